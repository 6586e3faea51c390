"""NLPD, calibration and prediction time of each predictive distribution.

Classification (scikit-learn's digits, inputs / 16, 1,257 train / 540 test rows): the
default BONGClassifier (MLP 64-50-10, DLR-10, BONG-LIN-HESS, sigma0 0.3) after one
pass over the first ``n`` training rows, for n in {200, 1257}, then every predictive of
``predictive=`` on the test rows: NLPD, top-label ECE (15 bins), accuracy and time per
1,000 predicted rows (steady state: the second call). One more block: breast_cancer,
logistic regression (no hidden layer, FC), sigma0 = 3, 50 observations, the regime of
``tests/test_predictive.py``'s calibration test.

Regression (UCI ``energy`` from ``SKBONG_DATA``, LO-FI protocol: standardised splits,
MLP with 50 ReLU units, DLR-10, one pass, fixed ``obs_noise = 0.1 Var(y)``): plug-in
``N(f(x, mu), R)`` against the linearised predictive of ``predict(return_std=True)``:
NLPD in original units, interval calibration error (mean |coverage - level| of the
central 10%..90% intervals), RMSE, time per 1,000 rows; mean +- SE over 5 splits.

Writes ``results/predictive.md`` and ``results/predictive.png``.

    python benchmarks/predictive.py
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from _report import RESULTS, markdown_table, write
from skbong import BONGClassifier, BONGRegressor
from skbong.datasets import uci_split
from skbong.metrics import (
    categorical_nlpd,
    expected_calibration_error,
    gaussian_nlpd,
    interval_calibration_error,
)

PREDICTIVES = ("plugin", "probit", "linearized_mc", "mc")
N_SAMPLES = 100
UCI_SET, N_SPLITS = "energy", 5


def _timed(fn, X, n_rows=1000):
    """Result of ``fn(X)`` and its steady-state seconds per ``n_rows`` rows."""
    fn(X)  # compile
    start = time.perf_counter()
    out = fn(X)
    return out, (time.perf_counter() - start) * n_rows / X.shape[0]


def classification_rows(name, clf, X_test, y_test):
    rows = []
    for predictive in PREDICTIVES:
        clf.set_params(predictive=predictive, n_predictive_samples=N_SAMPLES)
        log_proba, seconds = _timed(clf.predict_log_proba, X_test)
        proba = np.exp(log_proba)
        rows.append(
            [
                name,
                predictive,
                f"{categorical_nlpd(y_test, log_proba, clf.classes_):.3f}",
                f"{expected_calibration_error(y_test, proba, clf.classes_):.3f}",
                f"{np.mean(clf.classes_[proba.argmax(1)] == y_test):.3f}",
                f"{1e3 * seconds:.1f}",
            ]
        )
        print(" | ".join(rows[-1]), flush=True)
    return rows


def classification():
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X / 16.0, y, test_size=0.3, random_state=0, stratify=y)
    rows = []
    for n in (200, X_train.shape[0]):
        clf = BONGClassifier(random_state=0).fit(X_train[:n], y_train[:n])
        rows += classification_rows(f"digits, n={n}", clf, X_test, y_test)
    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.5, random_state=0, stratify=y)
    scaler = StandardScaler().fit(X_train)
    clf = BONGClassifier(hidden_layer_sizes=(), family="fc", sigma0=3.0, random_state=0)
    clf.fit(scaler.transform(X_train)[:50], y_train[:50])
    rows += classification_rows("breast_cancer, logistic, sigma0=3, n=50", clf, scaler.transform(X_test), y_test)
    return rows


def regression():
    per_split = {"plugin": [], "linearized": []}
    for split in range(N_SPLITS):
        data = uci_split(UCI_SET, split)
        # obs_noise="auto": the fixed R = 0.1 Var(y) of the protocol (the default now
        # calibrates R and the covariance, which would move both predictives at once).
        reg = BONGRegressor(obs_noise="auto", random_state=split).fit(data.X_train, data.y_train)
        (mean, std), seconds = _timed(lambda X: reg.predict(X, return_std=True), data.X_test)
        _, plugin_seconds = _timed(reg.predict, data.X_test)
        plugin_std = np.full_like(mean, np.sqrt(reg.obs_noise_[0]))
        rmse = data.y_std * np.sqrt(np.mean((mean - data.y_test) ** 2))
        for name, s, sec in (("plugin", plugin_std, plugin_seconds), ("linearized", std, seconds)):
            per_split[name].append(
                [
                    gaussian_nlpd(data.y_test, mean, s) + np.log(data.y_std),  # original units
                    interval_calibration_error(data.y_test, mean, s),
                    rmse,
                    1e3 * sec,
                ]
            )
    rows = []
    for name, values in per_split.items():
        values = np.asarray(values)
        mean, se = values.mean(0), values.std(0, ddof=1) / np.sqrt(values.shape[0])
        rows.append([f"{UCI_SET} ({N_SPLITS} splits)", name] + [f"{m:.3f} +- {s:.3f}" for m, s in zip(mean[:3], se[:3])] + [f"{mean[3]:.1f}"])
        print(" | ".join(rows[-1]), flush=True)
    return rows


def plot(class_rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    blocks = list(dict.fromkeys(r[0] for r in class_rows))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    width = 0.8 / len(PREDICTIVES)
    for k, predictive in enumerate(PREDICTIVES):
        rows = [r for r in class_rows if r[1] == predictive]
        for ax, column in zip(axes, (2, 3)):
            ax.bar(np.arange(len(blocks)) + k * width, [float(r[column]) for r in rows], width, label=predictive)
    for ax, title in zip(axes, ("NLPD (lower is better)", "ECE (lower is better)")):
        ax.set_xticks(np.arange(len(blocks)) + 0.4 - width / 2, [b.replace(", ", "\n", 1) for b in blocks], fontsize=7)
        ax.set_title(title)
    axes[0].set_yscale("log")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    class_rows = classification()
    reg_rows = regression()
    body = (
        f"Classification: every `predictive` of BONGClassifier (S = {N_SAMPLES} draws for the Monte-Carlo "
        "ones). NLPD = mean negative log predictive probability of the true label; ECE = top-label "
        "expected calibration error, 15 bins; time = steady-state milliseconds per 1,000 predicted rows.\n\n"
        + markdown_table(["data / model", "predictive", "NLPD", "ECE", "accuracy", "ms / 1000 rows"], class_rows)
        + "\n\n![NLPD and ECE](predictive.png)\n\n"
        f"Regression: UCI {UCI_SET}, default BONGRegressor (MLP 50, DLR-10, one pass), mean +- SE over "
        f"splits 0..{N_SPLITS - 1}. 'plugin' is N(f(x, mu), R); 'linearized' adds diag(J Sigma J^T) "
        "(LO-FI Eq. 60), as `predict(X, return_std=True)`. Calibration error = mean over levels "
        "10%..90% of |coverage of the central interval - level|.\n\n"
        + markdown_table(["data", "predictive", "NLPD (original units)", "interval calibration error", "RMSE", "ms / 1000 rows"], reg_rows)
    )
    plot(class_rows, RESULTS / "predictive.png")
    print(write("predictive", "Predictive distributions: NLPD, calibration, prediction time", body))


if __name__ == "__main__":
    main()
