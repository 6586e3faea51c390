"""BONGClassifier on sparse bag-of-words rows beside SGDClassifier, fed by ``partial_fit``.

Data: scikit-learn's bag-of-words generator ``make_multilabel_classification`` (12,000
documents of about 60 words over a 20,000-word vocabulary, 10 topics, ``random_state=0``),
keeping the documents of exactly one topic (7,102) as a 10-class problem; TF-IDF weights
(``TfidfTransformer``, fitted on the training rows), so each row has unit L2 norm and about
60 stored entries. Rows 0..4,999 are the training stream, rows 5,000..6,999 the test set;
``seed`` shuffles the order of the training rows.

Every method makes one pass in ``partial_fit`` calls of ``CHUNK`` rows, given the SciPy CSR
rows as they are. Each method's hyperparameter is tuned per seed by the log-loss on rows
4,000..4,999 of the shuffled stream after learning rows 0..3,999 (never test rows); the chosen
value then runs on all 5,000. Methods:

* ``SGDClassifier(loss="log_loss")``, ``alpha`` tuned;
* ``BONGClassifier`` on a linear model (``hidden_layer_sizes=()``: multinomial logistic
  regression, 200,010 weights) with ``family="diag"`` (VD-EKF) and ``family="dlr"`` (rank
  10), ``sigma0`` tuned;
* the linear ``diag`` model with ``sigma0`` a grid run side by side (the posterior averaged
  over the grid's prior scales by their one-step-ahead evidence), nothing tuned;
* scikit-learn's ``MLPClassifier`` with one hidden layer of 50 ReLU units (Adam, one step
  per row), ``learning_rate_init`` tuned;
* ``BONGClassifier``'s default MLP of the same shape (1,000,060 weights) with ``diag`` and
  with ``dlr`` (rank 10, ``sigma0`` in {0.3, 1, 3}), ``sigma0`` tuned.

A tuning run that raises (the health test found its posterior diverged) counts as an
infinite validation loss; 'tuning runs raised' counts them over the seeds, and 'warned' the
final passes that emitted a ``ConvergenceWarning`` and at which of their 50 calls (0 is the
first). Test accuracy and log-loss are the mean +- SE over
the seeds; 'fit s' is the final pass's wall time (``partial_fit`` calls only, compiled
beforehand by the tuning runs); 'peak MB' the largest numpy allocation traced during that
pass (``tracemalloc``), against the dense training rows (5,000 x 20,000 float32, 400 MB),
which no method forms.

Last, the linear DIAG model is fitted (``fit``, one pass) on the same rows once sparse and
once dense (``toarray()``): the posterior means must agree exactly; the times are given.

Writes ``results/sparse_inputs.md``, ``.json`` (the runs) and ``.png``.

    python benchmarks/sparse_inputs.py [--seeds 0,1,2] [--replot]
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc
import warnings

import numpy as np
from sklearn.datasets import make_multilabel_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.linear_model import SGDClassifier
from sklearn.metrics import log_loss
from sklearn.neural_network import MLPClassifier

from _report import RESULTS, format_mean_se, markdown_table, write
from skbong import BONGClassifier

CHUNK = 100
N_TRAIN, N_TEST, N_LEARN = 5000, 2000, 4000
CLASSES = np.arange(10)
SIGMA0S = (0.3, 1.0, 3.0, 10.0)

#: (label, estimator factory of the tuned value, candidate values).
METHODS = [
    (
        "SGDClassifier(log_loss), alpha tuned",
        lambda alpha: SGDClassifier(loss="log_loss", alpha=alpha, random_state=0),
        (1e-6, 1e-5, 1e-4),
    ),
    (
        "BONG linear, diag, sigma0 tuned",
        lambda s: BONGClassifier(hidden_layer_sizes=(), family="diag", sigma0=s, random_state=0),
        SIGMA0S,
    ),
    (
        "BONG linear, dlr-10, sigma0 tuned",
        lambda s: BONGClassifier(hidden_layer_sizes=(), family="dlr", sigma0=s, random_state=0),
        SIGMA0S,
    ),
    (
        f"BONG linear, diag, sigma0={list(SIGMA0S)} side by side",
        lambda _: BONGClassifier(hidden_layer_sizes=(), family="diag", sigma0=list(SIGMA0S), random_state=0),
        (None,),
    ),
    (
        "MLPClassifier 50 ReLU, Adam, batch 1, rate tuned",
        lambda rate: MLPClassifier(hidden_layer_sizes=(50,), learning_rate_init=rate, batch_size=1, random_state=0),
        (1e-3, 1e-2, 3e-2),
    ),
    (
        "BONG MLP 50 ReLU, diag, sigma0 tuned",
        lambda s: BONGClassifier(family="diag", sigma0=s, random_state=0),
        SIGMA0S,
    ),
    (
        "BONG MLP 50 ReLU, dlr-10, sigma0 tuned",
        lambda s: BONGClassifier(family="dlr", sigma0=s, random_state=0),
        SIGMA0S[:3],
    ),
]


def load():
    """TF-IDF rows (CSR) and topics of the single-topic documents."""
    X, Y = make_multilabel_classification(
        n_samples=12000, n_features=20000, n_classes=10, n_labels=1, length=60, allow_unlabeled=False,
        sparse=True, random_state=0,
    )
    single = np.asarray(Y.sum(axis=1)).ravel() == 1
    X, y = X[single].tocsr(), np.asarray(Y[single].argmax(axis=1)).ravel()
    tfidf = TfidfTransformer().fit(X[:N_TRAIN])
    X = tfidf.transform(X).astype(np.float32).tocsr()
    return X[:N_TRAIN], y[:N_TRAIN], X[N_TRAIN : N_TRAIN + N_TEST], y[N_TRAIN : N_TRAIN + N_TEST]


def stream(estimator, X, y):
    """One pass of ``partial_fit`` calls of ``CHUNK`` rows; returns (wall s, peak numpy MB,
    the indices of the calls that emitted a ``ConvergenceWarning``)."""
    warned = []
    tracemalloc.start()
    start = time.perf_counter()
    for call, row in enumerate(range(0, X.shape[0], CHUNK)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            estimator.partial_fit(X[row : row + CHUNK], y[row : row + CHUNK], classes=CLASSES)
        if any(issubclass(w.category, ConvergenceWarning) for w in caught):
            warned.append(call)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return seconds, peak, warned


def run(seeds):
    X, y, X_test, y_test = load()
    results = {label: [] for label, _, _ in METHODS}
    for seed in seeds:
        order = np.random.default_rng(seed).permutation(N_TRAIN)
        Xs, ys = X[order], y[order]
        for label, make, values in METHODS:
            scores = []
            for value in values:
                estimator = make(value)
                try:
                    stream(estimator, Xs[:N_LEARN], ys[:N_LEARN])
                except FloatingPointError:  # the health test found the posterior diverged
                    scores.append(np.inf)
                    continue
                scores.append(log_loss(ys[N_LEARN:], estimator.predict_proba(Xs[N_LEARN:]), labels=CLASSES))
            chosen = values[int(np.argmin(scores))]
            estimator = make(chosen)
            # The tuning run learned the same first rows at this value without raising.
            seconds, peak, warned = stream(estimator, Xs, ys)
            proba = estimator.predict_proba(X_test)
            results[label].append(
                dict(
                    value=chosen, accuracy=float(np.mean(CLASSES[proba.argmax(1)] == y_test)),
                    log_loss=log_loss(y_test, proba, labels=CLASSES), seconds=seconds, peak=peak, warned=warned,
                    chosen_sigma0=getattr(estimator, "sigma0_", None), raised=int(np.sum(np.isinf(scores))),
                )
            )
            print(seed, label, results[label][-1], flush=True)
    return X, y, results


def dense_against_sparse(X, y):
    """The linear DIAG fit on sparse and on dense rows: max |mean difference|, seconds each."""
    times, means = {}, {}
    dense = X.toarray()
    for name, rows in (("sparse", X), ("dense", dense), ("sparse again", X), ("dense again", dense)):
        estimator = BONGClassifier(hidden_layer_sizes=(), family="diag", sigma0=3.0, random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            start = time.perf_counter()
            estimator.fit(rows, y)
            times[name] = time.perf_counter() - start
        means[name] = np.asarray(estimator.posterior_[0])
    return float(np.max(np.abs(means["sparse"] - means["dense"]))), times


def _warned(runs) -> str:
    """How many final passes warned, and at which calls (0 is the first)."""
    calls = sorted({call for r in runs for call in r["warned"]})
    count = f"{sum(bool(r['warned']) for r in runs)}/{len(runs)}"
    return count if not calls else f"{count} (calls {', '.join(map(str, calls))})"


def report(results, difference, times, seeds) -> str:
    rows = []
    for label, runs in results.items():
        values = [r["value"] for r in runs]
        rows.append(
            [
                label,
                ", ".join("-" if v is None else f"{v:g}" for v in values),
                format_mean_se([r["accuracy"] for r in runs]),
                format_mean_se([r["log_loss"] for r in runs]),
                f"{np.median([r['seconds'] for r in runs]):.1f}",
                f"{max(r['peak'] for r in runs):.0f}",
                _warned(runs),
                str(sum(r["raised"] for r in runs)),
            ]
        )
    doc = __doc__.split("\n\n", 1)[1].rsplit("\n\n", 2)[0]
    return "\n\n".join(
        [
            doc,
            f"Seeds: {', '.join(map(str, seeds))}.",
            markdown_table(
                [
                    "method", "chosen value per seed", "accuracy", "log-loss", "fit s (median)", "peak MB (max)",
                    "warned", "tuning runs raised",
                ],
                rows,
            ),
            f"Sparse against dense rows (linear DIAG, sigma0 = 3, one `fit` on the 5,000 training rows): "
            f"max |difference of the posterior means| = {difference:g}; seconds "
            + ", ".join(f"{k} {v:.2f}" for k, v in times.items())
            + " (compilation in the first of each).",
            "![test accuracy and log-loss per method](sparse_inputs.png)",
        ]
    )


def plot(results, path) -> None:
    """Test accuracy and log-loss of each method, one point per seed and a bar at the mean."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(results)
    fig, axes = plt.subplots(1, 2, figsize=(11, 0.5 * len(labels) + 1.5), sharey=True)
    for ax, metric in zip(axes, ("accuracy", "log_loss")):
        for i, label in enumerate(labels):
            values = [r[metric] for r in results[label]]
            ax.scatter(values, np.full(len(values), i), color=f"C{i}", s=15)
            ax.vlines(np.mean(values), i - 0.3, i + 0.3, color=f"C{i}")
        ax.set_xlabel(f"test {metric.replace('_', '-')}")
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(range(len(labels)), labels, fontsize=7)
    axes[0].invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--replot", action="store_true", help="redraw the plot from results/sparse_inputs.json")
    args = parser.parse_args()
    if args.replot:
        plot(json.loads((RESULTS / "sparse_inputs.json").read_text()), RESULTS / "sparse_inputs.png")
        return
    seeds = [int(s) for s in args.seeds.split(",")]
    X, y, results = run(seeds)
    difference, times = dense_against_sparse(X, y)
    body = report(results, difference, times, seeds)
    print(body)
    path = write("sparse_inputs", "Sparse bag-of-words rows, BONG beside SGDClassifier", body)
    path.with_suffix(".json").write_text(json.dumps(results, indent=1))
    plot(results, path.with_suffix(".png"))
    print(path)


if __name__ == "__main__":
    main()
