"""Regressors fitted on rows in a given order: which are told that they lost the early rows.

A call that takes its rows in the order given (``fit(shuffle=False)``, ``partial_fit``)
checks the fitted posterior on its own rows (``BONGRegressor``'s forgotten-rows check): its
means against a constant fitted to the rows (``skbong._health.FORGOTTEN_EXCESS``), and its
predictive, that of ``predict(return_std=True)``, against the same means at the variance of
their errors (``skbong._health.narrow_variance_excess`` above ``NOISE_MISMATCH``). This
script fits the default regressor on ``dlr``, ``diag`` and ``fc`` with ``shuffle=False`` on
ten regression sets (all rows, inputs standardised) in three orders: shuffled once, sorted
by target and sorted by the first feature. It reports, through the public API on all the
rows, the R^2, the mean predicted variance over the mean squared error, the 90% interval
coverage, and whether the fit was told ("lost the others"), with the predictive named as
far too narrow.

Writes ``results/sorted_streams.md``.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.datasets import load_diabetes, make_friedman1, make_friedman2, make_friedman3, make_regression
from sklearn.preprocessing import StandardScaler

from _report import markdown_table, write
from skbong import BONGRegressor
from skbong.datasets import load_uci

ORDERS = ("shuffled", "sorted by target", "sorted by first feature")
FAMILIES = ("dlr", "diag", "fc")


def data_sets() -> dict:
    sets = {
        "friedman1": make_friedman1(1000, noise=1, random_state=0),
        "friedman2": make_friedman2(1000, noise=1, random_state=0),
        "friedman3": make_friedman3(1000, noise=0.1, random_state=0),
        "diabetes": load_diabetes(return_X_y=True),
        "linear, 10 features": make_regression(600, 10, noise=5, random_state=0),
    }
    for name in ("boston", "concrete", "energy", "wine", "yacht"):
        data = load_uci(name)
        sets[f"uci {name}"] = (data.X, data.y)
    return sets


def order_of(how: str, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    if how == "shuffled":
        return np.random.RandomState(0).permutation(len(y))
    return np.argsort(y if how == "sorted by target" else X[:, 0], kind="stable")


def main():
    rows, counts = [], {(how, key): 0 for how in ORDERS for key in ("fits", "told", "narrow")}
    for name, (X, y) in data_sets().items():
        X = StandardScaler().fit_transform(X)
        for family in FAMILIES:
            for how in ORDERS:
                order = order_of(how, X, y)
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    model = BONGRegressor(family=family, shuffle=False, random_state=0).fit(X[order], y[order])
                told = [str(w.message) for w in caught if "lost the others" in str(w.message)]
                narrow = any("far too narrow" in message for message in told)
                mean, std = model.predict(X, return_std=True)
                mse = np.mean((y - mean) ** 2)
                counts[how, "fits"] += 1
                counts[how, "told"] += bool(told)
                counts[how, "narrow"] += narrow
                rows.append([
                    name, family, how, f"{1 - mse / np.var(y):.3f}", f"{np.mean(std**2) / mse:.3g}",
                    f"{np.mean(np.abs(y - mean) < 1.645 * std):.3f}",
                    "far too narrow" if narrow else "worse than a constant" if told else "",
                ])
                print(*rows[-1], flush=True)
    summary = "\n".join(
        f"- {how}: {counts[how, 'told']} of {counts[how, 'fits']} told, {counts[how, 'narrow']} with the predictive "
        "named far too narrow" for how in ORDERS
    )
    header = ["data", "family", "order", "R^2 (all rows)", "mean variance / MSE", "90% coverage", "told"]
    body = __doc__.split("\n\n", 1)[1].replace("Writes ``results/sorted_streams.md``.\n", "").strip()
    print(write("sorted_streams", "Regressors on rows in a given order", body + "\n\n" + summary + "\n\n"
                + markdown_table(header, rows)))


if __name__ == "__main__":
    main()
