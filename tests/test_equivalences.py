"""Named algorithms of the seed papers, rebuilt from their own equations (float64).

Every reference below is written from the papers in plain numpy, with Jacobians,
gradients and Hessians by ``jax.jacfwd`` / ``jax.grad`` / ``jax.hessian`` of functions
defined here; none of skbong's update, curvature or likelihood code is called by a
reference. The model is a small nonlinear MLP (P about 50) unless the statement is about
a conjugate model.

1. ``test_bong_lin_hess_fc_is_extended_kalman_filter``: BONG-LIN-HESS-FC is CM-EKF
   (BONG Eqs. 23-25 / 126-130, LO-FI Eqs. 8-10, 26-29): the textbook EKF in covariance
   form (innovation covariance ``S = H Sigma H^T + R``, gain ``K = Sigma H^T S^-1``,
   ``Sigma -= K S K^T``) with the predict step ``mu <- gamma mu``,
   ``Sigma <- gamma^2 Sigma + q I`` (LO-FI Sec. 3.1). For the categorical likelihood the
   EKF observes ``h = softmax(f)`` with ``R = diag(p) - p p^T`` (LO-FI Eq. 10), made
   invertible by dropping one class (the first option of LO-FI footnote 2), not by the
   pseudo-inverse / Hessian-root route of the implementation. The categorical cases
   therefore also check Prop. 4.2: the reference is the linear(h)-Gaussian approximation
   (Eqs. 14-17, Jacobian of the probabilities), the implementation the linear(f)-delta
   one (Eqs. 18-20, score and Hessian of the log-likelihood in logit space). Batches
   stack the rows' observations (block-diagonal ``R``).
2. ``test_bong_lin_hess_dlr_is_lofi``: BONG-LIN-HESS-DLR is LO-FI (BONG E.5.2): LO-FI
   Algorithm 2 (predict, main-text form, which is the corrected Eq. 25) and Algorithm 3
   (update: ``W~ = [W, H^T A^T]`` with ``A = chol(R)^-1``, mean by the Kalman gain of the
   *unprojected* precision ``Upsilon + W~ W~^T`` (Eqs. 34-36), dense SVD of ``W~``, top
   ``L`` columns kept, the dropped part's diagonal added to ``Upsilon``, Eqs. 37-40).
   ``W`` is compared through ``W W^T`` (it is unique only up to a right rotation).
3. ``test_bong_mc_hess_fc_is_explicit_rvga``: BONG-MC-HESS-FC is the explicit R-VGA
   (R-VGA Eqs. 30-31, BONG Eqs. 11-12, 118-119) with expectations over ``q_{t|t-1}``
   replaced by the average over the *same* draws. The draws are reproduced from the key
   schedule documented in ``run_filter`` / ``apply_rule`` / ``MonteCarloHessian``:
   observation ``t`` uses ``k = fold_in(fold_in(key, t), 0)`` (inner step 0, also when
   ``I = 1``), ``sample_key = split(k)[0]``, ``theta = mu + z chol(Sigma)^T`` with
   ``z = normal(sample_key, (M, P))``.
   ``test_mc_hess_converges_to_exact_expectation_step``: for a model whose gradient and
   Hessian are polynomials of degree <= 3 in ``theta`` (quadratic mean, Gaussian noise),
   the third-degree spherical cubature rule (2P sigma points, the quadrature route the
   R-VGA paper mentions after Eq. 31) gives the expectations of Eqs. 9-10 exactly; the
   MC-HESS step's RMS error over seeds decays like ``M^-1/2``.
4. Proposition 4.1 (BONG Sec. 4.1, App. C): in the conjugate case the BONG step in
   natural parameters adds the observation's sufficient statistics,
   ``psi_t = psi_{t|t-1} + stats(y_t)``, independently of the current belief. For
   ``y ~ N(H theta, R)`` and the FC family that is
   ``Sigma_t^-1 mu_t = Sigma_{t|t-1}^-1 mu_{t|t-1} + H^T R^-1 y`` and
   ``Sigma_t^-1 = Sigma_{t|t-1}^-1 + H^T R^-1 H``. Consequences tested here and not in
   tests/core/test_families.py: the sequential posterior equals the batch posterior for
   a multi-output model, a NON-isotropic prior, and ANY order of the observations and
   any batch size (``test_prop_4_1_..._order_and_batching``); the DLR family is also
   conjugate while the accumulated statistics fit in its rank (``T C <= R < P``: the
   SVD projection drops nothing, so LO-FI is exact; with a smaller rank it is not)
   (``test_prop_4_1_dlr_is_exact_while_statistics_fit_in_rank``); and with MC-HESS the
   Hessian of this log-likelihood is constant, so the precision part of the update is
   exact for every ``M`` (even ``M = 1``), while the mean uses the Monte-Carlo gradient
   ``H^T R^-1 (y - H theta_bar)`` and is exact only in the limit, with error
   ``O(M^-1/2)`` (``test_prop_4_1_mc_hess_precision_exact_for_any_m``).
5. ``test_blr_one_unit_step_is_bong_for_mc_hess``: BLR with ``I = 1``, ``alpha = 1``
   equals BONG (the KL gradient vanishes at the start ``q_{t|t-1}``; BONG Sec. 4.6)
   for MC-HESS on fc / fc_mom / diag / diag_mom (tests/test_grid.py covers the other
   estimators). ``test_bong_mc_hess_diag_families_match_appendix_e3_e4`` checks the
   diagonal MC-HESS steps themselves against BONG Eqs. 210-211 (DIAG) and 246-247
   (DIAG_MOM), with Hutchinson's diagonal estimate (BONG E.3) from the same draws and
   Rademacher probes.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.special import logsumexp

from skbong.core import FullCovState, Hyperparameters, MLPSpec, make_config, run_filter

RTOL = 1e-8

# --------------------------------------------------------------------------------------
# Shared data and comparison helpers
# --------------------------------------------------------------------------------------


def _mlp(n_outputs):
    """``MLPSpec(4, (7,), C, "tanh")``: P = 35 + 8 C (43, 51 or 59)."""
    return MLPSpec(4, (7,), n_outputs, "tanh")


def _init_mean(spec, seed):
    """LeCun-normal initial mean of ``spec`` in float64."""
    return np.asarray(spec.init_params(seed), np.float64)


def _stream(likelihood, n_outputs, n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    if likelihood == "categorical":
        Y = np.eye(n_outputs)[rng.integers(n_outputs, size=n)]
    else:
        Y = 0.5 * rng.normal(size=(n, n_outputs))
    return X, Y


def _close(actual, expected, rtol=RTOL):
    """Entrywise ``|a - e| <= rtol (|e| + max|e|)``: relative to the array's scale."""
    expected = np.asarray(expected)
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=rtol, atol=rtol * np.abs(expected).max())


def _dlr_precision(state):
    return np.diag(state.diag_precision) + state.low_rank @ state.low_rank.T


# --------------------------------------------------------------------------------------
# Textbook references (numpy; derivatives by jax autodiff of functions defined here)
# --------------------------------------------------------------------------------------


def _softmax(f):
    e = jnp.exp(f - jnp.max(f, axis=-1, keepdims=True))
    return e / jnp.sum(e, axis=-1, keepdims=True)


@functools.lru_cache(maxsize=None)
def _observation_model(apply, likelihood):
    """Jitted ``(mu, x) -> (h(mu), jac h(mu), p)`` of LO-FI Eqs. 8-10 for a batch ``x``.

    Gaussian: ``h = f`` (all ``C`` outputs of every row). Categorical: ``h`` is the first
    ``C - 1`` class probabilities of every row (the last one is determined by them);
    ``p`` are those probabilities, from which ``R`` is built.
    """
    if likelihood == "gaussian":
        h = lambda theta, x: apply(theta, x).reshape(-1)  # noqa: E731
    else:
        h = lambda theta, x: _softmax(apply(theta, x))[:, :-1].reshape(-1)  # noqa: E731
    return jax.jit(lambda mu, x: (h(mu, x), jax.jacfwd(h)(mu, x)))


def _linearised_observation(apply, mu, xb, yb, likelihood, obs_noise):
    """EKF observation model of LO-FI Eqs. 8-10 for a batch of rows, stacked.

    Returns ``(yhat, H, R, y)``: the predicted observation ``h(mu)``, its Jacobian
    (forward mode, ``jax.jacfwd``), the observation covariance and the observation. The
    categorical case observes the first ``C - 1`` class probabilities, so ``R`` is the
    nonsingular leading block of ``diag(p) - p p^T`` (LO-FI footnote 2, first option).
    """
    yhat, H = (np.asarray(a) for a in _observation_model(apply, likelihood)(jnp.asarray(mu), jnp.asarray(xb)))
    yb = np.asarray(yb)
    if likelihood == "gaussian":
        y = yb.reshape(-1)
        R = np.diag(np.tile(np.broadcast_to(obs_noise, yb.shape[1]).astype(float), yb.shape[0]))
    else:
        y = yb[:, :-1].reshape(-1)
        k = yb.shape[1] - 1
        R = np.zeros((len(y), len(y)))
        for b, p in enumerate(yhat.reshape(-1, k)):
            R[b * k : (b + 1) * k, b * k : (b + 1) * k] = np.diag(p) - np.outer(p, p)
    return yhat, H, R, y


def _ekf_reference(apply, mean0, cov0, X, Y, likelihood, obs_noise, gamma, q, batch_size=1):
    """Extended Kalman filter (covariance form; Sarkka 2013, LO-FI Sec. 3). The dynamics act
    per observation: a batch takes its rows' predict steps in turn, then one update."""
    mu, cov = np.array(mean0, float), np.array(cov0, float)
    eye = np.eye(mu.shape[0])
    for start in range(0, X.shape[0], batch_size):
        rows = slice(start, start + batch_size)
        for _ in range(len(X[rows])):
            mu, cov = gamma * mu, gamma**2 * cov + q * eye
        yhat, H, R, y = _linearised_observation(apply, mu, X[rows], Y[rows], likelihood, obs_noise)
        S = H @ cov @ H.T + R
        K = np.linalg.solve(S, H @ cov).T  # Sigma H^T S^-1 (S, Sigma symmetric)
        mu = mu + K @ (y - yhat)
        cov = cov - K @ S @ K.T
    return mu, cov


def _lofi_reference(apply, mean0, sigma0, rank, X, Y, likelihood, obs_noise, gamma, q):
    """LO-FI (Chang et al. 2023): Algorithm 1 loop, Algorithm 2 predict, Algorithm 3 update.

    The SVD is a dense ``np.linalg.svd`` of ``W~`` (Eq. 37).
    """
    p = mean0.shape[0]
    mu, ups, W = np.array(mean0, float), np.full(p, sigma0**-2.0), np.zeros((p, rank))
    for t in range(X.shape[0]):
        # Algorithm 2 (lines 2-5).
        mu = gamma * mu
        ups_pred = 1.0 / (gamma**2 / ups + q)
        C = np.linalg.inv(np.eye(rank) + q * W.T @ ((ups_pred / ups)[:, None] * W))
        W = gamma * ((ups_pred / ups)[:, None] * W) @ np.linalg.cholesky(C)
        ups = ups_pred
        # Algorithm 3 (lines 2-16).
        yhat, H, R, y = _linearised_observation(apply, mu, X[t : t + 1], Y[t : t + 1], likelihood, obs_noise)
        A = np.linalg.inv(np.linalg.cholesky(R))
        W_ext = np.hstack([W, H.T @ A.T])
        G = np.linalg.inv(np.eye(W_ext.shape[1]) + W_ext.T @ (W_ext / ups[:, None]))
        Cm = H.T @ A.T @ A
        K = Cm / ups[:, None] - (W_ext / ups[:, None]) @ G @ (W_ext.T @ (Cm / ups[:, None]))
        mu = mu + K @ (y - yhat)
        U, s, _ = np.linalg.svd(W_ext, full_matrices=False)
        W = U[:, :rank] * s[:rank]
        W_dropped = U[:, rank:] * s[rank:]
        ups = ups + np.sum(W_dropped**2, axis=1)
    return mu, ups, W


def _log_likelihood(apply, likelihood, obs_noise):
    """``theta, x (B, D), y (B, C) -> sum_b log p(y_b | f(x_b, theta))`` up to a constant."""

    def loglik(theta, x, y):
        f = apply(theta, x)
        if likelihood == "gaussian":
            return -0.5 * jnp.sum((y - f) ** 2 / jnp.asarray(obs_noise))
        return jnp.sum(y * f) - jnp.sum(logsumexp(f, axis=-1))

    return loglik


def _grads_and_hessians(loglik):
    """Jitted per-draw ``(grad, hessian)`` of ``loglik`` for draws ``thetas`` (M, P)."""
    return jax.jit(jax.vmap(lambda theta, x, y: (jax.grad(loglik)(theta, x, y), jax.hessian(loglik)(theta, x, y)),
                            (0, None, None)))


def _draw_keys(key, t):
    """``(sample_key, probe_key)`` of observation ``t`` (see the module docstring)."""
    return jax.random.split(jax.random.fold_in(jax.random.fold_in(key, t), 0))


def _rvga_reference(loglik, mean0, cov0, X, Y, n_samples, key, gamma, q):
    """Explicit R-VGA (R-VGA Eqs. 30-31) with expectations over ``M`` draws from q_{t|t-1}."""
    derivatives = _grads_and_hessians(loglik)
    mu, cov = np.array(mean0, float), np.array(cov0, float)
    for t in range(X.shape[0]):
        mu, cov = gamma * mu, gamma**2 * cov + q * np.eye(mu.shape[0])
        sample_key, _ = _draw_keys(key, t)
        z = np.asarray(jax.random.normal(sample_key, (n_samples, mu.shape[0]), jnp.float64))
        thetas = jnp.asarray(mu + z @ np.linalg.cholesky(cov).T)
        x, y = jnp.asarray(X[t : t + 1]), jnp.asarray(Y[t : t + 1])
        g, G = (np.asarray(a).mean(0) for a in derivatives(thetas, x, y))
        precision = np.linalg.inv(cov) - G  # Eq. 31
        assert np.all(np.linalg.eigvalsh(0.5 * (precision + precision.T)) > 0), "reference left the PD cone"
        cov = np.linalg.inv(precision)
        mu = mu + cov @ g  # Eq. 30 (with P_t, as the R-VGA paper prescribes)
    return mu, cov


def _cubature_expectation(fn, mu, cov):
    """``E_{N(mu, cov)}[fn(theta)]`` by the third-degree spherical cubature rule.

    Points ``mu +- sqrt(P) L e_i`` with weights ``1 / 2P`` (``L L^T = cov``): exact for
    every polynomial of degree at most 3.
    """
    p = mu.shape[0]
    chol = np.linalg.cholesky(cov)
    points = jnp.asarray(mu + np.sqrt(p) * np.concatenate([chol.T, -chol.T]))
    return np.asarray(jax.jit(jax.vmap(fn))(points)).mean(0)


# --------------------------------------------------------------------------------------
# 1. BONG-LIN-HESS-FC = CM-EKF
# --------------------------------------------------------------------------------------


def _run(spec_apply, likelihood, family, state, X, Y, hyper, *, algorithm="bong", hessian="lin_hess", rank=1,
         n_inner=1, n_samples=1, batch_size=1, key=None):
    config = make_config(spec_apply, likelihood, family, rank, algorithm, hessian, n_inner, n_samples)
    return config, run_filter(config, state, X, Y, hyper, batch_size=batch_size, key=key)


EKF_CASES = {
    # likelihood, C, obs_noise, gamma, q, batch_size
    "gaussian-C1-static": ("gaussian", 1, 0.3, 1.0, 0.0, 1),
    "gaussian-C2-dynamic": ("gaussian", 2, np.array([0.2, 0.7]), 0.97, 2e-3, 1),
    "gaussian-C2-batch3": ("gaussian", 2, np.array([0.4, 0.1]), 0.95, 1e-3, 3),
    "categorical-C3-static": ("categorical", 3, 1.0, 1.0, 0.0, 1),
    "categorical-C3-dynamic": ("categorical", 3, 1.0, 0.95, 1e-2, 1),
}


@pytest.mark.parametrize("case", list(EKF_CASES))
def test_bong_lin_hess_fc_is_extended_kalman_filter(case, x64):
    likelihood, n_out, noise, gamma, q, batch_size = EKF_CASES[case]
    spec = _mlp(n_out)
    X, Y = _stream(likelihood, n_out, 15, seed=11)
    mean0, sigma0 = _init_mean(spec, 3), 0.6
    cov0 = sigma0**2 * np.eye(spec.n_params)

    _, state = _run(spec.apply, likelihood, "fc", FullCovState(jnp.asarray(mean0), jnp.asarray(cov0)), X, Y,
                    Hyperparameters(noise, gamma, q), batch_size=batch_size)
    mu, cov = _ekf_reference(spec.apply, mean0, cov0, X, Y, likelihood, noise, gamma, q, batch_size)

    assert np.abs(mu - mean0).max() > 1e-2  # the stream moved the belief
    _close(state.mean, mu)
    _close(state.cov, cov)


# --------------------------------------------------------------------------------------
# 2. BONG-LIN-HESS-DLR = LO-FI
# --------------------------------------------------------------------------------------

LOFI_CASES = {
    # likelihood, C, obs_noise, gamma, q, rank
    "gaussian-C1-static": ("gaussian", 1, 0.3, 1.0, 0.0, 4),
    "gaussian-C2-dynamic": ("gaussian", 2, np.array([0.5, 0.2]), 0.97, 5e-3, 5),
    "categorical-C3-dynamic": ("categorical", 3, 1.0, 0.95, 1e-2, 6),
}


@pytest.mark.parametrize("case", list(LOFI_CASES))
def test_bong_lin_hess_dlr_is_lofi(case, x64):
    likelihood, n_out, noise, gamma, q, rank = LOFI_CASES[case]
    spec = _mlp(n_out)
    X, Y = _stream(likelihood, n_out, 15, seed=12)
    mean0, sigma0 = _init_mean(spec, 4), 0.7

    config = make_config(spec.apply, likelihood, "dlr", rank)
    state0 = config.family.init(jnp.asarray(mean0), jnp.asarray(sigma0))
    state = run_filter(config, state0, X, Y, Hyperparameters(noise, gamma, q))
    mu, ups, W = _lofi_reference(spec.apply, mean0, sigma0, rank, X, Y, likelihood, noise, gamma, q)

    # The truncation was active: more pseudo-observations than the rank were absorbed.
    assert 15 * (n_out - (likelihood == "categorical")) > rank
    assert np.abs(ups - sigma0**-2).max() > 1e-3
    _close(state.mean, mu)
    _close(state.diag_precision, ups)
    _close(state.low_rank @ state.low_rank.T, W @ W.T)


# --------------------------------------------------------------------------------------
# 3. BONG-MC-HESS-FC = explicit R-VGA; convergence of MC-HESS in M
# --------------------------------------------------------------------------------------

RVGA_CASES = {
    # likelihood, C, obs_noise, gamma, q, M
    "gaussian-C2-static": ("gaussian", 2, np.array([1.5, 2.5]), 1.0, 0.0, 4),
    "categorical-C3-dynamic": ("categorical", 3, 1.0, 0.97, 1e-3, 5),
}


@pytest.mark.parametrize("case", list(RVGA_CASES))
def test_bong_mc_hess_fc_is_explicit_rvga(case, x64):
    likelihood, n_out, noise, gamma, q, n_samples = RVGA_CASES[case]
    spec = _mlp(n_out)
    X, Y = _stream(likelihood, n_out, 10, seed=13)
    mean0, sigma0 = _init_mean(spec, 5), 0.3
    cov0 = sigma0**2 * np.eye(spec.n_params)
    key = jax.random.PRNGKey(21)

    _, state = _run(spec.apply, likelihood, "fc", FullCovState(jnp.asarray(mean0), jnp.asarray(cov0)), X, Y,
                    Hyperparameters(noise, gamma, q), hessian="mc_hess", n_samples=n_samples, key=key)
    loglik = _log_likelihood(spec.apply, likelihood, noise)
    mu, cov = _rvga_reference(loglik, mean0, cov0, X, Y, n_samples, key, gamma, q)

    assert np.abs(mu - mean0).max() > 1e-2
    _close(state.mean, mu)
    _close(state.cov, cov)


def _quadratic(theta, x):
    """``f(x, theta) = x . theta + 0.5 sum(x * theta^2)``: a nonlinear mean of degree 2."""
    return (x @ theta + 0.5 * x @ theta**2)[:, None]


def test_mc_hess_converges_to_exact_expectation_step(x64):
    # One BONG-MC-HESS-FC step against Eqs. 9-10 with exact expectations: with Gaussian
    # noise the gradient (y - f) grad f / r has degree 3 and the Hessian
    # (-grad f grad f^T + (y - f) hess f) / r degree 2 in theta, so the cubature rule is
    # exact. The RMS error over seeds should scale like M^-1/2.
    rng = np.random.default_rng(7)
    p, noise = 8, 0.5
    x = rng.normal(size=(1, p))
    y = np.array([[1.5]])
    mu0 = 0.3 * rng.normal(size=p)
    a = rng.normal(size=(p, p))
    cov0 = 0.05 * (a @ a.T / p + 0.5 * np.eye(p))

    loglik = _log_likelihood(_quadratic, "gaussian", noise)
    g = _cubature_expectation(lambda th: jax.grad(loglik)(th, jnp.asarray(x), jnp.asarray(y)), mu0, cov0)
    G = _cubature_expectation(lambda th: jax.hessian(loglik)(th, jnp.asarray(x), jnp.asarray(y)), mu0, cov0)
    prec_exact = np.linalg.inv(cov0) - G  # Eq. 10
    mu_exact = mu0 + np.linalg.solve(prec_exact, g)  # Eq. 9

    # Self-check of the cubature rule on a degree-3 moment: E[(v.theta)^3] in closed form.
    v = rng.normal(size=p)
    m, s2 = v @ mu0, v @ cov0 @ v
    np.testing.assert_allclose(_cubature_expectation(lambda th: (jnp.asarray(v) @ th) ** 3, mu0, cov0),
                               m**3 + 3 * m * s2, rtol=1e-12)

    sizes, n_seeds = (16, 1024), 16
    state0 = FullCovState(jnp.asarray(mu0), jnp.asarray(cov0))
    rms = []
    for n_samples in sizes:
        config = make_config(_quadratic, "gaussian", "fc", 1, "bong", "mc_hess", 1, n_samples)
        errors = []
        for seed in range(n_seeds):
            state = run_filter(config, state0, x, y, Hyperparameters(noise, 1.0, 0.0), key=jax.random.PRNGKey(seed))
            prec = np.linalg.inv(np.asarray(state.cov))
            errors.append(np.sum((np.asarray(state.mean) - mu_exact) ** 2) / np.sum((mu_exact - mu0) ** 2)
                          + np.sum((prec - prec_exact) ** 2) / np.sum((prec_exact - np.linalg.inv(cov0)) ** 2))
        rms.append(np.sqrt(np.mean(errors)))
    # M grows 64-fold: the error should shrink about 8-fold (slope -1/2 in log-log).
    slope = np.log(rms[1] / rms[0]) / np.log(sizes[1] / sizes[0])
    assert rms[1] < 0.05
    assert -0.75 < slope < -0.3, (rms, slope)


# --------------------------------------------------------------------------------------
# 4. Proposition 4.1: the conjugate linear-Gaussian model
# --------------------------------------------------------------------------------------

D_IN, C_OUT = 5, 2


def _linear_multi(theta, x):
    """``f(x, theta) = x Theta`` with ``Theta = theta.reshape(D, C)``: y ~ N(f, diag(r))."""
    return x @ theta.reshape(D_IN, C_OUT)


def _linear_problem(n=12, seed=0, d=D_IN):
    rng = np.random.default_rng(seed)
    p = d * C_OUT
    X = rng.normal(size=(n, d))
    Y = X @ rng.normal(size=(d, C_OUT)) + 0.5 * rng.normal(size=(n, C_OUT))
    a = rng.normal(size=(p, p))
    cov0 = a @ a.T / p + 0.3 * np.eye(p)  # non-isotropic, correlated prior
    return X, Y, rng.normal(size=p), cov0, np.array([0.3, 0.8])


def _design(x, d=D_IN):
    """Rows of ``H`` for one input: ``f_c = sum_d x_d theta[d C + c]``."""
    return np.kron(x[None, :], np.eye(C_OUT)).reshape(C_OUT, d * C_OUT)


def _batch_posterior(X, Y, mean0, cov0, noise, d=D_IN):
    """Natural parameters accumulated over all rows (App. C Eq. 36): the exact posterior."""
    prec = np.linalg.inv(cov0)
    eta = prec @ mean0
    r_inv = np.diag(1.0 / noise)
    for x, y in zip(X, Y):
        H = _design(x, d)
        prec = prec + H.T @ r_inv @ H
        eta = eta + H.T @ r_inv @ y
    cov = np.linalg.inv(prec)
    return cov @ eta, cov


ORDERINGS = {
    "in-order-batch1": (None, 1),
    "reversed-batch1": ("reverse", 1),
    "shuffled-batch4": ("shuffle", 4),
    "shuffled-batch5-ragged": ("shuffle", 5),
    "one-batch": (None, 12),
}


@pytest.mark.parametrize("ordering", list(ORDERINGS))
def test_prop_4_1_fc_posterior_is_exact_for_any_order_and_batching(ordering, x64):
    X, Y, mean0, cov0, noise = _linear_problem()
    perm_kind, batch_size = ORDERINGS[ordering]
    perm = np.arange(len(X))
    if perm_kind == "reverse":
        perm = perm[::-1]
    elif perm_kind == "shuffle":
        perm = np.random.default_rng(1).permutation(len(X))
    _, state = _run(_linear_multi, "gaussian", "fc", FullCovState(jnp.asarray(mean0), jnp.asarray(cov0)),
                    X[perm], Y[perm], Hyperparameters(noise, 1.0, 0.0), batch_size=batch_size)
    mu, cov = _batch_posterior(X, Y, mean0, cov0, noise)
    _close(state.mean, mu)
    _close(state.cov, cov)
    # The same statement in natural parameters (App. C): eta and Lambda are sums of
    # per-observation statistics.
    _close(np.linalg.solve(state.cov, state.mean), np.linalg.solve(cov, mu))


def test_prop_4_1_natural_parameter_increment_is_independent_of_the_belief(x64):
    # Eq. 36: each BONG step adds (H^T R^-1 y, H^T R^-1 H) to (eta, Lambda) whatever the
    # prior; checked step by step, from two different (non-isotropic) beliefs and after
    # a predict step with gamma < 1, q > 0 (which changes the prior, not the increment).
    X, Y, mean0, cov0, noise = _linear_problem(n=4, seed=3)
    config = make_config(_linear_multi, "gaussian", "fc", 1, "bong", "lin_hess")
    gamma, q = 0.9, 0.05
    for cov_start in (cov0, np.diag(np.linspace(0.2, 3.0, cov0.shape[0]))):
        state = FullCovState(jnp.asarray(mean0), jnp.asarray(cov_start))
        for x, y in zip(X, Y):
            prior_mean = gamma * np.asarray(state.mean)
            prior_cov = gamma**2 * np.asarray(state.cov) + q * np.eye(len(mean0))
            state = run_filter(config, state, x[None], y[None], Hyperparameters(noise, gamma, q))
            H = _design(x)
            prec, prior_prec = np.linalg.inv(np.asarray(state.cov)), np.linalg.inv(prior_cov)
            _close(prec - prior_prec, H.T @ np.diag(1 / noise) @ H, rtol=1e-7)
            _close(prec @ np.asarray(state.mean) - prior_prec @ prior_mean, H.T @ (y / noise), rtol=1e-7)


def test_prop_4_1_dlr_is_exact_while_statistics_fit_in_rank(x64):
    # DLR(R) with W_0 = 0 holds T C rank-one statistics exactly when T C <= R < P: LO-FI's
    # projection then discards nothing (LO-FI Eq. 41 holds with equality for the whole
    # precision) and BONG-LIN-HESS-DLR is exact Bayes. With a smaller rank it is not.
    d = 8  # P = 16
    X, Y, mean0, _, noise = _linear_problem(n=5, seed=4, d=d)
    sigma0 = 0.8
    apply = lambda theta, x: x @ theta.reshape(d, C_OUT)  # noqa: E731
    mu, cov = _batch_posterior(X, Y, mean0, sigma0**2 * np.eye(d * C_OUT), noise, d=d)
    deviation = {}
    for rank in (10, 6):
        config = make_config(apply, "gaussian", "dlr", rank)
        state = config.family.init(jnp.asarray(mean0), jnp.asarray(sigma0))
        state = run_filter(config, state, X, Y, Hyperparameters(noise, 1.0, 0.0))
        precision = _dlr_precision(state)
        if rank == 10:
            _close(state.mean, mu)
            _close(precision, np.linalg.inv(cov))
        deviation[rank] = np.abs(precision - np.linalg.inv(cov)).max() / np.abs(np.linalg.inv(cov)).max()
    assert deviation[6] > 1e-3  # the truncation is real below T C = 10


def test_prop_4_1_mc_hess_precision_exact_for_any_m(x64):
    # MC-HESS: the Hessian -H^T R^-1 H is the same at every draw, so the precision is
    # exact even with M = 1; the mean uses the sampled gradient H^T R^-1 (y - H theta_bar)
    # and reaches the exact posterior mean only as M grows (RMS error ~ M^-1/2).
    X, Y, mean0, cov0, noise = _linear_problem(n=6, seed=5)
    mu, cov = _batch_posterior(X, Y, mean0, cov0, noise)
    state0 = FullCovState(jnp.asarray(mean0), jnp.asarray(cov0))
    rms = {}
    for n_samples in (1, 64):
        config = make_config(_linear_multi, "gaussian", "fc", 1, "bong", "mc_hess", 1, n_samples)
        errors = []
        for seed in range(8):
            state = run_filter(config, state0, X, Y, Hyperparameters(noise, 1.0, 0.0), key=jax.random.PRNGKey(seed))
            _close(np.linalg.inv(np.asarray(state.cov)), np.linalg.inv(cov), rtol=1e-7)
            errors.append(np.sum((np.asarray(state.mean) - mu) ** 2))
        rms[n_samples] = np.sqrt(np.mean(errors))
    assert rms[1] > 1e-3  # the finite-M mean is genuinely not exact
    # A 64-fold increase of M divides the error by about 8.
    assert 4.0 < rms[1] / rms[64] < 16.0, rms


# --------------------------------------------------------------------------------------
# 5. BLR (I = 1, alpha = 1) = BONG for MC-HESS; diagonal MC-HESS steps (E.3.1, E.4.1)
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", ["fc", "fc_mom", "diag", "diag_mom"])
def test_blr_one_unit_step_is_bong_for_mc_hess(family, x64):
    spec = _mlp(3)
    X, Y = _stream("categorical", 3, 8, seed=14)
    config = make_config(spec.apply, "categorical", family, 1, "bong", "mc_hess", 1, 3)
    state0 = config.family.init(jnp.asarray(_init_mean(spec, 6)), jnp.asarray(0.2))
    hyper = Hyperparameters(1.0, 0.97, 1e-3, 1.0)
    key = jax.random.PRNGKey(8)
    _, bong = _run(spec.apply, "categorical", family, state0, X, Y, hyper, hessian="mc_hess", n_samples=3, key=key)
    blr_config, blr = _run(spec.apply, "categorical", family, state0, X, Y, hyper, algorithm="blr",
                           hessian="mc_hess", n_inner=1, n_samples=3, key=key)
    assert bool(blr_config.family.is_valid(blr))
    assert np.abs(np.asarray(bong.mean) - _init_mean(spec, 6)).max() > 1e-3
    _close(blr.mean, bong.mean, rtol=1e-9)
    _close(blr_config.family.covariance(blr), config.family.covariance(bong), rtol=1e-9)


@pytest.mark.parametrize("family", ["diag", "diag_mom"])
def test_bong_mc_hess_diag_families_match_appendix_e3_e4(family, x64):
    # diag:     sigma_t^-2 = sigma_{t|t-1}^-2 - diag(G),  mu_t = mu + sigma_t^2 g  (Eqs. 210-211)
    # diag_mom: sigma_t^2 = sigma^2 + sigma^4 diag(G),    mu_t = mu + sigma^2 g    (Eqs. 246-247)
    # with diag(G) ~ mean_m z_m * (hess(theta_m) z_m), one Rademacher probe per draw (E.3).
    spec, n_samples, gamma, q = _mlp(2), 4, 0.98, 1e-3
    X, Y = _stream("gaussian", 2, 8, seed=15)
    noise = np.array([0.6, 0.9])
    mean0, var0 = _init_mean(spec, 7), 0.04
    key = jax.random.PRNGKey(9)
    config = make_config(spec.apply, "gaussian", family, 1, "bong", "mc_hess", 1, n_samples)
    state0 = config.family.init(jnp.asarray(mean0), jnp.asarray(np.sqrt(var0)))
    state = run_filter(config, state0, X, Y, Hyperparameters(noise, gamma, q), key=key)

    loglik = _log_likelihood(spec.apply, "gaussian", noise)
    derivatives = _grads_and_hessians(loglik)
    mu, var = np.array(mean0), np.full(spec.n_params, var0)
    for t in range(len(X)):
        mu, var = gamma * mu, gamma**2 * var + q
        sample_key, probe_key = _draw_keys(key, t)
        z = np.asarray(jax.random.normal(sample_key, (n_samples, spec.n_params), jnp.float64))
        thetas = jnp.asarray(mu + z * np.sqrt(var))
        probes = np.asarray(jax.random.rademacher(probe_key, (n_samples, spec.n_params), jnp.float64))
        x, y = jnp.asarray(X[t : t + 1]), jnp.asarray(Y[t : t + 1])
        g, hess = (np.asarray(a) for a in derivatives(thetas, x, y))
        g = g.mean(0)
        diag_G = np.mean(probes * np.einsum("mij,mj->mi", hess, probes), axis=0)
        if family == "diag":
            var = 1.0 / (1.0 / var - diag_G)
            mu = mu + var * g
        else:
            mu, var = mu + var * g, var + var**2 * diag_G
        assert np.all(var > 0)
    _close(state.mean, mu)
    _close(state.var, var)
