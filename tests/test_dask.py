"""A GridSearchCV over skbong on a Dask cluster (``distributed.LocalCluster``, two worker
processes), through joblib's Dask backend, as the user guide documents it.

The search must run its fits as tasks of the cluster's workers and find exactly what the
same search finds in this process with ``n_jobs=1``."""

import warnings

import joblib
import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.model_selection import GridSearchCV

from skbong import BONGClassifier

distributed = pytest.importorskip("distributed")


def _local_cluster():
    """Two single-threaded worker processes; two in-process workers where the machine
    refuses the loopback sockets the processes talk over (the Dask path is the same)."""
    options = dict(n_workers=2, threads_per_worker=1, dashboard_address=None)
    try:
        return distributed.LocalCluster(processes=True, **options)
    except (OSError, TimeoutError) as error:
        warnings.warn(f"worker processes could not start ({error!r}); using in-process workers", stacklevel=2)
        return distributed.LocalCluster(processes=False, **options)


def test_grid_search_on_a_local_dask_cluster_matches_the_serial_search():
    X, y = load_iris(return_X_y=True)
    X = X / 8
    grid = {"sigma0": [0.1, 0.3, 1.0], "hessian": ["lin_hess", "lin_ef"]}
    estimator = BONGClassifier(hidden_layer_sizes=(4,), random_state=0)
    serial = GridSearchCV(estimator, grid, cv=3, n_jobs=1).fit(X, y)
    with _local_cluster() as cluster, distributed.Client(cluster) as client:
        with distributed.get_task_stream(client) as tasks, joblib.parallel_backend("dask"):
            on_dask = GridSearchCV(estimator, grid, cv=3, n_jobs=-1).fit(X, y)
        used = {task["worker"] for task in tasks.data}
        addresses = set(client.scheduler_info()["workers"])
    # The fits ran as tasks of the cluster's workers (which of the two the scheduler
    # chose is its business).
    assert used and used <= addresses, f"tasks ran on {used}, the cluster's workers are {addresses}"
    np.testing.assert_array_equal(on_dask.cv_results_["mean_test_score"], serial.cv_results_["mean_test_score"])
    assert on_dask.best_params_ == serial.best_params_
