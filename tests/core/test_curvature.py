"""LIN-HESS against dense Jacobians (forward mode) and dense likelihood Hessians."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from skbong.core import Categorical, DiagState, Gaussian, LinearizedEF, LinearizedHessian, MLPSpec


@pytest.mark.parametrize("likelihood", [Gaussian(), Categorical()], ids=["gaussian", "categorical"])
def test_lin_hess_equals_dense_generalised_gauss_newton(likelihood, x64):
    spec = MLPSpec(3, (4,), 3, "tanh")
    rng = np.random.default_rng(1)
    mean = jnp.asarray(spec.init_params(0), jnp.float64)
    x = jnp.asarray(rng.normal(size=(5, 3)))
    y = jnp.asarray(np.eye(3)[rng.integers(3, size=5)] if isinstance(likelihood, Categorical) else rng.normal(size=(5, 3)))
    mask = jnp.asarray([True, True, False, True, True])
    noise = jnp.asarray([0.3, 0.7, 1.1])

    state = DiagState(mean, jnp.ones_like(mean))
    curv = LinearizedHessian()(spec.apply, likelihood, None, state, x, y, mask, noise, None)
    ef = LinearizedEF()(spec.apply, likelihood, None, state, x, y, mask, noise, None)

    grad = np.zeros(spec.n_params)
    ggn = np.zeros((spec.n_params, spec.n_params))
    empirical_fisher = np.zeros((spec.n_params, spec.n_params))
    for b in np.flatnonzero(mask):
        jac = jax.jacfwd(lambda theta: spec.apply(theta, x[b : b + 1])[0])(mean)  # (C, P)
        f = spec.apply(mean, x[b : b + 1])[0]
        row_grad = jax.grad(lambda theta: likelihood.log_prob(spec.apply(theta, x[b : b + 1])[0], y[b], noise))(mean)
        grad += row_grad
        empirical_fisher -= np.outer(row_grad, row_grad)
        ggn -= jac.T @ jax.hessian(likelihood.log_prob)(f, y[b], noise) @ jac
    np.testing.assert_allclose(curv.grad, grad, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(curv.root @ curv.root.T, ggn, rtol=1e-10, atol=1e-12)
    # LIN-EF (Eqs. 27-28): same gradient, G = -sum_b g_b g_b^T over the rows.
    np.testing.assert_allclose(ef.grad, grad, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ef.matrix(), empirical_fisher, rtol=1e-10, atol=1e-12)
    # The gradient in the columns of the root, which the DLR step relies on.
    for low_rank in (curv, ef):
        np.testing.assert_allclose(low_rank.root @ low_rank.coords, grad, rtol=1e-10, atol=1e-12)
