"""The prior-width check on a model linear in its weights: accuracy against sigma0 by family.

``BONGClassifier(hidden_layer_sizes=())`` is multinomial logistic regression. For each of
scikit-learn's digits, breast_cancer and wine (a 75/25 stratified split, ``random_state=0``,
inputs standardised on the training rows), each family and each ``sigma0``: one ``fit`` (one
pass) from each of 3 seeds (``random_state``: the shuffling), the mean test accuracy, the
prior's output spread (the standard deviation of the logits under the prior, linearised, over
the first 16 rows, as the estimators' check computes it; ``skbong._health``) and how many of
the fits warned that the prior is too wide. The check's limit is 2.5 for a diagonal family
on a network with hidden layers and 6 otherwise, linear ``diag`` included.

Writes ``results/linear_prior_width.md``.

    python benchmarks/linear_prior_width.py
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from _report import markdown_table, write
from skbong import BONGClassifier
from skbong._health import PRIOR_CHECK_ROWS
from skbong.core import make_config
from skbong.core._filter import prior_output_spread

DATA = {"digits": load_digits, "breast_cancer": load_breast_cancer, "wine": load_wine}
FAMILIES = ("diag", "diag_mom", "dlr", "fc")
SIGMA0S = (0.1, 0.3, 1.0, 3.0, 10.0)
SEEDS = (0, 1, 2)


def cell(X, y, X_test, y_test, family, sigma0):
    """Mean accuracy over the seeds (NaN for a fit that raised), the spread, fits warned."""
    accuracies, warned, spread = [], 0, None
    for seed in SEEDS:
        estimator = BONGClassifier(hidden_layer_sizes=(), family=family, sigma0=sigma0, random_state=seed)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            try:
                estimator.fit(X, y)
            except FloatingPointError:
                accuracies.append(np.nan)
                continue
        accuracies.append(estimator.score(X_test, y_test))
        warned += any("the prior is too wide" in str(w.message) for w in caught)
        if spread is None:
            config = make_config(estimator._spec.apply, "categorical")
            rows = np.asarray(X[:PRIOR_CHECK_ROWS], np.float32)
            spread = prior_output_spread(config, estimator._prior_mean, sigma0, rows)
    return np.nanmean(accuracies) if np.isfinite(accuracies).any() else np.nan, spread, warned


def main():
    rows = []
    for name, load in DATA.items():
        X, y = load(return_X_y=True)
        X, X_test, y, y_test = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
        scaler = StandardScaler().fit(X)
        X, X_test = scaler.transform(X), scaler.transform(X_test)
        for family in FAMILIES:
            cells = [cell(X, y, X_test, y_test, family, sigma0) for sigma0 in SIGMA0S]
            best = np.nanmax([c[0] for c in cells])
            rows.append(
                [name, family]
                + [
                    "raised" if not np.isfinite(acc) else
                    f"{acc:.3f}{' (best)' if acc == best else ''}, spread {spread:.2g}"
                    + (f", warned {warned}/{len(SEEDS)}" if warned else "")
                    for acc, spread, warned in cells
                ]
            )
            print(rows[-1], flush=True)
    body = "\n\n".join(
        [
            __doc__.split("\n\n", 1)[1].rsplit("\n\n", 2)[0],
            markdown_table(["data set", "family", *(f"sigma0 = {s:g}" for s in SIGMA0S)], rows),
        ]
    )
    print(write("linear_prior_width", "The prior-width check on a linear model", body))


if __name__ == "__main__":
    main()
