"""The root of G in per-layer factors against the P x K root: time per step on MLPs.

The built-in MLP carries its layer layout (``apply.dense_network``), so LIN-HESS and MC-EF
hand the BONG steps of DIAG and DLR the root of ``G`` as per-layer factors
(``skbong.core.DenseFactors``) and neither the ``P x K`` root nor, for DLR, the
``P x (R + K)`` matrix ``W~`` is formed. The same network behind a plain function carries
nothing, so the same steps run from the ``P x K`` root; both give the same belief
(``tests/core/test_families.py``). This times the two in one process, alternating call by
call, so that a noisy machine moves both alike.

Protocol: MLPs 784-h-10 (ReLU) on ``mnist_stream(0)``, BONG, one observation per step,
``filter_posterior`` in calls of 100 rows (each continuing from the last), sigma0 = 0.2,
float32, DLR of rank 10, the flat vector cut as the estimators cut it (``jnp.split`` for
DIAG, slices for DLR). One warm-up pass per variant, then ``--repeats`` passes of each,
alternating; the table gives the median ms per step of each and the median of the
per-pass ratios.

    python benchmarks/factored_root.py [--repeats 3]
"""

from __future__ import annotations

import argparse

import jax.numpy as jnp
import numpy as np

from _report import RESULTS, markdown_table, write
from chunked_calls import core_pass
from flax import nnx

from skbong.core import MLP, ModuleSpec, module_params
from skbong.datasets import mnist_stream

WIDTHS = (50, 126, 503)
CELLS = (("dlr", "lin_hess"), ("dlr", "mc_ef"), ("diag", "lin_hess"), ("diag", "mc_ef"))
CHUNK = 100
#: Rows per pass: about 12M parameter-rows, at least one call.
ROW_BUDGET = 12_000_000


def time_cell(width: int, family: str, hessian: str, X, Y, repeats: int) -> dict:
    module = MLP((784, width, 10), "relu", nnx.Rngs(0))
    # The cut of the flat vector the estimators choose (see flatten_module): one split for
    # the diagonal families, slices for DLR.
    spec = ModuleSpec.of(module, split=family == "diag")
    apply, mean0 = spec.apply, jnp.asarray(module_params(module))
    assert getattr(apply, "dense_network", None) is not None

    def plain(theta, x):  # the same network without its layout: the P x K root
        return apply(theta, x)

    n_rows = min(len(X), max(CHUNK, ROW_BUDGET // mean0.shape[0] // CHUNK * CHUNK))
    X, Y = X[:n_rows], Y[:n_rows]
    variants = {"factored": apply, "root": plain}
    for fn in variants.values():
        core_pass(fn, mean0, X, Y, family, CHUNK, hessian)
    times = {name: [] for name in variants}
    for _ in range(repeats):
        for name, fn in variants.items():
            times[name].append(core_pass(fn, mean0, X, Y, family, CHUNK, hessian))
    ratios = np.array(times["factored"]) / np.array(times["root"])
    return {"P": int(mean0.shape[0]), "rows": n_rows, "factored_s": float(np.median(times["factored"])),
            "root_s": float(np.median(times["root"])), "ratio": float(np.median(ratios)),
            "ratio_range": (float(ratios.min()), float(ratios.max()))}


def plot(cells: list[dict], path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for family, hessian in CELLS:
        mine = [c for c in cells if (c["family"], c["hessian"]) == (family, hessian)]
        ax.plot([c["P"] for c in mine], [c["ratio"] for c in mine], marker="o",
                label=f"{family.upper().replace('DLR', 'DLR-10')} {hessian.upper().replace('_', '-')}")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("P (MLP 784-h-10)")
    ax.set_ylabel("time per step, factored / P x K root")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    X, y, _, _ = mnist_stream(0)
    X = X.astype(np.float32)
    Y = np.eye(10, dtype=np.float32)[y]
    cells, rows = [], []
    for width in WIDTHS:
        for family, hessian in CELLS:
            cell = dict(time_cell(width, family, hessian, X, Y, args.repeats), family=family, hessian=hessian)
            cells.append(cell)
            low, high = cell["ratio_range"]
            rows.append([f"{cell['P']:,}", "DLR-10" if family == "dlr" else "DIAG", hessian.upper().replace("_", "-"),
                         cell["rows"], f"{1e3 * cell['root_s']:.2f}", f"{1e3 * cell['factored_s']:.2f}",
                         f"{cell['ratio']:.2f} ({low:.2f}-{high:.2f})"])
            print(rows[-1], flush=True)
    plot(cells, RESULTS / "factored_root.png")
    table = markdown_table(["P", "family", "hessian", "rows", "P x K root ms/step", "factored ms/step",
                            "factored / root (range over passes)"], rows)
    body = (f"Command: `python benchmarks/factored_root.py --repeats {args.repeats}`\n\n"
            f"{__doc__.split(chr(10) + chr(10), 1)[1].split('    python')[0].strip()}\n\n{table}\n\n"
            "![factored / root](factored_root.png)")
    print(write("factored_root", "The root of G in per-layer factors against the P x K root", body))


if __name__ == "__main__":
    main()
