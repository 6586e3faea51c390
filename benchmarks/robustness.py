"""No silent failure: every cell of a family x sigma0 x input-scale grid on digits either
learns or says that it did not (issue 19, item 2), and ``sigma0="auto"`` on the same cells.

Protocol: ``load_digits``, ``train_test_split(test_size=0.25, random_state=0)``, one pass of
``BONGClassifier(hidden_layer_sizes=(16,), family=F, sigma0=s, random_state=0).fit`` over
the training rows, inputs ``X / 16`` (in [0, 1]) or raw (0-16). For each cell: whether ``fit``
raised or warned (``ConvergenceWarning``), test accuracy and NLL of ``predict_proba`` when it
returned, and the largest absolute weight. A cell is a *silent failure* when it returned
without a warning and its accuracy is below 85% of the best accuracy of its family (over both
input scales and every sigma0).

Writes ``results/robustness[_NAME].md`` and ``.png``.

    python benchmarks/robustness.py [--name NAME]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split

from _report import RESULTS, markdown_table, write
from skbong import BONGClassifier

FAMILIES = ("fc", "fc_mom", "diag", "diag_mom", "dlr")
SIGMA0S = (0.01, 0.1, 0.3, 1.0, 3.0, 10.0, "auto")
INPUTS = {"X/16": 1 / 16, "raw X": 1.0}
HIDDEN = (16,)
SHARE_OF_BEST = 0.85


def run_cell(family: str, sigma0: float, scale: float, data) -> dict:
    X_train, X_test, y_train, y_test = data
    clf = BONGClassifier(hidden_layer_sizes=HIDDEN, family=family, sigma0=sigma0, random_state=0)
    start = time.perf_counter()
    out = {"family": family, "sigma0": sigma0, "status": "ok", "acc": np.nan, "nll": np.nan, "max_w": np.nan,
           "message": ""}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            clf.fit(X_train * scale, y_train)
        except Exception as err:  # noqa: BLE001 - the table reports what was raised
            out["status"] = f"raised {type(err).__name__}"
            out["message"] = str(err).split(". ")[0]
    convergence = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    if out["status"] == "ok":
        if convergence:
            out["status"] = "warned"
            out["message"] = str(convergence[0].message).split(". ")[0]
        proba = clf.predict_proba(X_test * scale)
        out["acc"] = float(np.mean(clf.classes_[proba.argmax(1)] == y_test))
        out["nll"] = float(log_loss(y_test, proba, labels=clf.classes_)) if np.all(np.isfinite(proba)) else np.inf
        out["max_w"] = float(np.max(np.abs(clf.posterior_[0])))
    out["seconds"] = time.perf_counter() - start
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default=None, help="results file suffix")
    args = parser.parse_args()
    X, y = load_digits(return_X_y=True)
    data = train_test_split(X, y, test_size=0.25, random_state=0)
    cells = []
    for family in FAMILIES:
        for input_name, scale in INPUTS.items():
            for sigma0 in SIGMA0S:
                cell = run_cell(family, sigma0, scale, data) | {"inputs": input_name}
                cells.append(cell)
                print(f"{family:>8} {input_name:>5} sigma0={sigma0!s:<5} {cell['status']:>28} acc {cell['acc']:.3f} "
                      f"nll {cell['nll']:.3f} max|w| {cell['max_w']:.3g} ({cell['seconds']:.1f} s) {cell['message']}",
                      flush=True)
    best = {f: np.nanmax([c["acc"] for c in cells if c["family"] == f]) for f in FAMILIES}
    rows, n_silent = [], 0
    for c in cells:
        silent = c["status"] == "ok" and not c["acc"] >= SHARE_OF_BEST * best[c["family"]]
        n_silent += silent
        rows.append([c["family"], c["inputs"], str(c["sigma0"]), c["status"], f"{c['acc']:.3f}", f"{c['nll']:.3f}",
                     f"{c['max_w']:.3g}", "**silent failure**" if silent else "", c["message"]])
    summary = markdown_table(
        ["family", "best accuracy", "cells ok", "warned", "raised", "silent failures"],
        [[f, f"{best[f]:.3f}", sum(c["status"] == "ok" for c in cells if c["family"] == f),
          sum(c["status"] == "warned" for c in cells if c["family"] == f),
          sum(c["status"].startswith("raised") for c in cells if c["family"] == f),
          sum(1 for c, r in zip(cells, rows) if c["family"] == f and r[7])] for f in FAMILIES])
    table = markdown_table(["family", "inputs", "sigma0", "fit", "accuracy", "NLL", "max abs weight",
                            f"< {SHARE_OF_BEST:.0%} of family best, no warning", "message"], rows)
    body = "\n\n".join([
        f"digits, one pass, `BONGClassifier(hidden_layer_sizes={HIDDEN}, family=F, sigma0=s, random_state=0)`, "
        "test = 25% (`train_test_split(random_state=0)`). A silent failure is a fit that returned without a "
        f"`ConvergenceWarning` with test accuracy below {SHARE_OF_BEST:.0%} of the best of its family.",
        f"**Silent failures: {n_silent} of {len(cells)} cells.**", summary, table, f"![grid](robustness{'_' + args.name if args.name else ''}.png)"])
    name = f"robustness_{args.name}" if args.name else "robustness"
    path = write(name, "No silent failure: digits, family x sigma0 x input scale", body)
    plot(cells, RESULTS / f"{name}.png")
    print(f"silent failures: {n_silent}; wrote {path}")


def plot(cells, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    markers = {"ok": "o", "warned": "^"}
    auto_x = 30.0  # where the sigma0="auto" cells are drawn, right of the fixed scales
    for ax, input_name in zip(axes, INPUTS):
        for family in FAMILIES:
            sel = [c for c in cells if c["family"] == family and c["inputs"] == input_name]
            fixed = [c for c in sel if c["sigma0"] != "auto"]
            line, = ax.semilogx([c["sigma0"] for c in fixed], [c["acc"] for c in fixed], "-", label=family, alpha=0.6)
            for c in sel:
                x = auto_x if c["sigma0"] == "auto" else c["sigma0"]
                marker = "*" if c["sigma0"] == "auto" else markers.get(c["status"], "x")
                y = c["acc"] if c["status"] in markers else 0.0
                ax.plot(x, y, marker, color=line.get_color(), markersize=10 if marker == "*" else 6)
        ax.set(title=f"inputs {input_name} (o ok, ^ warned, x raised; * auto at 30)", xlabel="sigma0",
               ylabel="test accuracy")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
