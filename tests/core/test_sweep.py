"""``run_sweep``: K filters side by side in one compiled scan (float64).

Each member must be the filter that :func:`run_filter` runs with that member's belief,
hyperparameters and key; for a linear-Gaussian model every member must also be the
closed-form batch posterior of its own prior scale and noise.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from skbong.core import (
    DLRState,
    Dynamics,
    Hyperparameters,
    MLPSpec,
    PluginPredictive,
    init_sweep,
    make_config,
    run_filter,
    run_sweep,
    trace_count,
)


def _linear(theta, x):
    return x @ theta[:, None]


def test_a_sweep_over_prior_scale_and_noise_is_the_batch_posterior_of_each(x64):
    # BONG Prop. 4.1: LIN-HESS-FC on a linear-Gaussian model is the Kalman filter, so each
    # member ends at the exact posterior of its own sigma0 and R.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(70, 3))  # 70 rows: two chunks (64 + 8 steps)
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.3 * rng.normal(size=70)
    sigma0 = np.array([0.1, 1.0, 10.0])
    noise = np.array([0.05, 0.1, 1.0])
    config = make_config(_linear, "gaussian", "fc")
    states = init_sweep(config.family, jnp.zeros(3), sigma0)
    out = run_sweep(config, states, X, y[:, None], Hyperparameters(noise, 1.0, 0.0))
    for k in range(3):
        precision = np.eye(3) / sigma0[k] ** 2 + X.T @ X / noise[k]
        cov = np.linalg.inv(precision)
        np.testing.assert_allclose(out.cov[k], cov, rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(out.mean[k], cov @ X.T @ y / noise[k], rtol=1e-8)


def identified(state, member=None):
    """The belief's leaves (of one member), with a low-rank factor ``W`` replaced by
    ``W W^T``: the factor is defined up to the signs (and, for equal singular values, a
    rotation) of its columns, which an eigendecomposition batched over members may choose
    otherwise than a single one."""
    leaves = [np.asarray(leaf if member is None else leaf[member]) for leaf in state]
    if isinstance(state, DLRState):
        leaves[2] = leaves[2] @ leaves[2].T
    return leaves


@pytest.mark.parametrize(
    "family, algorithm, hessian",
    [
        ("dlr", "bong", "lin_hess"),
        ("diag", "bong", "lin_hess"),
        ("fc", "blr", "lin_hess"),
        ("diag_mom", "bog", "mc_ef"),  # stochastic: one key per member
    ],
)
@pytest.mark.parametrize("batch_size, vectorize", [(1, True), (3, True), (1, False)])
def test_each_member_is_the_single_filter_with_its_values(family, algorithm, hessian, batch_size, vectorize, x64):
    rng = np.random.default_rng(1)
    spec = MLPSpec(4, (5,), 3, "tanh")
    X = rng.normal(size=(75, 4))
    Y = np.eye(3)[rng.integers(3, size=75)]
    config = make_config(spec.apply, "categorical", family, 2, algorithm, hessian, 2, 3)
    n_members = 3
    mean0 = np.stack([spec.init_params(seed) for seed in range(n_members)]).astype(np.float64)
    sigma0 = np.array([0.05, 0.2, 0.5])
    learning_rate = np.array([0.1, 0.3, 1.0]) if algorithm != "bong" else 1.0
    hypers = Hyperparameters(1.0, 1.0, np.array([0.0, 1e-4, 1e-3]), learning_rate)
    keys = jax.random.split(jax.random.PRNGKey(3), n_members)
    states, log_prob, mean = run_sweep(
        config,
        init_sweep(config.family, mean0, sigma0),
        X,
        Y,
        hypers,
        batch_size,
        keys,
        5,
        PluginPredictive(),
        vectorize=vectorize,
    )
    assert log_prob.shape == (n_members, 75) and mean.shape == (n_members, 75, 3)
    for k in range(n_members):
        single = Hyperparameters(1.0, 1.0, hypers.process_noise[k], np.broadcast_to(learning_rate, n_members)[k])
        state, lp, m = run_filter(
            config,
            config.family.init(jnp.asarray(mean0[k]), jnp.asarray(sigma0[k])),
            X,
            Y,
            single,
            batch_size,
            keys[k],
            5,
            PluginPredictive(),
        )
        for swept, alone in zip(identified(states, k), identified(state)):
            np.testing.assert_allclose(swept, alone, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(log_prob[k], lp, rtol=1e-9)
        np.testing.assert_allclose(mean[k], m, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("family", ["diag_mom", "dlr"])
def test_members_whose_steps_the_line_search_cuts_or_not_are_their_single_filters(family, x64):
    """With the line search (``backtrack=True``) in a vectorised sweep, where ``vmap`` runs
    both branches of its conditional for every member, each member is its own
    :func:`run_filter`: a narrow prior, whose full steps pass, beside wide ones, whose
    steps it cuts (the widest ends elsewhere than without the search)."""
    rng = np.random.default_rng(4)
    spec = MLPSpec(4, (5,), 3, "tanh")
    X = 2.0 * rng.normal(size=(30, 4))
    Y = np.eye(3)[rng.integers(3, size=30)]
    config = make_config(spec.apply, "categorical", family, rank=2, backtrack=True)
    mean0 = np.stack([spec.init_params(seed) for seed in range(3)]).astype(np.float64)
    sigma0 = np.array([0.05, 1.0, 3.0])
    hyper = Hyperparameters(1.0, 1.0, 0.0)
    states = run_sweep(config, init_sweep(config.family, mean0, sigma0), X, Y, hyper, vectorize=True)
    for k in range(3):
        alone = run_filter(config, config.family.init(jnp.asarray(mean0[k]), jnp.asarray(sigma0[k])), X, Y, hyper)
        # Wider priors on larger inputs than the test above: the batched and the single
        # products' round-off grows to 1.4e-9 (relative) in an entry of diag_mom's variances.
        for swept, single in zip(identified(states, k), identified(alone)):
            np.testing.assert_allclose(swept, single, rtol=1e-8, atol=1e-12)
    uncut_config = make_config(spec.apply, "categorical", family, rank=2, backtrack=False)
    uncut = run_filter(uncut_config, config.family.init(jnp.asarray(mean0[2]), jnp.asarray(3.0)), X, Y, hyper)
    assert np.max(np.abs(np.asarray(uncut.mean) - np.asarray(states.mean[2]))) > 1e-2


def test_new_values_reuse_the_compiled_sweep(x64):
    rng = np.random.default_rng(2)
    X, y = rng.normal(size=(20, 3)), rng.normal(size=(20, 1))
    config = make_config(_linear, "gaussian", "diag")
    run_sweep(config, init_sweep(config.family, jnp.zeros(3), [0.1, 1.0]), X, y, Hyperparameters([0.1, 1.0], 1.0, 0.0))
    before = trace_count("sweep")
    states = run_sweep(
        config, init_sweep(config.family, jnp.zeros(3), [3.0, 0.5]), X, y, Hyperparameters([2.0, 0.2], 1.0, 0.0)
    )
    assert trace_count("sweep") == before
    assert states.mean.shape == (2, 3)


def test_sweep_refuses_values_of_the_wrong_length(x64):
    config = make_config(_linear, "gaussian", "diag")
    states = init_sweep(config.family, jnp.zeros(3), [0.1, 1.0, 3.0])
    X, y = np.ones((4, 3)), np.ones((4, 1))
    with pytest.raises(ValueError, match="obs_noise must be a scalar or have leading axis 3"):
        run_sweep(config, states, X, y, Hyperparameters([0.1, 1.0], 1.0, 0.0))
    with pytest.raises(ValueError, match="one key per member"):
        run_sweep(config, states, X, y, Hyperparameters(0.1, 1.0, 0.0), keys=jax.random.split(jax.random.PRNGKey(0), 2))


@pytest.mark.parametrize("vectorize", [False, True])
@pytest.mark.parametrize("family, adaptive", [("dlr", False), ("fc", True)])
def test_a_member_left_out_keeps_its_belief_and_the_others_are_unchanged(vectorize, family, adaptive, x64):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(70, 3))
    y = np.tanh(X @ np.array([1.0, -2.0, 0.5]))[:, None] + 0.1 * rng.normal(size=(70, 1))
    spec = MLPSpec(3, (4,), 1, "tanh")
    config = make_config(spec.apply, "gaussian", family, 2, dynamics=Dynamics(adaptive_obs_noise=adaptive))
    states = init_sweep(config.family, np.asarray(spec.init_params(0), np.float64), np.array([0.1, 0.5, 1.0]))
    hypers = Hyperparameters(np.array([0.05, 0.1, 0.2]), 1.0, 0.0)
    args = (config, states, X, y, hypers, 1, None, 0, PluginPredictive())
    everyone = run_sweep(*args, vectorize=vectorize, return_valid=True)
    some = run_sweep(*args, vectorize=vectorize, return_valid=True, active=[True, False, True])
    for k in (0, 2):
        for a, b in zip(identified(everyone[0], k), identified(some[0], k)):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
        for a, b in zip(everyone[1:], some[1:]):
            np.testing.assert_allclose(a[k], b[k], rtol=1e-12)
    for a, b in zip(identified(states, 1), identified(some[0], 1)):
        np.testing.assert_array_equal(a, b)
    assert np.isnan(some[1][1]).all() and np.isnan(some[2][1]).all()
    if adaptive:  # the noise estimate it had, not one updated
        np.testing.assert_array_equal(some[3][1], [0.1])
    assert some[-1][1]
    with pytest.raises(ValueError, match="one flag per member"):
        run_sweep(*args, active=[True, False])
