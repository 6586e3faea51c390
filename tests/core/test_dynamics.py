"""LO-FI's extras against the paper's algorithms written out densely, in float64.

* spherical LO-FI: Algorithms 6-7 (LO-FI Appendix F), with ``U``, ``lambda`` and ``eta``
  kept explicitly and the SVD of Eqs. 115-116;
* covariance inflation: Eqs. 79-81 (Bayesian), 84-86 (simple), 89-91 (hybrid) on a dense
  precision, with the latent prior of Eqs. 75-77 run as a recursion;
* the online noise estimate of Eq. 66 around a dense extended Kalman filter;
* dynamics that vary over time: a dense EKF with ``gamma_t`` and ``q_t`` per step.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from skbong.core import (
    Dynamics,
    Hyperparameters,
    LatentPrior,
    LinearizedGaussian,
    init_sweep,
    belief_is_valid,
    filter_posterior,
    make_config,
    run_filter,
    run_sweep,
    trace_count,
)
from skbong.core._dynamics import noise_scale

N_IN, N_HIDDEN = 2, 3


def network(n_out):
    """A small tanh network ``theta -> f(theta, x)`` of ``P = 3 N_HIDDEN + 3 + N_HIDDEN n_out``."""
    n_first = N_IN * N_HIDDEN + N_HIDDEN

    def apply(theta, x):
        w1 = theta[: N_IN * N_HIDDEN].reshape(N_IN, N_HIDDEN)
        b1 = theta[N_IN * N_HIDDEN : n_first]
        w2 = theta[n_first:].reshape(N_HIDDEN, n_out)
        return jnp.tanh(x @ w1 + b1) @ w2

    return apply, n_first + N_HIDDEN * n_out


def stream(n_rows, n_out, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, N_IN))
    Y = np.stack([np.sin(X[:, 0] + k) + 0.3 * X[:, 1] for k in range(n_out)], axis=1)
    return X, Y + 0.2 * rng.normal(size=Y.shape)


def dense_ekf_update(apply, mean, cov, x, y, obs_noise):
    """One extended Kalman update (BONG-LIN-HESS-FC on a Gaussian likelihood)."""
    h = np.asarray(jax.jacfwd(lambda th: apply(th, x[None])[0])(mean))
    innovation = h @ cov @ h.T + np.diag(np.broadcast_to(obs_noise, (h.shape[0],)))
    gain = np.linalg.solve(innovation, h @ cov).T
    residual = y - np.asarray(apply(mean, x[None])[0])
    return mean + gain @ residual, cov - gain @ innovation @ gain.T


def dense_batch_ekf_update(apply, mean, cov, xs, ys, obs_noise):
    """One extended Kalman update with the rows ``xs`` of a one-output network at once (a
    step of ``len(xs)`` rows, one linearisation point); also returns the residuals."""
    h = np.concatenate([np.asarray(jax.jacfwd(lambda th: apply(th, x[None])[0])(mean)) for x in xs])
    innovation = h @ cov @ h.T + obs_noise * np.eye(len(xs))
    gain = np.linalg.solve(innovation, h @ cov).T
    residual = ys[:, 0] - np.asarray(apply(mean, xs)[:, 0])
    return mean + gain @ residual, cov - gain @ innovation @ gain.T, residual


# ---------------------------------------------------------------------- spherical LO-FI
def test_spherical_lofi_matches_algorithms_6_and_7(x64):
    """``family="slr"``: mean and precision ``eta I + U Lambda^2 U^T`` of Algorithms 6-7."""
    apply, n_params = network(2)
    X, Y = stream(12, 2)
    rank, sigma0, obs_noise, decay, q = 3, 0.7, 0.3, 0.98, 0.01
    mean0 = np.random.default_rng(1).normal(scale=0.5, size=n_params)

    mean, eta = mean0.copy(), sigma0**-2
    u, lam = np.zeros((n_params, rank)), np.zeros(rank)
    for x, y in zip(X, Y):
        # Algorithm 6: predict (Eqs. 108-110).
        mean = decay * mean
        lam = np.sqrt(decay**2 * lam**2 / ((decay**2 + q * eta) * (decay**2 + q * eta + q * lam**2)))
        eta = eta / (decay**2 + q * eta)
        # Algorithm 7: update with the full SVD (Eqs. 114-116).
        h = np.asarray(jax.jacfwd(lambda th: apply(th, x[None])[0])(mean))
        a_t = h.T / np.sqrt(obs_noise)  # H^T A^T with A^T = chol(R^{-1})
        w_ext = np.concatenate([u * lam, a_t], axis=1)
        residual = y - np.asarray(apply(mean, x[None])[0])
        inner = np.linalg.solve(eta * np.eye(w_ext.shape[1]) + w_ext.T @ w_ext, w_ext.T)
        grad = h.T @ residual / obs_noise
        mean = mean + (grad - w_ext @ (inner @ grad)) / eta
        left, singular, _ = np.linalg.svd(w_ext, full_matrices=False)
        u, lam = left[:, :rank], singular[:rank]
    precision = eta * np.eye(n_params) + (u * lam**2) @ u.T

    config = make_config(apply, "gaussian", "slr", rank)
    state = config.family.init(jnp.asarray(mean0), jnp.asarray(sigma0))
    state = run_filter(config, state, X, Y, Hyperparameters(obs_noise, decay, q))
    np.testing.assert_allclose(state.mean, mean, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(state.diag_precision, eta, rtol=1e-11)
    np.testing.assert_allclose(np.diag(state.diag_precision) + state.low_rank @ state.low_rank.T, precision,
                               rtol=1e-9, atol=1e-9)


def test_spherical_family_refuses_plain_steps():
    apply, _ = network(1)
    for algorithm in ("bog", "bbb"):
        with pytest.raises(ValueError, match="spherical"):
            make_config(apply, "gaussian", "slr", 2, algorithm)


# ---------------------------------------------------------------------------- inflation
def dense_inflate(kind, alpha, mean, precision, latent_mean, latent_precision):
    """LO-FI Eqs. 79-81, 84-86 and 89-91 on a dense precision."""
    eye = np.eye(mean.shape[0])
    if kind == "simple":
        return mean, precision / (1 + alpha)
    inflated = precision / (1 + alpha) + alpha * latent_precision / (1 + alpha) * eye
    if kind == "hybrid":
        return mean, inflated
    pull = np.linalg.solve(inflated, latent_mean - mean)
    return mean + alpha * latent_precision / (1 + alpha) * pull, inflated


@pytest.mark.parametrize("kind", ["bayesian", "simple", "hybrid"])
@pytest.mark.parametrize("family,rank", [("fc", 1), ("dlr", 30)])
def test_inflated_filter_matches_dense_recursion(kind, family, rank, x64):
    """Inflate, predict, update, step after step: a filter with inflation against the dense
    recursion, the latent prior advanced by Eq. 76 (the filter uses its closed form). DLR
    of rank >= P keeps the whole precision, so it must agree as well."""
    apply, n_params = network(1)
    X, Y = stream(10, 1, seed=2)
    sigma0, obs_noise, decay, q, alpha = 0.8, 0.2, 0.97, 0.02, 0.3
    mean0 = np.random.default_rng(3).normal(scale=0.5, size=n_params)

    mean, cov = mean0.copy(), sigma0**2 * np.eye(n_params)
    latent_mean, latent_precision = mean0.copy(), sigma0**-2
    for x, y in zip(X, Y):
        mean, precision = dense_inflate(kind, alpha, mean, np.linalg.inv(cov), latent_mean, latent_precision)
        mean, cov = decay * mean, decay**2 * np.linalg.inv(precision) + q * np.eye(n_params)
        latent_mean, latent_precision = decay * latent_mean, 1 / (decay**2 / latent_precision + q)
        mean, cov = dense_ekf_update(apply, mean, cov, x, y, obs_noise)

    config = make_config(apply, "gaussian", family, rank, dynamics=Dynamics(inflation=kind))
    state = config.family.init(jnp.asarray(mean0), jnp.asarray(sigma0))
    hyper = Hyperparameters(obs_noise, decay, q, inflation=alpha)
    state = run_filter(config, state, X, Y, hyper, latent_prior=LatentPrior(mean0, sigma0**-2))
    np.testing.assert_allclose(state.mean, mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(config.family.covariance(state), cov, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("kind", ["simple", "hybrid"])
def test_inflation_acts_per_row_in_steps_of_several_rows(kind, x64):
    """In steps of three rows, inflation by ``1 + alpha`` per row: the dense recursion
    inflates three times (the latent prior stays put without dynamics), then makes one
    update with the three rows. Once per step, a stream's forgetting depended on
    ``batch_size`` (a probe: x2.55, x1.27 and x1.13 over 94 rows at batch sizes 1, 4, 8)."""
    apply, n_params = network(1)
    X, Y = stream(12, 1, seed=4)
    sigma0, obs_noise, alpha = 0.8, 0.2, 0.3
    mean0 = np.random.default_rng(5).normal(scale=0.5, size=n_params)
    mean, cov = mean0.copy(), sigma0**2 * np.eye(n_params)
    for start in range(0, 12, 3):
        precision = np.linalg.inv(cov)
        for _ in range(3):
            mean, precision = dense_inflate(kind, alpha, mean, precision, mean0, sigma0**-2)
        cov = np.linalg.inv(precision)
        rows = slice(start, start + 3)
        mean, cov, _ = dense_batch_ekf_update(apply, mean, cov, X[rows], Y[rows], obs_noise)

    config = make_config(apply, "gaussian", "fc", dynamics=Dynamics(inflation=kind))
    state = config.family.init(jnp.asarray(mean0), jnp.asarray(sigma0))
    hyper = Hyperparameters(obs_noise, 1.0, 0.0, inflation=alpha)
    state = run_filter(config, state, X, Y, hyper, batch_size=3, latent_prior=LatentPrior(mean0, sigma0**-2))
    np.testing.assert_allclose(state.mean, mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(state.cov, cov, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("family,rank", [("fc", 1), ("dlr", 30)])
def test_simple_inflation_and_dynamics_act_per_row_in_steps_of_several_rows(family, rank, x64):
    """Simple inflation with decay and process noise in steps of three rows: per row,
    ``Sigma <- gamma^2 (1 + alpha) Sigma + q I``, then one update with the three rows. The
    step inflated first and then added the rows' composed noise uninflated (a probe of the
    core: means 5.5e-3 and covariances 4.2e-4 from the per-row recursion)."""
    apply, n_params = network(1)
    X, Y = stream(12, 1, seed=4)
    sigma0, obs_noise, decay, q, alpha = 0.8, 0.2, 0.97, 0.02, 0.3
    mean0 = np.random.default_rng(5).normal(scale=0.5, size=n_params)
    mean, cov = mean0.copy(), sigma0**2 * np.eye(n_params)
    for start in range(0, 12, 3):
        for _ in range(3):
            mean, cov = decay * mean, decay**2 * (1 + alpha) * cov + q * np.eye(n_params)
        rows = slice(start, start + 3)
        mean, cov, _ = dense_batch_ekf_update(apply, mean, cov, X[rows], Y[rows], obs_noise)

    config = make_config(apply, "gaussian", family, rank, dynamics=Dynamics(inflation="simple"))
    state = config.family.init(jnp.asarray(mean0), jnp.asarray(sigma0))
    state = run_filter(config, state, X, Y, Hyperparameters(obs_noise, decay, q, inflation=alpha), batch_size=3)
    np.testing.assert_allclose(state.mean, mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(config.family.covariance(state), cov, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("family", ["fc", "fc_mom", "diag", "diag_mom", "dlr", "slr"])
@pytest.mark.parametrize("kind", ["bayesian", "simple", "hybrid"])
def test_inflate_every_family(family, kind, x64):
    """One inflation of each family's belief equals the dense formula applied to its
    covariance (every family's precision stays in the family under these maps)."""
    from skbong.core._dynamics import inflate

    apply, n_params = network(1)
    X, Y = stream(6, 1, seed=4)
    config = make_config(apply, "gaussian", family, 3)
    rng = np.random.default_rng(5)
    state = config.family.init(jnp.asarray(rng.normal(size=n_params)), jnp.asarray(0.5))
    state = run_filter(config, state, X, Y, Hyperparameters(0.5, 1.0, 0.0))
    latent_mean, latent_precision, alpha = rng.normal(size=n_params), 3.0, 0.4
    inflated = inflate(config.family, state, kind, alpha, jnp.asarray(latent_mean), latent_precision)
    mean, precision = dense_inflate(kind, alpha, np.asarray(state.mean),
                                    np.linalg.inv(config.family.covariance(state)), latent_mean, latent_precision)
    np.testing.assert_allclose(inflated.mean, mean, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(np.linalg.inv(config.family.covariance(inflated)), precision, rtol=1e-8, atol=1e-9)


def test_bayesian_inflation_needs_the_latent_prior():
    apply, n_params = network(1)
    config = make_config(apply, "gaussian", "dlr", 2, dynamics=Dynamics(inflation="bayesian"))
    state = config.family.init(jnp.zeros(n_params), jnp.asarray(1.0))
    with pytest.raises(ValueError, match="latent_prior"):
        run_filter(config, state, np.ones((2, N_IN)), np.ones((2, 1)), Hyperparameters(1.0, 1.0, 0.0))
    with pytest.raises(ValueError, match="schedule"):
        Dynamics(inflation="hybrid", process_noise=lambda t: 0.1)
    with pytest.raises(ValueError, match="Unknown inflation"):
        Dynamics(inflation="bayes")


# ------------------------------------------------------------------ online noise estimate
@pytest.mark.parametrize("n_out", [1, 2])
def test_adaptive_noise_matches_dense_recursion(n_out, x64):
    """The EKF with ``R_t`` from Eq. 66 (residuals at ``mu_{t|t-1}``, ``R_{t-1}`` used by
    step ``t``), and the estimate returned after the last row."""
    apply, n_params = network(n_out)
    X, Y = stream(15, n_out, seed=6)
    sigma0, noise0, rate = 0.6, 1.0, 0.2
    mean0 = np.random.default_rng(7).normal(scale=0.5, size=n_params)

    mean, cov, noise = mean0.copy(), sigma0**2 * np.eye(n_params), np.full(n_out, noise0)
    for k, (x, y) in enumerate(zip(X, Y)):
        residual = y - np.asarray(apply(mean, x[None])[0])
        mean, cov = dense_ekf_update(apply, mean, cov, x, y, noise)
        eps = max(rate, 1 / (k + 2))
        noise = (1 - eps) * noise + eps * residual**2

    config = make_config(apply, "gaussian", "fc", dynamics=Dynamics(adaptive_obs_noise=True))
    state = config.family.init(jnp.asarray(mean0), jnp.asarray(sigma0))
    # Two calls: the estimate and the step count carry over from one call to the next.
    hyper = Hyperparameters(noise0, 1.0, 0.0, obs_noise_rate=rate)
    state, estimate = run_filter(config, state, X[:6], Y[:6], hyper)
    state, estimate = run_filter(config, state, X[6:], Y[6:], hyper._replace(obs_noise=estimate), n_seen=6)
    np.testing.assert_allclose(estimate, noise, rtol=1e-9)
    np.testing.assert_allclose(state.mean, mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(state.cov, cov, rtol=1e-8, atol=1e-10)


def _repeats_keep(k, weight, rate):
    """What Eq. 66 keeps of ``R`` over ``weight`` repeats of a row after ``k`` rows, each
    repeat at ``eps = max(rate, 1 / (k + 2 + i))``; a fraction of a repeat, as the weighted
    running mean takes a fractional count, ``(k + 1 + i) / (k + 1 + i + f)`` while the
    running mean's ``eps`` exceeds ``rate``, else ``(1 - rate)^f``."""
    keep, i = 1.0, 0
    while weight - i > 0:
        part = min(1.0, weight - i)
        if 1 / (k + 2 + i) > rate:
            keep *= (k + 1 + i) / (k + 1 + i + part)
        else:
            keep *= (1 - rate) ** part
        i += 1
    return keep


def test_adaptive_noise_counts_row_weights_as_repeats(x64):
    """With row weights the EKF runs at ``R / w`` and Eq. 66 counts a row of weight ``w``
    as ``w`` repeats of its residual: a row of weight 0 leaves the estimate, one of weight
    1e-12 barely moves it (it moved it as a full row did)."""
    apply, n_params = network(1)
    X, Y = stream(12, 1, seed=6)
    weights = np.array([1.0, 2.0, 0.0, 1e-12, 0.5, 3.0, 1.0, 0.0, 1.5, 1.0, 0.25, 1.0])
    sigma0, noise0, rate = 0.6, 1.0, 0.2
    mean0 = np.random.default_rng(7).normal(scale=0.5, size=n_params)
    mean, cov, noise = mean0.copy(), sigma0**2 * np.eye(n_params), np.full(1, noise0)
    for k, (x, y, w) in enumerate(zip(X, Y, weights)):
        if w == 0:
            continue
        residual = y - np.asarray(apply(mean, x[None])[0])
        mean, cov = dense_ekf_update(apply, mean, cov, x, y, noise / w)
        keep = _repeats_keep(k, w, rate)
        noise = keep * noise + (1 - keep) * residual**2

    config = make_config(apply, "gaussian", "fc", dynamics=Dynamics(adaptive_obs_noise=True))
    state = config.family.init(jnp.asarray(mean0), jnp.asarray(sigma0))
    hyper = Hyperparameters(noise0, 1.0, 0.0, obs_noise_rate=rate)
    state, estimate = run_filter(config, state, X, Y, hyper, sample_weight=weights)
    np.testing.assert_allclose(estimate, noise, rtol=1e-9)
    np.testing.assert_allclose(state.mean, mean, rtol=1e-8, atol=1e-10)


def test_adaptive_noise_forgets_per_row_in_steps_of_several_rows(x64):
    """In steps of three rows the estimate moves as three rows of the step's mean squared
    residual would, each at its own ``eps``: ``obs_noise_rate`` is a rate per row at any
    ``batch_size`` (per step, it remembered three times as many rows)."""
    apply, n_params = network(1)
    X, Y = stream(15, 1, seed=6)
    sigma0, noise0, rate = 0.6, 1.0, 0.2
    mean0 = np.random.default_rng(7).normal(scale=0.5, size=n_params)
    mean, cov, noise = mean0.copy(), sigma0**2 * np.eye(n_params), np.full(1, noise0)
    for start in range(0, 15, 3):
        rows = slice(start, start + 3)
        mean, cov, residual = dense_batch_ekf_update(apply, mean, cov, X[rows], Y[rows], noise)
        keep = np.prod([1 - max(rate, 1 / (start + 2 + i)) for i in range(3)])
        noise = keep * noise + (1 - keep) * np.mean(residual**2)

    config = make_config(apply, "gaussian", "fc", dynamics=Dynamics(adaptive_obs_noise=True))
    state = config.family.init(jnp.asarray(mean0), jnp.asarray(sigma0))
    hyper = Hyperparameters(noise0, 1.0, 0.0, obs_noise_rate=rate)
    state, estimate = run_filter(config, state, X, Y, hyper, batch_size=3)
    np.testing.assert_allclose(estimate, noise, rtol=1e-9)
    np.testing.assert_allclose(state.mean, mean, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("batch_size", [1, 8, 16])
def test_adaptive_noise_at_rate_zero_is_the_running_mean_at_any_batch_size(batch_size, x64):
    """At ``obs_noise_rate=0`` Eq. 66 is the running mean ``(R_0 + sum e^2) / (N + 1)``. At a
    prior so narrow that the weights barely move, the residuals are the same in steps of any
    size, so the estimate must be too (a probe: 3.4877 in steps of 1, 3.126 of 8, 3.643 of
    16, each step keeping ``(1 - 1/(k + 2))^B`` of ``R``)."""
    apply, n_params = network(1)
    X, _ = stream(16, 1, seed=6)
    Y = np.concatenate([np.full((8, 1), 3.0), np.full((8, 1), 0.1)])  # large residuals first
    mean0 = np.random.default_rng(7).normal(scale=0.5, size=n_params)
    config = make_config(apply, "gaussian", "fc", dynamics=Dynamics(adaptive_obs_noise=True))
    state = config.family.init(jnp.asarray(mean0), jnp.asarray(1e-6))
    _, estimate = run_filter(config, state, X, Y, Hyperparameters(1.0, 1.0, 0.0), batch_size=batch_size)
    residual = Y - np.asarray(apply(jnp.asarray(mean0), jnp.asarray(X)))
    np.testing.assert_allclose(estimate, (1.0 + np.sum(residual**2)) / 17, rtol=1e-6)


def test_adaptive_noise_finds_the_noise_level():
    """On a long stationary linear-Gaussian stream the estimate approaches the true noise
    variance (plus the shrinking parameter uncertainty), from far too small and far too
    large starting values, with forgetting (``eps_min = 0.005``, about the last 400 rows)."""
    rng = np.random.default_rng(8)
    X = rng.normal(size=(3000, 4))
    y = X @ rng.normal(size=4) + 0.5 * rng.normal(size=3000)  # variance 0.25

    def apply(theta, x):
        return x @ theta[:, None]

    config = make_config(apply, "gaussian", "fc", dynamics=Dynamics(adaptive_obs_noise=True))
    for start in (0.001, 100.0):
        state = config.family.init(jnp.zeros(4), jnp.asarray(1.0))
        hyper = Hyperparameters(start, 1.0, 0.0, obs_noise_rate=0.005)
        _, estimate = run_filter(config, state, X, y[:, None], hyper)
        assert 0.21 < float(estimate[0]) < 0.29, (start, estimate)


def test_adaptive_noise_is_gaussian_only():
    with pytest.raises(ValueError, match="Gaussian"):
        make_config(lambda th, x: x, "categorical", "diag", dynamics=Dynamics(adaptive_obs_noise=True))


# ------------------------------------------------- normalised innovations (noise scale)
def _weighted_stream(n_out):
    """15 rows with weights (two of them zero) and an initial mean for :func:`network`."""
    apply, n_params = network(n_out)
    X, Y = stream(15, n_out, seed=9)
    weights = np.random.default_rng(3).uniform(0.5, 2.0, size=15)
    weights[[2, 9]] = 0.0
    return apply, n_params, X, Y, weights, np.random.default_rng(7).normal(scale=0.5, size=n_params)


@pytest.mark.parametrize("n_out", [1, 2])
def test_innovation_sum_matches_dense_ekf(n_out, x64):
    """The sum of ``e^T (h Sigma h^T + R / w)^{-1} e`` over the rows, each row scored at the
    belief before its update, over two calls (each returns its own sum), with row weights
    (some zero); the filter itself is the plain EKF at the fixed ``R``."""
    apply, n_params, X, Y, weights, mean0 = _weighted_stream(n_out)
    sigma0, noise = 0.6, 0.3
    mean, cov, total = mean0.copy(), sigma0**2 * np.eye(n_params), 0.0
    for x, y, w in zip(X, Y, weights):
        h = np.asarray(jax.jacfwd(lambda th: apply(th, x[None])[0])(mean))
        residual = y - np.asarray(apply(mean, x[None])[0])
        if w == 0:
            continue
        total += residual @ np.linalg.solve(h @ cov @ h.T + noise / w * np.eye(n_out), residual)
        mean, cov = dense_ekf_update(apply, mean, cov, x, y, noise / w)

    config = make_config(apply, "gaussian", "fc", dynamics=Dynamics(innovation_scale=True))
    state = config.family.init(jnp.asarray(mean0), jnp.asarray(sigma0))
    hyper = Hyperparameters(noise, 1.0, 0.0)
    state, first = run_filter(config, state, X[:6], Y[:6], hyper, sample_weight=weights[:6])
    state, second = run_filter(config, state, X[6:], Y[6:], hyper, n_seen=6, sample_weight=weights[6:])
    np.testing.assert_allclose(np.sum(first + second), total, rtol=1e-9)
    np.testing.assert_allclose(state.mean, mean, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("sweep", [False, True])
def test_innovation_window_holds_the_latest_steps_sums(sweep, x64):
    """``innovation_window=W``: per row of positive weight (one a step), the sum over the
    outputs of ``e^T (h Sigma h^T + R / w)^{-1} e`` at the belief before it and its weight
    ``w``, the latest ``W`` of them, oldest first, against a dense EKF; zeros in front while
    fewer were taken. A call given the window of the one before (``innovation_start``) goes
    on from it: two calls give the window of one over their rows, for a sweep's members too,
    and a member left out keeps its window."""
    apply, n_params, X, Y, weights, mean0 = _weighted_stream(2)
    sigma0, noise, window = 0.6, 0.3, 5
    mean, cov, steps = mean0.copy(), sigma0**2 * np.eye(n_params), []
    for x, y, w in zip(X, Y, weights):
        if w == 0:  # a row of weight zero is no step of the window
            continue
        h = np.asarray(jax.jacfwd(lambda th: apply(th, x[None])[0])(mean))
        residual = y - np.asarray(apply(mean, x[None])[0])
        steps.append((residual @ np.linalg.solve(h @ cov @ h.T + noise / w * np.eye(2), residual), w))
        mean, cov = dense_ekf_update(apply, mean, cov, x, y, noise / w)
    steps = np.array(steps)

    config = make_config(apply, "gaussian", "fc", dynamics=Dynamics(innovation_scale=True, innovation_window=window))
    state = config.family.init(jnp.asarray(mean0), jnp.asarray(sigma0))
    run = run_filter
    if sweep:
        state = jax.tree_util.tree_map(lambda a: jnp.stack([a, a]), state)
        run = run_sweep
    hyper = Hyperparameters(noise, 1.0, 0.0)
    fresh = state
    # rows 0-3 hold three of positive weight (row 2 weighs zero)
    state, _, first = run(config, state, X[:4], Y[:4], hyper, sample_weight=weights[:4])
    for member in first.reshape(-1, window, 2):
        np.testing.assert_allclose(member, np.vstack([np.zeros((2, 2)), steps[:3]]), rtol=1e-9)
    _, _, second = run(
        config, state, X[4:], Y[4:], hyper, n_seen=4, sample_weight=weights[4:], innovation_start=(None, None, first)
    )
    _, _, whole = run(config, fresh, X, Y, hyper, sample_weight=weights, batch_size=1)
    for member in (*second.reshape(-1, window, 2), *whole.reshape(-1, window, 2)):
        np.testing.assert_allclose(member, steps[-window:], rtol=1e-9)
    if sweep:  # the second member left out of the second call
        _, _, kept = run(
            config, state, X[4:], Y[4:], hyper, n_seen=4, sample_weight=weights[4:], active=np.array([True, False]),
            innovation_start=(None, None, first),
        )
        np.testing.assert_allclose(kept[0], steps[-window:], rtol=1e-9)
        np.testing.assert_allclose(kept[1], first[1], rtol=1e-9)
    with pytest.raises(ValueError, match="innovation_window"):
        Dynamics(innovation_window=5)


def test_an_empty_window_leaves_the_records_at_the_scale_of_all_the_rows(x64):
    """A window with no step of weight yet (a start without one) has no scale of its own:
    the first row is scored at the scale of the earlier rows' sums alone, as without a
    window, not at the scale before any row (1)."""
    apply, n_params, X, Y, weights, mean0 = _weighted_stream(1)
    hyper, record = Hyperparameters(0.3, 1.0, 0.0), LinearizedGaussian()
    start = (np.array([40.0]), np.asarray(10.0))  # noise_scale: 4^(10/11), about 3.5
    records = []
    for window in (None, 5):
        dynamics = Dynamics(innovation_scale=True, innovation_window=window)
        config = make_config(apply, "gaussian", "fc", dynamics=dynamics)
        state = config.family.init(jnp.asarray(mean0), jnp.asarray(0.6))
        records.append(run_filter(config, state, X[:1], Y[:1], hyper, record=record, innovation_start=start)[1])
    np.testing.assert_allclose(records[1], records[0], rtol=1e-12)


@pytest.mark.parametrize("n_out", [1, 2])
@pytest.mark.parametrize("sweep", [False, True])
def test_innovation_scale_records_use_the_scale_fitted_so_far(n_out, sweep, x64):
    """With ``innovation_scale`` each row is scored by the model whose prior covariance and
    noise are both scaled by ``c = (S / (C N))^(C N / (C N + 1))`` (1 before any weight),
    ``S`` and ``N`` the sums of the
    normalised squared innovations and of the row weights before it (earlier calls given
    by ``innovation_start``): ``N(f, c (diag(h Sigma h^T) + R))`` around a dense EKF;
    without ``innovation_start``, at ``c = 1``."""
    apply, n_params, X, Y, weights, mean0 = _weighted_stream(n_out)
    sigma0, noise = 0.6, 0.3
    mean, cov, terms, weight, expected, filter_scale = mean0.copy(), sigma0**2 * np.eye(n_params), 0.0, 0.0, [], []
    for x, y, w in zip(X, Y, weights):
        h = np.asarray(jax.jacfwd(lambda th: apply(th, x[None])[0])(mean))
        residual = y - np.asarray(apply(mean, x[None])[0])
        var = np.diag(h @ cov @ h.T) + noise
        filter_scale.append(-0.5 * np.sum(np.log(2 * np.pi * var) + residual**2 / var))
        count = n_out * weight
        var = (1.0 if count == 0 else (terms / count) ** (count / (count + 1))) * var
        expected.append(-0.5 * np.sum(np.log(2 * np.pi * var) + residual**2 / var))
        if w == 0:
            continue
        terms += residual @ np.linalg.solve(h @ cov @ h.T + noise / w * np.eye(n_out), residual)
        weight += w
        mean, cov = dense_ekf_update(apply, mean, cov, x, y, noise / w)

    config = make_config(apply, "gaussian", "fc", dynamics=Dynamics(innovation_scale=True))
    state = config.family.init(jnp.asarray(mean0), jnp.asarray(sigma0))
    hyper = Hyperparameters(noise, 1.0, 0.0)
    record = LinearizedGaussian()
    if sweep:  # two members, the same filter: each gets its own sums
        state = jax.tree_util.tree_map(lambda a: jnp.stack([a, a]), state)
        run = lambda *args, start, **kw: run_sweep(*args, innovation_start=start, **kw)  # noqa: E731
        lift = lambda a: np.stack([a, a])  # noqa: E731
    else:
        run = lambda *args, start, **kw: run_filter(*args, innovation_start=start, **kw)  # noqa: E731
        lift = lambda a: a  # noqa: E731
    state, first, _, first_sum = run(
        config, state, X[:6], Y[:6], hyper, record=record, sample_weight=weights[:6], start=(0.0, 0.0)
    )
    state, second, _, _ = run(
        config, state, X[6:], Y[6:], hyper, n_seen=6, record=record, sample_weight=weights[6:],
        start=(first_sum, lift(np.asarray(weights[:6].sum()))),
    )
    records = np.concatenate([first, second], axis=-1)
    for member in records.reshape(-1, 15):
        np.testing.assert_allclose(member, expected, rtol=1e-9)
    # Without a start the records stay the filter's own, at c = 1.
    fresh = config.family.init(jnp.asarray(mean0), jnp.asarray(sigma0))
    fresh = jax.tree_util.tree_map(lambda a: jnp.stack([a, a]), fresh) if sweep else fresh
    unscaled = run(config, fresh, X[:6], Y[:6], hyper, record=record, sample_weight=weights[:6], start=None)[1]
    np.testing.assert_allclose(unscaled.reshape(-1, 6)[0], filter_scale[:6], rtol=1e-9)


def test_noise_scale_pulls_log_c_towards_0_by_one_observation():
    """``noise_scale(S, N)``: ``c = (S / N)^(N / (N + 1))``, the likelihood's peak ``S / N``
    pulled in ``log c`` by one pseudo-observation at ``c = 1``: by the same factor from above
    and below, 1 with no observation, positive and finite when every innovation is 0, and
    the same on the host (numpy, float64) as in a traced scan (jnp)."""
    for count in (0.5, 1.0, 3.0, 150.0, 2000.0):
        for mean in (1e-4, 0.3, 1.0, 7.0):
            host = noise_scale(mean * count, count)
            assert host == pytest.approx(mean ** (count / (count + 1)), rel=1e-12)
            assert host * noise_scale(count / mean, count) == pytest.approx(1.0, rel=1e-12)
            traced = jax.jit(noise_scale)(jnp.asarray(mean * count), jnp.asarray(count))
            assert float(traced) == pytest.approx(host, rel=1e-5)
    assert noise_scale(0.0, 0.0) == 1.0 and float(jax.jit(noise_scale)(jnp.zeros(()), jnp.zeros(()))) == 1.0
    assert 0.0 < noise_scale(0.0, 10.0) < 1e-10
    assert 0.0 < float(jax.jit(noise_scale)(jnp.zeros(()), jnp.asarray(10.0))) < 1e-10


@pytest.mark.parametrize("family", ["fc", "diag", "dlr"])
def test_linearised_filter_is_invariant_under_a_common_scale(family, x64):
    """What ``BONGRegressor(obs_noise="calibrated")`` rests on: scaling the prior covariance and
    ``R`` by ``c`` leaves every mean unchanged, scales the covariance by ``c`` and divides
    the normalised innovations by ``c``."""
    apply, n_params = network(1)
    X, Y = stream(40, 1, seed=4)
    mean0 = np.random.default_rng(2).normal(scale=0.5, size=n_params)
    config = make_config(apply, "gaussian", family, rank=3, dynamics=Dynamics(innovation_scale=True))
    c = 7.0
    runs = [
        run_filter(
            config, config.family.init(jnp.asarray(mean0), jnp.asarray(0.5 * np.sqrt(scale))), X, Y,
            Hyperparameters(0.1 * scale, 1.0, 0.0),
        )
        for scale in (1.0, c)
    ]
    (plain, plain_sum), (scaled, scaled_sum) = runs
    np.testing.assert_allclose(scaled.mean, plain.mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(scaled_sum, plain_sum / c, rtol=1e-9)
    np.testing.assert_allclose(config.family.covariance(scaled), c * config.family.covariance(plain), rtol=1e-8, atol=1e-14)


# ------------------------------------------------------------ noise-scaled belief
def dense_ef_update(apply, mean, cov, x, y, obs_noise):
    """One BONG-LIN-EF-FC step (BONG Eqs. 27-28 on natural parameters): ``g = h^T R^-1 e``,
    ``Sigma'^-1 = Sigma^-1 + g g^T``, ``mu' = mu + Sigma' g``."""
    h = np.asarray(jax.jacfwd(lambda th: apply(th, x[None])[0])(mean))
    residual = y - np.asarray(apply(mean, x[None])[0])
    grad = h.T @ (residual / obs_noise)
    cov = np.linalg.inv(np.linalg.inv(cov) + np.outer(grad, grad))
    return mean + cov @ grad, cov


def test_noise_scaled_ef_belief_is_the_model_at_the_noise_estimate(x64):
    """``noise_scaled_belief`` with LIN-EF: each step is the EF step of the model whose noise
    is the estimate ``R_t`` (Eq. 66) and whose covariance is ``c_t = R_t / R_0`` times the
    belief held, written out densely; the belief held is the model's divided by ``c_t``,
    over two calls (the estimate carried, ``R_0`` fixed), and each row is scored by the
    model's linearised predictive ``N(f, h c_t Sigma h^T + R_t)``. Plain
    ``adaptive_obs_noise`` runs the same steps on the belief itself: different means."""
    apply, n_params = network(1)
    X, Y = stream(15, 1, seed=6)
    sigma0, reference, rate = 0.6, 0.05, 0.2
    mean0 = np.random.default_rng(7).normal(scale=0.5, size=n_params)
    mean, cov, noise, log_probs = mean0.copy(), sigma0**2 * np.eye(n_params), np.full(1, reference), []
    for k, (x, y) in enumerate(zip(X, Y)):
        scale = noise[0] / reference
        h = np.asarray(jax.jacfwd(lambda th: apply(th, x[None])[0])(mean))
        residual = y - np.asarray(apply(mean, x[None])[0])
        var = np.diag(h @ (scale * cov) @ h.T) + noise
        log_probs.append(-0.5 * np.sum(np.log(2 * np.pi * var) + residual**2 / var))
        mean, model_cov = dense_ef_update(apply, mean, scale * cov, x, y, noise)
        cov = model_cov / scale
        eps = max(rate, 1 / (k + 2))
        noise = (1 - eps) * noise + eps * residual**2

    dynamics = Dynamics(adaptive_obs_noise=True, noise_scaled_belief=True)
    config = make_config(apply, "gaussian", "fc", hessian="lin_ef", dynamics=dynamics)
    state = config.family.init(jnp.asarray(mean0), jnp.asarray(sigma0))
    hyper = Hyperparameters(reference, 1.0, 0.0, obs_noise_rate=rate, reference_obs_noise=reference)
    record = LinearizedGaussian()
    state, first, _, estimate = run_filter(config, state, X[:6], Y[:6], hyper, record=record)
    state, second, _, estimate = run_filter(
        config, state, X[6:], Y[6:], hyper._replace(obs_noise=estimate), n_seen=6, record=record
    )
    np.testing.assert_allclose(estimate, noise, rtol=1e-9)
    np.testing.assert_allclose(state.mean, mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(state.cov, cov, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(np.concatenate([first, second]), log_probs, rtol=1e-9)

    # filter_posterior: R_0 defaults to the first call's obs_noise; a call that goes on
    # passes the last estimate as obs_noise and the first call's value as R_0.
    kwargs = dict(hessian="lin_ef", family="fc", sigma0=sigma0, dynamics=dynamics, obs_noise_rate=rate)
    state, estimate = filter_posterior(apply, jnp.asarray(mean0), X[:6], Y[:6], obs_noise=reference, **kwargs)
    state, estimate = filter_posterior(
        apply, jnp.asarray(mean0), X[6:], Y[6:], obs_noise=estimate, reference_obs_noise=reference, state=state,
        n_seen=6, **kwargs
    )
    np.testing.assert_allclose(estimate, noise, rtol=1e-9)
    np.testing.assert_allclose(state.mean, mean, rtol=1e-8, atol=1e-10)

    plain = make_config(apply, "gaussian", "fc", hessian="lin_ef", dynamics=Dynamics(adaptive_obs_noise=True))
    adaptive, _ = run_filter(plain, plain.family.init(jnp.asarray(mean0), jnp.asarray(sigma0)), X, Y, hyper)
    assert np.max(np.abs(adaptive.mean - mean)) > 1e-2


@pytest.mark.parametrize("family", ["fc", "diag", "dlr"])
def test_noise_scaled_hessian_belief_is_the_fixed_noise_filter(family, x64):
    """A Hessian curvature scales as the prior (``J^T J / R``), so a noise-scaled belief
    is, step for step, the filter at the fixed ``R_0`` (two outputs)."""
    apply, n_params = network(2)
    X, Y = stream(20, 2, seed=3)
    mean0 = jnp.asarray(np.random.default_rng(5).normal(scale=0.5, size=n_params))
    scaled = make_config(apply, "gaussian", family, rank=3,
                         dynamics=Dynamics(adaptive_obs_noise=True, noise_scaled_belief=True))
    fixed = make_config(apply, "gaussian", family, rank=3)
    hyper = Hyperparameters(0.05, 1.0, 0.0, obs_noise_rate=0.1, reference_obs_noise=np.array([0.05, 0.2]))
    state, estimate = run_filter(scaled, scaled.family.init(mean0, jnp.asarray(0.6)), X, Y, hyper)
    reference = run_filter(fixed, fixed.family.init(mean0, jnp.asarray(0.6)), X, Y,
                           hyper._replace(obs_noise=np.array([0.05, 0.2])))
    assert np.all(estimate > 0.1)  # the estimate moved far from R_0; the steps did not follow it
    for a, b in zip(jax.tree_util.tree_leaves(state), jax.tree_util.tree_leaves(reference)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_noise_scaled_sweep_member_matches_single_filter(x64):
    """Members of a sweep (MC-EF on ``dlr``, each its own ``R_0`` and estimate) equal single filters."""
    apply, n_params = network(1)
    X, Y = stream(12, 1, seed=12)
    config = make_config(apply, "gaussian", "dlr", 3, hessian="mc_ef", n_mc_samples=4,
                         dynamics=Dynamics(adaptive_obs_noise=True, noise_scaled_belief=True))
    mean0 = jnp.asarray(np.random.default_rng(13).normal(scale=0.5, size=n_params))
    scales = np.array([0.3, 1.0])
    noises = np.array([0.1, 0.4])
    hypers = Hyperparameters(noises, 1.0, 0.0, obs_noise_rate=0.1, reference_obs_noise=noises)
    keys = jax.random.split(jax.random.PRNGKey(3), 2)
    for vectorize in (False, True):
        states, noises = run_sweep(config, init_sweep(config.family, mean0, scales), X, Y, hypers, keys=keys,
                                   vectorize=vectorize)
        for k in range(2):
            state, noise = run_filter(
                config, config.family.init(mean0, jnp.asarray(scales[k])), X, Y,
                Hyperparameters(hypers.obs_noise[k], 1.0, 0.0, obs_noise_rate=0.1,
                                reference_obs_noise=hypers.reference_obs_noise[k]),
                key=keys[k],
            )
            np.testing.assert_allclose(states.mean[k], state.mean, rtol=1e-8, atol=1e-10)
            np.testing.assert_allclose(noises[k], noise, rtol=1e-9)


def test_noise_scaled_belief_needs_the_noise_estimate():
    with pytest.raises(ValueError, match="needs adaptive_obs_noise"):
        Dynamics(noise_scaled_belief=True)


def test_innovation_scale_is_gaussian_only():
    with pytest.raises(ValueError, match="Gaussian"):
        make_config(lambda th, x: x, "categorical", "diag", dynamics=Dynamics(innovation_scale=True))
    with pytest.raises(ValueError, match="exclude each other"):
        Dynamics(adaptive_obs_noise=True, innovation_scale=True)


# --------------------------------------------------------------- time-varying dynamics
def test_schedules_match_dense_recursion(x64):
    """``gamma_t`` and ``q_t`` from callables of the row index, against a dense EKF with
    the same per-row values: in batches of two rows, both rows' predict steps in turn (the
    burst at row 7, the second of its step, included), then one update with both rows."""
    apply, n_params = network(1)
    X, Y = stream(12, 1, seed=9)
    sigma0, obs_noise = 0.7, 0.25
    mean0 = np.random.default_rng(10).normal(scale=0.5, size=n_params)

    def decay_at(t):
        return 1.0 - 0.01 * (t % 3)

    def noise_at(t):
        return jnp.where(t == 7, 0.5, 0.001 * t)

    mean, cov = mean0.copy(), sigma0**2 * np.eye(n_params)
    for t in range(0, 12, 2):
        for row in (t, t + 1):
            gamma, q = float(decay_at(row)), float(noise_at(row))
            mean, cov = gamma * mean, gamma**2 * cov + q * np.eye(n_params)
        # A step of two rows: one update with both rows' Jacobians, at one prior.
        mean, cov, _ = dense_batch_ekf_update(apply, mean, cov, X[t : t + 2], Y[t : t + 2], obs_noise)

    config = make_config(apply, "gaussian", "fc", dynamics=Dynamics(decay=decay_at, process_noise=noise_at))
    state = config.family.init(jnp.asarray(mean0), jnp.asarray(sigma0))
    state = run_filter(config, state, X, Y, Hyperparameters(obs_noise, 1.0, 0.0), batch_size=2)
    np.testing.assert_allclose(state.mean, mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(state.cov, cov, rtol=1e-8, atol=1e-10)


def _schedule_equals_constants(family, decay, noise, seed):
    """Filter one stream with constant dynamics ``(decay, noise)`` and with schedules of the
    same values, assert they agree, and return the constant config, prior, data and result."""
    apply, n_params = network(1)
    X, Y = stream(8, 1, seed=seed)
    constant = make_config(apply, "gaussian", family, 2)
    scheduled = make_config(apply, "gaussian", family, 2,
                            dynamics=Dynamics(decay=lambda t: decay, process_noise=lambda t: noise))
    state0 = constant.family.init(jnp.full(n_params, 0.1), jnp.asarray(0.5))
    expected = run_filter(scheduled, state0, X, Y, Hyperparameters(0.3, 1.0, 0.0))
    got = run_filter(constant, state0, X, Y, Hyperparameters(0.3, decay, noise))
    for a, b in zip(expected, got):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    return constant, state0, X, Y, got


def test_filter_posterior_refuses_a_schedule_out_of_range_where_its_rows_reach_it():
    """The functional API checks a schedule at its call's row indices (``n_seen``,
    ``n_seen + 1``, ...) as the estimators do: a decay above one from t = 5 on is refused
    for six rows, naming t and the value, and accepted for five, and refused for the
    chunk of rows 3..5 that continues from the first three; so is a negative process
    noise."""
    from skbong.core import filter_posterior

    apply, n_params = network(1)
    X, Y = stream(6, 1)
    for name, dynamics, bad in (
        ("dynamics_decay", Dynamics(decay=lambda t: jnp.where(t < 5, 0.99, 1.5)), "1.5"),
        ("process_noise", Dynamics(process_noise=lambda t: jnp.where(t < 5, 0.0, -1e-3)), "-0.001"),
    ):
        with pytest.raises(ValueError, match=rf"The {name} schedule gave {bad} at t = 5 "):
            filter_posterior(apply, jnp.full(n_params, 0.1), X, Y, family="diag", dynamics=dynamics)
        state = filter_posterior(apply, jnp.full(n_params, 0.1), X[:5], Y[:5], family="diag", dynamics=dynamics)
        assert np.all(np.isfinite(state.mean)) and np.all(np.asarray(state.var) > 0)
        # A later chunk is checked at its own indices: rows 3..5 of the stream reach t = 5.
        head = filter_posterior(apply, jnp.full(n_params, 0.1), X[:3], Y[:3], family="diag", dynamics=dynamics)
        with pytest.raises(ValueError, match=rf"The {name} schedule gave {bad} at t = 5 "):
            filter_posterior(apply, jnp.full(n_params, 0.1), X[3:], Y[3:], family="diag", dynamics=dynamics,
                             state=head, n_seen=3)


@pytest.mark.parametrize(
    "family, hessian, options",
    [
        ("dlr", "lin_hess",
         dict(dynamics=Dynamics(decay=lambda t: 1.0 - 0.01 * t, process_noise=lambda t: 1e-3 * t))),
        ("diag", "mc_ef", {}),
        # The prior that inflation pulls towards decays with the steps taken (constant dynamics).
        ("dlr", "lin_hess", dict(dynamics=Dynamics(inflation="bayesian"), inflation=0.1, dynamics_decay=0.9)),
    ],
    ids=["schedules", "monte-carlo-keys", "latent-prior"],
)
def test_filter_posterior_in_chunks_with_n_seen_equals_one_call(family, hessian, options, x64):
    """A stream fed to ``filter_posterior`` in chunks, each call given the rows absorbed so
    far, ends at the belief of one call over the whole stream: the schedules, the
    Monte-Carlo draws and the prior that Bayesian inflation pulls towards all continue
    from ``n_seen``. Without ``n_seen`` the second chunk restarts them, and differs."""
    from skbong.core import filter_posterior

    apply, n_params = network(1)
    X, Y = stream(12, 1, seed=5)
    mean0 = jnp.full(n_params, 0.1)
    options = dict(family=family, hessian=hessian, sigma0=0.5, obs_noise=0.3, rank=2, batch_size=2, **options)
    whole = filter_posterior(apply, mean0, X, Y, **options)
    head = filter_posterior(apply, mean0, X[:6], Y[:6], **options)
    chunked = filter_posterior(apply, mean0, X[6:], Y[6:], state=head, n_seen=6, **options)
    restarted = filter_posterior(apply, mean0, X[6:], Y[6:], state=head, **options)
    for a, b in zip(whole, chunked):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    assert np.max(np.abs(np.asarray(restarted.mean) - np.asarray(whole.mean))) > 1e-6


def test_constant_schedule_equals_constant_dynamics(x64):
    _schedule_equals_constants("dlr", 0.95, 0.01, seed=11)


@pytest.mark.parametrize("family", ["fc", "fc_mom", "diag", "diag_mom", "dlr", "slr"])
def test_static_belief_equals_an_identity_schedule(family, x64):
    """Decay 1 and no process noise, as constants, take a program without the predict step;
    a schedule of the same values runs the step, and the two filters agree. Other constant
    values take the moving program, compiled once for all of them."""
    static, state0, X, Y, got = _schedule_equals_constants(family, 1.0, 0.0, seed=14)

    before = trace_count("filter")
    moved = run_filter(static, state0, X, Y, Hyperparameters(0.3, 0.97, 0.01))
    assert trace_count("filter") == before + 1
    run_filter(static, state0, X, Y, Hyperparameters(0.3, 1.0, 0.02))
    assert trace_count("filter") == before + 1
    assert np.max(np.abs(np.asarray(moved.mean) - np.asarray(got.mean))) > 1e-4


def test_returned_validity_is_that_of_the_final_belief(x64):
    """``return_valid`` gives ``belief_is_valid`` of the result, computed in the filter's
    program: per member in a sweep, where a member given a NaN prior scale breaks down (a
    NaN noise is refused before the filter runs)."""
    apply, n_params = network(1)
    X, Y = stream(6, 1, seed=15)
    config = make_config(apply, "gaussian", "diag")
    state0 = config.family.init(jnp.full(n_params, 0.1), jnp.asarray(0.5))
    state, valid = run_filter(config, state0, X, Y, Hyperparameters(0.3, 1.0, 0.0), return_valid=True)
    assert valid.shape == () and bool(valid) and bool(belief_is_valid(config.family, state))

    # (Targets of NaN are refused before the filter runs; a NaN prior scale breaks it.)
    with pytest.raises(ValueError, match="Y holds NaN"):
        run_filter(config, state0, X, Y * np.nan, Hyperparameters(0.3, 1.0, 0.0), return_valid=True)
    nan_prior = config.family.init(jnp.full(n_params, 0.1), jnp.asarray(np.nan))
    broken, valid = run_filter(config, nan_prior, X, Y, Hyperparameters(0.3, 1.0, 0.0), return_valid=True)
    assert not bool(valid) and not bool(belief_is_valid(config.family, broken))

    states = init_sweep(config.family, jnp.full(n_params, 0.1), np.array([0.5, np.nan, 0.5]))
    with pytest.raises(ValueError, match="obs_noise must be positive"):
        run_sweep(config, states, X, Y, Hyperparameters(np.array([0.3, np.nan, 0.1]), 1.0, 0.0))
    for vectorize in (False, True):
        swept, valid = run_sweep(config, states, X, Y, Hyperparameters(np.array([0.3, 0.2, 0.1]), 1.0, 0.0),
                                 vectorize=vectorize, return_valid=True)
        np.testing.assert_array_equal(valid, belief_is_valid(config.family, swept))
        np.testing.assert_array_equal(valid, [True, False, True])
    # Without rows the flag is the given belief's.
    _, valid = run_filter(config, state0, X[:0], Y[:0], Hyperparameters(0.3, 1.0, 0.0), return_valid=True)
    assert bool(valid)


# ---------------------------------------------------------------------------- sweeps
def test_sweep_member_matches_single_filter(x64):
    """Members of a sweep with inflation and a noise estimate equal single filters."""
    apply, n_params = network(1)
    X, Y = stream(10, 1, seed=12)
    dynamics = Dynamics(inflation="bayesian", adaptive_obs_noise=True)
    config = make_config(apply, "gaussian", "dlr", 3, dynamics=dynamics)
    mean0 = jnp.asarray(np.random.default_rng(13).normal(scale=0.5, size=n_params))
    scales = np.array([0.3, 1.0])
    hypers = Hyperparameters(np.array([0.1, 0.4]), 0.99, 0.01, inflation=np.array([0.1, 0.5]), obs_noise_rate=0.1)
    latents = LatentPrior(jnp.broadcast_to(mean0, (2, n_params)), scales**-2)
    for vectorize in (False, True):
        states, noises = run_sweep(config, init_sweep(config.family, mean0, scales), X, Y, hypers,
                                   latent_prior=latents, vectorize=vectorize)
        for k in range(2):
            state, noise = run_filter(
                config, config.family.init(mean0, jnp.asarray(scales[k])), X, Y,
                Hyperparameters(hypers.obs_noise[k], 0.99, 0.01, inflation=hypers.inflation[k], obs_noise_rate=0.1),
                latent_prior=LatentPrior(mean0, scales[k] ** -2),
            )
            np.testing.assert_allclose(states.mean[k], state.mean, rtol=1e-9, atol=1e-11)
            np.testing.assert_allclose(noises[k], noise, rtol=1e-9)
