"""Every (algorithm, hessian, family) cell of the BONG space on scikit-learn's digits.

One pass over 1,257 training rows (inputs / 16), MLP 64-H-10 (ReLU, H=10 by default,
P = 760, so that the O(P^3) full-covariance cells finish), batch size 1, 540 rows held out. For each cell: held-out accuracy and log-loss, compile time (first
fit minus second) and steady-state time per observation (second fit, which reuses the
compiled code). Cells the registry rejects print the reason.

    python benchmarks/digits_grid.py [--families dlr,diag] [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import SGDClassifier
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split

from _report import markdown_table, write
from skbong import BONGClassifier
from skbong.core import ALGORITHMS, FAMILIES, HESSIANS, trace_count

# Prior scale per family: the default 0.3, measured best for DLR/FC/DIAG on digits.
SIGMA0 = {"fc": 0.3, "fc_mom": 0.3, "diag": 0.3, "diag_mom": 0.3, "dlr": 0.3}
# Learning rates (not tuned per cell): BONG ignores it; BLR/BBB take I=2 inner steps.
LEARNING_RATE = {"bong": 1.0, "blr": 0.5, "bog": 0.1, "bbb": 0.1}
N_INNER = {"bong": 1, "blr": 2, "bog": 1, "bbb": 2}


def _data():
    X, y = load_digits(return_X_y=True)
    return train_test_split(X / 16.0, y, test_size=0.3, random_state=0, stratify=y)


def run_cell(algorithm, hessian, family, data, hidden):
    X_train, X_test, y_train, y_test = data
    params = dict(
        hidden_layer_sizes=(hidden,),
        algorithm=algorithm,
        hessian=hessian,
        family=family,
        sigma0=SIGMA0[family],
        learning_rate=LEARNING_RATE[algorithm],
        n_inner_steps=N_INNER[algorithm],
        random_state=0,
    )
    try:
        start = time.perf_counter()
        est = BONGClassifier(**params).fit(X_train, y_train)
        est.predict_proba(X_test[:1])
        first = time.perf_counter() - start
    except (ValueError, FloatingPointError) as err:
        return {"status": str(err).split(";")[0].split(".")[0]}
    traces = trace_count()
    start = time.perf_counter()
    BONGClassifier(**params).fit(X_train, y_train)
    second = time.perf_counter() - start
    proba = est.predict_proba(X_test)
    return {
        "status": "ok",
        "accuracy": est.score(X_test, y_test),
        "log_loss": log_loss(y_test, proba, labels=est.classes_),
        "compile_s": first - second,
        "ms_per_obs": 1e3 * second / len(X_train),
        "recompiled": trace_count() != traces,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS))
    parser.add_argument("--hessians", default=",".join(HESSIANS))
    parser.add_argument("--hidden", type=int, default=10)
    args = parser.parse_args()
    data = _data()
    X_train, X_test, y_train, y_test = data

    sgd = SGDClassifier(loss="log_loss", random_state=0).partial_fit(X_train, y_train, classes=np.arange(10))
    baseline = [["SGDClassifier(log_loss), one partial_fit pass", f"{sgd.score(X_test, y_test):.3f}",
                 f"{log_loss(y_test, sgd.predict_proba(X_test)):.3f}"]]

    header = ["algorithm", "hessian", "family", "accuracy", "log-loss", "ms / obs", "compile s"]
    rows = []
    for algorithm in args.algorithms.split(","):
        for hessian in args.hessians.split(","):
            for family in args.families.split(","):
                cell = run_cell(algorithm, hessian, family, data, args.hidden)
                if cell["status"] == "ok":
                    row = [algorithm, hessian, family, f"{cell['accuracy']:.3f}", f"{cell['log_loss']:.3f}",
                           f"{cell['ms_per_obs']:.2f}", f"{cell['compile_s']:.1f}"]
                    assert not cell["recompiled"], "a second fit recompiled"
                else:
                    row = [algorithm, hessian, family, cell["status"], "", "", ""]
                rows.append(row)
                print(" | ".join(row), flush=True)
    body = (
        f"One pass over digits (1,257 train / 540 test, inputs / 16), MLP 64-{args.hidden}-10 ReLU, "
        f"batch size 1, sigma0 per family {SIGMA0}, learning rate {LEARNING_RATE}, inner steps "
        f"{N_INNER}, 10 Monte-Carlo draws, random_state=0. Learning rates are not tuned per cell.\n\n"
        + markdown_table(["baseline", "accuracy", "log-loss"], baseline)
        + "\n\n"
        + markdown_table(header, rows)
    )
    print(write("digits_grid", "The BONG space on digits", body))


if __name__ == "__main__":
    main()
