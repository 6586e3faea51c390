"""The core entry points refuse streams whose pieces do not fit together.

``run_filter`` pads and reshapes its chunks, so before these checks a ``Y`` shorter than
``X`` was padded with targets of 0 that weighed 1, a ``Y`` narrower than the network's
outputs broadcast against them, and a negative noise gave a posterior of NaN, all without
a word (found by probing the core as a user)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from skbong.core import (
    Hyperparameters,
    filter_posterior,
    make_config,
    make_predictive,
    predict_distribution,
    run_filter,
)
from skbong.core._filter import _oversized_array


def _linear(theta, x):
    return x @ theta[:, None]


def _two_logits(theta, x):
    return x @ theta.reshape(3, 2)


def _one_output_per_row_flat(theta, x):
    return x @ theta


def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 3))
    return X, (X @ np.array([1.0, -2.0, 0.5]))[:, None]


@pytest.mark.parametrize(
    "change, match",
    [
        ({"Y": "short"}, "X has 20 rows, Y has shape \\(10, 1\\)"),
        ({"X": "short"}, "X has 10 rows, Y has shape \\(20, 1\\)"),
        ({"apply_fn": _two_logits, "init_mean": np.zeros(6)}, "returns 2 output\\(s\\) per row and Y has 1"),
        ({"apply_fn": _two_logits, "init_mean": np.zeros(6), "likelihood": "categorical"}, "one-hot rows"),
        ({"init_mean": np.zeros(4)}, "fails for params of shape \\(4,\\)"),
        # A (B,) output passed the width check (one output, one column of Y) and then failed
        # inside JAX's VJP with a message about float32[1, 1].
        ({"apply_fn": _one_output_per_row_flat}, "must return one row of outputs per row of x, shape \\(B, C\\)"),
        ({"init_mean": np.zeros(3, int)}, "float32 or float64 array"),
        ({"obs_noise": -1.0}, "obs_noise must be positive"),
        ({"obs_noise": np.ones(3)}, "one per output \\(1\\)"),
        ({"sigma0": 0.0}, "sigma0 must be positive"),
        ({"batch_size": 0}, "batch_size must be a positive integer"),
        ({"n_mc_samples": 0, "hessian": "mc_ef"}, "n_mc_samples must be a positive integer"),
        ({"rank": 0}, "rank must be a positive integer"),
        ({"X": "nan"}, "NaN"),
        ({"Y": "nan"}, "Y holds NaN"),
        ({"sigma0": np.inf}, "sigma0 must be positive and finite"),
        # A (P, P) matrix was taken elementwise (its off-diagonal entries dropped) on fc and
        # fc_mom and gave JAX's broadcasting error on the others; a (P + 1,) vector the latter.
        ({"sigma0": np.eye(3) + 0.1}, "sigma0 must be one prior standard deviation or one per parameter"),
        ({"sigma0": np.ones(4)}, "got shape \\(4,\\)"),
        # A constant out of range is refused as the same value from a schedule is: before,
        # decay 2 learned weights of 10 for a truth of 1, and a negative process noise gave NaN.
        ({"dynamics_decay": 2.0}, "dynamics_decay must be finite and in \\(0, 1\\]"),
        ({"dynamics_decay": 0.0}, "dynamics_decay must be finite and in \\(0, 1\\]"),
        ({"process_noise": -1.0}, "process_noise must be finite and >= 0"),
        ({"algorithm": "blr", "learning_rate": -1.0}, "learning_rate must be finite and > 0"),
        # The same values as JAX arrays, which a JAX user passes: before, they ran unchecked
        # to a NaN posterior (obs_noise 0 or -1, process_noise -0.5) or to means near 1e8.
        ({"obs_noise": jnp.asarray(0.0)}, "obs_noise must be positive"),
        ({"dynamics_decay": jnp.asarray(1.5)}, "dynamics_decay must be finite and in \\(0, 1\\]"),
        ({"process_noise": jnp.asarray(-0.5)}, "process_noise must be finite and >= 0"),
        ({"algorithm": "bog", "learning_rate": jnp.asarray(-1.0)}, "learning_rate must be finite and > 0"),
        ({"n_seen": -5}, "n_seen must be a non-negative integer"),
        ({"inflation": 0.5}, "inflation=0.5 has no effect"),
        ({"obs_noise_rate": 0.1}, "obs_noise_rate=0.1 has no effect"),
        (
            {"apply_fn": _two_logits, "init_mean": np.zeros(6), "likelihood": "categorical", "Y": "not one-hot"},
            "one-hot rows \\(or class probabilities",
        ),
    ],
)
def test_filter_posterior_refuses_what_does_not_fit_together(change, match):
    X, Y = _data()
    kwargs = {"apply_fn": _linear, "init_mean": np.zeros(3), "X": X, "Y": Y, "family": "dlr", "rank": 2}
    if change.get("Y") == "short":
        kwargs["Y"], change = Y[:10], {}
    elif change.get("X") == "short":
        kwargs["X"], change = X[:10], {}
    elif change.get("X") == "nan":
        kwargs["X"], change = np.where(np.arange(20)[:, None] == 3, np.nan, X), {}
    elif change.get("Y") == "nan":
        kwargs["Y"], change = np.where(np.arange(20)[:, None] == 3, np.nan, Y), {}
    elif change.get("Y") == "not one-hot":
        kwargs["Y"] = np.tile([3.0, -1.0], (20, 1))
        del change["Y"]
    kwargs.update(change)
    kwargs["init_mean"] = jnp.asarray(kwargs["init_mean"])
    with pytest.raises(ValueError, match=match):
        filter_posterior(**kwargs)


def test_run_filter_checks_too_and_a_matching_stream_runs():
    X, Y = _data()
    config = make_config(_linear, "gaussian", "fc")
    state = config.family.init(jnp.zeros(3), jnp.asarray(1.0))
    with pytest.raises(ValueError, match="X has 20 rows"):
        run_filter(config, state, X, Y[:10], Hyperparameters(0.1, 1.0, 0.0))
    # One observation per row, the linear model's outputs one per column: it learns the weights.
    state = run_filter(config, state, X, Y, Hyperparameters(1e-4, 1.0, 0.0))
    np.testing.assert_allclose(np.asarray(state.mean), [1.0, -2.0, 0.5], atol=1e-2)


@pytest.mark.parametrize("family", ["fc", "fc_mom", "diag", "diag_mom"])
def test_one_prior_scale_per_parameter_is_the_prior_it_names(family, x64):
    """``sigma0`` of shape (P,) is the prior ``N(0, diag(sigma0^2))``. On the linear-Gaussian
    model BONG-LIN-HESS-FC is exact (Prop. 4.1), so its posterior is the closed form
    ``(diag(sigma0^-2) + X^T X / R)^-1``. The other families are checked through
    ``theta = s * phi``: a unit prior on ``phi`` with inputs ``x * s`` is the same model, and
    their updates (the moment step; Eqs. 212-213 with the Kalman gain on the diagonal
    families) commute with that diagonal rescaling."""
    X, Y = _data()
    scales = np.array([0.3, 0.6, 0.05])
    noise = 5.0  # small enough a step that BONG on moments (fc_mom) stays positive definite
    run = filter_posterior(_linear, jnp.zeros(3), X, Y, family=family, sigma0=jnp.asarray(scales), obs_noise=noise)
    assert np.all(np.isfinite(np.asarray(run.mean)))
    if family == "fc":
        cov = np.linalg.inv(np.diag(scales**-2.0) + X.T @ X / noise)
        np.testing.assert_allclose(np.asarray(run.cov), cov, rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(np.asarray(run.mean), cov @ X.T @ Y[:, 0] / noise, rtol=1e-8, atol=1e-12)
    else:
        unit = filter_posterior(_linear, jnp.zeros(3), X * scales, Y, family=family, sigma0=1.0, obs_noise=noise)
        np.testing.assert_allclose(np.asarray(run.mean), scales * np.asarray(unit.mean), rtol=1e-8, atol=1e-12)
        assert not np.allclose(np.asarray(unit.mean), np.asarray(run.mean), rtol=1e-2)


def test_vmap_over_sigma0_gives_the_separate_runs():
    """The checks leave a traced ``sigma0`` alone: ``jax.vmap`` of a function that calls
    ``filter_posterior`` runs one filter per prior scale, each equal to its own call."""
    X, Y = _data()

    def final_mean(sigma0):
        return filter_posterior(_linear, jnp.zeros(3), X, Y, family="fc", sigma0=sigma0, obs_noise=0.5).mean

    scales = jnp.asarray([0.1, 1.0])
    batched = jax.vmap(final_mean)(scales)
    for row, sigma0 in zip(np.asarray(batched), [0.1, 1.0]):
        np.testing.assert_allclose(row, np.asarray(final_mean(sigma0)), rtol=1e-5, atol=1e-6)


def test_an_xla_error_naming_an_array_beyond_the_device_reads_as_out_of_memory():
    # XLA:GPU (jax 0.11.2 on an H200) refused to compile the 262,144-row step of
    # test_step_beyond_the_device_memory_raises_memory_error_and_keeps_the_state with this
    # INTERNAL error, where a CPU reports RESOURCE_EXHAUSTED: the filter reads the array's size.
    gpu = (
        "INTERNAL: No supported config found for HLO: %gemm_fusion_dot.31 = f32[2061584302080,2]{1,0} "
        "fusion(%loop_multiply_fusion.9, %bitcast.507.0), kind=kCustom, calls=%gemm_fusion_dot.31_computation"
    )
    array, size, limit, _ = _oversized_array(gpu)
    assert array == "f32[2061584302080,2]" and size == 2061584302080 * 2 * 4 and 0 < limit < size
    assert _oversized_array(gpu.replace("2061584302080", "2061")) is None  # 16 kB: another failure
    assert _oversized_array("INTERNAL: pred[3] and s64[7,2] but bf16[4096,4096,4096,64]")[:2] == (
        "bf16[4096,4096,4096,64]", 2 * 4096**3 * 64
    )
    assert _oversized_array("INTERNAL: a failure that names no array") is None


@pytest.mark.parametrize("cov_floor", [-1.0, float("nan"), "0.1", True])
def test_make_config_refuses_a_cov_floor_that_is_no_variance(cov_floor):
    # A negative or NaN floor ran as no floor at all: Categorical tested "> 0" in one place
    # and "== 0" in another (a probe of the core).
    with pytest.raises(ValueError, match="cov_floor must be a finite number >= 0"):
        make_config(_two_logits, "categorical", "dlr", 2, cov_floor=cov_floor)
    make_config(_two_logits, "categorical", "dlr", 2, cov_floor=np.float32(0.1))


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the message comes from the CPU's XLA options")
@pytest.mark.parametrize("transform", [jax.jit, jax.grad])
def test_tracing_filter_posterior_says_what_to_do_instead(transform):
    # JAX's own error named an inner program (_scan) and its XLA options (a probe of the core).
    X, Y = _data()

    def fit(sigma0):
        return filter_posterior(_linear, jnp.zeros(3), X, Y, family="dlr", rank=2, sigma0=sigma0).mean.sum()

    with pytest.raises(TypeError, match="cannot be traced by jax.jit.*predict_step and update_step"):
        transform(fit)(1.0)


@pytest.mark.parametrize(
    "change, match",
    [
        ({"obs_noise": -1.0}, "obs_noise must be positive and finite"),
        ({"obs_noise": np.ones(3)}, "one per output \\(1\\)"),
        ({"predictive": "probit"}, "'probit' \\(Probit\\) applies to the categorical likelihood only"),
        ({"predictive": "mc"}, "'mc' \\(MonteCarlo\\) applies to the categorical likelihood only"),
        ({"X": "empty"}, "at least one, got shape \\(0, 3\\)"),
        ({"X": "wide"}, "fails for params of shape \\(3,\\) \\(the prior mean\\) and rows of 4 feature"),
        ({"X": "nan"}, "X holds NaN"),
        ({"block_rows": 0}, "block_rows must be a positive integer"),
    ],
)
def test_predict_distribution_refuses_what_the_filter_refuses(change, match):
    # Before (a probe of the core): variances of -0.97 and NaN log-probabilities for
    # obs_noise=-1, "probabilities" of exactly 1 from Probit on a Gaussian config, an
    # IndexError for no rows, a dot_general TypeError for a wrong width, NaN for NaN rows,
    # "range() arg 3 must not be zero" for block_rows=0.
    X, Y = _data()
    config = make_config(_linear, "gaussian", "dlr", 2)
    state = run_filter(config, config.family.init(jnp.zeros(3), jnp.asarray(1.0)), X, Y, Hyperparameters(1.0, 1.0, 0.0))
    kwargs = {"obs_noise": 1.0, "block_rows": 8}
    predictive = make_predictive("linearized", "gaussian")
    rows = {"empty": X[:0], "wide": np.ones((5, 4)), "nan": np.where(np.arange(20)[:, None] == 3, np.nan, X)}
    if "predictive" in change:
        predictive = make_predictive(change.pop("predictive"), "categorical")
    X = rows[change.pop("X")] if "X" in change else X
    kwargs.update(change)
    with pytest.raises(ValueError, match=match):
        predict_distribution(config, predictive, state, X, **kwargs)
    valid = predict_distribution(config, make_predictive("linearized", "gaussian"), state, _data()[0], block_rows=8)
    assert valid.mean.shape == (20, 1) and np.all(np.isfinite(valid.mean))


@pytest.mark.parametrize("predictive", ["linearized", "LinearizedGaussian"])
def test_predict_distribution_refuses_a_predictive_name_or_class(predictive):
    # A name gave "'str' object is not callable" from inside the compiled prediction, a
    # class an __init__ TypeError (a probe reproducing the paper with the core).
    from skbong.core import LinearizedGaussian

    X, Y = _data()
    config = make_config(_linear, "gaussian", "dlr", 2)
    state = config.family.init(jnp.zeros(3), jnp.asarray(1.0))
    given = predictive if predictive == "linearized" else LinearizedGaussian
    with pytest.raises(TypeError, match="must be a predictive value such as Probit.*make_predictive"):
        predict_distribution(config, given, state, X)


def test_entry_points_name_the_mistake():
    # Each raised an error that named JAX's internals (a probe of the core): AttributeError
    # 'DiagState' object has no attribute 'cov', NotImplementedError(KeyError) for float16,
    # an IndexError for an unstacked sweep state or one parameter vector, XLA's iota
    # TypeError for a negative number of draws.
    from skbong.core import predict_at, run_sweep, sample_posterior

    X, Y = _data()
    fc, diag = make_config(_linear, "gaussian", "fc"), make_config(_linear, "gaussian", "diag")
    prior = fc.family.init(jnp.zeros(3), jnp.asarray(1.0))
    hyper = Hyperparameters(1.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="state is a DiagState, the belief of another family: family 'fc' keeps"):
        run_filter(fc, diag.family.init(jnp.zeros(3), jnp.asarray(1.0)), X, Y, hyper)
    with pytest.raises(ValueError, match="init_mean must be a 1-D float32 or float64 array.*float16"):
        filter_posterior(_linear, jnp.zeros(3, jnp.float16), X, Y)
    with pytest.raises(ValueError, match="stacked on a leading axis"):
        run_sweep(fc, prior, X, Y, hyper)
    with pytest.raises(ValueError, match="n_samples must be a positive integer, got -1"):
        sample_posterior(fc, prior, -1, jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="shape \\(S, P\\), got shape \\(3,\\)"):
        predict_at(fc, np.zeros(3), X)
    assert predict_at(fc, np.zeros((2, 3)), X).shape == (2, 20, 1)
    assert run_filter(fc, prior, X, Y, hyper).mean.shape == (3,)
    # A belief of another size or rank, and a config without a network: before, XLA's
    # "dot_general requires contracting dimensions to have the same shape" and, at the first
    # run, "Expected a callable value, got None".
    with pytest.raises(ValueError, match="state.cov has shape \\(4, 4\\) where the 'fc' belief of 3 parameters"):
        run_filter(fc, prior._replace(cov=jnp.eye(4)), X, Y, hyper)
    dlr2, dlr3 = make_config(_linear, "gaussian", "dlr", rank=2), make_config(_linear, "gaussian", "dlr", rank=3)
    with pytest.raises(ValueError, match="state.low_rank has shape \\(3, 3\\) where the .dlr. belief .* \\(3, 2\\)"):
        run_filter(dlr2, dlr3.family.init(jnp.zeros(3), jnp.asarray(1.0)), X, Y, hyper)
    with pytest.raises(TypeError, match="apply_fn must be a function apply\\(params_flat, x\\)"):
        make_config(None, "gaussian", "fc")
