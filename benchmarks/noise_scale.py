"""The regressor's observation noise: the fitted scale of ``obs_noise="calibrated"`` against a
fixed ``R = 0.1 Var(y)`` and the online estimate of ``obs_noise="adaptive"``.

Protocol, per data set and split (the estimators' defaults otherwise: MLP with one hidden
layer of 50 ReLU units, BONG-LIN-HESS, one pass, batch size 1, ``sigma0 = 0.3``):

* **fixed**: ``obs_noise="auto"``, ``R = 0.1 Var(y)`` of the training rows, the BONG
  paper's choice (Sec. 5);
* **calibrated**: the default ``obs_noise="calibrated"``: the filter runs at the same
  ``R_0 = 0.1 Var(y)``, so its means and RMSE are those of **fixed**; the noise and the prior covariance are then scaled
  by ``c``, the mean normalised innovation squared of the one-step-ahead predictions;
* **adaptive**: ``obs_noise="adaptive"`` (LO-FI Eq. 66, ``obs_noise_rate=0.01``).

Each for ``family="dlr"`` (rank 10) and ``family="fc"``, and for DLR also with
``sigma0="auto"``. Scored on the test rows: Gaussian NLPD of ``predict(return_std=True)``
and RMSE, both in the units of y, mean +- SE over the splits.

Data: the five UCI sets of ``benchmarks/uci.py`` (``uci_split``: standardised with training
statistics; training rows shuffled with the split as seed), splits 0..4; scikit-learn's
``load_diabetes``, ``make_friedman1(1000, noise=5)`` and ``make_regression(1000, 10,
noise=5)``, each cut by ``train_test_split(random_state=split)`` with inputs standardised
on the training rows, splits 0..4.

Writes ``results/noise_scale.md``.

    python benchmarks/noise_scale.py [--splits 5]
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from sklearn.datasets import load_diabetes, make_friedman1, make_regression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from _report import markdown_table, write
from skbong import BONGRegressor
from skbong.datasets import UCI_NAMES, uci_split
from skbong.metrics import gaussian_nlpd

#: (label, estimator parameters); "calibrated" is the default obs_noise.
SETTINGS = [
    ("DLR fixed", dict(obs_noise="auto")),
    ("DLR calibrated", dict()),
    ("DLR adaptive", dict(obs_noise="adaptive")),
    ("DLR sigma0=auto, fixed", dict(sigma0="auto", obs_noise="auto")),
    ("DLR sigma0=auto, calibrated", dict(sigma0="auto")),
    ("FC fixed", dict(family="fc", obs_noise="auto")),
    ("FC calibrated", dict(family="fc")),
]


def splits(n_splits: int):
    """``(name, split, X, y, X_test, y_test, y_scale)``: y_scale maps y to its units."""
    for name in UCI_NAMES:
        for split in range(n_splits):
            data = uci_split(name, split)
            order = np.random.default_rng(split).permutation(len(data.y_train))
            yield name, split, data.X_train[order], data.y_train[order], data.X_test, data.y_test, data.y_std
    sklearn_sets = {
        "diabetes (sklearn)": load_diabetes(return_X_y=True),
        "friedman1, noise 5": make_friedman1(1000, noise=5.0, random_state=0),
        "make_regression, noise 5": make_regression(1000, 10, noise=5.0, random_state=0),
    }
    for name, (X, y) in sklearn_sets.items():
        for split in range(n_splits):
            X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=split)
            scaler = StandardScaler().fit(X_train)
            yield name, split, scaler.transform(X_train), y_train, scaler.transform(X_test), y_test, 1.0


def run(n_splits: int) -> dict:
    results = {}
    for name, split, X, y, X_test, y_test, y_scale in splits(n_splits):
        for label, params in SETTINGS:
            est = BONGRegressor(random_state=split, **params)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(X, y)
            mean, std = est.predict(X_test, return_std=True)
            nlpd = gaussian_nlpd(y_test, mean, std) + np.log(y_scale)
            rmse = float(np.sqrt(np.mean((mean - y_test) ** 2))) * y_scale
            scale = getattr(est, "noise_scale_", np.nan)
            results.setdefault(name, {}).setdefault(label, []).append((nlpd, rmse, scale))
        print(name, split, flush=True)
    return results


def _mean_se(values) -> str:
    values = np.asarray(values, float)
    return f"{values.mean():.3f} +- {values.std(ddof=1) / np.sqrt(len(values)):.3f}"


def report(results: dict, n_splits: int) -> str:
    labels = [label for label, _ in SETTINGS]
    nlpd_rows, rmse_rows, wins = [], [], 0
    for name, by_label in results.items():
        nlpd = {label: np.array([r[0] for r in by_label[label]]) for label in labels}
        rmse = {label: np.array([r[1] for r in by_label[label]]) for label in labels}
        scale = np.array([r[2] for r in by_label["DLR calibrated"]])
        nlpd_rows.append([name, *(_mean_se(nlpd[label]) for label in labels), f"{np.median(scale):.2f}"])
        rmse_rows.append([name, *(_mean_se(rmse[label]) for label in labels)])
        wins += int(nlpd["DLR calibrated"].mean() <= nlpd["DLR fixed"].mean())
    return "\n\n".join(
        [
            __doc__.split("\n\n", 1)[1].rsplit("\n\n", 2)[0],
            f"**NLPD (lower is better), mean +- SE over {n_splits} splits.** 'calibrated' is at most 'fixed' on "
            f"{wins} of {len(results)} data sets (DLR, sigma0 = 0.3). The last column is the median fitted "
            "scale c of 'DLR calibrated' (1 means R_0 = 0.1 Var(y) was right).",
            markdown_table(["data set", *labels, "c (DLR calibrated)"], nlpd_rows),
            "**RMSE**, same fits: 'calibrated' and 'fixed' have the same means (the invariance), so equal RMSE.",
            markdown_table(["data set", *labels], rmse_rows),
        ]
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--name", default="noise_scale")
    args = parser.parse_args()
    results = run(args.splits)
    path = write(args.name, "The regressor's observation noise: fitted scale, fixed, adaptive", report(results, args.splits))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
