"""Regression intervals from ``predict(return_std=True)`` against ``BayesianRidge``, from
targets nearly free of noise to noisy ones.

``BONGRegressor``'s default noise (``obs_noise="calibrated"``) fits one scale ``c`` of the
noise and of the prior covariance: ``c = (S / N)^(N / (N + 1))``, ``S / N`` the mean
normalised squared one-step-ahead error (``skbong.core._dynamics.noise_scale``), or since
session 87 the same over the latest 200 rows where that is smaller (``latest_noise_scale.py``;
150 training rows lie inside that window, so only the 2,000-row fits can differ). Until
c6c8fc0 the pseudo-row at ``c = 1`` was added to the sums, ``c = (1 + S) / (1 + N)``,
which held ``c`` above about ``1 / (N + 1)``; where the noise is far below ``R_0 = 0.1
Var(y)`` the true ``c`` is smaller than that. Both are shown: the means do not depend on
``c`` (the linearised updates are invariant under a common scale of the prior and the
noise) and every predictive variance is proportional to it, so the older intervals are the
same fit's standard deviations times ``sqrt(c_old / c)``.

Settings: ``BayesianRidge()``; the default ``BONGRegressor`` (MLP 50 ReLU units, DLR-10,
one pass); a linear model (``hidden_layer_sizes=()``, ``family="fc"``, exact Bayesian
filtering) at the default ``sigma0 = 0.3``, at ``sigma0="auto"`` and at ``sigma0 = 10``.

Data: ``make_regression`` (5 informative features, noise standard deviation 1, 10 and 100;
``y``'s standard deviation is 100-200), ``make_friedman1`` (noise 1) and scikit-learn's
diabetes; 150 or 2,000 training rows and a quarter as many test rows (diabetes: its 442
rows, 75/25), inputs standardised on the training rows, 5 splits. Scored on the test
rows: Gaussian NLPD in the units of ``y``, the coverage of central 90% intervals, and the
mean predicted standard deviation over the RMSE (1 where the intervals are as wide as the
errors); mean over the splits.

    python benchmarks/regression_intervals.py [--splits 5]

Writes ``results/regression_intervals.md`` and ``results/regression_intervals.png``.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from scipy.stats import norm
from sklearn.datasets import load_diabetes, make_friedman1, make_regression
from sklearn.linear_model import BayesianRidge
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from _report import markdown_table, write
from skbong import BONGRegressor
from skbong.metrics import gaussian_nlpd

LINEAR = dict(hidden_layer_sizes=(), family="fc")
#: (label, estimator factory taking the split's seed)
SETTINGS = [
    ("BayesianRidge", lambda seed: BayesianRidge()),
    ("default", lambda seed: BONGRegressor(random_state=seed)),
    ("linear, sigma0=0.3", lambda seed: BONGRegressor(random_state=seed, **LINEAR)),
    ("linear, sigma0=auto", lambda seed: BONGRegressor(sigma0="auto", random_state=seed, **LINEAR)),
    ("linear, sigma0=10", lambda seed: BONGRegressor(sigma0=10.0, random_state=seed, **LINEAR)),
]
#: The fixed-scale settings whose pre-c6c8fc0 intervals are derived from the same fit.
BEFORE = ["default", "linear, sigma0=0.3", "linear, sigma0=10"]


def data_sets(n_splits: int):
    """``(name, split, X, y, X_test, y_test)``, inputs standardised on the training rows."""
    for n_train in (150, 2000):
        n_rows = n_train + n_train // 4
        makers = {
            f"make_regression noise {noise}": (lambda s, noise=noise: make_regression(
                n_rows, 5, noise=noise, random_state=s))
            for noise in (1, 10, 100)
        }
        makers["friedman1 noise 1"] = lambda s: make_friedman1(n_rows, noise=1.0, random_state=s)
        for name, make in makers.items():
            for split in range(n_splits):
                X, y = make(split)
                yield f"{name}, {n_train} rows", split, *_split(X, y, split, n_train)
    X, y = load_diabetes(return_X_y=True)
    for split in range(n_splits):
        yield "diabetes, 331 rows", split, *_split(X, y, split, None)


def _split(X, y, split, n_train):
    X_train, X_test, y_train, y_test = train_test_split(X, y, train_size=n_train, random_state=split)
    scaler = StandardScaler().fit(X_train)
    return scaler.transform(X_train), y_train, scaler.transform(X_test), y_test


def _scores(y, mean, std) -> tuple[float, float, float]:
    rmse = float(np.sqrt(np.mean((mean - y) ** 2)))
    nlpd = gaussian_nlpd(y, mean, std)
    coverage = float(np.mean(np.abs(y - mean) <= norm.ppf(0.95) * std))
    return nlpd, coverage, float(np.mean(std)) / rmse


def run(n_splits: int) -> dict:
    results = {}
    for name, split, X, y, X_test, y_test in data_sets(n_splits):
        cell = results.setdefault(name, {})
        for label, make in SETTINGS:
            est = make(split)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(X, y)
            mean, std = est.predict(X_test, return_std=True)
            cell.setdefault(label, []).append(_scores(y_test, mean, std))
            if label in BEFORE:
                old_scale = (1.0 + float(np.sum(est._innovation_sum))) / (1.0 + est._innovation_weight)  # one output
                cell.setdefault(f"{label}, before", []).append(
                    _scores(y_test, mean, std * np.sqrt(old_scale / est.noise_scale_))
                )
        print(name, split, flush=True)
    return results


def report(results: dict, n_splits: int) -> str:
    labels = [label for label, _ in SETTINGS]
    tables = []

    def mean(cell, label, index):
        return f"{np.mean([r[index] for r in cell[label]]):.3f}"

    for index, metric in enumerate(("NLPD (lower is better)", "coverage of 90% intervals", "mean std / RMSE")):
        rows = [[name, *(mean(cell, label, index) for label in labels)] for name, cell in results.items()]
        tables += [f"**{metric}**, mean over {n_splits} splits.", markdown_table(["data", *labels], rows)]
    before_rows = [
        [name, *(f"{mean(cell, label + ', before', i)} -> {mean(cell, label, i)}" for label in BEFORE for i in (0, 2))]
        for name, cell in results.items()
    ]
    header = ["data", *(f"{label}: {metric}" for label in BEFORE for metric in ("NLPD", "std / RMSE"))]
    tables += [
        "**Before -> after c6c8fc0** (the pseudo-row added to the sums -> pulling log c), same fits.",
        markdown_table(header, before_rows),
    ]
    def near(cell, label):  # NLPD at most 0.05 above BayesianRidge's
        return float(mean(cell, label, 0)) <= float(mean(cell, "BayesianRidge", 0)) + 0.05

    summary = "NLPD at most 0.05 above BayesianRidge's, in how many of the data sets: " + "; ".join(
        f"{label} {sum(near(cell, label) for cell in results.values())} of {len(results)}" for label in labels[1:]
    ) + "."
    body = __doc__.split("\n\n", 1)[1].rsplit("\n\n", 2)[0]
    return "\n\n".join([body, summary, *tables, "![std / RMSE](regression_intervals.png)"])


def plot(results: dict, path) -> None:
    """Mean std / RMSE per data set and setting (1: intervals as wide as the errors)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [label for label, _ in SETTINGS] + ["linear, sigma0=10, before"]
    names = list(results)
    fig, ax = plt.subplots(figsize=(12, 4.5))
    width = 0.8 / len(labels)
    x = np.arange(len(names))
    for k, label in enumerate(labels):
        ratio = [np.mean([r[2] for r in results[name][label]]) for name in names]
        ax.bar(x + (k - len(labels) / 2) * width, ratio, width, label=label)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_yscale("log")
    ax.set_xticks(x, names, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("mean predicted std / test RMSE")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=5)
    args = parser.parse_args()
    results = run(args.splits)
    path = write("regression_intervals", "Regression intervals against BayesianRidge", report(results, args.splits))
    plot(results, path.with_suffix(".png"))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
