"""The backtracking line search of the mean step (``backtrack=True``) against the plain step.

A linearised BONG step is one Gauss-Newton step on the step's MAP objective. For a row the
network predicts confidently wrong, the categorical curvature ``p (1 - p)`` nearly vanishes
and the step can overshoot, raising the objective it minimises; ``backtrack=True`` halves
such a mean move until the objective is no higher than at the prior mean
(``skbong.core.make_config``). This script measures what that changes, with
``BONGClassifier`` at its defaults otherwise (one pass, batch size 1, BONG-LIN-HESS):

* ``mnist_mlp``: the MLP 784-50-10, DLR-10 (the default), on the stream of
  ``benchmarks/mnist_stream.py`` (``mnist_stream(seed)``: learn on the first T = 2,000 rows
  in order, test on its 2,000 test rows);
* ``mnist_mlp_diag``: the same with ``family="diag"`` (VD-EKF);
* ``mnist_cnn``: the paper's CNN of ``mnist_stream.py`` passed as ``model=``, DLR-10;
* ``digits`` and ``digits_raw``: ``load_digits`` with inputs ``X / 16`` and raw (0-16), a
  shuffle per seed, 1,000 learning rows and 797 test rows (as ``auto_sigma0.py``);
* ``mnist_mlp_mc_ef`` and ``mnist_cnn_mc_ef``: the MLP and the CNN with BONG-MC-EF (M = 10
  draws, as ``mnist_stream.py``), where the estimators' default leaves the line search off
  (``backtrack="auto"``); run apart, ``--datasets mnist_mlp_mc_ef,mnist_cnn_mc_ef --sigma0s
  0.03,0.1,0.3 --name backtrack_mc`` (``mnist_stream.py``'s MC-EF grid).

Each at sigma0 in ``SIGMA0S`` (or ``--sigma0s``), seeds 0-4, with and without backtracking; the same seed gives
both the same initial weights and data. Reported: test log-loss and accuracy (mean ± SE over
seeds; a fit that raised counts as failed), the paired difference, and the wall time of a fit
with backtracking over one without (median over seeds, after a warm-up fit compiled both).

Writes ``results/backtrack.{md,json}`` (or ``--name``).

    python benchmarks/backtrack.py [--seeds 5] [--datasets mnist_mlp,mnist_mlp_diag,mnist_cnn,digits,digits_raw]
        [--sigma0s 0.1,0.3,1] [--name backtrack] [--from-json]
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from sklearn.datasets import load_digits

from _report import RESULTS, markdown_table, format_mean_se, write
from auto_sigma0 import fit_timed, score_nll
from mnist_stream import build_model
from skbong import BONGClassifier
from skbong.datasets import mnist_stream

SIGMA0S = (0.1, 0.3, 1.0)
N_MNIST = 2000
DATASETS = ("mnist_mlp", "mnist_mlp_diag", "mnist_cnn", "digits", "digits_raw")


def _data(name: str, seed: int):
    """(X, y, X_test, y_test, estimator options) of one run."""
    if name.startswith("mnist"):
        X, y, X_test, y_test = mnist_stream(seed)
        options = {"shuffle": False}
        if name.startswith("mnist_cnn"):
            options["model"] = build_model("cnn").build(seed)
        if name == "mnist_mlp_diag":
            options["family"] = "diag"
        if name.endswith("_mc_ef"):
            options.update(hessian="mc_ef", n_mc_samples=10)
        return X[:N_MNIST], y[:N_MNIST], X_test, y_test, options
    X, y = load_digits(return_X_y=True)
    X = X / 16 if name == "digits" else X
    order = np.random.default_rng(seed).permutation(len(y))
    return X[order[:1000]], y[order[:1000]], X[order[1000:]], y[order[1000:]], {}


def _fit_score(X, y, X_test, y_test, sigma0, **params) -> dict:
    est, seconds, warned = fit_timed(lambda s: BONGClassifier(sigma0=s, **params), sigma0, X, y)
    if est is None:
        return {"nll": np.inf, "acc": np.nan, "seconds": seconds, "status": "raised"}
    nll, acc = score_nll(est, X_test, y_test, regression=False)
    return {"nll": nll, "acc": acc, "seconds": seconds, "status": "warned" if warned else ""}


def run(datasets, n_seeds: int, sigma0s=SIGMA0S) -> dict:
    results = {}
    for name in datasets:
        X, y, X_test, y_test, options = _data(name, 0)
        for backtrack in (False, True):  # warm-up: compile both programs
            _fit_score(X[:200], y[:200], X_test, y_test, sigma0=0.3, backtrack=backtrack, random_state=0, **options)
        for sigma0 in sigma0s:
            for seed in range(n_seeds):
                X, y, X_test, y_test, options = _data(name, seed)
                pair = {
                    str(backtrack): _fit_score(X, y, X_test, y_test, sigma0=sigma0, backtrack=backtrack,
                                               random_state=seed, **options)
                    for backtrack in (False, True)
                }
                results.setdefault(name, {}).setdefault(str(sigma0), []).append(pair)
                print(f"{name:>15} sigma0={sigma0:<4} seed {seed}: plain {pair['False']['nll']:.4f} / "
                      f"{pair['False']['acc']:.3f}, backtrack {pair['True']['nll']:.4f} / {pair['True']['acc']:.3f} "
                      f"({pair['True']['seconds'] / pair['False']['seconds']:.2f}x time)", flush=True)
    return results


def report(results: dict) -> str:
    rows = []
    n_better = n_worse = n_cells = 0
    for name, by_sigma in results.items():
        for sigma0, runs in by_sigma.items():
            plain = np.array([r["False"]["nll"] for r in runs])
            backtracked = np.array([r["True"]["nll"] for r in runs])
            diff = backtracked - plain
            finite = np.all(np.isfinite(diff))
            se = diff.std(ddof=1) / np.sqrt(len(diff)) if finite and len(diff) > 1 else np.nan
            if finite:
                n_cells += 1
                n_better += bool(diff.mean() < -se)
                n_worse += bool(diff.mean() > se)
            ratio = np.median([r["True"]["seconds"] / r["False"]["seconds"] for r in runs])
            flags = lambda key: ", ".join(  # noqa: E731
                f"{sum(r[key]['status'] == s for r in runs)} {s}" for s in ("warned", "raised")
                if any(r[key]["status"] == s for r in runs)
            )
            rows.append([
                name, sigma0, len(runs), format_mean_se(plain), format_mean_se(backtracked),
                f"{diff.mean():+.4f} ± {se:.4f}" if finite else "n/a",
                format_mean_se([r["False"]["acc"] for r in runs]), format_mean_se([r["True"]["acc"] for r in runs]),
                flags("False"), flags("True"), f"{ratio:.2f}",
            ])
    table = markdown_table(
        ["data", "sigma0", "seeds", "log-loss plain", "log-loss backtrack", "backtrack - plain",
         "accuracy plain", "accuracy backtrack", "plain warned/raised", "backtrack warned/raised",
         "time backtrack / plain"],
        rows,
    )
    summary = (
        f"**Of {n_cells} (data, sigma0) cells where both always fit, backtracking lowers the mean test "
        f"log-loss by more than one SE of the paired difference in {n_better} and raises it by more "
        f"than one SE in {n_worse}.**"
    )
    return f"{(__doc__ or '').split(chr(10) + chr(10) + '    python')[0]}\n\n{summary}\n\n{table}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--sigma0s", default=",".join(map(str, SIGMA0S)))
    parser.add_argument("--name", default="backtrack", help="results/NAME.{md,json}")
    parser.add_argument("--from-json", action="store_true", help="re-render results/NAME.json without fitting")
    args = parser.parse_args()
    json_path = RESULTS / f"{args.name}.json"
    if args.from_json:
        results = json.loads(json_path.read_text())
    else:
        results = run(args.datasets.split(","), args.seeds, [float(s) for s in args.sigma0s.split(",")])
        json_path.write_text(json.dumps(results, indent=1, default=float))
    title = "Backtracking the mean step: test log-loss with and without"
    path = write(args.name, title + ("" if args.name == "backtrack" else f" ({args.name})"), report(results))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
