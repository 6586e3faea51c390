"""The calibrated noise scale against the errors of a fit's latest rows: a measured candidate.

``obs_noise="calibrated"`` (the regressor's default) runs the filter at ``R_0 = 0.1 Var(y)``
and scales the noise and the prior covariance by ``c``, the mean normalised innovation
squared of all the one-step-ahead predictions of the fit. Where ``R_0`` is far above the
true noise (targets nearly a function of the inputs), the first rows, predicted while the
posterior was still near the prior, have innovations of the order of the prior's and
dominate ``c``: ``return_std`` ends several times wider than the errors. This script
measures a candidate remedy without changing the estimator: the factor ``c_late``, the mean
over the last ``LATE_ROWS`` training rows of the squared one-step-ahead error over the
fitted predictive variance (``predict(return_std=True)`` squared) at those rows, rescales
the test predictive variance. Both use only training rows.

Since session 87 the estimator itself takes ``c`` as the smaller of the mean over all the
rows and the mean over the latest 200 rows (``latest_noise_scale.py``): a results file
dated before then has the mean over all the rows as "calibrated", a later one the smaller.

Data: the five UCI sets (splits 0-2) and, cut 70/30 with seeds 0-2, diabetes,
``make_friedman1`` (1,000 rows, noise 5 and 1), ``make_regression`` (1,000 rows and 10
features at noise 5; 600 rows and 20 features, 10 informative, at noise 10) and a sine of
one input (2,000 rows, noise 0.01). Inputs standardised on the training rows, which are
permuted once and fed in that order (``shuffle=False``) so that the record is in a known
order. Models: the default MLP on ``dlr``, and the linear model (no hidden layer) on ``fc``,
the exact Kalman filter.

Writes ``results/late_noise_scale.md``.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.datasets import load_diabetes, make_friedman1, make_regression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from _report import markdown_table, write
from skbong import BONGRegressor
from skbong.datasets import load_uci

LATE_ROWS = 200
SEEDS = (0, 1, 2)
MODELS = {"MLP dlr": ("dlr", (50,)), "linear fc": ("fc", ())}


def sine(seed: int):
    rng = np.random.RandomState(seed)
    X = rng.uniform(-3, 3, (2000, 1))
    return X, np.sin(2 * X[:, 0]) + 0.01 * rng.randn(2000)


GENERATED = {
    "diabetes": lambda seed: load_diabetes(return_X_y=True),
    "friedman1, noise 5": lambda seed: make_friedman1(1000, noise=5, random_state=seed),
    "friedman1, noise 1": lambda seed: make_friedman1(1000, noise=1, random_state=seed),
    "linear 10, noise 5": lambda seed: make_regression(1000, 10, noise=5, random_state=seed),
    "linear 20, noise 10": lambda seed: make_regression(600, 20, n_informative=10, noise=10, random_state=seed),
    "sine, noise 0.01": sine,
}


def splits():
    """``(name, seed, X_train, y_train, X_test, y_test)`` of every data set and split."""
    for name in ("boston", "concrete", "energy", "wine", "yacht"):
        data = load_uci(name)
        for seed in SEEDS:
            train, test = data.train_idx[seed], data.test_idx[seed]
            yield f"uci {name}", seed, data.X[train], data.y[train], data.X[test], data.y[test]
    for name, make in GENERATED.items():
        for seed in SEEDS:
            X, y = make(seed)
            X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=seed)
            yield name, seed, X_train, y_train, X_test, y_test


def nlpd(y, mean, std) -> float:
    return float(np.mean(0.5 * np.log(2 * np.pi * std**2) + 0.5 * ((y - mean) / std) ** 2))


def measure(X_train, y_train, X_test, y_test, seed, family, hidden) -> dict:
    scaler = StandardScaler().fit(X_train)
    X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    order = np.random.RandomState(seed).permutation(len(y_train))
    X_train, y_train = X_train[order], y_train[order]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = BONGRegressor(family=family, hidden_layer_sizes=hidden, random_state=seed, prequential=True,
                              shuffle=False).fit(X_train, y_train)
    one_step = np.asarray(model.prequential_prediction_).reshape(len(y_train), -1)[:, 0]
    late = slice(-LATE_ROWS, None)
    _, late_std = model.predict(X_train[late], return_std=True)
    c_late = float(np.mean((y_train[late] - one_step[late]) ** 2 / late_std**2))
    mean, std = model.predict(X_test, return_std=True)
    z = np.abs(y_test - mean) / std
    return {
        "rmse": float(np.sqrt(np.mean((y_test - mean) ** 2))),
        "std_ratio": float(np.mean(std) / np.sqrt(np.mean((y_test - mean) ** 2))),
        "nlpd": nlpd(y_test, mean, std),
        "nlpd_late": nlpd(y_test, mean, std * np.sqrt(c_late)),
        "cover": float(np.mean(z < 1.645)),
        "cover_late": float(np.mean(z / np.sqrt(c_late) < 1.645)),
        "c_late": c_late,
        "warned": len(caught),
    }


def main():
    results = {}
    for name, seed, X_train, y_train, X_test, y_test in splits():
        for label, (family, hidden) in MODELS.items():
            run = measure(X_train, y_train, X_test, y_test, seed, family, hidden)
            results.setdefault((name, label), []).append(run)
        print(name, seed, flush=True)
    rows, gains = [], []
    for (name, label), runs in results.items():
        mean = {key: float(np.mean([run[key] for run in runs])) for key in runs[0]}
        gains.append((mean["nlpd_late"] - mean["nlpd"], min(run["c_late"] for run in runs), name, label))
        rows.append([
            name, label, f"{mean['rmse']:.4g}", f"{mean['std_ratio']:.2f}", f"{mean['nlpd']:.3f}",
            f"{mean['nlpd_late']:.3f}", f"{mean['nlpd_late'] - mean['nlpd']:+.3f}",
            " ".join(f"{run['c_late']:.2f}" for run in runs), f"{mean['cover']:.3f}", f"{mean['cover_late']:.3f}",
            sum(run["warned"] for run in runs),
        ])
    header = ["data", "model", "test RMSE", "mean std / RMSE", "NLPD calibrated", "NLPD rescaled by c_late",
              "change", "c_late per split", "90% cover", "90% cover rescaled", "warnings"]
    gated = [g for g in gains if g[1] < 0.5]
    ungated = [g[0] for g in gains if g[1] >= 0.5] or [0.0]
    summary = (
        f"Mean over splits {', '.join(map(str, SEEDS))}; NLPD in the units of y (lower is better). "
        f"Rescaling changes the NLPD by {min(g[0] for g in gains):+.3f} to {max(g[0] for g in gains):+.3f} nats. "
        f"The rows where some split's c_late is below 0.5 (the late errors' variance under half the predicted): "
        + "; ".join(f"{name} ({label}) {change:+.3f}" for change, _, name, label in gated)
        + f". Where every c_late is 0.5 or above the change is {min(ungated):+.3f} to {max(ungated):+.3f}."
    )
    body = (__doc__.split("\n\n", 1)[1].replace("Writes ``results/late_noise_scale.md``.\n", "").strip()
            + "\n\n" + summary + "\n\n" + markdown_table(header, rows))
    print(write("late_noise_scale", "The calibrated noise scale against the latest rows' errors", body))


if __name__ == "__main__":
    main()
