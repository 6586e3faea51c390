"""A search over sigma0 three ways: GridSearchCV with ``n_jobs=1``, the same GridSearchCV
on a Dask cluster (joblib's Dask backend, ``distributed.LocalCluster``), and one
vectorised ``run_sweep`` per fold (issue 22, item 4).

The search: ``BONGClassifier(random_state=0, shuffle=False)`` (the defaults otherwise: MLP
64-50-10, DLR-10, BONG-LIN-HESS, one pass) over ``sigma0`` in ``AUTO_SIGMA0`` on digits
(inputs / 16), 3-fold cross-validation, accuracy. The sweep runs, per fold, the five prior
scales as the members of one :func:`skbong.core.run_sweep` from the initial weights the
estimator draws, then scores each member's plug-in predictions on the held-out fold; member
``k`` is the estimator at ``sigma0_k`` (``tests/core/test_sweep.py``), so the three ways
must find the same scores, which the script asserts.

Wall times include compilation (every worker process compiles once) but not the cluster's
start, which is reported apart. On a real cluster only the address passed to ``Client``
changes.

Writes ``results/dask_search.md``.

    python benchmarks/dask_search.py [--workers 2]
"""

from __future__ import annotations

import argparse
import time

import jax
import joblib
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.utils import check_random_state

from _report import markdown_table, write
from skbong import AUTO_SIGMA0, BONGClassifier
from skbong.core import (
    Hyperparameters,
    MLPSpec,
    PluginPredictive,
    init_sweep,
    make_config,
    predict_distribution,
    run_sweep,
)

N_FOLDS = 3


def _search(X, y, n_jobs):
    estimator = BONGClassifier(random_state=0, shuffle=False)
    cv = StratifiedKFold(N_FOLDS)
    return GridSearchCV(estimator, {"sigma0": list(AUTO_SIGMA0)}, cv=cv, n_jobs=n_jobs).fit(X, y)


def _sweep_scores(X, y):
    """Mean held-out accuracy of each prior scale: one ``run_sweep`` per fold."""
    X = X.astype(np.float32)
    spec = MLPSpec(X.shape[1], (50,), 10, "relu")
    config = make_config(spec.apply, "categorical", "dlr", 10, backtrack="auto")  # as the estimator
    seed = int(check_random_state(0).randint(np.iinfo(np.int32).max))  # as the estimator draws it
    mean0 = spec.init_params(seed).astype(np.float32)
    scores = []
    for train, test in StratifiedKFold(N_FOLDS).split(X, y):
        states = init_sweep(config.family, mean0, np.asarray(AUTO_SIGMA0, np.float32))
        Y = np.eye(10, dtype=np.float32)[y[train]]
        hyper = Hyperparameters(1.0, 1.0, 0.0, 1.0)
        states = run_sweep(config, states, X[train], Y, hyper, 1, jax.random.PRNGKey(seed))
        fold = []
        for k in range(len(AUTO_SIGMA0)):
            member = jax.tree_util.tree_map(lambda leaf: leaf[k], states)
            proba = predict_distribution(config, PluginPredictive(), member, X[test]).mean
            fold.append(np.mean(proba.argmax(1) == y[test]))
        scores.append(fold)
    return np.mean(scores, axis=0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    import distributed

    X, y = load_digits(return_X_y=True)
    X = X / 16.0

    start = time.perf_counter()
    serial = _search(X, y, n_jobs=1)
    serial_s = time.perf_counter() - start

    start = time.perf_counter()
    with distributed.LocalCluster(
        n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, distributed.Client(cluster):
        cluster_s = time.perf_counter() - start
        start = time.perf_counter()
        with joblib.parallel_backend("dask"):
            on_dask = _search(X, y, n_jobs=-1)
        dask_s = time.perf_counter() - start

    start = time.perf_counter()
    sweep = _sweep_scores(X, y)
    sweep_s = time.perf_counter() - start

    reference = serial.cv_results_["mean_test_score"]
    np.testing.assert_array_equal(on_dask.cv_results_["mean_test_score"], reference)
    np.testing.assert_allclose(sweep, reference, atol=1.5 / len(y))  # at most a row flips in float32

    rows = [
        ["GridSearchCV, n_jobs=1", f"{serial_s:.1f}", "1.00", ""],
        [f"GridSearchCV on Dask, LocalCluster({args.workers} workers x 1 thread)", f"{dask_s:.1f}",
         f"{serial_s / dask_s:.2f}", f"cluster start {cluster_s:.1f} s, not counted"],
        [f"one run_sweep of {len(AUTO_SIGMA0)} scales per fold (core)", f"{sweep_s:.1f}",
         f"{serial_s / sweep_s:.2f}", "no refit of the winner"],
    ]
    scores = [[f"{s:g}", f"{r:.4f}", f"{d:.4f}"] for s, r, d in zip(AUTO_SIGMA0, reference, sweep)]
    body = "\n\n".join([
        f"GridSearchCV of BONGClassifier(random_state=0, shuffle=False) over sigma0 in {list(AUTO_SIGMA0)} on "
        f"digits (X / 16, 1,797 rows), {N_FOLDS}-fold stratified CV, accuracy; {len(AUTO_SIGMA0) * N_FOLDS} fits "
        "plus the refit of the winner. Wall times include each process's compilation.",
        markdown_table(["way", "wall s", "speed-up over n_jobs=1", "note"], rows),
        "Mean held-out accuracy per sigma0 (the script asserts that the three ways agree):",
        markdown_table(["sigma0", "GridSearchCV (n_jobs=1 and Dask)", "run_sweep"], scores),
    ])
    print(body)
    print(write("dask_search", "A sigma0 search: n_jobs=1, Dask, and one vectorised sweep", body))


if __name__ == "__main__":
    main()
