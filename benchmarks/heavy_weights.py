"""Rows of heavy weight: one linearised step per row against steps of at most
``MAX_STEP_WEIGHT`` (``skbong.core``), for this tree and a baseline commit in one run.

A row of weight ``w`` is ``w`` observations of it. Absorbed in one linearised step, its
curvature enters ``w`` times at the prior mean, far from where ``w`` copies of the row move
the mean. This script fits ``BONGClassifier`` (defaults, one pass) on four data sets that
ship with scikit-learn, standardised, with every training row given the same weight ``w``,
and scores the test rows' log-loss; a uniform weight changes no row's share, only how much
the data weigh against the prior, so each ``w`` should do about as well as ``w`` copies of
every row (shown for ``w = 10``: ``np.repeat``, shuffled by the estimator).

Splits: ``train_test_split(test_size=0.4, stratify=y, random_state=s)`` for ``s`` in
``0..SPLITS-1``; the estimator's ``random_state`` is ``s`` too. Each tree runs in its own
subprocess (the baseline from ``git worktree``).

    python benchmarks/heavy_weights.py [--baseline f7b3c38]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from _report import baseline_tree, format_mean_se, markdown_table, write

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ("breast_cancer", "wine", "iris", "digits")
FAMILIES = ("dlr", "diag")
WEIGHTS = (1, 3, 10, 30, 100)
SPLITS = 5

MEASURE = r"""
import json, sys, time, warnings
import numpy as np
from sklearn import datasets
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from skbong import BONGClassifier

names, families, weights, splits, repeat = json.loads(sys.argv[1])
results = []
for name in names:
    X, y = getattr(datasets, "load_" + name)(return_X_y=True)
    for split in range(splits):
        X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.4, stratify=y, random_state=split)
        scaler = StandardScaler().fit(X_train)
        X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
        for family in families:
            cases = [("weight", w) for w in weights] + ([("repeat", repeat)] if repeat else [])
            for kind, w in cases:
                clf = BONGClassifier(family=family, random_state=split)
                rows = (X_train, y_train, np.full(len(y_train), float(w))) if kind == "weight" else (
                    np.repeat(X_train, w, 0), np.repeat(y_train, w), None)
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", ConvergenceWarning)
                    start = time.perf_counter()
                    try:
                        clf.fit(rows[0], rows[1], sample_weight=rows[2])
                        loss = log_loss(y_test, clf.predict_proba(X_test), labels=clf.classes_)
                    except FloatingPointError:
                        loss = float("nan")
                    seconds = time.perf_counter() - start
                warned = any(issubclass(c.category, ConvergenceWarning) for c in caught)
                results.append(dict(data=name, split=split, family=family, kind=kind, weight=w, log_loss=loss,
                                    warned=warned, seconds=seconds))
print(json.dumps(results))
"""


def measure(tree: Path, repeat: int) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(tree), "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu")}
    spec = json.dumps([DATASETS, FAMILIES, WEIGHTS, SPLITS, repeat])
    result = subprocess.run([sys.executable, "-c", MEASURE, spec], env=env, capture_output=True, text=True, cwd=tree)
    if result.returncode:
        raise RuntimeError(result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def cell(rows: list[dict]) -> str:
    """Mean ± SE of the test log-loss over splits; fits that raised are counted, not averaged."""
    losses = np.array([r["log_loss"] for r in rows])
    failed = int(np.sum(~np.isfinite(losses)))
    text = format_mean_se(losses[np.isfinite(losses)]) if failed < len(losses) else "all raised"
    if failed and failed < len(losses):
        text += f" ({failed} raised)"
    warned = sum(r["warned"] for r in rows)
    return text + (f", {warned} warned" if warned else "")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="f7b3c38", help="commit to compare with (one step per row)")
    args = parser.parse_args()
    with baseline_tree(args.baseline) as base_tree:
        results = {"baseline": measure(base_tree, repeat=0), "this tree": measure(ROOT, repeat=10)}
    rows = []
    for name in DATASETS:
        for family in FAMILIES:
            def pick(tree, kind, w):
                return [r for r in results[tree] if r["data"] == name and r["family"] == family
                        and r["kind"] == kind and r["weight"] == w]

            repeated = cell(pick("this tree", "repeat", 10))
            for w in WEIGHTS:
                seconds = np.median([r["seconds"] for r in pick("this tree", "weight", w)])
                rows.append([name, family, w, cell(pick("baseline", "weight", w)), cell(pick("this tree", "weight", w)),
                             repeated if w == 10 else "", f"{seconds:.2f}"])
    heavy = [w for w in WEIGHTS if w > 4]

    def failures(tree):  # fits with heavy weights that raised, and that warned
        fits = [r for r in results[tree] if r["kind"] == "weight" and r["weight"] in heavy]
        return sum(not np.isfinite(r["log_loss"]) for r in fits), sum(r["warned"] for r in fits), len(fits)

    def mean_loss(tree, name, family, w):
        losses = [r["log_loss"] for r in results[tree] if (r["data"], r["family"], r["kind"], r["weight"])
                  == (name, family, "weight", w)]
        return np.mean(losses) if np.all(np.isfinite(losses)) else np.inf

    cells = [(n, f, w) for n in DATASETS for f in FAMILIES for w in heavy]
    lower = sum(mean_loss("this tree", *c) < mean_loss("baseline", *c) for c in cells)
    summary = (
        f"Fits with weights above 4 ({len(cells)} cells x {SPLITS} splits): the baseline raised "
        f"{failures('baseline')[0]} and warned {failures('baseline')[1]} of {failures('baseline')[2]}; "
        f"this tree raised {failures('this tree')[0]} and warned {failures('this tree')[1]}. "
        f"This tree's mean log-loss is the lower in {lower} of the {len(cells)} cells."
    )
    body = "\n\n".join([
        f"**{summary}**",
        f"`BONGClassifier(family=f, random_state=s)`, defaults otherwise (MLP (50,), one pass, batch size 1), "
        f"fitted on standardised training rows all of weight w; test log-loss, mean ± SE over {SPLITS} splits "
        "(stratified, 40% test). 'baseline' is the commit given, which absorbs a row in one step whatever its "
        "weight; 'this tree' cuts a row of weight w > MAX_STEP_WEIGHT = 4 into k = ceil(w / 4) steps of w / k "
        "(at most MAX_SUBSTEPS = 16). 'raised': the fit refused a diverged posterior (FloatingPointError); "
        "'warned': a ConvergenceWarning. 'w copies' fits every row repeated w = 10 times (no weights); "
        "'s / fit' is this tree's median wall time of a fit, compilation included.",
        markdown_table(["data", "family", "w", "baseline: one step a row", "this tree: steps of <= 4",
                        "w copies (w = 10)", "s / fit"], rows),
    ])
    path = write("heavy_weights", "Rows of heavy weight: one step a row against steps of at most 4", body)
    (path.parent / "heavy_weights.json").write_text(json.dumps(results))
    print(path.read_text())


if __name__ == "__main__":
    main()
