"""Every BONG and BLR cell at the estimators' defaults, as a new user runs them, on data sets
that ship with scikit-learn: does each one learn, warn or raise?

For each data set (a ``train_test_split`` with ``random_state=0``, inputs standardised on the
training rows) and each cell (algorithm in {bong, blr} x hessian x family; BLR with
``learning_rate=0.5`` and two inner steps; defaults otherwise: MLP with one hidden layer
of 50 ReLU units, one pass, ``sigma0 = 0.3``, ``random_state=0``), one ``fit`` and the test
score (accuracy, or R^2). BLR on the full-covariance families (an O(P^3) inversion per
inner step, minutes per fit at these sizes) and the classifiers' full-covariance MC-HESS
(a dense P x P Hessian per draw) are left out.

A cell's outcome: its score, 'raised' (``fit`` raised, naming the cause and the remedy, and
the estimator kept its state), or the score marked 'W' when the fit warned
(``ConvergenceWarning``). The last table lists the fits that neither warned nor raised and
scored below 85% of the data set's best cell (issue 19's criterion): degraded fits that no
check flags.

Writes ``results/default_cells.md``.

    python benchmarks/default_cells.py
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn import datasets
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from _report import markdown_table, write
from skbong import BONGClassifier, BONGRegressor

HESSIANS = ("lin_hess", "lin_ef", "mc_hess", "mc_ef")
FAMILIES = ("fc", "fc_mom", "diag", "diag_mom", "dlr")


def data_sets() -> dict:
    rng = np.random.default_rng(0)
    inputs = rng.uniform(-5, 5, (1500, 1))
    return {
        "classifier": {
            "iris": datasets.load_iris(return_X_y=True),
            "wine": datasets.load_wine(return_X_y=True),
            "breast_cancer": datasets.load_breast_cancer(return_X_y=True),
            "digits": datasets.load_digits(return_X_y=True),
            "make_classification": datasets.make_classification(2000, 20, n_informative=10, n_classes=3, random_state=0),
            "make_moons": datasets.make_moons(1000, noise=0.2, random_state=0),
        },
        "regressor": {
            "diabetes": datasets.load_diabetes(return_X_y=True),
            "friedman1": datasets.make_friedman1(2000, random_state=0),
            "friedman2": datasets.make_friedman2(2000, random_state=0),
            "friedman3": datasets.make_friedman3(2000, random_state=0),
            "make_regression": datasets.make_regression(1000, 20, noise=10, random_state=0),
            "sinc": (inputs, np.sinc(inputs[:, 0]) + 0.1 * rng.standard_normal(1500)),
        },
    }


def cells(kind: str) -> list[tuple[str, str, str]]:
    return [
        (algorithm, hessian, family)
        for algorithm in ("bong", "blr")
        for hessian in HESSIANS
        for family in FAMILIES
        if not (hessian == "mc_hess" and family == "dlr")  # undefined (BONG App. E.5)
        and not (algorithm == "blr" and family.startswith("fc"))
        and not (kind == "classifier" and family.startswith("fc") and hessian == "mc_hess")
    ]


def run() -> dict:
    results = {}
    for kind, sets in data_sets().items():
        estimator = BONGClassifier if kind == "classifier" else BONGRegressor
        for name, (X, y) in sets.items():
            X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
            scaler = StandardScaler().fit(X_train)
            X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
            for algorithm, hessian, family in cells(kind):
                extra = {"learning_rate": 0.5, "n_inner_steps": 2} if algorithm == "blr" else {}
                est = estimator(algorithm=algorithm, hessian=hessian, family=family, random_state=0, **extra)
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    try:
                        est.fit(X_train, y_train)
                        outcome = (float(est.score(X_test, y_test)), any(
                            issubclass(w.category, ConvergenceWarning) for w in caught))
                    except (ValueError, FloatingPointError) as error:
                        outcome = (type(error).__name__, False)
                results.setdefault(kind, {}).setdefault(name, {})[(algorithm, hessian, family)] = outcome
                print(kind, name, algorithm, hessian, family, outcome, flush=True)
    return results


def report(results: dict, seconds: float) -> str:
    parts = [__doc__.split("\n\n", 1)[1].rsplit("\n\n", 2)[0]]
    unflagged = []
    for kind, by_set in results.items():
        names = list(by_set)
        rows, raised, warned, total = [], 0, 0, 0
        best = {name: max(s for s, _ in by_set[name].values() if isinstance(s, float)) for name in names}
        for cell in cells(kind):
            row = ["-".join(cell)]
            for name in names:
                score, did_warn = by_set[name][cell]
                total += 1
                if not isinstance(score, float):
                    raised += 1
                    row.append("raised")
                    continue
                warned += did_warn
                row.append(f"{score:.3f}{' W' if did_warn else ''}")
                if not did_warn and score < 0.85 * best[name]:
                    unflagged.append([kind, name, "-".join(cell), f"{score:.3f}", f"{best[name]:.3f}"])
            rows.append(row)
        parts += [
            f"**{kind}s** ({'accuracy' if kind == 'classifier' else 'R^2'}): {total} fits, {raised} raised, "
            f"{warned} warned.",
            markdown_table(["cell", *names], rows),
        ]
    parts += [
        f"**Unflagged fits below 85% of their data set's best cell: {len(unflagged)}.**",
        markdown_table(["estimator", "data set", "cell", "score", "best cell"], unflagged) if unflagged else "",
        f"Total time {seconds / 60:.1f} min.",
    ]
    return "\n\n".join(parts)


def main():
    start = time.perf_counter()
    results = run()
    path = write("default_cells", "Every BONG and BLR cell at its defaults", report(results, time.perf_counter() - start))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
