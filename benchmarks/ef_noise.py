"""The empirical-Fisher curvatures of the regressor at a fixed noise, at a noise that follows
the residuals, and on a belief whose scale follows them.

LIN-EF and MC-EF take the outer product of the gradients, ``J^T e e^T J / R^2``, for the
curvature, whose expectation is the linearised ``J^T J / R`` only where the residuals'
variance is ``R`` (BONG Sec. 4.5). Unlike LIN-HESS's, their means therefore depend on the
level of ``R``. Settings, per family (``dlr`` rank 10, ``diag``, ``fc``; the estimator's
defaults otherwise: MLP with one hidden layer of 50 ReLU units, BONG, one pass, batch size
1, ``sigma0 = 0.3``):

* **LIN-HESS**: the default ``hessian="lin_hess"`` and ``obs_noise``, the reference; with
  ``obs_noise="adaptive"``, and with it and ``sigma0="auto"``;
* **EF at R_0**: ``obs_noise="auto"``, the fixed ``R_0 = 0.1 Var(y)``. The means, so the
  RMSE, of the default ``"calibrated"`` for these curvatures until 2026-11-28;
* **EF adaptive**: ``obs_noise="adaptive"`` (LO-FI Eq. 66: the steps take ``R_t``, which
  follows the squared one-step-ahead residuals). What the default ran as from then;
* **EF default**: the default ``obs_noise="calibrated"``, which since 2026-11-29 holds a
  noise-scaled belief with these curvatures (``skbong.core.Dynamics.noise_scaled_belief``):
  the steps take ``R_0`` and the outer products are divided by ``c_t = R_t / R_0``, i.e.
  taken at the model's noise ``R_t`` with the model's covariance ``c_t`` times the belief's.

Scored on the test rows: RMSE and Gaussian NLPD of ``predict(return_std=True)``, both in the
units of y, mean +- SE over the splits; 'warned' counts the fits that emitted a
``ConvergenceWarning``. Data and splits: those of ``noise_scale.py`` (the five UCI sets and
three of scikit-learn's), and a sine, ``y = sin(3 x) + 0.1 noise`` on 2,000 rows of ``x``
uniform on ``[-3, 3]`` (75/25 split), where a noise in the steps that follows an untrained
network's residuals (about ``Var(y)``) keeps it from learning.

Writes ``results/ef_noise.md`` and ``results/ef_noise.png``.

    python benchmarks/ef_noise.py [--splits 3]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split

from _report import format_mean_se, markdown_table, write
from noise_scale import splits
from skbong import BONGRegressor
from skbong.metrics import gaussian_nlpd

FAMILIES = ("dlr", "diag", "fc")
#: (label, estimator parameters) per family.
SETTINGS = [
    ("LIN-HESS", dict()),
    ("LIN-HESS adaptive", dict(obs_noise="adaptive")),
    ("LIN-HESS adaptive, sigma0 auto", dict(obs_noise="adaptive", sigma0="auto")),
] + [
    (f"{method} {label}", dict(hessian=hessian, **noise))
    for method, hessian in (("LIN-EF", "lin_ef"), ("MC-EF", "mc_ef"))
    for label, noise in (("at R_0", dict(obs_noise="auto")), ("adaptive", dict(obs_noise="adaptive")), ("default", {}))
]


def sine_splits(n_splits: int):
    """The sine of the module docstring, in ``splits``'s format."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, (2000, 1))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=2000)
    for split in range(n_splits):
        X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=split)
        yield "sine", split, X_train, y_train, X_test, y_test, 1.0


def run(n_splits: int) -> dict:
    results = {}
    for name, split, X, y, X_test, y_test, y_scale in (*splits(n_splits), *sine_splits(n_splits)):
        for family in FAMILIES:
            for label, params in SETTINGS:
                est = BONGRegressor(family=family, random_state=split, **params)
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    try:
                        est.fit(X, y)
                    except (ValueError, FloatingPointError) as error:  # a refused fit counts as warned
                        results.setdefault((name, family), {}).setdefault(label, []).append((np.nan, np.nan, True))
                        print(f"{name} {split} {family} {label}: {type(error).__name__}", flush=True)
                        continue
                warned = any(issubclass(w.category, ConvergenceWarning) for w in caught)
                mean, std = est.predict(X_test, return_std=True)
                nlpd = gaussian_nlpd(y_test, mean, std) + np.log(y_scale)
                rmse = float(np.sqrt(np.mean((mean - y_test) ** 2))) * y_scale
                results.setdefault((name, family), {}).setdefault(label, []).append((rmse, nlpd, warned))
        print(name, split, flush=True)
    return results


def report(results: dict, n_splits: int, seconds: float) -> str:
    labels = [label for label, _ in SETTINGS]
    rows = []
    closer = {(method, other): [0, 0] for method in ("LIN-EF", "MC-EF") for other in ("adaptive", "at R_0")}
    for (name, family), by_label in results.items():
        rmse = {label: np.array([r[0] for r in by_label[label]]) for label in labels}
        nlpd = {label: np.array([r[1] for r in by_label[label]]) for label in labels}
        warned = {label: sum(r[2] for r in by_label[label]) for label in labels}
        rows.append(
            [name, family]
            + [f"{format_mean_se(rmse[label])} ({warned[label]})" for label in labels]
            + [format_mean_se(nlpd[label]) for label in labels]
        )
        for method, other in closer:
            closer[method, other][0] += int(np.mean(rmse[f"{method} default"]) < np.mean(rmse[f"{method} {other}"]))
            closer[method, other][1] += 1
    summary = "; ".join(
        f"{method} default has a lower RMSE than {method} {other} on {won} of {n}"
        for (method, other), (won, n) in closer.items()
    )
    return "\n\n".join(
        [
            __doc__.split("\n\n", 1)[1].rsplit("\n\n", 2)[0],
            f"**{summary} (data set, family) cells.** RMSE (lower is better) in the units of y, mean +- SE over "
            f"{n_splits} splits, with the number of fits that warned in brackets; then NLPD, same fits. Total "
            f"time {seconds / 60:.1f} min.",
            markdown_table(
                ["data set", "family"] + [f"RMSE {label}" for label in labels] + [f"NLPD {label}" for label in labels],
                rows,
            ),
            "![RMSE over LIN-HESS's](ef_noise.png)",
        ]
    )


def plot(results: dict, path) -> None:
    """Each cell's mean RMSE over LIN-HESS's, per noise setting and EF method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for ax, method in zip(axes, ("LIN-EF", "MC-EF")):
        names = [f"{name.split(',')[0].split(' (')[0]} {family}" for name, family in results]
        ratio = {
            setting: [np.nanmean([r[0] for r in cell[f"{method} {setting}"]]) / np.nanmean([r[0] for r in cell["LIN-HESS"]])
                      for cell in results.values()]
            for setting in ("at R_0", "adaptive", "default")
        }
        x = np.arange(len(names))
        ax.bar(x - 0.27, ratio["at R_0"], 0.27, label=f"{method} at R_0")
        ax.bar(x, ratio["adaptive"], 0.27, label=f"{method}, obs_noise='adaptive'")
        ax.bar(x + 0.27, ratio["default"], 0.27, label=f"{method}, default (noise-scaled belief)")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_yscale("log")
        ax.set_xticks(x, names, rotation=90, fontsize=7)
        ax.set_title(method)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("test RMSE / LIN-HESS's")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=3)
    args = parser.parse_args()
    start = time.perf_counter()
    results = run(args.splits)
    path = write(
        "ef_noise",
        "Empirical-Fisher curvatures of the regressor: fixed noise against a noise that follows the residuals",
        report(results, args.splits, time.perf_counter() - start),
    )
    plot(results, path.with_suffix(".png"))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
