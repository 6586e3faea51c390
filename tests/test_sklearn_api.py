"""scikit-learn conformance: ``check_estimator`` for both estimators and every family."""

from sklearn.utils.estimator_checks import parametrize_with_checks

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
        "check_estimators_dtypes",
        "check_pipeline_consistency",
        "check_estimators_pickle",
        "check_estimators_partial_fit_n_features",
        "check_non_transformer_estimators_n_iter",
        "check_fit2d_1feature",
        "check_fit_idempotent",
        "check_fit_check_is_fitted",
        "check_n_features_in",
    ],
    "diag_mom": [
        "check_estimators_partial_fit_n_features",
        "check_non_transformer_estimators_n_iter",
        "check_fit_idempotent",
        "check_fit_check_is_fitted",
        "check_n_features_in",
    ],
}


def _estimators():
    for cls in (BONGClassifier, BONGRegressor):
        yield cls()
        for family, sigma0 in _STABLE_SIGMA0.items():
            params = {"family": family, "rank": 3, "random_state": 0}
            if sigma0 is not None:
                params["sigma0"] = sigma0
            yield cls(**params)


def _expected_failures(estimator):
    if not isinstance(estimator, BONGRegressor):
        return {}
    return {check: _MOMENT_BREAKDOWN for check in _UNSCALED_REGRESSOR_CHECKS.get(estimator.family, [])}


@parametrize_with_checks(list(_estimators()), expected_failed_checks=_expected_failures, xfail_strict=True)
def test_sklearn_compatible(estimator, check):
    check(estimator)
