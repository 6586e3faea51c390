"""Rows per filter step: time and accuracy of one pass over digits against ``batch_size``.

A batch of ``B`` rows sums their log-likelihoods into one update. Its curvature has a rank of
up to ``B C`` (``C`` outputs), and the ``dlr`` step decomposes a matrix of order ``rank + B C``,
so past a few rows a step costs more than its rows taken one by one; the diagonal family's
step grows only linearly. This script times ``fit`` (one pass, the estimators' defaults
otherwise: ``dlr`` rank 10 and ``diag``, MLP 64-50-10, ``sigma0=0.3``) on 1,257 training rows
of digits (inputs / 16), compiled first and then timed ``--rounds`` times in turns over the
batch sizes (the lowest time of each), and scores the held-out 540 rows (accuracy, log-loss;
mean over ``random_state`` 0-2). The user guide's figures for batch sizes come from here.

    python benchmarks/batch_size.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split

from _report import markdown_table, write
from skbong import BONGClassifier

BATCH_SIZES = (1, 4, 8, 16, 32, 64, 128)
FAMILIES = ("dlr", "diag")
SEEDS = (0, 1, 2)


def _data():
    X, y = load_digits(return_X_y=True)
    return train_test_split(X / 16.0, y, test_size=0.3, random_state=0, stratify=y)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="timed fits per cell, in turns over the cells")
    args = parser.parse_args()
    X_train, X_test, y_train, y_test = _data()
    cells = [(family, batch) for family in FAMILIES for batch in BATCH_SIZES]
    scores, compile_s, best = {}, {}, {}
    for family, batch in cells:  # compile, and score from three seeds
        accuracy, loss = [], []
        for seed in SEEDS:
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                clf = BONGClassifier(family=family, batch_size=batch, random_state=seed).fit(X_train, y_train)
            if seed == 0:
                compile_s[family, batch] = time.perf_counter() - start
            accuracy.append(clf.score(X_test, y_test))
            loss.append(log_loss(y_test, clf.predict_proba(X_test), labels=clf.classes_))
        scores[family, batch] = (np.mean(accuracy), np.mean(loss))
        print(family, batch, f"first fit {compile_s[family, batch]:.2f} s", scores[family, batch], flush=True)
    for _ in range(args.rounds):
        for family, batch in cells:
            clf = BONGClassifier(family=family, batch_size=batch, random_state=0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                start = time.perf_counter()
                clf.fit(X_train, y_train)
                elapsed = time.perf_counter() - start
            best[family, batch] = min(best.get((family, batch), np.inf), elapsed)
    rows = []
    for family, batch in cells:
        one = best[family, 1]
        rows.append([family, batch, f"{best[family, batch]:.3f}", f"{best[family, batch] / one:.2f}",
                     f"{1e3 * best[family, batch] / len(X_train):.3f}", f"{compile_s[family, batch]:.2f}",
                     f"{scores[family, batch][0]:.3f}", f"{scores[family, batch][1]:.3f}"])
    header = ["family", "batch_size", "pass s (compiled)", "x batch_size=1", "ms / row", "first fit s (compiling)",
              "accuracy", "log-loss"]
    body = f"""Command: `python benchmarks/batch_size.py --rounds {args.rounds}`

One pass of `BONGClassifier(family=..., batch_size=...)` (MLP 64-50-10, `sigma0=0.3`, `dlr`
rank 10) over 1,257 rows of digits (X / 16), 540 held out. 'pass s' is the lowest of
{args.rounds} timed fits, taken in turns over the cells after each was compiled; 'first fit s'
is the fit that compiled it. Accuracy and log-loss on the held-out rows, mean over
`random_state` {SEEDS[0]}-{SEEDS[-1]}.

{markdown_table(header, rows)}
"""
    path = write("batch_size", "Rows per filter step on digits", body)
    print(body)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
