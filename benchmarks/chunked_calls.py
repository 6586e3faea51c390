"""Time per step when the filter is called as users call it (issue 22 item 3): the MNIST
stream in chunks of 1, 10 and 100 rows, through ``BONGClassifier(model=...).partial_fit``
(the public estimator, all its validation and bookkeeping included) and through the core's
``filter_posterior`` (the functional API), one filter step per row, float32.

Models and methods are those of the issue's reference figures: the MLP 784-50-10 with
BONG-LIN-HESS on DLR-10 and on DIAG, and the paper's CNN with DLR-10. The reference code,
called in chunks of 100 rows on this machine type (2 cores), took 5.9, 2.3 and 20.8 ms per
step; the target is at most 0.3x of each through the estimator at chunks of 100.

Each cell: one untimed pass over the chunks (compilation), then the median over
``--repeats`` passes of (seconds / rows), ``--rows`` rows per pass. The passes run in
rounds, each round one pass of every cell in turn (estimator, then ``filter_posterior``),
so that a slow spell of a shared 2-core host is spread over all cells instead of falling
on the few that run during it. Run it with nothing else on the machine.

    python benchmarks/chunked_calls.py [--rows 600] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from typing import Callable

import jax.numpy as jnp
import numpy as np

from _report import RESULTS, markdown_table, write
from mnist_stream import build_model
from skbong import BONGClassifier
from skbong.core import ModuleSpec, filter_posterior, module_params
from skbong.datasets import mnist_stream

CASES = (("mlp", "dlr", 5.9), ("mlp", "diag", 2.3), ("cnn", "dlr", 20.8))
CHUNKS = (1, 10, 100)
TARGET = 0.3


def estimator_pass(module, family: str, X, y, chunk: int) -> Callable[[], float]:
    """One pass of ``BONGClassifier.partial_fit`` over ``X, y`` in calls of ``chunk`` rows,
    from a new estimator: seconds per row."""

    def one_pass() -> float:
        clf = BONGClassifier(model=module, family=family, rank=10, sigma0=0.2, random_state=0)
        start = time.perf_counter()
        for begin in range(0, len(y), chunk):
            clf.partial_fit(X[begin : begin + chunk], y[begin : begin + chunk], classes=np.arange(10))
        return (time.perf_counter() - start) / len(y)

    return one_pass


def core_pass(apply, mean0, X, Y, family: str, chunk: int, hessian: str = "lin_hess") -> float:
    """Seconds per step of one pass of ``filter_posterior`` (BONG, rank 10, sigma0 = 0.2)
    over the one-hot rows ``Y`` in calls of ``chunk`` rows, each continuing from the last."""
    state = None
    start = time.perf_counter()
    for begin in range(0, len(Y), chunk):
        state = filter_posterior(apply, mean0, X[begin : begin + chunk], Y[begin : begin + chunk],
                                 likelihood="categorical", family=family, hessian=hessian, rank=10, sigma0=0.2,
                                 state=state)
    state.mean.block_until_ready()
    return (time.perf_counter() - start) / len(Y)


def filter_pass(module, family: str, X, y, chunk: int) -> Callable[[], float]:
    """One :func:`core_pass` of ``filter_posterior`` over the same rows: seconds per row."""
    spec = ModuleSpec.of(module)
    apply, mean0 = spec.apply, jnp.asarray(module_params(module))
    Y = np.eye(10, dtype=np.float32)[y]
    return lambda: core_pass(apply, mean0, X, Y, family, chunk)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    X, y, _, _ = mnist_stream(0)
    X, y = X[: args.rows].astype(np.float32), y[: args.rows]
    cells, labels = {}, {}
    for model_name, family, reference in CASES:
        model = build_model(model_name)
        module, labels[model_name] = model.build(0), model.label
        rows_here = args.rows if model_name == "mlp" else args.rows // 2
        for chunk in CHUNKS:
            data = (X[:rows_here], y[:rows_here], chunk)
            cells[(model_name, family, chunk)] = (estimator_pass(module, family, *data),
                                                  filter_pass(module, family, *data))
    times = {key: ([], []) for key in cells}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for passes in cells.values():  # compilation
            for one_pass in passes:
                one_pass()
        for _ in range(args.repeats):
            for key, passes in cells.items():
                for timed, one_pass in zip(times[key], passes):
                    timed.append(one_pass())
    rows, results = [], {}
    for model_name, family, reference in CASES:
        for chunk in CHUNKS:
            estimator_times, core_times = times[(model_name, family, chunk)]
            estimator, core = float(np.median(estimator_times)), float(np.median(core_times))
            ratio = 1e3 * estimator / reference
            spread = f"{1e3 * min(estimator_times) / reference:.2f}-{1e3 * max(estimator_times) / reference:.2f}"
            verdict = ("met" if ratio <= TARGET else "missed") if chunk == 100 else ""
            rows.append([labels[model_name], family.upper() if family == "diag" else "DLR-10", chunk,
                         f"{1e3 * estimator:.2f}", f"{1e3 * core:.2f}", f"{estimator / core:.2f}",
                         f"{reference}", f"{ratio:.2f}" + (f" ({verdict})" if verdict else ""), spread])
            results[f"{model_name}-{family}-{chunk}"] = {"estimator_s": estimator_times, "core_s": core_times}
    table = markdown_table(["model", "family", "rows per call", "estimator ms/step", "filter_posterior ms/step",
                            "estimator / core", "reference ms/step", "estimator / reference",
                            "range over passes"], rows)
    print(table)
    body = f"""Command: `python benchmarks/chunked_calls.py --rows {args.rows} --repeats {args.repeats}`

BONG-LIN-HESS, one filter step per row, sigma0 = 0.2, float32; the MNIST stream of
`mnist_stream(0)` ({args.rows} rows for the MLP, {args.rows // 2} for the CNN) in calls of 1, 10
and 100 rows, each call continuing from the last. The estimator column includes everything a
`partial_fit` call does (validation, label encoding, the one-step-ahead scoring for the
health check, the validity check); `filter_posterior` builds its config and converts its
inputs on every call too. Each runs at its defaults: the estimator with its line search
(`backtrack="auto"`, on for these cells), `filter_posterior` without. The reference times are the issue's (the paper's code in chunks
of 100 rows on this machine type); target: estimator <= {TARGET}x reference at 100 rows.
Medians over {args.repeats} passes of each cell, the passes taken in rounds over all cells;
the last column is the estimator's range over its passes, as a fraction of the reference.

{table}
"""
    write("chunked_calls", "Time per step in calls of 1, 10 and 100 rows", body)
    (RESULTS / "chunked_calls.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
