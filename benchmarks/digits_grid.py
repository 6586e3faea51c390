"""Every (algorithm, hessian, family) cell of the BONG space on scikit-learn's digits.

One pass over 1,257 training rows (inputs / 16), MLP 64-H-10 (ReLU, H=5 by default,
P = 385, so that the 32 O(P^3) full-covariance cells and their learning-rate searches
finish in minutes on two cores), batch size 1, 540 rows held out. The learning rate of
BLR, BOG and BBB is chosen per cell on a validation split of the training rows (first
600 rows to learn, last 300 to score by log-loss); BONG takes its unit step. Each cell
then makes one pass over all training rows and reports held-out accuracy and log-loss,
steady-state time per observation (the final fit, which reuses the code the validation
fits compiled) and compile time. Cells the registry rejects print the reason. Writes ``results/digits_grid.md`` and ``results/digits_grid.png``.

    python benchmarks/digits_grid.py [--families dlr,diag] [--hidden 10]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import SGDClassifier
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split

from _report import RESULTS, markdown_table, write
from skbong import BONGClassifier
from skbong.core import ALGORITHMS, FAMILIES, HESSIANS, trace_count, undefined_reason

SIGMA0 = 0.3
#: Learning rates tried on the validation split; BONG has none (unit step, Eq. 5).
LEARNING_RATES = {
    "bong": (1.0,),
    "blr": (1.0, 0.5, 0.1),
    # Plain gradients in natural coordinates move the mean by about lr sigma^4 grad
    # (Eqs. 112-113), so useful rates there reach far above 1.
    "bog": (100.0, 10.0, 1.0, 0.1, 0.01, 0.001),
    "bbb": (100.0, 10.0, 1.0, 0.1, 0.01, 0.001),
}
N_INNER = {"bong": 1, "blr": 2, "bog": 1, "bbb": 2}
#: Validation split of the training rows: learn on the first N_LEARN, score the last N_VAL.
N_LEARN, N_VAL = 600, 300


def _data():
    X, y = load_digits(return_X_y=True)
    return train_test_split(X / 16.0, y, test_size=0.3, random_state=0, stratify=y)


def _params(algorithm, hessian, family, hidden, learning_rate):
    return dict(
        hidden_layer_sizes=(hidden,),
        algorithm=algorithm,
        hessian=hessian,
        family=family,
        sigma0=SIGMA0,
        learning_rate=learning_rate,
        n_inner_steps=N_INNER[algorithm],
        random_state=0,
    )


def _validation_loss(params, X_learn, y_learn, X_val, y_val):
    try:
        est = BONGClassifier(**params).fit(X_learn, y_learn)
    except FloatingPointError:
        return math.inf
    loss = log_loss(y_val, est.predict_proba(X_val), labels=np.arange(10))
    return loss if np.isfinite(loss) else math.inf


def tune_learning_rate(algorithm, hessian, family, hidden, X_train, y_train):
    """``(rate, seconds of the first validation fit)``: the rate of
    ``LEARNING_RATES[algorithm]`` with the lowest validation log-loss (None if all diverge).

    The first fit compiles the cell (the learning rate is a traced argument, so the other
    rates and the final fit reuse the compiled code)."""
    X_learn, X_val = X_train[:N_LEARN], X_train[-N_VAL:]
    y_learn, y_val = y_train[:N_LEARN], y_train[-N_VAL:]
    losses, first_fit_s = {}, None
    for lr in LEARNING_RATES[algorithm]:
        start = time.perf_counter()
        losses[lr] = _validation_loss(_params(algorithm, hessian, family, hidden, lr), X_learn, y_learn, X_val, y_val)
        if first_fit_s is None:
            first_fit_s = time.perf_counter() - start
    best = min(losses, key=losses.get)
    return (best if np.isfinite(losses[best]) else None), first_fit_s


def run_cell(algorithm, hessian, family, data, hidden):
    reason = undefined_reason(algorithm, hessian, family)
    if reason is not None:
        return {"status": "undefined", "reason": reason}
    X_train, X_test, y_train, y_test = data
    lr, first_fit_s = tune_learning_rate(algorithm, hessian, family, hidden, X_train, y_train)
    if lr is None:
        return {"status": "diverged at every learning rate"}
    traces = trace_count()
    try:
        start = time.perf_counter()
        est = BONGClassifier(**_params(algorithm, hessian, family, hidden, lr)).fit(X_train, y_train)
        fit_s = time.perf_counter() - start
    except FloatingPointError:
        return {"status": f"diverged (learning rate {lr})"}
    recompiled = trace_count() != traces
    proba = est.predict_proba(X_test)
    ms_per_obs = 1e3 * fit_s / len(X_train)
    return {
        "status": "ok",
        "learning_rate": lr,
        "accuracy": est.score(X_test, y_test),
        "log_loss": log_loss(y_test, proba, labels=est.classes_),
        # The first validation fit = compilation + N_LEARN steps at the steady rate.
        "compile_s": first_fit_s - 1e-3 * ms_per_obs * N_LEARN,
        "ms_per_obs": ms_per_obs,
        "recompiled": recompiled,
    }


def plot(cells, algorithms, hessians, families, path):
    """Heat map of held-out accuracy; undefined cells hatched, diverged cells blank."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [(a, h) for a in algorithms for h in hessians]
    acc = np.full((len(rows), len(families)), np.nan)
    fig, ax = plt.subplots(figsize=(1.4 * len(families) + 2.5, 0.42 * len(rows) + 1.2))
    for i, (a, h) in enumerate(rows):
        for j, f in enumerate(families):
            cell = cells[(a, h, f)]
            if cell["status"] == "ok":
                acc[i, j] = cell["accuracy"]
                ax.text(j, i, f"{cell['accuracy']:.2f}", ha="center", va="center", fontsize=8)
            else:
                label = "undefined" if cell["status"] == "undefined" else "diverged"
                ax.text(j, i, label, ha="center", va="center", fontsize=7, color="0.4")
    image = ax.imshow(acc, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(families)), families)
    ax.set_yticks(range(len(rows)), [f"{a}-{h}" for a, h in rows])
    ax.set_title("held-out accuracy on digits after one pass")
    fig.colorbar(image, ax=ax, fraction=0.04)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS))
    parser.add_argument("--hessians", default=",".join(HESSIANS))
    parser.add_argument("--hidden", type=int, default=5)
    args = parser.parse_args()
    families, algorithms, hessians = (s.split(",") for s in (args.families, args.algorithms, args.hessians))
    data = _data()
    X_train, X_test, y_train, y_test = data

    sgd = SGDClassifier(loss="log_loss", random_state=0).partial_fit(X_train, y_train, classes=np.arange(10))
    baseline = [["SGDClassifier(log_loss), one partial_fit pass", f"{sgd.score(X_test, y_test):.3f}",
                 f"{log_loss(y_test, sgd.predict_proba(X_test)):.3f}"]]

    header = ["algorithm", "hessian", "family", "learning rate", "accuracy", "log-loss", "ms / obs", "compile s"]
    rows, cells, reasons = [], {}, {}
    for algorithm in algorithms:
        for hessian in hessians:
            for family in families:
                cell = cells[(algorithm, hessian, family)] = run_cell(algorithm, hessian, family, data, args.hidden)
                if cell["status"] == "ok":
                    assert not cell["recompiled"], "the final fit recompiled"
                    row = [algorithm, hessian, family, f"{cell['learning_rate']:g}", f"{cell['accuracy']:.3f}",
                           f"{cell['log_loss']:.3f}", f"{cell['ms_per_obs']:.2f}", f"{cell['compile_s']:.1f}"]
                else:
                    if cell["status"] == "undefined":
                        reasons[(algorithm, hessian, family)] = cell["reason"]
                    row = [algorithm, hessian, family, cell["status"], "", "", "", ""]
                rows.append(row)
                print(" | ".join(row), flush=True)
    reason_lines = "\n".join(f"- {'-'.join(key)}: {text}." for key, text in reasons.items())
    body = (
        f"One pass over digits (1,257 train / 540 test, inputs / 16), MLP 64-{args.hidden}-10 ReLU, "
        f"batch size 1, sigma0 = {SIGMA0}, inner steps {N_INNER}, 10 Monte-Carlo draws, random_state=0. "
        f"The learning rate of each BLR/BOG/BBB cell is the one of {LEARNING_RATES} with the lowest "
        f"log-loss on a validation split of the training rows (learn on the first {N_LEARN}, score the "
        f"last {N_VAL}); 'diverged' means every rate made the posterior invalid (the estimator raises "
        "FloatingPointError). Time per observation is the wall time of the final one-pass fit divided by "
        "1,257 (the validation fits compiled the code; the script asserts the final fit did not "
        f"recompile); compile time is the first validation fit minus {N_LEARN} steps at that rate.\n\n"
        + markdown_table(["baseline", "accuracy", "log-loss"], baseline)
        + "\n\n"
        + markdown_table(header, rows)
        + "\n\n![accuracy heat map](digits_grid.png)\n\nUndefined cells:\n\n"
        + reason_lines
    )
    plot(cells, algorithms, hessians, families, RESULTS / "digits_grid.png")
    print(write("digits_grid", "The BONG space on digits", body))


if __name__ == "__main__":
    main()
