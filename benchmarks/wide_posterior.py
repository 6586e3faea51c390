"""The covariance check of plain-gradient regressors, measured on three regression sets.

BOG and BBB step the covariance at the mean's learning rate (BONG Eqs. 176, 308-309,
318-319), so it can stay wide while the mean learns; a regressor's ``return_std`` then
carries mostly the covariance. The estimators check this on the rows a fit saw
(``skbong._health.WIDE_POSTERIOR_EXCESS``): the Gaussian predictive whose variance adds the
linearised variance of the outputs to the rows' mean squared error, against the one with
the mean squared error alone, in nats a row. This script fits every BONG and BLR cell on
``dlr``, ``diag`` and ``fc`` at four prior scales, and every BOG and BBB cell on ``dlr``,
``diag`` and ``diag_mom`` at three prior scales and two learning rates (at 0.01 and above
they are refused as invalid on these sets), three passes each, on standardised inputs of
friedman1 (1,000 rows), diabetes and a linear set of 10 features (600 rows, noise 5). It
measures that excess through the public API (``predict(X, return_std=True)`` less
``obs_noise_``) on all the rows, and records whether the fit was told.

Writes ``results/wide_posterior.md``.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.stats import norm
from sklearn.datasets import load_diabetes, make_friedman1, make_regression
from sklearn.preprocessing import StandardScaler

from _report import markdown_table, write
from skbong import BONGRegressor
from skbong._health import WIDE_POSTERIOR_EXCESS

NATURAL = [(a, f, s, 1.0 if a == "bong" else 0.5) for a in ("bong", "blr") for f in ("dlr", "diag", "fc")
           for s in (0.1, 0.3, 1.0, 3.0)]
PLAIN = [(a, f, s, r) for a in ("bog", "bbb") for f in ("dlr", "diag", "diag_mom") for s in (0.3, 3.0, 30.0)
         for r in (1e-3, 1e-4)]


def data_sets() -> dict:
    return {
        "friedman1": make_friedman1(1000, random_state=0),
        "diabetes": load_diabetes(return_X_y=True),
        "linear": make_regression(600, 10, noise=5.0, random_state=0),
    }


def covariance_excess(reg: BONGRegressor, X: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Nats a row that adding the linearised variance to the squared errors costs on ``X``,
    and the median ratio of that variance to the mean squared error."""
    mean, std = reg.predict(X, return_std=True)
    linearised = np.maximum(std**2 - np.ravel(reg.obs_noise_)[0], 0.0)
    mse = np.mean((y - mean) ** 2)
    excess = np.mean(norm.logpdf(y, mean, np.sqrt(mse)) - norm.logpdf(y, mean, np.sqrt(mse + linearised)))
    return float(excess), float(np.median(linearised) / mse)


def main():
    header = ["data", "algorithm", "family", "sigma0", "learning rate", "R^2 (own rows)", "excess (nats a row)",
              "linearised variance / MSE", "told"]
    rows, by_geometry = [], {"natural": [], "plain": []}
    for name, (X, y) in data_sets().items():
        X = StandardScaler().fit_transform(X)
        for algorithm, family, sigma0, rate in NATURAL + PLAIN:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    reg = BONGRegressor(algorithm=algorithm, family=family, sigma0=sigma0, learning_rate=rate,
                                        max_iter=3, random_state=0).fit(X, y)
                except FloatingPointError:
                    continue  # refused (an invalid posterior): nothing to check
            told = any("far wider than its data allow" in str(w.message) for w in caught)
            excess, ratio = covariance_excess(reg, X, y)
            geometry = "natural" if algorithm in ("bong", "blr") else "plain"
            by_geometry[geometry].append((excess, told))
            rows.append([name, algorithm, family, f"{sigma0:g}", f"{rate:g}", f"{reg.score(X, y):.3f}",
                         f"{excess:.3f}", f"{ratio:.3g}", "yes" if told else ""])
            print(" | ".join(rows[-1]), flush=True)
    lines = []
    for geometry, results in by_geometry.items():
        excesses = [e for e, _ in results]
        lines.append(f"- {geometry} gradient: {len(results)} fits, excess {min(excesses):.3f} to {max(excesses):.3f} "
                     f"nats a row, {sum(t for _, t in results)} told")
    summary = "\n".join(lines)
    print(summary)
    body = (
        __doc__.split("\n\n", 1)[1].rsplit("\n\nWrites", 1)[0]
        + f"\n\nThe threshold is {WIDE_POSTERIOR_EXCESS} nats a row (the estimators measure it on up to 256 of "
        "the fit's rows, evenly spaced, with the rows' mean squared error per output).\n\n"
        + summary + "\n\n" + markdown_table(header, rows)
    )
    print(write("wide_posterior", "The covariance check of plain-gradient regressors", body))


if __name__ == "__main__":
    main()
