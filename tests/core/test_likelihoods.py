"""Likelihood derivatives against automatic differentiation of ``log_prob``."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from skbong.core import Categorical, Gaussian


@pytest.mark.parametrize("likelihood", [Gaussian(), Categorical()], ids=["gaussian", "categorical"])
def test_score_and_hessian_root_match_autodiff(likelihood, x64):
    rng = np.random.default_rng(0)
    f = jnp.asarray(rng.normal(size=4))
    y = jnp.asarray(np.eye(4)[2] if isinstance(likelihood, Categorical) else rng.normal(size=4))
    noise = jnp.asarray([0.5, 1.0, 2.0, 0.1])
    grad = jax.grad(likelihood.log_prob)(f, y, noise)
    hess = jax.hessian(likelihood.log_prob)(f, y, noise)
    root = likelihood.hessian_root(f, noise)
    np.testing.assert_allclose(likelihood.score(f, y, noise), grad, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(root @ root.T, -hess, rtol=1e-12, atol=1e-12)


def test_categorical_curvature_has_rank_c_minus_one(x64):
    f = jnp.asarray([0.3, -1.0, 2.0, 0.0, 0.5])
    root = Categorical().hessian_root(f, None)
    assert np.linalg.matrix_rank(np.asarray(root @ root.T), tol=1e-10) == 4
    p = jax.nn.softmax(f)
    np.testing.assert_allclose(Categorical().variance(f, None), np.diag(np.diag(p) - np.outer(p, p)))


@pytest.mark.parametrize("likelihood", [Gaussian(), Categorical()], ids=["gaussian", "categorical"])
def test_score_coords_give_the_gradient_through_the_root(likelihood, x64):
    # L z equals the autodiff gradient of log_prob, for categorical targets that do not sum to one too.
    rng = np.random.default_rng(3)
    f = jnp.asarray(rng.normal(size=4))
    y = jnp.asarray(rng.uniform(size=4) if isinstance(likelihood, Categorical) else rng.normal(size=4))
    noise = jnp.asarray([0.5, 1.0, 2.0, 0.1])
    grad = jax.grad(likelihood.log_prob)(f, y, noise)
    coords = likelihood.score_coords(f, y, noise)
    np.testing.assert_allclose(likelihood.hessian_root(f, noise) @ coords, grad, rtol=1e-12, atol=1e-12)


def test_categorical_coords_stay_finite_for_vanishing_probabilities():
    # float32, the wrong class 300 logits below the top one: p underflows, L z = y - p must not.
    f = jnp.asarray([300.0, 0.0, -5.0], jnp.float32)
    y = jnp.asarray([0.0, 1.0, 0.0], jnp.float32)
    root, coords = Categorical().hessian_root(f, None), Categorical().score_coords(f, y, None)
    assert np.all(np.isfinite(root)) and np.all(np.isfinite(coords))
    np.testing.assert_allclose(root @ coords, [-1.0, 1.0, 0.0], atol=1e-6)


def test_categorical_cov_floor_is_the_ekf_with_a_floored_observation_covariance(x64):
    # BONG-LIN-HESS-FC with R = diag(p) - p p^T + eps I is the EKF that observes all C class
    # probabilities with that covariance (LO-FI Eqs. 8-10), written densely here.
    from skbong.core import MLPSpec, filter_posterior

    spec = MLPSpec(3, (4,), 3, "tanh")
    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(5, 3)), np.eye(3)[rng.integers(3, size=5)]
    mean0, sigma0, eps = np.asarray(spec.init_params(0), np.float64), 0.7, 0.05
    state = filter_posterior(spec.apply, jnp.asarray(mean0), X, Y, likelihood="categorical", family="fc",
                             sigma0=sigma0, cov_floor=eps)
    mu, cov = mean0.copy(), sigma0**2 * np.eye(mean0.shape[0])
    probs = jax.jit(lambda theta, x: jax.nn.softmax(spec.apply(theta, x[None])[0]))
    jac = jax.jit(jax.jacfwd(lambda theta, x: jax.nn.softmax(spec.apply(theta, x[None])[0])))
    for x, y in zip(X, Y):
        p, H = np.asarray(probs(jnp.asarray(mu), jnp.asarray(x))), np.asarray(jac(jnp.asarray(mu), jnp.asarray(x)))
        S = H @ cov @ H.T + np.diag(p) - np.outer(p, p) + eps * np.eye(3)
        K = cov @ H.T @ np.linalg.inv(S)
        mu, cov = mu + K @ (y - p), cov - K @ S @ K.T
    np.testing.assert_allclose(state.mean, mu, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(state.cov, cov, rtol=1e-7, atol=1e-10)
    # eps = 0 keeps the exact (pseudo-inverse) step, which this EKF does not reach.
    exact = filter_posterior(spec.apply, jnp.asarray(mean0), X, Y, likelihood="categorical", family="fc", sigma0=sigma0)
    assert not np.allclose(exact.mean, mu, rtol=1e-4)
