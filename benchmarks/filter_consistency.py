"""The filter-consistency (NIS) test of a calibrated regressor on healthy streams and on broken ones.

A later ``partial_fit`` call of :class:`~skbong.BONGRegressor` (``obs_noise="calibrated"``)
is warned when its normalised squared innovations average more than ``INCONSISTENT_RATIO``
times the noise scale fitted before it (on ``INCONSISTENT_ROWS`` terms or more), or exceed
their expectation by more than ``max(INCONSISTENT_EXCESS, the call's expected sum)``
(``skbong._health``). This script records, for every later call of healthy streams, the
call's mean over the scale before ("ratio") and its excess in rows' worth, and counts the
warnings; then it runs three broken streams (a linear stream whose ``y`` is multiplied by 10,
shifted by 5, or given one target 60 noise standard deviations off, after 1,000 rows).

Healthy streams: scikit-learn's diabetes and ``make_friedman1`` (1,500 rows), a 1-D sine
(800 rows) and the five UCI sets of ``skbong.datasets``, inputs standardised, rows in a
fixed random order, fed in calls of 10 and 100 rows to the estimator at its defaults and five
variants (``family="diag"``, ``"fc"`` with 8 hidden units, ``tanh``, ``process_noise=1e-3``,
``sigma0="auto"``).

Writes ``results/filter_consistency.md`` and ``.png``.

    SKBONG_DATA=../shared/data python benchmarks/filter_consistency.py
"""

from __future__ import annotations

import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_diabetes, make_friedman1
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler

import skbong._estimators as estimators
from _report import RESULTS, markdown_table, write
from skbong import BONGRegressor
from skbong.datasets import UCI_NAMES, load_uci

SETTINGS = {
    "defaults": {},
    "diag": dict(family="diag"),
    "fc, 8 hidden": dict(family="fc", hidden_layer_sizes=(8,)),
    "tanh": dict(activation="tanh"),
    "process_noise 1e-3": dict(process_noise=1e-3),
    "sigma0 auto": dict(sigma0="auto"),
}
CALLS = (10, 100)
MESSAGE = "filter-consistency test"


def healthy_sets():
    sets = {}
    X, y = load_diabetes(return_X_y=True)
    sets["diabetes"] = (X, y)
    sets["friedman1"] = make_friedman1(1500, noise=1.0, random_state=0)
    rng = np.random.default_rng(0)
    x = rng.uniform(-3, 3, (800, 1))
    sets["sine"] = (x, np.sin(3 * x[:, 0]) + 0.1 * rng.normal(size=800))
    for name in UCI_NAMES:
        data = load_uci(name)
        sets[name] = (data.X, data.y)
    return {name: (StandardScaler().fit_transform(X), y) for name, (X, y) in sets.items()}


def stream(X, y, rows_per_call, **params):
    """Feed the rows in calls; return the recorded (ratio, excess, terms) and the warnings."""
    recorded, told = [], 0
    original = estimators._inconsistent_innovations

    def spy(call_sum, call_terms, previous_scale, previous_weight, *weighting):
        if call_terms > 0 and previous_weight >= estimators.INCONSISTENT_AFTER:
            excess = (call_sum - call_terms * previous_scale) / previous_scale
            recorded.append((call_sum / call_terms / previous_scale, excess, call_terms))
        return original(call_sum, call_terms, previous_scale, previous_weight, *weighting)

    estimators._inconsistent_innovations = spy
    try:
        estimator = BONGRegressor(random_state=0, **params)
        for start in range(0, len(y), rows_per_call):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                estimator.partial_fit(X[start : start + rows_per_call], y[start : start + rows_per_call])
            told += sum(MESSAGE in str(w.message) for w in caught)
    finally:
        estimators._inconsistent_innovations = original
    return np.array(recorded).reshape(-1, 3), told


def broken_streams():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(1200, 4))
    y = X @ np.array([1.0, -1.0, 0.5, 0.3]) + 0.1 * rng.normal(size=1200)
    changes = {"y times 10": lambda z: z * 10, "y plus 5": lambda z: z + 5}

    def one_outlier(z):
        z = z.copy()
        z[37] += 6.0
        return z

    changes["one target 60 noise sd off"] = one_outlier
    rows = []
    for name, change in changes.items():
        changed = np.concatenate([y[:1000], change(y[1000:1100])])
        recorded, told = stream(X[:1100], changed, 100, hidden_layer_sizes=())
        ratio, excess, _ = recorded[-1]
        rows.append([name, f"{ratio:.3g}", f"{excess:.3g}", "yes" if told else "no"])
    return rows


def main():
    warnings.simplefilter("ignore", UserWarning)
    rows, ratios = [], {calls: [] for calls in CALLS}
    for name, (X, y) in healthy_sets().items():
        order = np.random.default_rng(1).permutation(len(y))
        for calls in CALLS:
            for label, params in SETTINGS.items():
                recorded, told = stream(X[order], y[order], calls, **params)
                worst = recorded[np.argmax(recorded[:, 0])]
                rows.append([name, calls, label, len(recorded), f"{worst[0]:.3g} ({worst[2]:.0f} terms)",
                             f"{recorded[:, 1].max():.3g}", told])
                ratios[calls].append(recorded[:, 0])
                print(rows[-1], flush=True)
    broken = broken_streams()
    print(broken)
    figure, axis = plt.subplots(figsize=(6, 3.5))
    for calls in CALLS:
        axis.hist(np.log10(np.concatenate(ratios[calls])), bins=60, alpha=0.6, label=f"calls of {calls} rows")
    for row in broken:
        axis.axvline(np.log10(float(row[1])), color="k", linestyle=":")
    axis.axvline(np.log10(estimators.INCONSISTENT_RATIO), color="r", label="INCONSISTENT_RATIO")
    axis.set_xlabel("log10 of a call's mean NIS over the scale before (dotted: broken streams)")
    axis.set_ylabel("later calls")
    axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(RESULTS / "filter_consistency.png", dpi=120)
    n_told = sum(row[-1] for row in rows)
    body = "\n\n".join(
        [
            __doc__.split("\n\n", 1)[1].rsplit("\n\n", 2)[0],
            f"**Healthy streams: {len(rows)}, later calls recorded: "
            f"{sum(row[3] for row in rows)}, warned: {n_told}.**",
            markdown_table(["data set", "rows per call", "setting", "later calls", "largest ratio",
                            "largest excess (rows' worth)", "warned"], rows),
            "Broken streams (linear, calls of 100 rows, the change in the 11th call):",
            markdown_table(["change", "ratio", "excess (rows' worth)", "warned"], broken),
            "![ratios](filter_consistency.png)",
        ]
    )
    print(write("filter_consistency", "The filter-consistency test on healthy and broken streams", body))


if __name__ == "__main__":
    main()
