"""A belief counts as valid only where it is a Gaussian: finite, with a positive definite
covariance, at the end of every chunk of a call.

Before these tests the full-covariance families checked the variances (the diagonal of
``Sigma``) alone, and a call reported the flag of its last chunk alone. BOG-LIN-HESS-FC on
digits (``benchmarks/digits_grid.py``'s MLP at sigma0 = 1.78, learning rate 5.6e-5, seed 1)
made ``Sigma`` indefinite (smallest eigenvalue -0.73) with every variance positive; the
fit was accepted and predicted below chance (test accuracy 0.09) without a word."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from skbong.core import Hyperparameters, belief_is_valid, make_config, run_filter, run_sweep


def _linear(theta, x):
    return x @ theta[:, None]


# Eigenvalues 3 and -1, both variances 1: positive diagonal, not positive definite.
INDEFINITE = np.array([[1.0, 2.0], [2.0, 1.0]])


@pytest.mark.parametrize("family", ["fc", "fc_mom"])
@pytest.mark.parametrize(
    "cov, expected",
    [
        (INDEFINITE, False),
        (np.array([[1.0, 0.9], [0.9, 1.0]]), True),
        (np.array([[1.0, 1.0], [1.0, 1.0]]), False),  # singular: no Gaussian density
        (np.array([[1.0, np.inf], [np.inf, 1.0]]), False),
        (np.array([[1.0, 0.0], [np.nan, 1.0]]), False),  # a NaN below the diagonal alone
    ],
)
def test_full_covariance_valid_only_when_positive_definite(family, cov, expected):
    config = make_config(_linear, "gaussian", family)
    state = config.family.init(jnp.zeros(2), 1.0)._replace(cov=jnp.asarray(cov, jnp.float32))
    assert bool(belief_is_valid(config.family, state)) is expected
    # The members of a sweep are checked one by one.
    members = jax.tree.map(lambda a: jnp.stack([a, a]), state)
    members = members._replace(cov=members.cov.at[0].set(jnp.eye(2)))
    assert np.asarray(belief_is_valid(config.family, members)).tolist() == [True, expected]


@pytest.mark.parametrize("family", ["fc", "fc_mom"])
def test_a_mean_with_an_indefinite_covariance_is_invalid(family):
    """The mean is finite and every variance positive: the covariance alone decides."""
    config = make_config(_linear, "gaussian", family)
    state = config.family.init(jnp.array([0.3, -1.0]), 1.0)
    assert bool(belief_is_valid(config.family, state))
    assert not bool(belief_is_valid(config.family, state._replace(cov=jnp.asarray(INDEFINITE, jnp.float32))))


def test_a_call_is_invalid_when_an_earlier_chunk_broke_down():
    """A call runs in compiled chunks of at most 512 steps. BOG's plain step on moments,
    ``Sigma -= (alpha / 2) H^T R^-1 H`` (BOG-LIN-HESS-FC_MOM, Eq. 178), at a large rate
    turns ``Sigma`` negative within the first chunk (about -20 I). The 3,072 rows of weight
    1e-9 after it hardly update it, while their predict steps (``Sigma += q I``, q = 0.01)
    make it positive definite again by the end of the call. The mean those steps moved is
    not mended, so the call must say that its belief broke down, as the call of its first
    512 rows does."""
    rng = np.random.default_rng(0)
    n_bad, n_after = 512, 3072
    X = rng.normal(size=(n_bad + n_after, 2))
    Y = X @ np.array([1.0, -0.5])[:, None]
    weights = np.r_[np.ones(n_bad), np.full(n_after, 1e-9)]
    config = make_config(_linear, "gaussian", "fc_mom", algorithm="bog")
    hyper = Hyperparameters(1.0, 1.0, 0.01, learning_rate=0.1)
    prior = config.family.init(jnp.zeros(2), 1.0)

    first, first_valid = run_filter(config, prior, X[:n_bad], Y[:n_bad], hyper, return_valid=True)
    assert not bool(first_valid)
    last = run_filter(config, first, X[n_bad:], Y[n_bad:], hyper, n_seen=n_bad, sample_weight=weights[n_bad:])
    # The belief that ends the stream looks like a Gaussian again.
    assert bool(belief_is_valid(config.family, last))

    whole, whole_valid = run_filter(config, prior, X, Y, hyper, sample_weight=weights, return_valid=True)
    np.testing.assert_allclose(whole.cov, last.cov, rtol=1e-5)
    assert not bool(whole_valid)

    # The same for every member of a sweep.
    members = jax.tree.map(lambda a: jnp.stack([a, a]), prior)
    sweep_hyper = Hyperparameters(1.0, 1.0, 0.01, learning_rate=jnp.array([0.1, 1e-3]))
    *_, valid = run_sweep(config, members, X, Y, sweep_hyper, sample_weight=weights, return_valid=True)
    assert np.asarray(valid).tolist() == [False, True]


def _tanh_mlp():
    """A built-in MLP ``3 -> 4 -> 3`` (P = 31), float64."""
    from flax import nnx

    from skbong.core import MLP, flatten_module

    apply, mean0 = flatten_module(MLP((3, 4, 3), "tanh", rngs=nnx.Rngs(0)))
    return apply, jnp.asarray(mean0, jnp.float64)


@pytest.mark.parametrize(
    "algorithm, hessian, n_inner_steps, learning_rate",
    [
        ("bong", "lin_hess", 1, 1.0),
        ("bong", "lin_ef", 1, 1.0),
        ("bong", "mc_ef", 1, 1.0),
        ("blr", "lin_hess", 1, 5.0),  # one inner step starts at the prior: any rate
        ("blr", "lin_hess", 3, 1.0),
        ("blr", "mc_ef", 3, 0.7),
    ],
)
def test_natural_steps_on_fc_keep_the_covariance_positive_definite(
    algorithm, hessian, n_inner_steps, learning_rate, x64
):
    """The steps whose chunks are checked on their variances alone (``_checks_definiteness``)
    keep ``Sigma`` positive definite in exact arithmetic (Eqs. 118, 133 with a negative
    semi-definite ``G``). Checked densely after every row of a wide prior (sigma0 = 3) on a
    tanh MLP with large inputs, where BOG's and the moment steps break it."""
    apply, mean0 = _tanh_mlp()
    rng = np.random.default_rng(1)
    X = 3 * rng.normal(size=(30, 3))
    Y = np.eye(3)[rng.integers(3, size=30)]
    config = make_config(apply, "categorical", "fc", algorithm=algorithm, hessian=hessian, n_inner_steps=n_inner_steps)
    hyper = Hyperparameters(1.0, 1.0, 0.0, learning_rate=learning_rate)
    state = config.family.init(mean0, 3.0)
    smallest = []
    for t in range(X.shape[0]):
        state, valid = run_filter(config, state, X[t : t + 1], Y[t : t + 1], hyper, n_seen=t, return_valid=True)
        assert bool(valid)
        cov = np.asarray(state.cov)
        smallest.append(np.linalg.eigvalsh(0.5 * (cov + cov.T))[0] / np.abs(cov).max())
    assert min(smallest) > 1e-9
    # The rows were informative: the covariance shrank twentyfold or more somewhere.
    assert smallest[-1] < 0.05


def test_steps_that_can_break_definiteness_are_checked_exactly(x64):
    """Where a step can make ``Sigma`` indefinite with every variance positive, the chunk's
    check factorises it. BLR with two inner steps at rate 3 on a linear-Gaussian model:
    ``precision' = precision_prior - 3 H`` (Eq. 133 twice, ``G = -H``, ``H = x x^T``), with
    eigenvalues 1 - 6 and 1 for ``x = (1, 1)``; ``Sigma`` has variances 0.4 and eigenvalue
    -0.2. At rate 0.9 it stays positive definite. The same per member of a sweep, whose
    rates are traced."""
    X, Y = np.array([[1.0, 1.0]]), np.array([[0.5]])
    config = make_config(_linear, "gaussian", "fc", algorithm="blr", n_inner_steps=2)
    prior = config.family.init(jnp.zeros(2), 1.0)
    for rate, expected in [(3.0, False), (0.9, True)]:
        hyper = Hyperparameters(1.0, 1.0, 0.0, learning_rate=rate)
        state, valid = run_filter(config, prior, X, Y, hyper, return_valid=True)
        cov = np.asarray(state.cov)
        assert np.all(np.diag(cov) > 0)
        assert bool(np.linalg.eigvalsh(cov)[0] > 0) is expected
        assert bool(valid) is expected
    members = jax.tree.map(lambda a: jnp.stack([a, a]), prior)
    hypers = Hyperparameters(1.0, 1.0, 0.0, learning_rate=jnp.array([3.0, 0.9]))
    for vectorize in (False, True):
        *_, valid = run_sweep(config, members, X, Y, hypers, vectorize=vectorize, return_valid=True)
        assert np.asarray(valid).tolist() == [False, True]
