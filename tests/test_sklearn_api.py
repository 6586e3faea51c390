"""scikit-learn conformance: ``check_estimator`` for both estimators, every family, and\nnon-default cells covering every algorithm and every curvature estimator."""

import warnings

import jax
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.estimator_checks import parametrize_with_checks

from networks import FeatureConv  # noqa: E402 (tests/networks.py)
from skbong import BONGClassifier, BONGRegressor

# The diagonal and moment-parameter steps are stable only while the prior predictive
# variance sigma0^2 ||J||^2 stays below the observation noise: VD-EKF (Eqs. 212-213)
# overshoots otherwise, and the moment steps (Eqs. 168, 247) lose positive definiteness
# (sigma'^2 = sigma^2 (1 - sigma^2 J^2 / R)). Those families run the checks at a prior
# scale inside that range.
_STABLE_SIGMA0 = {"fc": None, "dlr": None, "diag": 0.03, "fc_mom": 0.03, "diag_mom": 0.03}

_MOMENT_BREAKDOWN = (
    "moment-parameter BONG step (BONG Eqs. 168/247) loses positive definiteness on this "
    "check's unscaled inputs (|x| ~ 10-100, R = 0.1 Var(y)); no sigma0 keeps it valid there "
    "and still passes check_regressors_train, so fit raises the documented FloatingPointError"
)
# Checks feeding the regressor unscaled inputs (make_blobs, iris, N(100, 1) features).
_UNSCALED_REGRESSOR_CHECKS = {
    "fc_mom": [
        "check_estimators_overwrite_params",
        "check_estimators_fit_returns_self",
        "check_readonly_memmap_input",
        "check_estimators_partial_fit_n_features",
        "check_non_transformer_estimators_n_iter",
        "check_fit_idempotent",
        "check_fit_check_is_fitted",
        "check_n_features_in",
        "check_sample_weights_pandas_series",
        "check_sample_weights_not_an_array",
        "check_sample_weights_shape",
        "check_sample_weights_not_overwritten",
    ],
}

# Two more checks leave the moment step's Sigma indefinite with every variance positive
# (check_fit2d_1sample's one row: smallest eigenvalue -1.1e-4 against a prior variance of
# 9e-4). They passed while the validity check read the variances alone; since 2026-12-02 a
# full covariance must be positive definite (tests/core/test_validity.py) and fit refuses.
_MOMENT_INDEFINITE_CHECKS = ("check_fit2d_1sample", "check_n_features_in_after_fitting")
_MOMENT_INDEFINITE = (
    "the moment-parameter BONG step (BONG Eq. 168) leaves Sigma indefinite on this check's rows "
    "at sigma0 = 0.03, and fit raises the documented FloatingPointError"
)

# A weight w raises a row's likelihood to the power w (tests/test_sample_weight.py). Repeating
# a row w times is the same only within one filter step or for an exact (linear-Gaussian)
# filter: a nonlinear filter relinearises between the copies, and the check's shuffled
# passes see the repeated rows in another order.
_SEQUENTIAL_NOT_REPEATED = (
    "an online filter absorbs repeated rows one step at a time (relinearising between them) and "
    "shuffles n rows and sum(w) rows differently; tests/test_sample_weight.py checks the "
    "equivalence where it holds (one step, and exact linear-Gaussian filtering)"
)
# check_class_weight_classifiers weighs class 0 by 1000 and the others by 1e-4 on unscaled
# blobs (|x| ~ 20-60) with max_iter=1000 passes: a likelihood to the power 1000 per row,
# counted 1000 times, far outside the prior scale. Since the health checks score rows by
# their weights (as the fit does), what happens depends on the configuration: some fits give
# what the check wants, some posteriors break down or diverge (FloatingPointError), and some
# predict class 0 on all its rows but on fewer than the check's 87% of the test rows, with a
# ConvergenceWarning (the prior conflicts with the data, the inputs are unscaled). Which, for
# a given configuration, sits near thresholds that round-off may cross on another CPU, so
# the test asks what skbong promises there: the check passes, or the fit raises or warns.
# On standardised blobs with one pass the same weights give what the check wants
# (tests/test_sample_weight.py).

# The three checks that fit on N(100, 1) features with random targets. Far from the scale
# the prior N(mu_0, sigma0^2 I) is meant for (sigma0^2 ||J||^2 ~ 1e3 times the noise), most
# configurations learn nothing and warn so (ConvergenceWarning: not learning), which these
# checks accept. Those listed here go further: their weights grow by orders of magnitude and
# they predict tens of nats per observation worse than a constant (the classifiers: confident
# guesses at chance, worse than the class frequencies in Brier score too), so skbong raises
# FloatingPointError (issue 19: no silent failure) where the checks want a fit.
_DIVERGES_UNSCALED = (
    "fits N(100, 1) features with random targets: the filter diverges there (weights orders of "
    "magnitude past the prior scale, log-loss far above a constant predictor's) and fit raises "
    "FloatingPointError instead of returning garbage (skbong/_health.py)"
)
_UNSCALED_RANDOM_TARGETS = ["check_fit_idempotent", "check_fit_check_is_fitted", "check_n_features_in"]
_UNSCALED_DIVERGENCE = {
    "BONGClassifier(family='diag',random_state=0,sigma0=0.03)": _UNSCALED_RANDOM_TARGETS,
    "BONGClassifier(family='fc_mom',random_state=0,sigma0=0.03)": _UNSCALED_RANDOM_TARGETS,
    "BONGClassifier(family='diag_mom',random_state=0,sigma0=0.03)": _UNSCALED_RANDOM_TARGETS,
    "BONGClassifier(family='fc',hessian='mc_hess',hidden_layer_sizes=(),n_mc_samples=4,random_state=0)": (
        _UNSCALED_RANDOM_TARGETS
    ),
    "BONGClassifier(algorithm='blr',hessian='lin_ef',learning_rate=0.5,n_inner_steps=2,random_state=0,rank=3)": (
        _UNSCALED_RANDOM_TARGETS
    ),
    "BONGRegressor(family='fc',random_state=0)": _UNSCALED_RANDOM_TARGETS,
    "BONGRegressor(algorithm='blr',hessian='lin_ef',learning_rate=0.5,n_inner_steps=2,random_state=0,rank=3)": (
        _UNSCALED_RANDOM_TARGETS
    ),
}
# check_decision_proba_consistency fits unscaled blobs (centres (2, 2, ...) and (4, 4, ...),
# 80 rows, one pass). BOG and BBB at learning rate 0.05 make confident guesses there (55-56%
# right against the class frequencies' 49%, 2.2-2.6 nats per row against 0.71, worse in
# Brier score too), so fit raises FloatingPointError; they pass every other classifier check.
_PLAIN_STEPS_GUESS = (
    "plain-gradient steps at learning rate 0.05 on this check's unscaled blobs give confident "
    "guesses near chance, worse than a constant predictor in log-loss and Brier score, and fit "
    "raises FloatingPointError instead of returning garbage (skbong/_health.py)"
)


# Non-default cells of the algorithm x hessian space: together they cover every algorithm
# (bong, blr, bog, bbb) and every curvature estimator (lin_hess, lin_ef, mc_hess, mc_ef).
# BONG-MC-HESS-FC is explicit R-VGA, run on the model where the R-VGA paper defines it (no
# hidden layer: logistic / linear regression), because the per-draw Hessian of a ReLU
# network is indefinite and the FC precision can lose positive definiteness.
_BOTH = [
    {"algorithm": "bong", "hessian": "mc_hess", "family": "fc", "hidden_layer_sizes": (), "n_mc_samples": 4},
    {"algorithm": "blr", "hessian": "lin_hess", "family": "dlr", "rank": 3, "learning_rate": 0.5, "n_inner_steps": 2},
    # The regressor's default noise follows the residuals with an empirical-Fisher curvature;
    # at the fixed R_0 it overestimated the curvature and reached R^2 0.23 at best (alpha in
    # 0.001..0.5) where check_regressors_train wants 0.5.
    {"algorithm": "blr", "hessian": "lin_ef", "family": "dlr", "rank": 3, "learning_rate": 0.5, "n_inner_steps": 2},
]
# Plain-gradient (BOG, BBB) cells pass the classifier checks (all but
# check_decision_proba_consistency, _PLAIN_STEPS_GUESS). As regressors they are not run:
# with a fixed learning rate, gradient steps on (mu, Upsilon, W) diverge on the checks'
# unscaled inputs (make_blobs, |x| ~ 10) at every rate that still reaches
# check_regressors_train's R^2 > 0.5 in a few passes (bog-mc_ef-dlr: NaN for alpha >= 0.01,
# R^2 0.57 at 0.001).
_CLASSIFIER_ONLY = [
    {"algorithm": "bog", "hessian": "mc_ef", "family": "dlr", "rank": 3, "learning_rate": 0.05, "n_mc_samples": 4},
    {"algorithm": "bbb", "hessian": "lin_hess", "family": "dlr", "rank": 3, "learning_rate": 0.05, "n_inner_steps": 2},
]


def _estimators():
    for cls in (BONGClassifier, BONGRegressor):
        yield cls()
        for family, sigma0 in _STABLE_SIGMA0.items():
            if family == "dlr":
                continue  # the default family: cls() above
            params = {"family": family, "random_state": 0}
            if sigma0 is not None:
                params["sigma0"] = sigma0
            yield cls(**params)
        for params in _BOTH:
            yield cls(random_state=0, **params)
    for params in _CLASSIFIER_ONLY:
        yield BONGClassifier(random_state=0, **params)
    # The Jacobian-based and sampling predictives (row independence, dtype, pickling).
    yield BONGClassifier(predictive="probit", rank=3, random_state=0)
    yield BONGClassifier(predictive="linearized_mc", n_predictive_samples=16, rank=3, random_state=0)
    yield BONGRegressor(prequential=True, rank=3, random_state=0)
    # A custom flax network (issue 20), built by its factory from the data's widths.
    for cls in (BONGClassifier, BONGRegressor):
        yield cls(model=FeatureConv, rank=3, random_state=0)
    # The continual-learning options (issue 21): spherical LO-FI, inflation, noise estimate.
    yield BONGClassifier(family="slr", rank=3, inflation="hybrid", random_state=0)
    yield BONGRegressor(family="slr", rank=3, inflation="bayesian", obs_noise="adaptive", random_state=0)
    # (The backtracking line search of the mean step is on in the default, BONGClassifier().)


def _expected_failures(estimator):
    key = "".join(repr(estimator).split())  # as in the test ids: long reprs wrap
    failures = {check: _DIVERGES_UNSCALED for check in _UNSCALED_DIVERGENCE.get(key, [])}
    failures["check_sample_weight_equivalence_on_dense_data"] = _SEQUENTIAL_NOT_REPEATED
    failures["check_sample_weight_equivalence_on_sparse_data"] = _SEQUENTIAL_NOT_REPEATED
    if isinstance(estimator, BONGClassifier):
        if estimator.algorithm in ("bog", "bbb"):
            failures["check_decision_proba_consistency"] = _PLAIN_STEPS_GUESS
    if isinstance(estimator, BONGRegressor) and estimator.algorithm == "bong":
        failures |= {check: _MOMENT_BREAKDOWN for check in _UNSCALED_REGRESSOR_CHECKS.get(estimator.family, [])}
        if estimator.family == "fc_mom":
            failures |= dict.fromkeys(_MOMENT_INDEFINITE_CHECKS, _MOMENT_INDEFINITE)
    return failures


_last_estimator = []


@pytest.fixture(autouse=True)
def _release_compiled_code_between_estimators(request):
    """The checks of one estimator share compiled code; drop it when the next estimator
    starts, so that this module's 1,200 checks stay far below ``vm.max_map_count``
    (see ``conftest.py``)."""
    estimator = request.node.callspec.params["estimator"]
    if _last_estimator and _last_estimator[0] is not estimator:
        jax.clear_caches()
    _last_estimator[:] = [estimator]


#: The classifiers whose class weighting check_class_weight_classifiers runs: the default and
#: the diagonal families. class_weight enters as a factor of sample_weight, whose path depends
#: on the family only; tests/test_sample_weight.py checks that product for the others, and
#: the check's own data, standardised, in one pass, on every family. The check's 1,000 passes
#: of rows weighing 1000 (each absorbed in 16 updates, skbong.core.MAX_SUBSTEPS) took 212 and
#: 194 s on fc and fc_mom, whose updates cost O(P^2), a tenth of the suite on two cores.
_CLASS_WEIGHT_CHECKED = {"BONGClassifier()"} | {
    "".join(repr(BONGClassifier(family=family, random_state=0, sigma0=_STABLE_SIGMA0[family])).split())
    for family in ("diag", "diag_mom")
}


@parametrize_with_checks(list(_estimators()), expected_failed_checks=_expected_failures, xfail_strict=True)
def test_sklearn_compatible(estimator, check):
    if getattr(check, "func", check).__name__ == "check_class_weight_classifiers":
        if "".join(repr(estimator).split()) not in _CLASS_WEIGHT_CHECKED:
            pytest.skip(
                "class_weight is a factor of sample_weight: checked on the default and the diagonal families, and "
                "on every family in tests/test_sample_weight.py"
            )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            try:
                check(estimator)
            except FloatingPointError:
                return  # named, and the estimator kept its state (issue 19: no silent failure)
            except AssertionError:
                # The check's 87% missed: acceptable only where the fit said why.
                assert any(issubclass(w.category, ConvergenceWarning) for w in caught), "missed silently"
        return
    check(estimator)
