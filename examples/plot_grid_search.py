"""
Grid search without recompiling
===============================

Every continuous hyperparameter of :class:`~skbong.BONGClassifier` (``sigma0``,
``learning_rate``, ``dynamics_decay``, ``process_noise``, ``obs_noise``) is a
run-time input of the compiled filter, not a constant baked into it. The
structure (network sizes, ``family``, ``algorithm``, ``hessian``, ...) is what
JAX compiles for, and equal structures share compiled code. So the candidates of
a :class:`~sklearn.model_selection.GridSearchCV` over continuous
hyperparameters, and its cross-validation folds, all run the code compiled for
the first fit.

Here the grid tunes the prior scale ``sigma0`` and the step size
``learning_rate`` of the Bayesian learning rule (``algorithm="blr"``), and
:func:`skbong.core.trace_count` counts how often the filter was traced
(compiled). The count is per process, so keep ``n_jobs=1`` to read it.
"""

import time

from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV

from skbong import BONGClassifier
from skbong.core import trace_count

X, y = load_digits(return_X_y=True)
X, y = X[:600] / 16, y[:600]

param_grid = {"sigma0": [0.1, 0.3, 1.0], "learning_rate": [0.3, 0.6, 1.0]}
search = GridSearchCV(
    BONGClassifier(algorithm="blr", hidden_layer_sizes=(20,), random_state=0),
    param_grid,
    cv=3,
    n_jobs=1,
)

traces_before = trace_count("filter")
start = time.perf_counter()
search.fit(X, y)
elapsed = time.perf_counter() - start
n_compilations = trace_count("filter") - traces_before

# %%
n_fits = len(search.cv_results_["params"]) * search.n_splits_ + 1  # + the refit on all rows
print(f"{len(search.cv_results_['params'])} candidates x {search.n_splits_} folds + 1 refit = {n_fits} fits, "
      f"{n_compilations} compilation(s) of the filter, {elapsed:.1f} s in all")
for params, mean, std in zip(
    search.cv_results_["params"], search.cv_results_["mean_test_score"], search.cv_results_["std_test_score"]
):
    print(f"  sigma0={params['sigma0']:<4} learning_rate={params['learning_rate']:<4} accuracy {mean:.3f} +- {std:.3f}")
print("best:", search.best_params_, f"accuracy {search.best_score_:.3f}")
assert n_compilations == 1
