"""R-VGA (``skbong.core._rvga``) against independent references (float64).

The references never call the 1-D reduction or the root finder under test:

* Bayesian linear regression in closed form (batch normal equations) for Theorem 2;
* ``scipy.integrate.quad`` for the 1-D expectations of Eqs. 56-57, and the paper's Eqs. 59-61
  typed in numpy, to check that the implicit scheme's output satisfies its fixed point;
* a direct minimisation (``scipy.optimize``) of ``KL(q || p(y | theta) q_{t-1})`` over
  ``(mu, chol P)`` with expectations on a 2-D tensor Gauss-Hermite grid in ``theta``
  (Algorithm 1 itself, not its stationarity conditions);
* the explicit scheme, Eqs. 30-31, with autodiff gradients and Hessians of
  ``log p(y | theta)`` averaged on the same 2-D grid, and skbong's BONG-MC-HESS-FC (the
  explicit R-VGA by Monte Carlo) with many draws;
* the EKF for logistic regression (Eq. 81) typed in numpy, against BONG-LIN-HESS-FC on the
  same linear-logit model, which the benchmark uses as its EKF.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, optimize
from scipy.special import expit

from skbong.core import (
    ExplicitRVGA,
    FullCovState,
    GaussHermite,
    Hyperparameters,
    ImplicitRVGA,
    InverseProbit,
    LinearGaussian,
    Logistic,
    make_config,
    run_filter,
    run_rvga,
)
from skbong.core._rvga import _scan

BETA = np.sqrt(8 / np.pi)


def _prior(d, seed, scale=1.0):
    """A non-isotropic prior ``N(mu_0, P_0)``."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(d, d))
    return rng.normal(size=d), scale * (A @ A.T / d + 0.5 * np.eye(d))


def _state(mean, cov):
    return FullCovState(jnp.asarray(mean, jnp.float64), jnp.asarray(cov, jnp.float64))


def _logistic_data(n, d, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (rng.random(n) < expit(X @ rng.normal(size=d))).astype(float)
    return X, y


def _gauss_moments(fn, mean, var):
    """``E[fn(a)]``, ``a ~ N(mean, var)``, by adaptive quadrature."""
    sd = np.sqrt(var)
    value, _ = integrate.quad(lambda z: fn(mean + sd * z) * np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi),
                              -np.inf, np.inf, epsabs=1e-14, epsrel=1e-13, limit=200)
    return value


def _grid_2d(mean, cov, n=100):
    """Tensor Gauss-Hermite nodes and weights of ``N(mean, cov)`` in 2-D."""
    z, w = np.polynomial.hermite_e.hermegauss(n)
    w = w / w.sum()
    Z = np.stack(np.meshgrid(z, z, indexing="ij"), -1).reshape(-1, 2)
    W = np.outer(w, w).reshape(-1)
    return mean + Z @ np.linalg.cholesky(cov).T, W


def _log_sigmoid_lik(theta, x, y):
    a = theta @ x
    return y * jax.nn.log_sigmoid(a) + (1 - y) * jax.nn.log_sigmoid(-a)


def _close(actual, expected, rtol):
    expected = np.asarray(expected)
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=rtol, atol=rtol * np.abs(expected).max())


# --------------------------------------------------------------------------------------
# 1. Theorem 2: linear-Gaussian R-VGA (implicit and explicit) = Kalman filter
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", [ImplicitRVGA(), ExplicitRVGA()], ids=["implicit", "explicit"])
def test_linear_gaussian_rvga_is_exact_posterior(scheme, x64):
    d, n, noise = 4, 30, 0.3
    mean0, cov0 = _prior(d, 1)
    rng = np.random.default_rng(2)
    X = rng.normal(size=(n, d))
    y = X @ rng.normal(size=d) + np.sqrt(noise) * rng.normal(size=n)
    for stop in (1, 7, n):  # the filter equals the batch posterior after every prefix
        state = run_rvga(scheme, LinearGaussian(), _state(mean0, cov0), X[:stop], y[:stop], noise)
        precision = np.linalg.inv(cov0) + X[:stop].T @ X[:stop] / noise
        cov = np.linalg.inv(precision)
        _close(state.cov, cov, 1e-9)
        _close(state.mean, cov @ (np.linalg.solve(cov0, mean0) + X[:stop].T @ y[:stop] / noise), 1e-9)


def test_linear_gaussian_new_noise_does_not_recompile(x64):
    mean0, cov0 = _prior(3, 0)
    X, y = np.ones((5, 3)), np.arange(5.0)
    run_rvga(ImplicitRVGA(), LinearGaussian(), _state(mean0, cov0), X, y, 0.5)
    before = _scan._cache_size()
    run_rvga(ImplicitRVGA(), LinearGaussian(), _state(mean0, cov0), X, y, 2.0)
    assert _scan._cache_size() == before


# --------------------------------------------------------------------------------------
# 2. The implicit scheme's output satisfies its fixed point and minimises the KL
# --------------------------------------------------------------------------------------


def _one_step_at_a_time(scheme, model, mean0, cov0, X, y):
    """The beliefs ``q_0 .. q_N`` of a run, one ``run_rvga`` call per row."""
    beliefs = [(np.asarray(mean0), np.asarray(cov0))]
    for x_t, y_t in zip(X, y):
        state = run_rvga(scheme, model, _state(*beliefs[-1]), x_t[None], np.array([y_t]))
        beliefs.append((np.asarray(state.mean), np.asarray(state.cov)))
    return beliefs


@pytest.mark.parametrize("prior_scale", [0.3, 3.0])
def test_implicit_gauss_hermite_satisfies_eqs_3_4(prior_scale, x64):
    """Eqs. 3-4 with ``E_{q_t}`` by adaptive quadrature, at each step of a stream."""
    d = 3
    X, y = _logistic_data(12, d, seed=4)
    mean0, cov0 = _prior(d, 5, prior_scale)
    beliefs = _one_step_at_a_time(ImplicitRVGA(), Logistic(GaussHermite(160)), mean0, cov0, X, y)
    for (mu0, P0), (mu, P), x, label in zip(beliefs[:-1], beliefs[1:], X, y):
        alpha, v = x @ mu, x @ P @ x
        e_sigma = _gauss_moments(expit, alpha, v)
        e_dsigma = _gauss_moments(lambda a: expit(a) * (1 - expit(a)), alpha, v)
        _close(mu, mu0 + P0 @ x * (label - e_sigma), 1e-9)  # Eq. 3 with Eq. 56
        _close(np.linalg.inv(P), np.linalg.inv(P0) + e_dsigma * np.outer(x, x), 1e-9)  # Eq. 4 with Eq. 57
    assert np.abs(beliefs[-1][0] - mean0).max() > 0.1


@pytest.mark.parametrize("prior_scale", [0.3, 30.0])
def test_implicit_inverse_probit_satisfies_eqs_59_61(prior_scale, x64):
    """The paper's R-VGA for logistic regression, Eqs. 59-61, at each step of a stream."""
    d = 4
    X, y = _logistic_data(15, d, seed=6)
    mean0, cov0 = _prior(d, 7, prior_scale)
    beliefs = _one_step_at_a_time(ImplicitRVGA(), Logistic(InverseProbit()), mean0, cov0, X, y)
    for (mu0, P0), (mu, P), x, label in zip(beliefs[:-1], beliefs[1:], X, y):
        k = BETA / np.sqrt(x @ P @ x + BETA**2)  # Eq. 59, under q_t
        s = expit(k * (x @ mu))
        _close(mu, mu0 + P0 @ x * (label - s), 1e-9)  # Eq. 60
        _close(np.linalg.inv(P), np.linalg.inv(P0) + k * s * (1 - s) * np.outer(x, x), 1e-9)  # Eq. 61


@pytest.mark.parametrize("case", [(1.0, 0.5), (0.0, 4.0)], ids=["y1-narrow", "y0-wide"])
def test_implicit_step_minimises_the_kl_of_algorithm_1(case, x64):
    """``q_t = argmin KL(q || p(y_t | theta) q_{t-1})`` over all 2-D Gaussians (Algorithm 1)."""
    label, prior_scale = case
    mean0, cov0 = _prior(2, 8, prior_scale)
    x = np.array([1.3, -0.7])
    prec0 = np.linalg.inv(cov0)
    log_lik = jax.jit(jax.vmap(_log_sigmoid_lik, (0, None, None)))

    def objective(params):
        mean = params[:2]
        chol = np.array([[np.exp(params[2]), 0.0], [params[3], np.exp(params[4])]])
        cov = chol @ chol.T
        thetas, weights = _grid_2d(mean, cov)
        expected = weights @ np.asarray(log_lik(jnp.asarray(thetas), x, label))
        kl = 0.5 * (np.trace(prec0 @ cov) + (mean - mean0) @ prec0 @ (mean - mean0) - 2
                    + np.linalg.slogdet(cov0)[1] - np.linalg.slogdet(cov)[1])
        return kl - expected

    chol0 = np.linalg.cholesky(cov0)
    start = np.array([*mean0, np.log(chol0[0, 0]), chol0[1, 0], np.log(chol0[1, 1])])
    best = optimize.minimize(objective, start, method="BFGS", options={"gtol": 1e-11, "maxiter": 500}).x
    chol = np.array([[np.exp(best[2]), 0.0], [best[3], np.exp(best[4])]])

    state = run_rvga(ImplicitRVGA(), Logistic(GaussHermite(80)), _state(mean0, cov0), x[None], np.array([label]))
    _close(state.mean, best[:2], 1e-6)
    _close(state.cov, chol @ chol.T, 1e-6)


def test_implicit_solver_handles_extreme_priors(x64):
    """The bracketed root finder converges where the paper reports hybrid Powell struggling
    (large ``alpha_0``, ``v_0``; App. 9.5): Eqs. 64 and 66 hold to rounding."""
    rng = np.random.default_rng(9)
    n = 400
    alpha0 = rng.choice([-1, 1], n) * 10 ** rng.uniform(-3, 3, n)
    v0 = 10 ** rng.uniform(-4, 6, n)
    labels = rng.integers(0, 2, n).astype(float)
    scheme, model = ImplicitRVGA(), Logistic(InverseProbit())
    alpha, v = jax.jit(jax.vmap(lambda a, b, c: scheme.solve(model, a, b, c, 1.0)))(alpha0, v0, labels)
    alpha, v = np.asarray(alpha), np.asarray(v)
    k = BETA / np.sqrt(v + BETA**2)
    s = expit(alpha * k)
    # Eq. 64 relative to the width v_0 of its bracket; Eq. 66 relative to v.
    assert np.abs(alpha + v0 * s - alpha0 - v0 * labels).max() <= 1e-11 * np.maximum(v0, np.abs(alpha0)).max()
    np.testing.assert_allclose(v, v0 / (1 + v0 * k * s * (1 - s)), rtol=1e-11)
    assert np.all((v > 0) & (v <= v0))


# --------------------------------------------------------------------------------------
# 3. The explicit scheme: dense reference, BONG-MC-HESS-FC; EKF setup of the benchmark
# --------------------------------------------------------------------------------------


def _logit_pair(theta, x):
    """Two-class logits ``[0, x^T theta]``: softmax gives ``[1 - sigma(a), sigma(a)]``."""
    a = x @ theta
    return jnp.stack([jnp.zeros_like(a), a], axis=-1)


def test_explicit_gauss_hermite_is_eqs_30_31(x64):
    """Eqs. 30-31 with autodiff gradient and Hessian averaged on a 2-D grid under q_{t-1}."""
    X, y = _logistic_data(10, 2, seed=10)
    mean0, cov0 = _prior(2, 11, 2.0)
    grad_hess = jax.jit(jax.vmap(lambda th, x, lab: (jax.grad(_log_sigmoid_lik)(th, x, lab),
                                                     jax.hessian(_log_sigmoid_lik)(th, x, lab)), (0, None, None)))
    mu, P = mean0.copy(), cov0.copy()
    for x, label in zip(X, y):
        thetas, weights = _grid_2d(mu, P)
        g, G = (np.tensordot(weights, np.asarray(a), 1) for a in grad_hess(jnp.asarray(thetas), x, label))
        P = np.linalg.inv(np.linalg.inv(P) - G)  # Eq. 31
        mu = mu + P @ g  # Eq. 30
    state = run_rvga(ExplicitRVGA(), Logistic(GaussHermite(100)), _state(mean0, cov0), X, y)
    _close(state.mean, mu, 1e-9)
    _close(state.cov, P, 1e-9)


def test_explicit_agrees_with_bong_mc_hess_fc(x64):
    """BONG-MC-HESS-FC is the explicit R-VGA by Monte Carlo: one step from the same beliefs,
    with M = 40,000 draws, agrees with the quadrature to Monte-Carlo accuracy."""
    d, n_samples = 3, 40_000
    X, y = _logistic_data(4, d, seed=12)
    mean0, cov0 = _prior(d, 13, 1.5)
    config = make_config(_logit_pair, "categorical", "fc", 1, "bong", "mc_hess", 1, n_samples)
    hyper = Hyperparameters(1.0, 1.0, 0.0, 1.0)
    belief = _state(mean0, cov0)
    for t, (x, label) in enumerate(zip(X, y)):
        mc = run_filter(config, belief, x[None], np.eye(2)[[int(label)]], hyper, key=jax.random.PRNGKey(t))
        belief = run_rvga(ExplicitRVGA(), Logistic(GaussHermite(80)), belief, x[None], np.array([label]))
        _close(mc.mean, belief.mean, 1e-2)
        _close(mc.cov, belief.cov, 1e-2)


def test_bong_lin_hess_fc_on_logit_pair_is_eq_81(x64):
    """The benchmark's EKF: BONG-LIN-HESS-FC on the two-class logits is the paper's Eq. 81."""
    X, y = _logistic_data(20, 3, seed=14)
    mean0, cov0 = _prior(3, 15, 2.0)
    mu, P = mean0.copy(), cov0.copy()
    for x, label in zip(X, y):
        r = expit(x @ mu) * (1 - expit(x @ mu))
        new_P = P - np.outer(P @ x, P @ x) / (1 / r + x @ P @ x)
        mu, P = mu + new_P @ x * (label - expit(x @ mu)), new_P
    config = make_config(_logit_pair, "categorical", "fc", 1, "bong", "lin_hess")
    state = run_filter(config, _state(mean0, cov0), X, np.eye(2)[y.astype(int)], Hyperparameters(1.0, 1.0, 0.0, 1.0))
    _close(state.mean, mu, 1e-9)
    _close(state.cov, P, 1e-9)


def test_implicit_and_explicit_differ_on_logistic_data(x64):
    """Away from the linear-Gaussian case the schemes are different algorithms (Sec. 4.2)."""
    X, y = _logistic_data(30, 3, seed=16)
    mean0, cov0 = _prior(3, 17, 10.0)
    implicit = run_rvga(ImplicitRVGA(), Logistic(), _state(mean0, cov0), X, y)
    explicit = run_rvga(ExplicitRVGA(), Logistic(), _state(mean0, cov0), X, y)
    assert np.abs(np.asarray(implicit.mean) - np.asarray(explicit.mean)).max() > 1e-2


def test_float32_runs_close_to_float64():
    X, y = _logistic_data(50, 5, seed=18)
    mean0, cov0 = _prior(5, 19, 3.0)
    single = run_rvga(ImplicitRVGA(), Logistic(), FullCovState(jnp.asarray(mean0, jnp.float32),
                                                               jnp.asarray(cov0, jnp.float32)), X, y)
    assert single.mean.dtype == jnp.float32
    with jax.enable_x64(True):
        double = run_rvga(ImplicitRVGA(), Logistic(), _state(mean0, cov0), X, y)
    _close(single.mean, double.mean, 1e-3)
    _close(single.cov, double.cov, 1e-3)


# --------------------------------------------------------------------------------------
# 4. Bad inputs fail clearly
# --------------------------------------------------------------------------------------


def _call(**overrides):
    mean0, cov0 = _prior(3, 0)
    args = dict(scheme=ImplicitRVGA(), model=Logistic(), state=_state(mean0, cov0), X=np.ones((4, 3)),
                y=np.array([0.0, 1.0, 1.0, 0.0]), obs_noise=1.0)
    args.update(overrides)
    return run_rvga(args["scheme"], args["model"], args["state"], args["X"], args["y"], args["obs_noise"])


@pytest.mark.parametrize("overrides, error, match", [
    (dict(scheme="implicit"), TypeError, "scheme must be"),
    (dict(model="logistic"), TypeError, "model must be"),
    (dict(state=(np.zeros(3), np.eye(3))), TypeError, "FullCovState"),
    (dict(state=FullCovState(jnp.zeros(3), jnp.eye(2))), ValueError, r"cov \(d, d\)"),
    (dict(X=np.ones((4, 2))), ValueError, r"X must have shape \(N, 3\)"),
    (dict(y=np.zeros(5)), ValueError, r"y must have shape \(4,\)"),
    (dict(y=np.array([0.0, 1.0, 2.0, 0.0])), ValueError, "labels must be 0 or 1"),
    (dict(X=np.full((4, 3), np.nan)), ValueError, "finite"),
    (dict(model=LinearGaussian(), obs_noise=0.0), ValueError, "obs_noise must be a positive"),
    (dict(model=LinearGaussian(), obs_noise=np.ones(2)), ValueError, "obs_noise must be a positive"),
], ids=["scheme", "model", "state-type", "cov-shape", "X-shape", "y-shape", "labels", "nan", "noise-zero",
        "noise-vector"])
def test_bad_inputs_raise(overrides, error, match, x64):
    with pytest.raises(error, match=match):
        _call(**overrides)


def test_bad_values_raise_at_construction():
    with pytest.raises(ValueError, match="n_points must be a positive integer"):
        GaussHermite(0)
    with pytest.raises(ValueError, match="max_iter must be a positive integer"):
        ImplicitRVGA(max_iter=2.5)
    with pytest.raises(TypeError, match="integrals must be"):
        Logistic("probit")
