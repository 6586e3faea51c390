"""sigma0='auto' for a classifier that predicts with its posterior: which evidence weighs the scales.

``sigma0="auto"`` weighs its grid of prior scales by their prequential evidence. Scored by
the plug-in predictive (the network at each posterior mean), the evidence does not see how
wide each posterior is, and a classifier that then predicts with the posterior
(``predictive`` "probit" or "mc") may be handed a scale whose posterior is far too wide for
it. Since 2026-11-29 a classifier with such a ``predictive`` weighs the scales by that
predictive's own evidence. For each of scikit-learn's wine, breast_cancer, iris and digits
(70/30 stratified splits ``random_state`` 0 to 2, inputs standardised on the training rows,
one pass, the default MLP, ``random_state`` = the split) this script compares, on the test
rows:

* **plug-in weighed** (the behaviour before): ``fit`` with ``predictive="plugin"``, then
  ``set_params(predictive=P)``;
* **own weighed**: ``fit`` with ``predictive=P``;
* the plug-in predictive itself (``predictive="plugin"``), for reference.

'fit s' is the wall time of the fits (compilation included; one process, in turns), the
ratio own / plug-in weighed the median over the splits.

Writes ``results/auto_sigma0_predictive.md`` and ``.png``.

    python benchmarks/auto_sigma0_predictive.py
"""

from __future__ import annotations

import time
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from _report import RESULTS, format_mean_se, markdown_table, write
from skbong import BONGClassifier

DATA = {"wine": load_wine, "breast_cancer": load_breast_cancer, "iris": load_iris, "digits": load_digits}
PREDICTIVES = ("probit", "mc")
SPLITS = (0, 1, 2)


def scores(estimator, X, y):
    proba = estimator.predict_proba(X)
    return log_loss(y, proba, labels=estimator.classes_), accuracy_score(y, estimator.classes_[proba.argmax(1)])


def timed_fit(X, y, **params):
    start = time.perf_counter()
    estimator = BONGClassifier(sigma0="auto", **params).fit(X, y)
    return estimator, time.perf_counter() - start


def main():
    rows, plot = [], {}
    for name, load in DATA.items():
        X_all, y_all = load(return_X_y=True)
        results = {key: [] for key in ("plugin", *[(p, how) for p in PREDICTIVES for how in ("plugin", "own")])}
        for split in SPLITS:
            X, X_test, y, y_test = train_test_split(X_all, y_all, test_size=0.3, random_state=split, stratify=y_all)
            scaler = StandardScaler().fit(X)
            X, X_test = scaler.transform(X), scaler.transform(X_test)
            plugin, seconds = timed_fit(X, y, random_state=split)
            results["plugin"].append((*scores(plugin, X_test, y_test), plugin.sigma0_, seconds))
            for predictive in PREDICTIVES:
                plugin.set_params(predictive=predictive)
                results[(predictive, "plugin")].append((*scores(plugin, X_test, y_test), plugin.sigma0_, seconds))
                own, seconds_own = timed_fit(X, y, random_state=split, predictive=predictive)
                results[(predictive, "own")].append((*scores(own, X_test, y_test), own.sigma0_, seconds_own))
                plugin.set_params(predictive="plugin")
        for key, values in results.items():
            values = np.asarray(values)
            predictive, how = ("plugin", "plugin") if key == "plugin" else key
            ratio = ""
            if how == "own":
                ratio = f"{np.median(values[:, 3] / np.asarray(results[(predictive, 'plugin')])[:, 3]):.2f}"
            rows.append(
                [name, predictive, f"{how} evidence", format_mean_se(values[:, 0]), format_mean_se(values[:, 1]),
                 " ".join(f"{s:g}" for s in values[:, 2]), f"{np.mean(values[:, 3]):.1f}", ratio]
            )
            plot[(name, predictive, how)] = values[:, 0]
            print(rows[-1], flush=True)
    header = ["data set", "predictive", "scales weighed by", "test log-loss", "test accuracy", "sigma0_ (splits)",
              "fit s", "fit s, own / plug-in weighed"]
    figure, axis = plt.subplots(figsize=(8, 3.5))
    labels = list(DATA)
    for offset, (predictive, how, colour) in enumerate(
        [("plugin", "plugin", "grey"), ("probit", "plugin", "tab:blue"), ("probit", "own", "navy"),
         ("mc", "plugin", "tab:orange"), ("mc", "own", "darkred")]
    ):
        means = [plot[(name, predictive, how)].mean() for name in labels]
        axis.bar(np.arange(len(labels)) + 0.16 * (offset - 2), means, 0.16, color=colour,
                 label=f"{predictive}, {how}-weighed" if predictive != "plugin" else "plugin predictive")
    axis.set_xticks(np.arange(len(labels)), labels)
    axis.set_ylabel("test log-loss (mean of 3 splits)")
    axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(RESULTS / "auto_sigma0_predictive.png", dpi=120)
    body = "\n\n".join(
        [
            __doc__.split("\n\n", 1)[1].rsplit("\n\n", 2)[0],
            markdown_table(header, rows),
            "![test log-loss by evidence](auto_sigma0_predictive.png)",
        ]
    )
    print(write("auto_sigma0_predictive", "sigma0='auto' with a posterior predictive: plug-in or own evidence", body))


if __name__ == "__main__":
    warnings.simplefilter("ignore", ConvergenceWarning)
    main()
