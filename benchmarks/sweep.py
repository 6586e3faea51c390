"""Vectorised sweeps: ``run_sweep`` over K hyperparameter values against a loop of K runs.

For each network and family, K filters that differ in ``sigma0`` (and, for a second case,
in ``sigma0`` and the initial weights: seeds) run over the same stream, one pass, batch size
1, with the plug-in prequential record (what ``sigma0="auto"`` runs):

* loop: K calls of ``run_filter``, one per value (one compilation serves them all);
* sweep, vectorised: one call of ``run_sweep(..., vectorize=True)`` with the K members
  stacked (``init_sweep``), their steps batched by ``jax.vmap``;
* sweep, sequential: ``vectorize=False``, the members one after the other (``lax.map``)
  inside one compiled call, each with a single filter's code (the default on a CPU).

Steady-state wall time is the fastest of ``--repeats`` timed calls after a compiling one
(``jax.block_until_ready``); compile time is the first call's excess over it. Networks: the
digits MLP 64-50-10 (P = 3,760) and the MNIST MLP 784-50-10 (P = 39,760) on random inputs of
those shapes (the cost of a step does not depend on the values).

Writes ``results/sweep.md`` and ``.png``.

    python benchmarks/sweep.py [--steps 1000] [--repeats 3] [--name sweep]
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from _report import RESULTS, markdown_table, write
from skbong.core import Hyperparameters, MLPSpec, PluginPredictive, init_sweep, make_config, run_filter, run_sweep

NETWORKS = {"digits MLP 64-50-10": MLPSpec(64, (50,), 10, "relu"), "MNIST MLP 784-50-10": MLPSpec(784, (50,), 10, "relu")}
FAMILIES = {"DIAG": ("diag", 1), "DLR-10": ("dlr", 10)}
SIZES = (1, 5, 10)


def _timed(fn, repeats: int) -> tuple[float, float]:
    """(steady seconds, compile seconds) of ``fn``."""
    start = time.perf_counter()
    jax.block_until_ready(fn())
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return min(times), max(first - min(times), 0.0)


def measure(spec: MLPSpec, family: str, rank: int, n_members: int, n_steps: int, repeats: int) -> dict:
    rng = np.random.default_rng(0)
    X = rng.random((n_steps, spec.n_inputs)).astype(np.float32)
    Y = np.eye(spec.n_outputs, dtype=np.float32)[rng.integers(spec.n_outputs, size=n_steps)]
    config = make_config(spec.apply, "categorical", family, rank)
    sigma0 = np.geomspace(0.03, 1.0, n_members).astype(np.float32)
    mean0 = np.stack([spec.init_params(seed) for seed in range(n_members)]).astype(np.float32)
    hyper = Hyperparameters(1.0, 1.0, 0.0, 1.0)
    record = PluginPredictive()

    def loop():
        return [
            run_filter(config, config.family.init(jnp.asarray(mean0[k]), jnp.asarray(sigma0[k])), X, Y, hyper, 1, None,
                       0, record)[0]
            for k in range(n_members)
        ]

    def sweep(vectorize):
        states = init_sweep(config.family, mean0, sigma0)
        return lambda: run_sweep(config, states, X, Y, hyper, 1, None, 0, record, vectorize=vectorize)[0]

    loop_s, loop_compile = _timed(loop, repeats)
    vmap_s, vmap_compile = _timed(sweep(True), repeats)
    map_s, map_compile = _timed(sweep(False), repeats)
    return {"loop": loop_s, "vmap": vmap_s, "map": map_s, "vmap_compile": vmap_compile, "map_compile": map_compile}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--name", default="sweep")
    args = parser.parse_args()
    rows, results = [], {}
    for net_name, spec in NETWORKS.items():
        for fam_name, (family, rank) in FAMILIES.items():
            for k in SIZES:
                out = measure(spec, family, rank, k, args.steps, args.repeats)
                results[(net_name, fam_name, k)] = out
                ms = 1e3 / args.steps
                single = out["loop"] / k
                rows.append([net_name, fam_name, k, f"{out['loop'] * ms:.3f}", f"{out['vmap'] * ms:.3f}",
                             f"{out['map'] * ms:.3f}", f"{out['loop'] / out['vmap']:.2f}",
                             f"{out['loop'] / out['map']:.2f}", f"{out['vmap'] / single:.2f}",
                             f"{out['map'] / single:.2f}", f"{out['vmap_compile']:.1f} / {out['map_compile']:.1f}"])
                print(" | ".join(str(c) for c in rows[-1]), flush=True)
    body = "\n\n".join([
        f"One pass of {args.steps} steps (batch 1, plug-in prequential record), K filters differing in sigma0 and "
        "initial weights. ms per step of the whole batch of K; speed-up = loop / sweep; 'x one run' is the "
        "sweep's time in units of one single run (below K means the sweep beats K single runs).",
        markdown_table(["network", "family", "K", "loop of K run_filter (ms/step)", "vectorised sweep (ms/step)",
                        "sequential sweep (ms/step)", "speed-up vectorised", "speed-up sequential",
                        "vectorised x one run", "sequential x one run", "compile s (vect. / seq.)"], rows),
        f"![sweep]({args.name}.png)",
    ])
    path = write(args.name, "Vectorised sweeps: run_sweep against a loop of single runs", body)
    plot(results, RESULTS / f"{args.name}.png")
    print(f"wrote {path}")


def plot(results: dict, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(NETWORKS), figsize=(10, 3.5), sharey=True)
    for ax, net_name in zip(np.atleast_1d(axes), NETWORKS):
        for i, fam_name in enumerate(FAMILIES):
            single = results[(net_name, fam_name, 1)]["loop"]
            ax.plot(SIZES, [results[(net_name, fam_name, k)]["vmap"] / single for k in SIZES], "o-", color=f"C{i}",
                    label=f"{fam_name} vectorised")
            ax.plot(SIZES, [results[(net_name, fam_name, k)]["map"] / single for k in SIZES], "^-.", color=f"C{i}",
                    label=f"{fam_name} sequential")
            ax.plot(SIZES, [results[(net_name, fam_name, k)]["loop"] / single for k in SIZES], "s--", color=f"C{i}",
                    alpha=0.5, label=f"{fam_name} loop")
        ax.plot(SIZES, SIZES, "k:", lw=1, label="K single runs")
        ax.set(title=net_name, xlabel="K (members)", ylabel="time / one run")
    np.atleast_1d(axes)[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
