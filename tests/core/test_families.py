"""Family updates against closed forms and dense references (float64).

References are written independently of the code under test: batch least squares
for the linear-Gaussian posterior, dense Jacobians by forward-mode autodiff, dense
matrix inverses.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from skbong.core import (
    Categorical,
    FullCovState,
    Hyperparameters,
    MLPSpec,
    belief_is_valid,
    filter_posterior,
    make_config,
    run_filter,
    update_step,
)
from skbong.core._families import DLRState, _dlr_output_cov_from_root


def _linear(theta, x):
    return x @ theta[:, None]


def _linear_data(n=40, p=4, noise=0.25, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = X @ rng.normal(size=p) + np.sqrt(noise) * rng.normal(size=n)
    return X, y


def _exact_posterior(X, y, mean0, sigma0, noise):
    """Bayesian linear regression: N(mean0, sigma0^2 I) prior, N(x^T theta, noise) likelihood."""
    precision = np.eye(X.shape[1]) / sigma0**2 + X.T @ X / noise
    cov = np.linalg.inv(precision)
    return cov @ (mean0 / sigma0**2 + X.T @ y / noise), cov


@pytest.mark.parametrize("batch_size", [1, 5])
def test_bong_lin_hess_fc_is_exact_for_linear_gaussian(batch_size, x64):
    # BONG Prop. 4.1 / E.1.2: with a linear mean and Gaussian noise, LIN-HESS is exact and
    # the FC update is the Kalman filter, so T steps give the batch posterior.
    X, y = _linear_data()
    mean0 = np.array([0.5, -0.2, 0.0, 0.1])
    state = filter_posterior(
        _linear, jnp.asarray(mean0), X, y[:, None], family="fc", sigma0=1.5, obs_noise=0.25, batch_size=batch_size
    )
    mean, cov = _exact_posterior(X, y, mean0, 1.5, 0.25)
    np.testing.assert_allclose(state.mean, mean, rtol=1e-6)
    np.testing.assert_allclose(state.cov, cov, rtol=1e-6, atol=1e-6 * np.abs(cov).max())


def test_update_step_is_one_kalman_update_and_ignores_masked_rows(x64):
    # The filter's step body on its own: for a linear-Gaussian model, BONG-LIN-HESS-FC on
    # two rows is the batch posterior of those rows; masked rows change nothing.
    X, y = _linear_data(n=3)
    mean0 = np.array([0.5, -0.2, 0.0, 0.1])
    config = make_config(_linear, "gaussian", "fc")
    prior = config.family.init(jnp.asarray(mean0), jnp.asarray(1.5))
    hyper = Hyperparameters(*(jnp.asarray(v) for v in (0.25, 1.0, 0.0, 1.0)))
    mask = jnp.asarray([True, True, False])
    new = update_step(config, prior, jnp.asarray(X), jnp.asarray(y[:, None]), mask, hyper, jax.random.PRNGKey(0))
    mean, cov = _exact_posterior(X[:2], y[:2], mean0, 1.5, 0.25)
    np.testing.assert_allclose(new.mean, mean, rtol=1e-10)
    np.testing.assert_allclose(new.cov, cov, rtol=1e-10, atol=1e-12)


def test_fc_mom_step_is_kalman_without_epistemic_term(x64):
    # BONG E.2.1: the moment-parameter step (Eqs. 169-170) is the Kalman step with the
    # innovation covariance R + H Sigma H^T replaced by R. It is therefore not exact; its
    # error relative to the exact update shrinks like ||H Sigma H^T|| / R.
    rng = np.random.default_rng(3)
    mean0, H = rng.normal(size=3), rng.normal(size=(1, 3))
    y = np.array([1.3])
    deviations = []
    for noise in [1.0, 10.0, 100.0]:
        state = filter_posterior(
            _linear, jnp.asarray(mean0), H, y[:, None], family="fc_mom", sigma0=0.7, obs_noise=noise
        )
        prior_cov = 0.49 * np.eye(3)
        mean_exact, cov_exact = _exact_posterior(H, y, mean0, 0.7, noise)
        innovation = y - H @ mean0
        np.testing.assert_allclose(state.mean, mean0 + prior_cov @ H.T @ innovation / noise, rtol=1e-12)
        np.testing.assert_allclose(state.cov, prior_cov - prior_cov @ H.T @ H @ prior_cov / noise, rtol=1e-12)
        deviations.append(np.abs(state.cov - cov_exact).max() / np.abs(prior_cov - cov_exact).max())
        assert deviations[-1] > 0
    epistemic = 0.49 * float((H @ H.T)[0, 0])
    np.testing.assert_allclose(deviations, [epistemic / n for n in [1.0, 10.0, 100.0]], rtol=1e-8)


def _mlp_stream(n=25, seed=0):
    spec = MLPSpec(3, (4,), 3, "tanh")
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    Y = np.eye(3)[rng.integers(3, size=n)]
    return spec, X, Y


def test_dlr_with_full_rank_reproduces_fc(x64):
    spec, X, Y = _mlp_stream()
    mean0 = jnp.asarray(spec.init_params(0), jnp.float64)
    kwargs = dict(likelihood="categorical", sigma0=0.8)
    fc = filter_posterior(spec.apply, mean0, X, Y, family="fc", **kwargs)
    dlr = filter_posterior(spec.apply, mean0, X, Y, family="dlr", rank=spec.n_params, **kwargs)
    cov_dlr = np.linalg.inv(np.diag(dlr.diag_precision) + dlr.low_rank @ dlr.low_rank.T)
    np.testing.assert_allclose(dlr.mean, fc.mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(cov_dlr, fc.cov, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("family", ["diag", "diag_mom"])
def test_diag_reproduces_fc_when_jacobians_have_disjoint_support(family, x64):
    # Each observation touches one coordinate, so the exact posterior stays diagonal: both
    # Kalman steps (and the printed natural step, Eqs. 212-213) equal the FC (Kalman) step.
    # The printed moment step equals it only to first order (E.4.1), so it is checked
    # against its own closed form: sigma^2 <- sigma^2 - sigma^4 h^2 / R once per coordinate.
    rng = np.random.default_rng(5)
    p = 6
    X = np.diag(rng.uniform(0.5, 2.0, size=p))[rng.permutation(p)]
    y = rng.normal(size=p)
    mean0 = rng.normal(size=p)
    kwargs = dict(sigma0=0.9, obs_noise=5.0)
    fc = filter_posterior(_linear, jnp.asarray(mean0), X, y[:, None], family="fc", **kwargs)
    np.testing.assert_allclose(np.abs(fc.cov - np.diag(np.diag(fc.cov))).max(), 0, atol=1e-15)
    for step in ("kalman", "projected"):
        diag = filter_posterior(_linear, jnp.asarray(mean0), X, y[:, None], family=family, diag_step=step, **kwargs)
        if family == "diag_mom" and step == "projected":
            h = X.sum(axis=0)  # the single non-zero of the row that touches each coordinate
            np.testing.assert_allclose(diag.var, 0.81 - 0.81**2 * h**2 / 5.0, rtol=1e-12)
        else:
            np.testing.assert_allclose(np.diag(fc.cov), diag.var, rtol=1e-12)
            np.testing.assert_allclose(diag.mean, fc.mean, rtol=1e-12)


def test_dlr_projection_preserves_diagonal_of_precision_and_uses_unprojected_mean(x64):
    # LO-FI / BONG E.5.2: the mean step uses Upsilon + W~ W~^T before truncation, and the
    # truncated directions are moved into Upsilon so that diag(precision) is unchanged.
    spec, X, Y = _mlp_stream(n=6, seed=2)
    config = make_config(spec.apply, "categorical", "dlr", rank=2)
    hyper = Hyperparameters(1.0, 1.0, 0.0)
    state = config.family.init(jnp.asarray(spec.init_params(1), jnp.float64), jnp.asarray(0.7))
    state = run_filter(config, state, X[:5], Y[:5], hyper)  # a state with W != 0
    new = run_filter(config, state, X[5:], Y[5:], hyper)

    x, y = X[5], Y[5]
    jac = jax.jacfwd(lambda theta: spec.apply(theta, x[None])[0])(state.mean)  # (C, P)
    f = spec.apply(state.mean, x[None])[0]
    likelihood = Categorical()
    neg_hess = -jax.hessian(likelihood.log_prob)(f, jnp.asarray(y), None)
    precision_full = np.diag(state.diag_precision) + state.low_rank @ state.low_rank.T + jac.T @ neg_hess @ jac
    grad = jac.T @ jax.grad(likelihood.log_prob)(f, jnp.asarray(y), None)

    precision_new = np.diag(new.diag_precision) + new.low_rank @ new.low_rank.T
    np.testing.assert_allclose(np.diag(precision_new), np.diag(precision_full), rtol=1e-10)
    np.testing.assert_allclose(new.mean, state.mean + np.linalg.solve(precision_full, grad), rtol=1e-8, atol=1e-12)
    assert new.low_rank.shape == (spec.n_params, 2)
    # The kept part is the best rank-2 approximation of the low-rank precision term.
    lowrank_full = precision_full - np.diag(state.diag_precision)
    top = np.sort(np.linalg.eigvalsh(lowrank_full))[::-1][:2]
    np.testing.assert_allclose(np.sort(np.linalg.eigvalsh(new.low_rank.T @ new.low_rank))[::-1], top, rtol=1e-8)


def test_dlr_mean_step_is_accurate_in_float32_for_an_improbable_class():
    # The gradient enters the DLR step through coordinates 1 / sqrt(p) in the root's
    # columns. With the observed class about 100 logits below the best (p < e^-90 is
    # subnormal in float32, and XLA flushes it to zero) and a precision far above the prior, the
    # float32 step must still match a dense float64 solve.
    spec = MLPSpec(3, (4,), 3, "tanh")
    rng = np.random.default_rng(5)
    mean = spec.init_params(0).astype(np.float64)
    n_params = mean.shape[0]
    ups = np.full(n_params, 4.0)
    low_rank = 30.0 * rng.normal(size=(n_params, 2))
    x = 3.0 * rng.normal(size=3)
    logits = np.asarray(spec.apply(jnp.asarray(mean), jnp.asarray(x[None]))[0])
    # Shift the output bias so that the observed class sits 100 logits below the best one.
    observed = int(np.argmin(logits))
    mean[-3:] += np.where(np.arange(3) == observed, -100.0 - (logits.max() - logits.min()), 0.0)
    y = np.eye(3)[observed]

    config = make_config(spec.apply, "categorical", "dlr", rank=2)
    hyper = Hyperparameters(1.0, 1.0, 0.0)
    state = config.family.init(jnp.asarray(mean, jnp.float32), jnp.asarray(0.5, jnp.float32))
    state = state._replace(diag_precision=jnp.asarray(ups, jnp.float32), low_rank=jnp.asarray(low_rank, jnp.float32))
    new = run_filter(config, state, x[None].astype(np.float32), y[None].astype(np.float32), hyper)

    with jax.enable_x64(True):
        theta = jnp.asarray(mean)
        f = spec.apply(theta, jnp.asarray(x[None]))[0]
        assert jax.nn.log_softmax(f)[observed] < -90
        jac = np.asarray(jax.jacfwd(lambda t: spec.apply(t, jnp.asarray(x[None]))[0])(theta))
        likelihood = Categorical()
        neg_hess = -np.asarray(jax.hessian(likelihood.log_prob)(f, jnp.asarray(y), None))
        grad = jac.T @ np.asarray(jax.grad(likelihood.log_prob)(f, jnp.asarray(y), None))
    precision = np.diag(ups) + low_rank @ low_rank.T + jac.T @ neg_hess @ jac
    step = np.linalg.solve(precision, grad)
    np.testing.assert_allclose(np.asarray(new.mean, np.float64) - mean, step, rtol=0, atol=2e-3 * np.abs(step).max())


def test_dlr_output_covariance_is_accurate_in_float32_for_a_posterior_far_inside_its_prior():
    # Data that pin every direction (rank = P, precisions 1e6 times the prior's) leave
    # J Sigma J^T at 1e-6 of J Upsilon^{-1} J^T. LO-FI Eq. 61 as a difference of the two
    # returned variances of 0 and below 0 in float32; the square-root form must match a
    # dense float64 inverse to float32 accuracy and stay positive.
    rng = np.random.default_rng(0)
    n_params, n_rows, n_outputs = 5, 4, 2
    basis, _ = np.linalg.qr(rng.normal(size=(n_params, n_params)))
    low_rank = basis * np.array([1e3, 2e3, 3e3, 5e3, 8e3])
    ups = rng.uniform(0.5, 2.0, n_params)
    jac = rng.normal(size=(n_rows, n_outputs, n_params))
    config = make_config(_linear, "gaussian", "dlr", rank=n_params)
    state = config.family.init(jnp.zeros(n_params, jnp.float32), jnp.asarray(1.0, jnp.float32))
    state = state._replace(diag_precision=jnp.asarray(ups, jnp.float32), low_rank=jnp.asarray(low_rank, jnp.float32))
    got = np.asarray(config.family.output_covariance(state, jnp.asarray(jac, jnp.float32)), np.float64)
    cov = np.linalg.inv(np.diag(ups) + low_rank @ low_rank.T)
    expected = np.einsum("bcp,pq,bdq->bcd", jac, cov, jac)
    variances = np.diagonal(got, axis1=1, axis2=2)
    assert (variances > 0).all()
    # Within 5e-3 on an AMD EPYC host, 6e-3 on an Intel Xeon (condition number of the
    # precision about 1e8); the difference form gives variances of 0 and below.
    np.testing.assert_allclose(variances, np.diagonal(expected, axis1=1, axis2=2), rtol=2e-2)
    np.testing.assert_allclose(got, expected, rtol=0, atol=5e-3 * np.abs(expected).max())
    # Both forms are exact: the square root, and Eq. 61 where little cancels (W of order 1).
    with jax.enable_x64(True):
        for scale in (1.0, 1e3):
            w = basis[:, :3] * scale
            state = DLRState(jnp.zeros(n_params), jnp.asarray(ups), jnp.asarray(w))
            expected = np.einsum("bcp,pq,bdq->bcd", jac, np.linalg.inv(np.diag(ups) + w @ w.T), jac)
            forms = (config.family.output_covariance, _dlr_output_cov_from_root)
            for got in (form(state, jnp.asarray(jac)) for form in forms):
                np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-10, atol=1e-12)


def test_dlr_output_covariance_of_a_row_does_not_depend_on_the_rows_beside_it():
    # A row whose variance cancels (its Jacobian along a direction the data pinned) took the
    # square-root form for the whole batch: the other rows' covariances moved by round-off
    # (42.983299 against 42.983307 alone), and a prediction with the rows predicted with it.
    rng = np.random.default_rng(0)
    n_params = 50
    pinned = rng.normal(size=n_params)
    pinned /= np.linalg.norm(pinned)
    config = make_config(_linear, "gaussian", "dlr", rank=2)
    w = np.stack([1e3 * pinned, 0.5 * rng.normal(size=n_params)], 1)
    state = config.family.init(jnp.zeros(n_params, jnp.float32), jnp.asarray(1.0))
    state = state._replace(low_rank=jnp.asarray(w, jnp.float32))
    rows = rng.normal(size=(3, 1, n_params))
    alone = config.family.output_covariance(state, jnp.asarray(rows, jnp.float32))
    with_pinned = np.concatenate([rows, pinned[None, None]])
    beside = config.family.output_covariance(state, jnp.asarray(with_pinned, jnp.float32))
    np.testing.assert_array_equal(np.asarray(beside[:3]), np.asarray(alone))
    assert 0 < float(beside[3, 0, 0]) < 1e-5  # the pinned row's own variance, from the square root


@pytest.mark.parametrize("family", ["fc", "fc_mom", "diag", "diag_mom", "dlr"])
# DLR takes a shortcut when q = 0, and leaves the belief as it is when also gamma = 1.
@pytest.mark.parametrize("q, decay", [(0.05, 0.9), (0.0, 0.9), (0.0, 1.0)])
def test_predict_step_matches_dense_recursion(family, q, decay, x64):
    # LO-FI Algorithm 2 (Eqs. 19, 25) for DLR; Sigma <- gamma^2 Sigma + q I for all.
    spec, X, Y = _mlp_stream(n=8, seed=4)
    config = make_config(spec.apply, "categorical", family, rank=3)
    state = config.family.init(jnp.asarray(spec.init_params(2), jnp.float64), jnp.asarray(0.6))
    state = run_filter(config, state, X, Y, Hyperparameters(1.0, 1.0, 0.0))
    predicted = config.family.predict(state, jnp.asarray(decay), jnp.asarray(q))
    cov = np.asarray(config.family.covariance(state))
    expected = decay**2 * cov + q * np.eye(cov.shape[0])
    np.testing.assert_allclose(config.family.covariance(predicted), expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(predicted.mean, decay * state.mean, rtol=1e-14)


@pytest.mark.parametrize("family", ["fc", "diag", "dlr"])
def test_samples_have_the_family_covariance(family, x64):
    spec, X, Y = _mlp_stream(n=10, seed=6)
    spec = MLPSpec(2, (), 2, "relu")  # P = 6, small enough for a sharp Monte-Carlo check
    config = make_config(spec.apply, "categorical", family, rank=2)
    state = config.family.init(jnp.asarray(spec.init_params(0), jnp.float64), jnp.asarray(0.8))
    state = run_filter(config, state, X[:, :2], Y[:, :2], Hyperparameters(1.0, 1.0, 0.0))
    n = 200_000
    draws = np.asarray(config.family.sample(state, jax.random.PRNGKey(0), n))
    cov = np.asarray(config.family.covariance(state))
    # Standard error of a sample covariance entry: sqrt((S_ii S_jj + S_ij^2) / n).
    se = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov**2) / n)
    np.testing.assert_array_less(np.abs(np.cov(draws.T) - cov), 5 * se)
    np.testing.assert_array_less(np.abs(draws.mean(0) - state.mean), 5 * np.sqrt(np.diag(cov) / n))


def _numpy_is_valid(family_name, state) -> bool:
    """The validity check written with numpy: every leaf finite, and the covariance positive
    definite (FC: the smallest eigenvalue of its symmetric part, in float64), the variances
    (diagonal families) or the diagonal precision (DLR) positive."""
    leaves = [np.asarray(leaf) for leaf in state]
    if not all(np.all(np.isfinite(leaf)) for leaf in leaves):
        return False
    if family_name in ("fc", "fc_mom"):
        cov = leaves[1].astype(np.float64)
        return bool(np.linalg.eigvalsh(0.5 * (cov + cov.T)).min() > 0)
    return bool(np.all(leaves[1] > 0))


@pytest.mark.parametrize("family", ["fc", "fc_mom", "diag", "diag_mom", "dlr"])
def test_is_valid_flags_every_non_finite_entry_and_non_positive_variance(family):
    spec, X, Y = _mlp_stream(n=6, seed=2)
    config = make_config(spec.apply, "categorical", family, rank=3)
    state = config.family.init(jnp.asarray(spec.init_params(1), jnp.float32), jnp.asarray(0.5))
    state = run_filter(config, state, X, Y, Hyperparameters(1.0, 1.0, 0.0))
    is_valid = jax.jit(config.family.is_valid)
    assert bool(is_valid(state)) and _numpy_is_valid(family, state)
    rng = np.random.default_rng(0)
    broken = []
    for leaf_index, leaf in enumerate(state):
        for value in (np.nan, np.inf, -np.inf, 0.0, -1e-3):
            array = np.array(leaf)
            array.flat[rng.integers(array.size)] = value
            broken.append(state._replace(**{state._fields[leaf_index]: jnp.asarray(array)}))
    for candidate in broken:
        assert bool(is_valid(candidate)) == _numpy_is_valid(family, candidate)
    # Huge finite entries are valid (no sum that overflows); a batch of beliefs (a sweep's
    # members) gets one flag each.
    huge = jax.tree_util.tree_map(lambda a: jnp.full_like(a, 3e38), state)
    if family in ("fc", "fc_mom"):
        # A covariance of equal entries is singular: a multiple of I instead, below half the
        # float32 maximum, as the Cholesky factorisation symmetrises (Sigma + Sigma^T) / 2.
        huge = huge._replace(cov=1e38 * jnp.eye(state.cov.shape[0], dtype=state.cov.dtype))
    assert bool(is_valid(huge))
    stacked = jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), state, *broken[:6])
    expected = [_numpy_is_valid(family, s) for s in (state, *broken[:6])]
    np.testing.assert_array_equal(belief_is_valid(config.family, stacked), expected)


# --------------------------------------------------------------------------------------
# Diagonal families: the Kalman (VD-EKF) step against the dense update, projected


def _dense_kalman_projected(mean, var, root, coords, lr, moment):
    """The FC natural step without KL (BONG Eqs. 118-119) written densely, then the
    diagonal of the precision (natural family) or of the covariance (moment family)."""
    precision = np.diag(1.0 / var) + lr * root @ root.T
    cov = np.linalg.inv(precision)
    mean_new = mean + lr * cov @ (root @ coords)
    return mean_new, (np.diag(cov) if moment else 1.0 / np.diag(precision))


@pytest.mark.parametrize("family", ["diag", "diag_mom"])
@pytest.mark.parametrize("lr", [1.0, 0.4])
def test_diag_kalman_step_is_the_dense_update_projected(family, lr, x64):
    from skbong.core import DiagState, LowRankCurvature

    rng = np.random.default_rng(3)
    p, k = 9, 4
    mean, var = rng.normal(size=p), rng.uniform(0.05, 4.0, size=p)
    root, coords = rng.normal(size=(p, k)), rng.normal(size=k)
    config = make_config(_linear, "gaussian", family)
    curv = LowRankCurvature(jnp.asarray(root @ coords), jnp.asarray(root), jnp.asarray(coords))
    state = DiagState(jnp.asarray(mean), jnp.asarray(var))
    out = config.family.natural_step(state, state, curv, jnp.float64(lr), False)
    mean_ref, var_ref = _dense_kalman_projected(mean, var, root, coords, lr, family == "diag_mom")
    np.testing.assert_allclose(out.mean, mean_ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out.var, var_ref, rtol=1e-10)
    # The printed step (Eqs. 212-213 / 246-247) differs from it: the option is not a no-op.
    printed = make_config(_linear, "gaussian", family, diag_step="projected").family
    assert not np.allclose(printed.natural_step(state, state, curv, jnp.float64(lr), False).mean, mean_ref)


@pytest.mark.parametrize("family", ["diag", "diag_mom"])
def test_diag_kalman_filter_never_overshoots_where_eq_212_does(family, x64):
    # One scalar observation of a linear model with a wide prior, sigma0^2 ||x||^2 >> R: the
    # Kalman mean moves the prediction part of the way to y (Eq. 212 overshoots it many times).
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, 20))
    y = np.array([[1.0]])
    mean0 = jnp.zeros(20)
    residual = {}
    for step in ("kalman", "projected"):
        state = filter_posterior(
            _linear, mean0, x, y, family=family, sigma0=3.0, obs_noise=0.1, diag_step=step
        )
        residual[step] = float(y[0, 0] - x[0] @ np.asarray(state.mean))
    assert 0.0 < residual["kalman"] < 1.0
    if family == "diag":
        assert abs(residual["projected"]) > 1.0


def _factored_cases():
    # MC-EF with one row per step draws the first layer's pre-activation, not its weights:
    # other numbers than the root's draws (its law is tested in
    # test_mc_ef_local_draws_have_the_law_of_weight_draws, its step below).
    return [
        (family, likelihood, batch_size, hessian)
        for family in ("diag", "diag_mom", "dlr")
        for likelihood in ("categorical", "gaussian")
        for batch_size in (1, 3)
        for hessian in ("lin_hess", "mc_ef")
        if not (hessian == "mc_ef" and batch_size == 1)
    ]


def _mlp_and_plain():
    """The built-in MLP's flat apply, which carries its layout, the same network behind
    a plain function, which carries nothing, and its initial weights in float64."""
    from flax import nnx

    from skbong.core import MLP, flatten_module

    module = MLP((4, 5, 6, 3), "tanh", rngs=nnx.Rngs(0))
    apply, mean0 = flatten_module(module)

    def plain(theta, x):
        return apply(theta, x)

    return apply, plain, jnp.asarray(mean0, jnp.float64)


@pytest.mark.parametrize("family, likelihood, batch_size, hessian", _factored_cases())
def test_factored_step_on_an_mlp_equals_the_root_step(family, likelihood, batch_size, hessian, x64):
    """The built-in MLP's apply carries its layout, and the diagonal Kalman step and the
    DLR natural step from the per-layer factors of LIN-HESS's or MC-EF's root are the
    steps from the ``P x K`` root (the same network behind a plain function, which
    carries nothing; MC-EF draws the same weights from the same keys). A padded row
    (weight 0) adds nothing to either. For DLR the precision ``Upsilon + W W^T`` is
    compared (``W`` is unique only up to the signs of its columns), with rank 2 and up to
    9 root columns, so that the projection discards directions at every step."""
    from skbong.core import LinearizedHessian, MonteCarloEF

    apply, plain, mean0 = _mlp_and_plain()

    rng = np.random.default_rng(1)
    X = rng.normal(size=(9, 4))
    Y = np.eye(3)[rng.integers(0, 3, 9)] if likelihood == "categorical" else rng.normal(size=(9, 3))
    hyper = Hyperparameters(1.0 if likelihood == "categorical" else 0.3, 1.0, 0.0)
    states = {}
    estimator = LinearizedHessian() if hessian == "lin_hess" else MonteCarloEF(4)
    for name, fn in (("factored", apply), ("root", plain)):
        config = make_config(fn, likelihood, family, hessian=hessian, n_mc_samples=4, rank=2)
        state0 = config.family.init(mean0, jnp.asarray(0.7))
        curv = estimator(fn, config.likelihood, config.family, state0, jnp.asarray(X[:batch_size]),
                         jnp.asarray(Y[:batch_size]), jnp.ones(batch_size), jnp.asarray(hyper.obs_noise),
                         jax.random.PRNGKey(0))
        assert (curv.factors is not None) == (name == "factored")
        # 8 rows in batches of 3: the last batch holds one padded row.
        states[name] = run_filter(config, state0, X[:8], Y[:8], hyper, batch_size=batch_size)
    np.testing.assert_allclose(states["factored"].mean, states["root"].mean, rtol=1e-9, atol=1e-12)
    if family == "dlr":
        precision = {name: np.diag(s.diag_precision) + s.low_rank @ s.low_rank.T for name, s in states.items()}
        np.testing.assert_allclose(precision["factored"], precision["root"], rtol=1e-9, atol=1e-10)
        assert np.linalg.norm(states["root"].low_rank) > 1e-2
    else:
        np.testing.assert_allclose(states["factored"].var, states["root"].var, rtol=1e-9)
    assert np.max(np.abs(np.asarray(states["root"].mean) - np.asarray(mean0))) > 1e-2


def test_layered_vector_holds_the_flat_vector_by_layer(x64):
    """A :class:`LayeredVector` of a flat vector gives it back, its blocks are the layers'
    ``[b; W]`` blocks, a layer's bias or kernel range is a slice of one block, and a range
    that cuts through a block's rows is refused."""
    from skbong.core._curvature import LayeredVector, flat_rows, layer_block, layer_weights

    _, _, mean0 = _mlp_and_plain()
    network = _mlp_and_plain()[0].dense_network
    layered = LayeredVector.of(mean0, network)
    np.testing.assert_array_equal(flat_rows(layered), mean0)
    assert layered.size == mean0.shape[0] and layered.dtype == mean0.dtype
    for layer in network.layers:
        np.testing.assert_array_equal(layer_block(layered, layer), layer_block(mean0, layer))
        for got, expected in zip(layer_weights(layered, layer), layer_weights(mean0, layer)):
            np.testing.assert_array_equal(got, expected)
        kernel = slice(layer.kernel, layer.kernel + layer.n_in * layer.n_out)
        np.testing.assert_array_equal(layered.piece(kernel.start, kernel.stop), mean0[kernel])
    stacked = LayeredVector(tuple(jnp.stack([b, 2 * b]) for b in layered.blocks), layered.offsets)
    np.testing.assert_array_equal(flat_rows(stacked), jnp.stack([mean0, 2 * mean0]))
    first = network.layers[0]
    with pytest.raises(ValueError, match="whole rows"):
        layered.piece(first.kernel + 1, first.kernel + first.n_out + 1)


@pytest.mark.parametrize("family", ["diag", "diag_mom"])
@pytest.mark.parametrize("hessian", ["lin_hess", "mc_ef"])
@pytest.mark.parametrize("backtrack", [False, True])
def test_scan_carries_a_dense_diagonal_belief_by_layer_and_takes_the_flat_steps(family, hessian, backtrack, x64):
    """On a dense network the filter's scan carries a diagonal belief as per-layer blocks
    (``_layered_network``, on a CPU); its beliefs and plug-in records are those of the same steps
    taken one row at a time by ``update_step`` on the flat vectors, with the scan's keys
    (``fold_in(key, t)``), with and without the line search (at sigma0 = 3 it cuts 1-4 of
    the 12 moves of ``diag_mom`` and of MC-EF; none of ``diag`` LIN-HESS's)."""
    from skbong.core._filter import _default_platform, _layered_network
    from skbong.core._predictive import PluginPredictive

    apply, _, mean0 = _mlp_and_plain()
    rng = np.random.default_rng(3)
    X = rng.normal(size=(12, 4)) * 2.0
    Y = np.eye(3)[rng.integers(0, 3, 12)]
    hyper = Hyperparameters(1.0, 1.0, 0.0)
    config = make_config(apply, "categorical", family, hessian=hessian, n_mc_samples=4, backtrack=backtrack)
    state0 = config.family.init(mean0, jnp.asarray(3.0))
    record = PluginPredictive()
    # Per layer on a CPU only (on a GPU the per-layer blocks cost launches, see the function).
    on_cpu = _default_platform() == "cpu"
    assert (_layered_network(config, state0, jnp.asarray(X)[:, None], record, True) is not None) == on_cpu
    key = jax.random.PRNGKey(5)
    scanned, log_prob, _ = run_filter(config, state0, X, Y, hyper, key=key, record=record)

    state, log_probs = state0, []
    for t in range(X.shape[0]):
        x, y = jnp.asarray(X[t : t + 1]), jnp.asarray(Y[t : t + 1])
        log_probs.append(float(record(apply, config.likelihood, config.family, state, x, 1.0, None).log_prob(y)[0]))
        state = update_step(config, state, x, y, jnp.ones(1), hyper, jax.random.fold_in(key, t))
    np.testing.assert_allclose(scanned.mean, state.mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(scanned.var, state.var, rtol=1e-10)
    np.testing.assert_allclose(log_prob, log_probs, rtol=1e-10, atol=1e-12)
    assert np.max(np.abs(np.asarray(state.mean) - np.asarray(mean0))) > 1e-2


@pytest.mark.parametrize("family, hessian", [("dlr", "lin_hess"), ("slr", "lin_hess"), ("dlr", "mc_ef")])
@pytest.mark.parametrize("backtrack", [False, True])
def test_scan_carries_the_gram_matrix_of_the_low_rank_factor_and_takes_the_same_steps(family, hessian, backtrack, x64):
    """A BONG scan carries ``W^T W`` beside a DLR belief (``DLRGramState``) and updates it
    from the step's small matrices, and on a CPU carries the belief per layer
    (``_layered_network``); its beliefs and records are those of ``update_step`` on a
    flat ``DLRState`` one row at a time, which forms ``W^T W`` from ``W``. Checked
    on ``W W^T`` (the belief's own), and on ``W`` for MC-EF, whose local draws are taken
    along ``W``'s columns: without the sign of the step's eigenvectors fixed
    (``_signed_by_largest_entry``) the round-off of the two ways flipped a column of ``W``
    and the two parted after three steps."""
    from skbong.core._families import DLRState
    from skbong.core._filter import _carries_low_rank_gram, _default_platform, _layered_network
    from skbong.core._predictive import PluginPredictive

    apply, _, mean0 = _mlp_and_plain()
    rng = np.random.default_rng(4)
    X = rng.normal(size=(12, 4)) * 2.0
    Y = np.eye(3)[rng.integers(0, 3, 12)]
    hyper = Hyperparameters(1.0, 1.0, 0.0)
    config = make_config(apply, "categorical", family, rank=2, hessian=hessian, n_mc_samples=4, backtrack=backtrack)
    assert _carries_low_rank_gram(config, True) and not _carries_low_rank_gram(config, False)
    state0 = config.family.init(mean0, jnp.asarray(3.0))
    record = PluginPredictive()
    on_cpu = _default_platform() == "cpu"
    assert (_layered_network(config, state0, jnp.asarray(X)[:, None], record, True) is not None) == on_cpu
    key = jax.random.PRNGKey(6)
    scanned, log_prob, _ = run_filter(config, state0, X, Y, hyper, key=key, record=record)
    assert type(scanned) is DLRState  # the Gram matrix stays inside the scan

    state, log_probs = state0, []
    for t in range(X.shape[0]):
        x, y = jnp.asarray(X[t : t + 1]), jnp.asarray(Y[t : t + 1])
        log_probs.append(float(record(apply, config.likelihood, config.family, state, x, 1.0, None).log_prob(y)[0]))
        state = update_step(config, state, x, y, jnp.ones(1), hyper, jax.random.fold_in(key, t))
        assert type(state) is DLRState
    np.testing.assert_allclose(scanned.mean, state.mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(scanned.diag_precision, state.diag_precision, rtol=1e-9)
    low_rank = np.asarray(state.low_rank @ state.low_rank.T)
    np.testing.assert_allclose(scanned.low_rank @ scanned.low_rank.T, low_rank, atol=1e-10 * np.abs(low_rank).max())
    if hessian == "mc_ef":
        np.testing.assert_allclose(scanned.low_rank, state.low_rank, atol=1e-9 * np.abs(state.low_rank).max())
    np.testing.assert_allclose(log_prob, log_probs, rtol=1e-9, atol=1e-12)
    assert np.max(np.abs(np.asarray(state.mean) - np.asarray(mean0))) > 1e-2


@pytest.mark.parametrize("hessian", ["lin_hess", "mc_ef"])
def test_a_step_from_a_carried_gram_matrix_gives_that_of_its_new_factor(hessian, x64):
    """The Gram matrix a BONG step returns is ``W^T W`` of the ``W`` it returns, and the
    step from a carried Gram matrix is the step that forms it."""
    from skbong.core._families import DLRGramState

    apply, _, mean0 = _mlp_and_plain()
    rng = np.random.default_rng(5)
    config = make_config(apply, "categorical", "dlr", rank=2, hessian=hessian, n_mc_samples=4)
    state = config.family.init(mean0, jnp.asarray(1.0))
    state = state._replace(low_rank=jnp.asarray(rng.normal(size=state.low_rank.shape)))
    hyper = Hyperparameters(1.0, 1.0, 0.0)
    x, y, key = jnp.asarray(rng.normal(size=(1, 4))), jnp.eye(3)[:1], jax.random.PRNGKey(7)
    plain = update_step(config, state, x, y, jnp.ones(1), hyper, key)
    carried = update_step(config, DLRGramState(*state, state.low_rank.T @ state.low_rank), x, y, jnp.ones(1), hyper, key)
    gram = np.asarray(carried.low_rank.T @ carried.low_rank)
    np.testing.assert_allclose(carried.low_rank_gram, gram, atol=1e-10 * np.abs(gram).max())
    np.testing.assert_allclose(carried.mean, plain.mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(carried.diag_precision, plain.diag_precision, rtol=1e-10)
    np.testing.assert_allclose(carried.low_rank @ carried.low_rank.T, plain.low_rank @ plain.low_rank.T, atol=1e-10)


def test_eigenvectors_get_the_sign_of_their_largest_entry(x64):
    """``_signed_by_largest_entry`` keeps eigenvectors (``A v = lambda v``) and gives each
    the sign that makes its largest entry positive, whatever sign the solver returned."""
    from skbong.core._families import _signed_by_largest_entry

    rng = np.random.default_rng(10)
    root = rng.normal(size=(6, 6))
    matrix = root @ root.T
    values, vecs = np.linalg.eigh(matrix)
    flips = np.array([1.0, -1.0, -1.0, 1.0, -1.0, 1.0])
    for given in (vecs, vecs * flips):
        signed = np.asarray(_signed_by_largest_entry(jnp.asarray(given)))
        np.testing.assert_allclose(matrix @ signed, signed * values, atol=1e-10)
        assert np.all(signed[np.argmax(np.abs(signed), axis=0), np.arange(6)] > 0)
        np.testing.assert_allclose(np.abs(signed), np.abs(vecs))
    np.testing.assert_array_equal(_signed_by_largest_entry(jnp.asarray(vecs)), _signed_by_largest_entry(jnp.asarray(vecs * flips)))


def test_summed_slices_are_the_product_over_the_last_axis(x64):
    """``_summed_slices`` (the DLR step's products with ``W``'s per-layer blocks, as sums of
    scaled slices that XLA fuses) equals the matrix product over the block's last axis."""
    from skbong.core._families import _summed_slices

    rng = np.random.default_rng(11)
    block, m = rng.normal(size=(7, 5, 4)), rng.normal(size=(4, 3))
    np.testing.assert_allclose(_summed_slices(jnp.asarray(block), jnp.asarray(m)), block @ m, rtol=1e-12, atol=1e-12)


def test_scan_carries_flat_what_may_not_read_layers(x64):
    """The scan carries a belief per layer only for the built-in network functions: not for
    a function of the user's own that carries the same layout (it may read only flat
    vectors), nor for a DLR belief from LIN-EF (no factored root), BLR's steps, or a
    linearised record."""
    from skbong.core._filter import _default_platform, _layered_network
    from skbong.core._predictive import LinearizedGaussian, PluginPredictive

    apply, _, mean0 = _mlp_and_plain()

    def own(theta, x):
        return apply(theta, x)

    own.dense_network = apply.dense_network
    xs = jnp.zeros((2, 1, 4), mean0.dtype)
    cases = [
        (make_config(apply, "categorical", "diag"), PluginPredictive(), True),
        (make_config(own, "categorical", "diag"), None, False),
        (make_config(apply, "categorical", "dlr", rank=2), PluginPredictive(), True),
        (make_config(apply, "categorical", "dlr", rank=2, hessian="mc_ef"), None, True),
        (make_config(apply, "categorical", "dlr", rank=2, hessian="lin_ef"), None, False),
        (make_config(apply, "categorical", "diag", algorithm="blr"), None, False),
        (make_config(apply, "gaussian", "diag_mom"), LinearizedGaussian(), False),
    ]
    on_cpu = _default_platform() == "cpu"  # per layer on a CPU only
    for config, record, layered in cases:
        state = config.family.init(mean0, jnp.asarray(0.5))
        assert (_layered_network(config, state, xs, record, True) is not None) == (layered and on_cpu)
    # The belief of a carried configuration leaves the scan flat, as it entered.
    for config in (cases[0][0], cases[2][0]):
        before = config.family.init(mean0, jnp.asarray(0.5))
        after = run_filter(config, before, np.ones((3, 4)), np.eye(3), Hyperparameters(1.0, 1.0, 0.0))
        assert jax.tree.map(jnp.shape, after) == jax.tree.map(jnp.shape, before)


def _belief(family, mean0, rng, first=None, spread=1.0):
    """A diagonal or DLR (rank 2) belief around ``mean0`` with random variances or
    precisions; ``spread`` scales the first layer's (``first``) variances up (for DLR its
    diagonal precision down)."""
    from skbong.core import DiagState, DLRState

    p = mean0.shape[0]
    scale = np.ones(p)
    if first is not None:
        scale[first.bias : first.bias + (first.n_in + 1) * first.n_out] = spread
    if family.startswith("diag"):
        return DiagState(mean0, jnp.asarray(rng.uniform(0.2, 1.0, size=p) * scale))
    low_rank = 0.0 * rng.normal(size=(p, 2)) if family == "dlr_zero" else 0.7 * rng.normal(size=(p, 2))
    return DLRState(mean0, jnp.asarray(rng.uniform(1.0, 5.0, size=p) / scale), jnp.asarray(low_rank))


@pytest.mark.parametrize("family", ["diag", "diag_mom", "dlr"])
@pytest.mark.parametrize("likelihood", ["categorical", "gaussian"])
def test_mc_ef_local_draws_step_equals_the_step_from_their_root(family, likelihood, x64):
    # One row: MC-EF's factors come from draws of the first layer's pre-activation. The
    # root it returns is the one they stand for: its gradient is the mean of the per-draw
    # gradients, and the step from the factors is the step from that root.
    from skbong.core import MonteCarloEF

    apply, _, mean0 = _mlp_and_plain()
    rng = np.random.default_rng(4)
    x = jnp.asarray(rng.normal(size=(1, 4)))
    y = jnp.asarray(np.eye(3)[[1]] if likelihood == "categorical" else rng.normal(size=(1, 3)))
    config = make_config(apply, likelihood, family, hessian="mc_ef", n_mc_samples=4, rank=2)
    state = _belief(family, mean0, rng)
    curv = MonteCarloEF(4)(apply, config.likelihood, config.family, state, x, y, jnp.ones(1),
                           jnp.asarray(0.3), jax.random.PRNGKey(0))
    assert curv.factors is not None and curv.root.shape == (mean0.shape[0], 4)
    np.testing.assert_allclose(curv.grad, curv.root @ curv.coords, rtol=1e-12, atol=1e-14)
    # The last layer's bias gradient of draw m is the likelihood's score there: nonzero.
    assert np.min(np.abs(np.asarray(curv.root))[-3:]) > 0
    lr = jnp.asarray(0.7)
    factored = config.family.natural_step(state, state, curv, lr, False)
    from_root = config.family.natural_step(state, state, curv._replace(factors=None), lr, False)
    np.testing.assert_allclose(factored.mean, from_root.mean, rtol=1e-10, atol=1e-12)
    if family == "dlr":
        precision = [np.diag(s.diag_precision) + s.low_rank @ s.low_rank.T for s in (factored, from_root)]
        np.testing.assert_allclose(precision[0], precision[1], rtol=1e-9, atol=1e-10)
    else:
        np.testing.assert_allclose(factored.var, from_root.var, rtol=1e-10)
    assert np.max(np.abs(np.asarray(factored.mean) - np.asarray(mean0))) > 1e-3


def _draw_gradients(apply_fn, config, state, x, y, n_draws, seed):
    """The ``n_draws`` per-draw gradients ``(n_draws, P)`` of MC-EF's root for one row."""
    from skbong.core import MonteCarloEF

    curv = MonteCarloEF(n_draws)(apply_fn, config.likelihood, config.family, state, x, y, jnp.ones(1),
                                 jnp.asarray(1.0), jax.random.PRNGKey(seed))
    return np.asarray(curv.root).T * np.sqrt(n_draws)


@pytest.mark.parametrize("family", ["diag", "dlr", "dlr_zero"])
def test_mc_ef_local_draws_have_the_law_of_weight_draws(family, x64):
    """The per-draw gradients from draws of the first layer's pre-activation (the MLP's
    apply, which carries its layout) and from draws of every weight (a plain function)
    have the same mean, second moments and second moments along random directions (the
    whole covariance, across layers), to within 5 standard errors of 20,000 draws each;
    and the same comparison tells the law apart from one with the first layer's
    variances twice as large (DLR: its diagonal precision halved), so it can fail. DLR
    with rank 2, and with ``W = 0`` (no low-rank part to condition on)."""
    apply, plain, mean0 = _mlp_and_plain()
    rng = np.random.default_rng(5)
    x = jnp.asarray(rng.normal(size=(1, 4)))
    y = jnp.asarray(np.eye(3)[[2]])
    config = make_config(apply, "categorical", "dlr" if family.startswith("dlr") else family,
                         hessian="mc_ef", rank=2)
    directions = rng.normal(size=(mean0.shape[0], 20))
    first = apply.dense_network.layers[0]
    state = _belief(family, mean0, np.random.default_rng(6))
    wider = _belief(family, mean0, np.random.default_rng(6), first, spread=2.0)

    def statistics(g):
        return [g, g**2, (g @ directions) ** 2]

    def max_z(a, b):
        return max(
            np.max(np.abs(sa.mean(0) - sb.mean(0)) / np.sqrt((sa.var(0) + sb.var(0)) / len(sa) + 1e-300))
            for sa, sb in zip(statistics(a), statistics(b))
        )

    local = _draw_gradients(apply, config, state, x, y, 20_000, seed=0)
    assert max_z(local, _draw_gradients(plain, config, state, x, y, 20_000, seed=1)) < 5.0
    assert max_z(local, _draw_gradients(plain, config, wider, x, y, 20_000, seed=1)) > 8.0


def _kalman_filter(X, y, weight, mean0, sigma0, noise, decay, q, batch_size):
    """Dense Kalman filter of ``y = x^T theta + N(0, noise / w)`` with the predict step
    ``theta <- decay theta + N(0, q I)`` before every row; also each row's one-step-ahead
    log density. A step takes the predict steps of its rows in turn, then one update; rows
    of weight zero are not observations and take no predict step (a step of none is
    scored by the next row's forecast, one predict step, and leaves the belief)."""
    mean, cov = np.array(mean0, float), sigma0**2 * np.eye(len(mean0))
    log_probs = []
    for start in range(0, len(y), batch_size):
        rows = slice(start, start + batch_size)
        H, w = X[rows], weight[rows]
        pred_mean, pred_cov = mean, cov
        for _ in range(max(int(np.sum(w > 0)), 1)):
            pred_mean, pred_cov = decay * pred_mean, decay**2 * pred_cov + q * np.eye(len(mean))
        var = np.einsum("bp,pq,bq->b", H, pred_cov, H) + noise
        log_probs += list(-0.5 * (np.log(2 * np.pi * var) + (y[rows] - H @ pred_mean) ** 2 / var))
        keep = w > 0
        if keep.any():
            H, R = H[keep], np.diag(noise / w[keep])
            gain = pred_cov @ H.T @ np.linalg.inv(H @ pred_cov @ H.T + R)
            mean = pred_mean + gain @ (y[rows][keep] - H @ pred_mean)
            cov = pred_cov - gain @ H @ pred_cov
    return mean, cov, np.array(log_probs)


@pytest.mark.parametrize("family", ["fc", "dlr"])
def test_predict_and_update_steps_in_a_scan_of_ones_own_are_the_kalman_filter(family, x64):
    # The pieces a user scans in a program of their own: predict_step then update_step per
    # row. For a linear-Gaussian model with drift both families (dlr at full rank) are the
    # Kalman filter; forecast_belief after the last row is its next predict step.
    from skbong.core import LatentPrior, forecast_belief, predict_step

    X, y = _linear_data(n=30, p=4)
    mean0, sigma0, noise, decay, q = np.linspace(-0.3, 0.3, 4), 1.2, 0.25, 0.97, 0.02
    config = make_config(_linear, "gaussian", family, rank=4)
    hyper = Hyperparameters(*(jnp.asarray(v) for v in (noise, decay, q, 1.0)))

    @jax.jit
    def scan(state):
        def body(state, row):
            t, x, target = row
            prior = predict_step(config, state, hyper, t, t, None)
            key = jax.random.PRNGKey(0)
            return update_step(config, prior, x[None], target[None, None], jnp.ones(1), hyper, key), None

        return jax.lax.scan(body, state, (jnp.arange(30), jnp.asarray(X), jnp.asarray(y)))[0]

    state = scan(config.family.init(jnp.asarray(mean0), jnp.asarray(sigma0)))
    mean, cov, _ = _kalman_filter(X, y, np.ones(30), mean0, sigma0, noise, decay, q, batch_size=1)
    np.testing.assert_allclose(state.mean, mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(config.family.covariance(state), cov, rtol=1e-8, atol=1e-10)
    forecast = forecast_belief(config, state, hyper, 30, 30, LatentPrior(mean0, sigma0**-2))
    np.testing.assert_allclose(forecast.mean, decay * mean, rtol=1e-10)
    expected = decay**2 * cov + q * np.eye(4)
    np.testing.assert_allclose(config.family.covariance(forecast), expected, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("batch_size", [1, 2])
@pytest.mark.parametrize("decay, q", [(1.0, 0.0), (0.97, 0.02)])
def test_fc_deferred_downdates_are_the_kalman_filter(batch_size, decay, q, x64):
    # FullCovariance holds the downdates of a block of steps in a factor and applies them at
    # the block's end. For a linear-Gaussian model BONG-LIN-HESS-FC is the Kalman filter, so
    # with blocks of 3 steps (the last one partial), a predict step, row weights and rows of
    # weight zero, it must still give the Kalman filter's posterior and predictions.
    from skbong.core import FullCovariance, make_predictive
    from skbong.core._filter import _deferral

    X, y = _linear_data(n=41, p=5)
    weight = np.random.default_rng(1).uniform(0.5, 2.0, size=41)
    weight[[4, 5, 17]] = 0.0
    mean0, sigma0, noise = np.linspace(-0.3, 0.3, 5), 1.2, 0.25
    family = FullCovariance(deferred_columns=3 * batch_size, defer_from=0)
    config = dataclasses.replace(make_config(_linear, "gaussian", "fc"), family=family)
    state = family.init(jnp.asarray(mean0), jnp.asarray(sigma0))
    hyper = Hyperparameters(*(jnp.asarray(v) for v in (noise, decay, q, 1.0)))
    xs, ys, ws = (jnp.asarray(a)[None, :batch_size] for a in (X, y[:, None], weight))
    assert _deferral(config, state, xs, ys, ws, hyper, jax.random.PRNGKey(0)) == (3, 3 * batch_size)

    new, log_prob, _ = run_filter(
        config, state, X, y[:, None], hyper, batch_size=batch_size, sample_weight=weight,
        record=make_predictive("linearized", "gaussian"),
    )
    mean, cov, expected_log_prob = _kalman_filter(X, y, weight, mean0, sigma0, noise, decay, q, batch_size)
    assert isinstance(new, FullCovState)
    np.testing.assert_allclose(new.mean, mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(new.cov, cov, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(log_prob, expected_log_prob, rtol=1e-9)


def test_fc_settles_only_the_filled_columns_of_its_pending_downdates(x64):
    # A call of a few rows fills a few of the factor's columns; the settled covariance takes
    # the product of the filled ones (the least power of two from 8 that holds them), which
    # must be the dense formula whatever the count, traced inside a compiled function.
    from skbong.core import FullCovariance
    from skbong.core._families import FullCovDeferred

    rng = np.random.default_rng(3)
    n, width = 30, 100
    root = rng.normal(size=(n, n))
    base = root @ root.T / n + np.eye(n)
    family = FullCovariance(deferred_columns=width, defer_from=0)
    settle = jax.jit(family.settle)
    for filled in (0, 1, 8, 9, 33, 64, 65, 100):
        factor = np.zeros((n, width))
        factor[:, :filled] = 0.1 * rng.normal(size=(n, filled))
        state = FullCovDeferred(
            jnp.zeros(n), jnp.asarray(base), jnp.asarray(0.9), jnp.asarray(0.05), jnp.asarray(factor),
            jnp.asarray(filled, jnp.int32),
        )
        expected = 0.9 * base + 0.05 * np.eye(n) - factor[:, :filled] @ factor[:, :filled].T
        np.testing.assert_allclose(settle(state).cov, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("hessian", ["lin_hess", "lin_ef", "mc_ef"])
@pytest.mark.parametrize("vectorize", [False, True])
def test_fc_deferred_downdates_leave_an_mlp_sweep_unchanged(hessian, vectorize, x64):
    # On a nonlinear model the deferred form must reproduce the step-by-step update: the
    # same posteriors and records, in a sweep over two prior scales with a predict step.
    from skbong.core import FullCovariance, init_sweep, make_predictive, run_sweep

    spec, X, Y = _mlp_stream(n=23, seed=2)
    mean0 = jnp.asarray(spec.init_params(0), jnp.float64)
    direct = make_config(spec.apply, "categorical", "fc", hessian=hessian, n_mc_samples=4)
    deferred = dataclasses.replace(direct, family=FullCovariance(deferred_columns=12, defer_from=0))
    hypers = Hyperparameters(*(jnp.asarray(v) for v in (1.0, 0.98, [0.0, 0.01], 1.0)))
    runs = []
    for config in (direct, deferred):
        states = init_sweep(config.family, mean0, jnp.asarray([0.5, 1.0]))
        runs.append(run_sweep(
            config, states, X, Y, hypers, record=make_predictive("linearized_mc", "categorical", 8),
            vectorize=vectorize,
        ))
    for expected, got in zip(jax.tree_util.tree_leaves(runs[0]), jax.tree_util.tree_leaves(runs[1])):
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("family", ["diag", "diag_mom", "dlr"])
def test_output_moments_on_a_dense_network_take_the_jacobians_factors_and_agree_with_them_dense(family, x64):
    """On an MLP (``apply.dense_network``) output_moments builds ``J Sigma J^T`` from the
    Jacobians' factors: it equals the covariance of the dense per-row Jacobians (the same
    function without the layout, which takes the generic path), also for a DLR belief whose
    rows cancel and so take the square-root form of the dense Jacobians, and in float32."""
    from skbong.core import output_moments

    spec = MLPSpec(5, (7, 6), 4, "tanh")
    apply = spec.apply
    assert apply.dense_network is not None

    def without_layout(theta, x):
        return apply(theta, x)

    rng = np.random.default_rng(0)
    n_params = spec.n_params
    mean = jnp.asarray(rng.normal(size=n_params))
    x = jnp.asarray(rng.normal(size=(6, 5)))
    config = make_config(apply, "categorical", family, **({"rank": 3} if family == "dlr" else {}))
    if family == "dlr":
        beliefs = [
            DLRState(mean, jnp.asarray(rng.uniform(0.5, 3.0, n_params)), jnp.asarray(rng.normal(size=(n_params, 3)))),
            # W pins every direction 1e6 times past Upsilon: each row's variances cancel
            DLRState(mean, jnp.asarray(rng.uniform(0.5, 2.0, n_params)),
                     jnp.asarray(np.linalg.qr(rng.normal(size=(n_params, n_params)))[0] * 1e3)),
        ]
    else:
        variances = jnp.asarray(rng.uniform(0.1, 2.0, n_params))
        beliefs = [config.family.init(mean, jnp.asarray(0.7))._replace(var=variances)]

    def jacobian_sized(jaxpr):
        """Outputs of P x C entries per row or more, outside conditional branches (DLR's
        rows that cancel take the dense Jacobians in one)."""
        found = []
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "cond":
                continue
            found += [v for v in eqn.outvars if np.prod(v.aval.shape) >= 4 * n_params]
            for value in eqn.params.values():  # the bodies of scans (lax.map) and of jitted calls
                if hasattr(value, "jaxpr"):
                    found += jacobian_sized(getattr(value.jaxpr, "jaxpr", value.jaxpr))
        return found

    probe = beliefs[0]
    assert not jacobian_sized(jax.make_jaxpr(lambda s: output_moments(apply, config.family, s, x))(probe).jaxpr)
    assert jacobian_sized(jax.make_jaxpr(lambda s: output_moments(without_layout, config.family, s, x))(probe).jaxpr)

    jac = np.asarray(jax.vmap(lambda row: jax.jacrev(lambda t: apply(t, row[None])[0])(mean))(x))
    # compiled once per path and dtype, for both beliefs
    moments = {fn: jax.jit(functools.partial(output_moments, fn, config.family)) for fn in (apply, without_layout)}
    for state in beliefs:
        precision = getattr(state, "diag_precision", None)
        # J Upsilon^-1 J^T (DLR's first term; J Sigma J^T for the diagonal families): the
        # scale of the round-off of either form
        first = np.einsum("bcp,p,bcp->bc", jac, 1 / precision if precision is not None else state.var, jac).max()
        for dtype, rtol in ((jnp.float64, 1e-12), (jnp.float32, 2e-5)):
            state_d, x_d = jax.tree.map(lambda a: a.astype(dtype), (state, x))
            (f, cov), (f_ref, cov_ref) = (moments[fn](state_d, x_d) for fn in (apply, without_layout))
            np.testing.assert_allclose(f, f_ref, rtol=rtol, atol=rtol)
            atol = max(rtol * float(np.abs(cov_ref).max()), 100 * float(jnp.finfo(dtype).eps) * first)
            np.testing.assert_allclose(cov, cov_ref, rtol=rtol, atol=atol)
            if precision is not None and state is beliefs[1]:
                # the variances are below 1e-4 of the first term's: in float32 (under 1e4 eps)
                # both forms take the square root of the dense Jacobians, so they agree exactly
                assert np.all(np.diagonal(np.asarray(cov_ref, np.float64), axis1=1, axis2=2) < 1e-4 * first)
                if dtype == jnp.float32:
                    np.testing.assert_array_equal(cov, cov_ref)
