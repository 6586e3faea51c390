"""A candidate default prior: each layer's weights at ``s / sqrt(fan_in)`` against one ``sigma0``.

The estimators' prior is ``N(theta_0, sigma0^2 I)`` around the LeCun-normal initial weights,
whose standard deviation is ``1 / sqrt(fan_in)``. At the default ``sigma0 = 0.3`` the prior
is therefore wide against the initial weights of a layer with many inputs (digits' first
layer, fan-in 64: 2.4 times their scale) and narrow against those of a layer with few
(iris, fan-in 4: 0.6 times), where the posterior can hardly move the random features. The
standard parameterisation of priors on network weights (Neal 1996, Sec. 2.2) scales each
layer's prior standard deviation as ``s / sqrt(fan_in)`` instead, so that the prior on the
network's function does not depend on the layer widths.

This script measures that prior on the default estimators: the per-parameter standard
deviation ``s / sqrt(n_in)`` for the kernel and the bias of every layer of ``n_in`` inputs
(``skbong.core.parameter_fan_in``), given to the filter in place of the scalar ``sigma0``
(the filter's families take a per-parameter prior; the estimators do not expose it, so the
script replaces their call of ``init_belief``, and reads the network's fan-in where they read
its initial weights, ``module_params``). ``s = 2.4`` is fixed in advance as the value that leaves digits' first layer
at today's 0.3 (``0.3 sqrt(64)``); 1.5 and 3.5 show the slope around it. ``sigma0="auto"``
(the evidence-weighted sweep over fixed scales) is the reference for choosing a scale from
the data. The estimators' prior checks still judge the scalar ``sigma0``; their warnings are
counted, not acted on (on moons and circles, 2 inputs, they are the prior-conflict warning:
the posterior mean's distance from the prior mean measured in units of 0.3, where the
first layer's prior was ``2.4 / sqrt(2) = 1.7``). No setting is chosen on the test rows: every setting is reported.

Data: classification, 5-fold stratified cross-validation (shuffled, seeds 0 and 1) on
scikit-learn's iris, wine, breast_cancer and digits and on make_moons (500, noise 0.2),
make_circles (500, noise 0.1, factor 0.5) and make_classification (1,000 rows, 20 features,
10 informative, 3 classes); regression, the splits of ``late_noise_scale.py`` (the five UCI
sets, splits 0-2; diabetes, friedman1 at noise 5 and 1, two linear sets and a sine). Inputs
standardised on the training rows. MNIST: the protocol of ``mnist_stream.py`` (one pass over
the first 2,000 rows of ``skbong.datasets.mnist_stream(seed)``, scored on its 2,000 held-out
rows, seeds 0-2), the MLP 784-50-10 and the paper's CNN passed as ``model=`` to the default
classifier (DLR-10, BONG-LIN-HESS), pixels in [0, 1] as in the paper: not standardised, so
the first layer's inputs have a mean square of about 0.1, not 1.

Writes ``results/fan_in_prior.md`` and ``.png``.
"""

from __future__ import annotations

import contextlib
import time
import warnings

import numpy as np
from sklearn.datasets import (
    load_breast_cancer,
    load_digits,
    load_iris,
    load_wine,
    make_circles,
    make_classification,
    make_moons,
)
from sklearn.metrics import log_loss, r2_score
from sklearn.model_selection import StratifiedKFold
from sklearn.preprocessing import StandardScaler

import skbong._estimators as estimators
import skbong.core._models as models
from _report import RESULTS, markdown_table, write
from late_noise_scale import nlpd, splits
from mnist_stream import build_model
from skbong import BONGClassifier, BONGRegressor
from skbong.core import parameter_fan_in
from skbong.datasets import mnist_stream

FAN_IN_SCALES = (1.5, 2.4, 3.5)
SETTINGS = ("sigma0=0.3", "sigma0='auto'", *(f"fan-in s={s}" for s in FAN_IN_SCALES))
FOLD_SEEDS = (0, 1)
CLASSIFICATION = {
    "iris": lambda: load_iris(return_X_y=True),
    "wine": lambda: load_wine(return_X_y=True),
    "breast_cancer": lambda: load_breast_cancer(return_X_y=True),
    "digits": lambda: load_digits(return_X_y=True),
    "moons": lambda: make_moons(500, noise=0.2, random_state=0),
    "circles": lambda: make_circles(500, noise=0.1, factor=0.5, random_state=0),
    "classification 3x20": lambda: make_classification(
        1000, 20, n_informative=10, n_classes=3, random_state=0
    ),
}


@contextlib.contextmanager
def fan_in_prior(scale: float | None):
    """Within the block, fixed-``sigma0`` fits start from the prior of standard deviation
    ``scale / sqrt(fan_in)`` per weight (:func:`skbong.core.parameter_fan_in` of the network
    that the estimator builds)."""
    if scale is None:
        yield
        return
    init_belief, module_params = estimators.init_belief, models.module_params
    fan_in = {}

    def params(module):
        fan_in["of the network"] = parameter_fan_in(module)
        return module_params(module)

    def init(family, mean0, sigma0):
        std = scale / np.sqrt(fan_in["of the network"])
        return init_belief(family, mean0, std.astype(np.asarray(mean0).dtype))

    estimators.init_belief, models.module_params = init, params
    try:
        yield
    finally:
        estimators.init_belief, models.module_params = init_belief, module_params


def setting_args(setting: str):
    """``(estimator keyword arguments, fan-in scale or None)`` of a setting's name."""
    if setting == "sigma0='auto'":
        return {"sigma0": "auto"}, None
    if setting.startswith("fan-in"):
        return {}, float(setting.split("=")[1])
    return {}, None


def fit(estimator, X, y, scale):
    with warnings.catch_warnings(record=True) as caught, fan_in_prior(scale):
        warnings.simplefilter("always")
        estimator.fit(X, y)
    return estimator, len(caught)


def classification_runs():
    for name, load in CLASSIFICATION.items():
        X, y = load()
        for fold_seed in FOLD_SEEDS:
            folds = StratifiedKFold(5, shuffle=True, random_state=fold_seed).split(X, y)
            for k, (train, test) in enumerate(folds):
                scaler = StandardScaler().fit(X[train])
                X_train, X_test = scaler.transform(X[train]), scaler.transform(X[test])
                for setting in SETTINGS:
                    kwargs, scale = setting_args(setting)
                    model, warned = fit(BONGClassifier(random_state=k, **kwargs), X_train, y[train], scale)
                    proba = model.predict_proba(X_test)
                    yield name, setting, {
                        "accuracy": float(np.mean(model.classes_[proba.argmax(1)] == y[test])),
                        "log_loss": float(log_loss(y[test], proba, labels=model.classes_)),
                        "warned": warned,
                    }
        print(name, flush=True)


MNIST_SEEDS = (0, 1, 2)
MNIST_ROWS = 2000


def mnist_runs():
    for model_name in ("mlp", "cnn"):
        model = build_model(model_name)
        for seed in MNIST_SEEDS:
            X_train, y_train, X_test, y_test = mnist_stream(seed)
            for setting in SETTINGS:
                kwargs, scale = setting_args(setting)
                clf, warned = fit(BONGClassifier(model=model.build(seed), random_state=seed, **kwargs),
                                  X_train[:MNIST_ROWS], y_train[:MNIST_ROWS], scale)
                proba = clf.predict_proba(X_test)
                yield f"MNIST {model.label}", setting, {
                    "accuracy": float(np.mean(clf.classes_[proba.argmax(1)] == y_test)),
                    "log_loss": float(log_loss(y_test, proba, labels=clf.classes_)),
                    "warned": warned,
                }
            print(model_name, seed, flush=True)


def regression_runs():
    for name, seed, X_train, y_train, X_test, y_test in splits():
        scaler = StandardScaler().fit(X_train)
        X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
        for setting in SETTINGS:
            kwargs, scale = setting_args(setting)
            model, warned = fit(BONGRegressor(random_state=seed, **kwargs), X_train, y_train, scale)
            mean, std = model.predict(X_test, return_std=True)
            yield name, setting, {"r2": float(r2_score(y_test, mean)), "nlpd": nlpd(y_test, mean, std),
                                  "warned": warned}
        print(name, seed, flush=True)


def summarise(runs, metrics):
    """Mean and standard error of each metric per (data set, setting), and the runs' warnings."""
    cells = {}
    for name, setting, run in runs:
        cells.setdefault((name, setting), []).append(run)
    out = {}
    for key, values in cells.items():
        out[key] = {m: (float(np.mean([v[m] for v in values])),
                        float(np.std([v[m] for v in values], ddof=1) / np.sqrt(len(values)))) for m in metrics}
        out[key]["warned"] = sum(v["warned"] for v in values)
        out[key]["n"] = len(values)
    return out


def paired_change(runs, metric, setting, baseline="sigma0=0.3"):
    """Mean and standard error over the data sets' runs of ``setting`` minus ``baseline``, paired per run."""
    by = {}
    for name, s, run in runs:
        by.setdefault((name, s), []).append(run[metric])
    out = {}
    for name in dict.fromkeys(n for n, _ in by):
        d = np.array(by[(name, setting)]) - np.array(by[(name, baseline)])
        out[name] = (float(d.mean()), float(d.std(ddof=1) / np.sqrt(d.size)))
    return out


def table(summary, names, metrics, formats):
    rows = []
    for name in names:
        for setting in SETTINGS:
            cell = summary[(name, setting)]
            rows.append([name, setting] + [f"{cell[m][0]:{f}} ± {cell[m][1]:{f}}" for m, f in zip(metrics, formats)]
                        + [cell["warned"]])
    return rows


def plot(class_changes, reg_changes, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, changes, label in [(axes[0], class_changes, "test log-loss"), (axes[1], reg_changes, "test NLPD")]:
        names = list(next(iter(changes.values())))
        width = 0.8 / len(changes)
        for k, (setting, change) in enumerate(changes.items()):
            ax.bar(np.arange(len(names)) + k * width, [change[n][0] for n in names], width,
                   yerr=[change[n][1] for n in names], label=setting)
        ax.axhline(0, color="k", lw=0.5)
        ax.set_xticks(np.arange(len(names)) + 0.4 - width / 2, names, rotation=60, ha="right", fontsize=8)
        ax.set_ylabel(f"{label} minus sigma0=0.3's (paired)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    start = time.perf_counter()
    class_runs = list(classification_runs()) + list(mnist_runs())
    reg_runs = list(regression_runs())
    class_summary = summarise(class_runs, ("accuracy", "log_loss"))
    reg_summary = summarise(reg_runs, ("r2", "nlpd"))
    others = [s for s in SETTINGS if s != "sigma0=0.3"]
    class_changes = {s: paired_change(class_runs, "log_loss", s) for s in others}
    reg_changes = {s: paired_change(reg_runs, "nlpd", s) for s in others}

    def counts(changes):
        return "; ".join(
            f"{s}: lower on {sum(m + 2 * e < 0 for m, e in c.values())}, higher on "
            f"{sum(m - 2 * e > 0 for m, e in c.values())} of {len(c)}" for s, c in changes.items()
        )

    summary = (
        "Paired against sigma0=0.3 (the same folds and seeds), a data set counts as lower or higher where the "
        "mean change is more than two standard errors from 0. Test log-loss of the classifiers: "
        + counts(class_changes) + ". Test NLPD of the regressors: " + counts(reg_changes) + "."
    )
    class_names = list(dict.fromkeys(name for name, _, _ in class_runs))
    reg_names = list(dict.fromkeys(name for name, _, _ in reg_runs))
    body = (
        __doc__.split("\n\n", 1)[1].replace("Writes ``results/fan_in_prior.md`` and ``.png``.\n", "").strip()
        + f"\n\n{summary}\n\n## Classification (mean ± SE over {2 * 5} folds; MNIST over seeds {MNIST_SEEDS})\n\n"
        + markdown_table(["data", "prior", "accuracy", "log-loss", "warnings"],
                         table(class_summary, class_names, ("accuracy", "log_loss"), (".3f", ".3f")))
        + "\n\n## Regression (mean ± SE over the splits)\n\n"
        + markdown_table(["data", "prior", "R^2", "NLPD", "warnings"],
                         table(reg_summary, reg_names, ("r2", "nlpd"), (".3f", ".3f")))
        + "\n\n## Paired change against sigma0=0.3 (mean ± SE)\n\n"
        + markdown_table(["data", *others],
                         [[n] + [f"{class_changes[s][n][0]:+.3f} ± {class_changes[s][n][1]:.3f}" for s in others]
                          for n in class_names]
                         + [[n] + [f"{reg_changes[s][n][0]:+.3f} ± {reg_changes[s][n][1]:.3f}" for s in others]
                            for n in reg_names])
        + f"\n\nTotal runtime: {(time.perf_counter() - start) / 60:.1f} min.\n\n![change](fan_in_prior.png)"
    )
    plot(class_changes, reg_changes, RESULTS / "fan_in_prior.png")
    print(write("fan_in_prior", "A fan-in prior against one sigma0", body))


if __name__ == "__main__":
    main()
