"""The public estimator against the core's filter on the MNIST stream: same numbers, same speed?

Issue 20 item 2: ``benchmarks/mnist_stream.py`` now runs every model through
``BONGClassifier(model=...).partial_fit``; before, it called the core's ``run_filter``
directly. This script runs both paths side by side on the same rows, the same ``mu_0`` and
the same prior, for the paper's CNN and the MLP 784-50-10 with BONG-LIN-HESS on DLR-10 and
DIAG (deterministic updates, so the two paths must agree to float32 round-off), and times
them in alternating segments of ``--segment`` rows in one process: ms per step of segments
2.. (compiled code, results waited for), and the ratio estimator / core. The estimator's
extra work per step is input validation per call, one plug-in forward pass per row (the
one-step-ahead score its divergence check reads) and one wait per compiled chunk.

    python benchmarks/estimator_path.py [--steps 1500] [--segment 250] [--models mlp,cnn]
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from _report import markdown_table, write
from mnist_stream import CNN_N_PARAMS, N_CLASSES, build_model
from skbong import BONGClassifier
from skbong.core import Hyperparameters, make_config, run_filter
from skbong.datasets import mnist_stream

#: sigma0 of each (model, family): the values mnist_stream's validation split chose.
SIGMA0 = {("cnn", "dlr"): 0.3, ("cnn", "diag"): 0.3, ("mlp", "dlr"): 0.2, ("mlp", "diag"): 0.2}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--segment", type=int, default=250)
    parser.add_argument("--models", default="mlp,cnn")
    args = parser.parse_args()
    X, y, _, _ = mnist_stream(0)
    X, y = X[: args.steps], y[: args.steps]
    Y = np.eye(N_CLASSES, dtype=np.float32)[y]
    rows = []
    for name in args.models.split(","):
        model = build_model(name)
        assert name != "cnn" or model.n_params == CNN_N_PARAMS
        for family in ("dlr", "diag"):
            sigma0 = SIGMA0[(name, family)]
            # backtrack="auto": the estimator's default, so that both paths run the same update.
            config = make_config(model.apply, "categorical", family=family, rank=10, backtrack="auto")
            state = config.family.init(jnp.asarray(model.init_mean(0)), jnp.float32(sigma0))
            hyper = Hyperparameters(obs_noise=1.0, dynamics_decay=1.0, process_noise=0.0, learning_rate=1.0)
            clf = BONGClassifier(model=model.build(0), family=family, rank=10, sigma0=sigma0, random_state=0)
            seconds = {"core": [], "estimator": []}
            for start in range(0, args.steps, args.segment):
                stop = min(start + args.segment, args.steps)
                wall = time.perf_counter()
                state = jax.block_until_ready(
                    run_filter(config, state, X[start:stop], Y[start:stop], hyper, key=jax.random.PRNGKey(0), n_seen=start)
                )
                seconds["core"].append((stop - start, time.perf_counter() - wall))
                wall = time.perf_counter()
                clf.partial_fit(X[start:stop], y[start:stop], classes=np.arange(N_CLASSES))
                seconds["estimator"].append((stop - start, time.perf_counter() - wall))
            ms = {path: 1e3 * sum(s for _, s in v[1:]) / sum(n for n, _ in v[1:]) for path, v in seconds.items()}
            gap = float(np.max(np.abs(np.asarray(state.mean) - np.asarray(clf.posterior_[0]))))
            label = f"{model.label}, BONG-LIN-HESS {'DLR-10' if family == 'dlr' else 'DIAG'}"
            rows.append([label, f"{ms['core']:.2f}", f"{ms['estimator']:.2f}", f"{ms['estimator'] / ms['core']:.3f}",
                         f"{gap:.1e}"])
            print(" | ".join(rows[-1]), flush=True)
    table = markdown_table(
        ["model and method", "core run_filter ms / step", "estimator partial_fit ms / step", "estimator / core",
         "max |mean difference| after the pass"],
        rows,
    )
    body = (
        f"`mnist_stream(0)`, the first {args.steps} rows, one observation per step, in segments of "
        f"{args.segment} rows that alternate between the two paths (the core's `run_filter` on one-hot "
        "targets; `BONGClassifier(model=module).partial_fit` on labels), the same `mu_0` (the module "
        "drawn from seed 0) and sigma0 (mnist_stream's validated values). ms / step: wall time of "
        "segments 2.. over their steps. The last column compares the posterior means at the end "
        "(float32; the updates are deterministic).\n\n" + table
    )
    path = write("estimator_path", "The estimator path against the core filter (issue 20 item 2)", body)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
