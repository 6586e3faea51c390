"""The backtracking line search of the mean step (``make_config(backtrack=True)``) against
a slow NumPy reference of the step's MAP objective."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from skbong.core import DiagState, DLRState, Hyperparameters, make_config, run_filter
from skbong.core._filter import BACKTRACK_HALVINGS
from skbong.core._rules import apply_rule

D, C = 3, 3  # linear softmax / linear regression, P = 9


def _linear(theta, x):
    return x @ theta.reshape(D, C)


def _dense_precision(family, state):
    return np.linalg.inv(np.asarray(family.covariance(state)))


def _reference_step_size(mean, precision, delta, x, y, weight):
    """The first of 1, 1/2, ..., 2^-8 at which the step's MAP objective is no higher than
    at the prior mean, else 0 (NumPy, float64)."""

    def objective(step):
        logits = x @ (mean + step * delta).reshape(D, C)
        shifted = logits - logits.max(1, keepdims=True)
        log_softmax = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
        return -np.sum(weight * np.sum(y * log_softmax, axis=1)) + 0.5 * step**2 * delta @ precision @ delta

    for step in 0.5 ** np.arange(BACKTRACK_HALVINGS + 1):
        if objective(step) <= objective(0.0):
            return step
    return 0.0


@pytest.mark.parametrize("family", ["diag", "diag_mom", "dlr"])
def test_precision_quadratic_is_the_dense_one(family, x64):
    rng = np.random.default_rng(0)
    config = make_config(_linear, "categorical", family, rank=2)
    state = config.family.init(jnp.asarray(rng.normal(size=D * C)), jnp.asarray(0.7))
    X, Y = rng.normal(size=(5, D)), np.eye(C)[rng.integers(C, size=5)]
    state = run_filter(config, state, X, Y, Hyperparameters(1.0, 1.0, 0.0))
    v = rng.normal(size=D * C)
    expected = v @ _dense_precision(config.family, state) @ v
    np.testing.assert_allclose(config.family.precision_quadratic(state, jnp.asarray(v)), expected, rtol=1e-10)


def _mlp():
    """A built-in MLP ``D -> 4 -> C``, whose curvature comes in factored form."""
    from flax import nnx

    from skbong.core import MLP, flatten_module

    apply, mean0 = flatten_module(MLP((D, 4, C), "tanh", rngs=nnx.Rngs(0)))
    return apply, np.asarray(mean0, np.float64)


@pytest.mark.parametrize(
    "family, model",
    [("dlr", "linear"), ("slr", "linear"), ("diag", "linear"), ("diag_mom", "linear"), ("diag", "mlp"), ("diag_mom", "mlp")],
)
def test_move_quadratic_of_the_low_rank_step_is_the_dense_one(family, model, x64):
    """The line search's penalty that the DLR natural step, and the diagonal families'
    Kalman step (from the root, and from a dense network's factors), return from their
    small matrices is ``delta^T Sigma^{-1} delta`` of the mean move under the prior
    precision, formed densely."""
    rng = np.random.default_rng(3)
    apply, mean0 = (_linear, rng.normal(size=D * C)) if model == "linear" else _mlp()
    config = make_config(apply, "categorical", family, rank=2)
    state = config.family.init(jnp.asarray(mean0), jnp.asarray(0.7))
    X, Y = rng.normal(size=(5, D)), np.eye(C)[rng.integers(C, size=5)]
    state = run_filter(config, state, X, Y, Hyperparameters(1.0, 1.0, 0.0))
    x, y = jnp.asarray(rng.normal(size=(2, D))), jnp.asarray(np.eye(C)[[0, 2]])

    def curvature_at(current, key):
        return config.estimator(apply, config.likelihood, config.family, current, x, y, jnp.ones(2), 1.0, key)

    key = jax.random.PRNGKey(0)
    updated, quadratic = apply_rule(config.rule, config.family, state, curvature_at, 1.0, key, move_quadratic=True)
    assert quadratic is not None
    delta = np.asarray(updated.mean) - np.asarray(state.mean)
    assert np.linalg.norm(delta) > 1e-3  # the step moves
    expected = delta @ _dense_precision(config.family, state) @ delta
    np.testing.assert_allclose(quadratic, expected, rtol=1e-9)
    # The same step as without the by-product, and none where the rule has the KL term.
    plain = apply_rule(config.rule, config.family, state, curvature_at, 1.0, key)
    for got, want in zip(updated, plain):
        np.testing.assert_array_equal(got, want)
    blr = make_config(apply, "categorical", family, rank=2, algorithm="blr")
    _, none = apply_rule(blr.rule, blr.family, state, curvature_at, 0.5, key, move_quadratic=True)
    assert none is None


@pytest.mark.parametrize("family", ["diag", "dlr", "slr"])
def test_overshooting_step_is_shortened_as_the_reference(family, x64):
    """A row predicted confidently wrong: the linearised step raises the MAP objective, and
    the backtracked step is the reference's halving of it; the covariance is unchanged."""
    rng = np.random.default_rng(1)
    plain = make_config(_linear, "categorical", family, rank=2)
    backtracked = make_config(_linear, "categorical", family, rank=2, backtrack=True)
    hyper = Hyperparameters(1.0, 1.0, 0.0)
    # A broad prior belief (variances ~ 100) with a non-trivial precision, around a mean
    # that predicts x = e_0 as class 0 with p(class 2) ~ 3e-4.
    mean0 = np.zeros((D, C))
    mean0[0] = [4.0, 0.0, -4.0]
    scale = rng.uniform(0.5, 1.5, size=D * C)
    if family == "diag":
        state = DiagState(jnp.asarray(mean0.ravel()), jnp.asarray(100.0 * scale))
    else:
        low_rank = 0.05 * rng.normal(size=(D * C, 2))
        state = DLRState(jnp.asarray(mean0.ravel()), jnp.asarray(0.01 * scale), jnp.asarray(low_rank))
    x, y = np.array([[1.0, 0.1, -0.1]]), np.eye(C)[[2]]
    after_plain = run_filter(plain, state, x, y, hyper)
    after_backtracked = run_filter(backtracked, state, x, y, hyper)

    mean = np.asarray(state.mean)
    delta = np.asarray(after_plain.mean) - mean
    step = _reference_step_size(mean, _dense_precision(plain.family, state), delta, x, y, np.ones(1))
    assert 0 < step < 1  # the case exercises the shortening
    np.testing.assert_allclose(after_backtracked.mean, mean + step * delta, rtol=1e-12, atol=1e-12)
    for got, expected in zip(after_backtracked[1:], after_plain[1:]):
        np.testing.assert_array_equal(got, expected)


def test_halvings_stop_at_the_last_one_tried_and_a_failed_search_stays(x64):
    """Down a descent direction of the data term, with the move's quadratic form raised
    step by step, the first passing step walks from 1 through 2^-1, ..., 2^-8 to none (the
    mean stays): at every quadratic the line search takes the reference's step, so it
    tries the full step and exactly ``BACKTRACK_HALVINGS`` halvings, never one more."""
    from skbong.core._filter import _backtracked

    config = make_config(_linear, "categorical", "diag", backtrack=True)
    rng = np.random.default_rng(3)
    mean = rng.normal(size=D * C)
    x, y, weight = rng.normal(size=(2, D)), np.eye(C)[[0, 2]], np.ones(2)
    gradient = jax.grad(lambda theta: -jnp.sum(y * jax.nn.log_softmax(x @ theta.reshape(D, C))))(jnp.asarray(mean))
    delta = -np.asarray(gradient) / np.linalg.norm(gradient)
    prior = DiagState(jnp.asarray(mean), jnp.ones(D * C))
    updated = prior._replace(mean=jnp.asarray(mean + delta))
    taken = set()
    for quadratic in np.geomspace(1e-2, 1e4, 60):
        # delta has unit norm: the precision quadratic * I gives delta^T P delta = quadratic.
        expected = _reference_step_size(mean, quadratic * np.eye(D * C), delta, x, y, weight)
        got = _backtracked(config, prior, updated, jnp.asarray(x), jnp.asarray(y), jnp.asarray(weight),
                           jnp.asarray(1.0), jnp.asarray(quadratic))
        np.testing.assert_allclose(got.mean, mean + expected * delta, rtol=1e-12, atol=1e-12)
        taken.add(expected)
    assert {1.0, 0.5**BACKTRACK_HALVINGS, 0.0} <= taken


@pytest.mark.parametrize("family", ["diag", "diag_mom", "dlr"])
def test_conjugate_updates_are_taken_in_full(family, x64):
    """Linear-Gaussian: the Kalman step minimises the step's MAP objective exactly, so
    backtracking never shortens it and the whole stream's posterior is unchanged."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(20, D))
    Y = X @ rng.normal(size=(D, C)) + 0.1 * rng.normal(size=(20, C))
    hyper = Hyperparameters(0.05, 1.0, 0.0)
    beliefs = []
    for backtrack in (False, True):
        config = make_config(_linear, "gaussian", family, rank=2, backtrack=backtrack)
        state = config.family.init(jnp.zeros(D * C), jnp.asarray(3.0))
        beliefs.append(run_filter(config, state, X, Y, hyper))
    for got, expected in zip(*beliefs):
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("family", ["fc", "fc_mom"])
def test_full_covariance_refuses_backtracking(family):
    with pytest.raises(ValueError, match="backtrack=True needs"):
        make_config(_linear, "categorical", family, backtrack=True)


@pytest.mark.parametrize(
    "algorithm, hessian, family, expected",
    [("bong", "lin_hess", "dlr", True), ("bong", "lin_hess", "diag", True), ("bong", "lin_ef", "slr", True),
     ("bong", "lin_hess", "fc", False), ("bong", "lin_hess", "fc_mom", False), ("blr", "lin_hess", "dlr", False),
     ("bbb", "lin_hess", "diag", False), ("bong", "mc_ef", "dlr", False), ("bong", "mc_hess", "diag", False)],
)
def test_auto_is_on_for_linearised_bong_where_the_family_has_the_quadratic_form(algorithm, hessian, family, expected):
    config = make_config(_linear, "categorical", family, rank=2, algorithm=algorithm, hessian=hessian,
                         backtrack="auto")
    assert config.backtrack is expected


def test_an_unknown_backtrack_string_is_refused():
    with pytest.raises(ValueError, match="Unknown backtrack 'yes'"):
        make_config(_linear, "categorical", "dlr", rank=2, backtrack="yes")
