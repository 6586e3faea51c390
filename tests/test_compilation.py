"""Compiled code is shared by structure and never rebuilt for hyperparameters or batch
lengths; XLA options that a jaxlib refuses fall back to its defaults."""

import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_digits

from skbong import BONGClassifier, BONGRegressor
from skbong.core import Hyperparameters, MLPSpec, PluginPredictive, make_config, make_predictive, run_filter, trace_count
from skbong.core._filter import _REFUSED_OPTIONS, _default_platform, _refuses_options, default_key, jit_with_options


def _digits(n):
    X, y = load_digits(return_X_y=True)
    return X[:n] / 16, y[:n]


def test_partial_fit_chunks_equal_one_call_and_do_not_recompile():
    X, y = _digits(41 + 41)
    classes = np.unique(y)
    whole = BONGClassifier(random_state=0).partial_fit(X[:41], y[:41], classes=classes)
    pieces = BONGClassifier(random_state=0)
    for rows in (slice(0, 1), slice(1, 8), slice(8, 41)):
        pieces.partial_fit(X[rows], y[rows], classes=classes)
    # The same belief to float32 round-off: mean, diagonal and low-rank precision W W^T.
    # The scan carries W^T W within a call and forms it anew at each, so the calls' beliefs
    # differ by round-off (about 1e-6 of their scale on a CPU), and W itself also by rotations
    # of its columns where eigenvalues are close, which the precision does not see. A GPU's
    # float32 steps round differently: there W W^T of one call was 4.4e-5 of its scale from
    # the float64 fit's (CPU: 2.5e-6), so the bound is also a multiple of that distance. The
    # products are NumPy's in float64: posterior_ holds device arrays, whose products run at
    # JAX's default precision, TF32 on a GPU (the test's products ran so on an H200: 3e-4 of
    # the scale apart).
    (mean, ups, w), (mean1, ups1, w1) = pieces.posterior_, whole.posterior_
    np.testing.assert_allclose(mean, mean1, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(ups, ups1, rtol=2e-5, atol=1e-6)
    whole64 = BONGClassifier(random_state=0, dtype="float64").partial_fit(X[:41], y[:41], classes=classes)
    probes = np.random.default_rng(0).normal(size=(w.shape[0], 3))
    w, w1, w64 = (np.asarray(a.posterior_[2], np.float64) for a in (pieces, whole, whole64))
    precision = w1 @ (w1.T @ probes)
    atol = max(5e-5 * np.abs(precision).max(), 4 * np.abs(precision - w64 @ (w64.T @ probes)).max())
    np.testing.assert_allclose(w @ (w.T @ probes), precision, atol=atol)
    np.testing.assert_allclose(pieces.predict_proba(X), whole.predict_proba(X), atol=1e-5)
    assert pieces.t_ == whole.t_ == 41

    # The buckets for 1, 7 and 33 steps are compiled now; new lengths reuse them.
    before = trace_count("filter")
    for rows in (slice(41, 43), slice(43, 48), slice(48, 60), slice(60, 82)):
        pieces.partial_fit(X[rows], y[rows])
    assert trace_count("filter") == before


def test_new_sigma0_and_clones_do_not_recompile():
    X, y = _digits(300)
    BONGClassifier(random_state=0).fit(X, y).predict(X)
    # A belief that moves between steps is a second program (a static one has no predict step).
    before = trace_count("filter")
    BONGClassifier(dynamics_decay=0.999, process_noise=1e-5, random_state=0).fit(X, y)
    assert trace_count("filter") == before + 1
    before = trace_count()
    est = BONGClassifier(sigma0=0.05, random_state=1).fit(X, y)
    clone(est).set_params(sigma0=0.6, dynamics_decay=0.99, process_noise=1e-4).fit(X, y).predict_proba(X)
    clone(est).set_params(sigma0=0.2, dynamics_decay=0.9, process_noise=0.0).fit(X, y)
    assert trace_count() == before


def test_regressor_obs_noise_does_not_recompile():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(50, 4)), rng.normal(size=50)
    # A fixed value and the default "calibrated" (which also sums the normalised
    # innovations) are two programs; a search over fixed values, or over sigma0 at
    # "calibrated", reuses one.
    BONGRegressor(obs_noise=0.2, random_state=0).fit(X, y)
    BONGRegressor(random_state=0).fit(X, y)
    before = trace_count()
    BONGRegressor(obs_noise=0.5, sigma0=0.1, random_state=0).fit(X, y)
    BONGRegressor(sigma0=0.1, random_state=0).fit(X, y)
    assert trace_count() == before


def test_structure_change_does_compile():
    X, y = _digits(20)
    before = trace_count("filter")
    BONGClassifier(rank=4, random_state=0).fit(X, y)
    assert trace_count("filter") == before + 1


def test_import_defers_flax_until_a_network_is_built():
    """``import skbong`` leaves flax (and what it pulls in) unimported; the first fit, or a
    name of ``skbong.core`` that is a network, imports it."""
    code = (
        "import sys\n"
        "import skbong, skbong.core\n"
        "from skbong import BONGClassifier\n"
        "assert 'flax' not in sys.modules, 'import skbong imported flax'\n"
        "from skbong.core import MLP\n"
        "assert 'flax.nnx' in sys.modules and MLP.__module__ == 'skbong.core._models'\n"
        "import numpy as np\n"
        "X = np.random.default_rng(0).normal(size=(20, 3))\n"
        "print(BONGClassifier(hidden_layer_sizes=(2,)).fit(X, X[:, 0] > 0).score(X, X[:, 0] > 0))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert 0.0 <= float(result.stdout.strip().splitlines()[-1]) <= 1.0


def test_refused_compiler_options_fall_back_to_xla_defaults():
    """A jaxlib that does not know an option (XLA's change between versions) refuses the
    compilation; the program then compiles with XLA's defaults, and the refusal is kept."""
    options = {"xla_cpu_no_such_option_in_any_jaxlib": True}
    with pytest.raises(jax.errors.JaxRuntimeError) as refused:
        jax.jit(lambda x: x + 1, compiler_options=options)(1.0)
    assert _refuses_options(refused.value)
    double_plus_one = jit_with_options(lambda x: 2 * x + 1, options)
    np.testing.assert_array_equal(double_plus_one(jnp.arange(3.0)), [1.0, 3.0, 5.0])
    np.testing.assert_array_equal(double_plus_one(jnp.arange(2.0)), [1.0, 3.0])
    if _default_platform() == "cpu":  # options apply to CPU programs only (as jit_with_options decides)
        assert tuple(options.items()) in _REFUSED_OPTIONS


def test_a_refused_option_set_keeps_its_older_options():
    """A set whose newest option this jaxlib refuses compiles with the older ones, not with
    XLA's defaults: a jaxlib without the scan's copy-insertion option must keep the opt-out
    of YNNPACK (``CPU_COMPILER_OPTIONS``)."""
    from skbong.core._filter import CPU_COMPILER_OPTIONS, _compiler_options

    options = {**CPU_COMPILER_OPTIONS, "xla_cpu_no_such_option_in_any_jaxlib": True}
    plus_one = jit_with_options(lambda x: x + 1, options)
    np.testing.assert_array_equal(plus_one(jnp.arange(3.0)), [1.0, 2.0, 3.0])
    if _default_platform() == "cpu":
        assert tuple(options.items()) in _REFUSED_OPTIONS
        assert tuple(CPU_COMPILER_OPTIONS.items()) not in _REFUSED_OPTIONS
        assert _compiler_options("cpu", tuple(options.items())) == tuple(CPU_COMPILER_OPTIONS.items())
    assert _compiler_options("gpu", tuple(options.items())) == ()


def test_a_small_networks_scan_is_compiled_for_compile_time():
    """The filter's scan takes the compile-time options below ``SMALL_NETWORK`` parameters,
    for a single belief and for a sweep's, and the run-time ones from there; this jaxlib
    accepts every set (none is remembered as refused)."""
    from skbong.core import DiagState
    from skbong.core._filter import (
        CPU_COMPILER_OPTIONS,
        CPU_SCAN_OPTIONS,
        CPU_SMALL_NETWORK_OPTIONS,
        SMALL_NETWORK,
        _scan_options,
    )

    def belief(*shape):
        return DiagState(jnp.zeros(shape), jnp.ones(shape))

    assert _scan_options(None, belief(SMALL_NETWORK - 1)) is CPU_SMALL_NETWORK_OPTIONS
    assert _scan_options(None, belief(3, SMALL_NETWORK - 1)) is CPU_SMALL_NETWORK_OPTIONS
    assert _scan_options(None, belief(SMALL_NETWORK)) is CPU_SCAN_OPTIONS
    assert _scan_options(None, belief(3, SMALL_NETWORK)) is CPU_SCAN_OPTIONS
    for options in (CPU_SMALL_NETWORK_OPTIONS, CPU_SCAN_OPTIONS, CPU_COMPILER_OPTIONS):
        double_plus_one = jit_with_options(lambda x: 2 * x + 1, options)
        np.testing.assert_array_equal(double_plus_one(jnp.arange(3.0)), [1.0, 3.0, 5.0])
        assert tuple(options.items()) not in _REFUSED_OPTIONS


def _small_stream(n_rows):
    """An MLP 4-5-3 and ``n_rows`` rows of inputs and one-hot targets for it."""
    rng = np.random.default_rng(0)
    return MLPSpec(4, (5,), 3, "tanh"), rng.normal(size=(n_rows, 4)), np.eye(3)[rng.integers(3, size=n_rows)]


@pytest.mark.parametrize("hessian", ["lin_hess", "lin_ef"])
def test_deterministic_filters_ignore_their_key(hessian):
    """Without a key, a filter whose estimator and record draw nothing gets a placeholder
    (no compilation of ``PRNGKey``): its result must not depend on any key."""
    spec, X, Y = _small_stream(20)
    config = make_config(spec.apply, "categorical", "dlr", 2, "bong", hessian)
    state = config.family.init(jnp.asarray(spec.init_params(0)), jnp.float32(0.3))
    hyper = Hyperparameters(1.0, 1.0, 0.0)
    runs = [
        run_filter(config, state, X, Y, hyper, key=key, record=PluginPredictive(), record_key=key)
        for key in (None, jax.random.PRNGKey(0), jax.random.PRNGKey(12345))
    ]
    for run in runs[1:]:
        for a, b in zip(jax.tree_util.tree_leaves(run), jax.tree_util.tree_leaves(runs[0])):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("prng_impl", ["threefry2x32", "rbg"])
def test_a_deterministic_filter_runs_under_any_default_prng(prng_impl):
    """The placeholder key has the default PRNG's key shape, whichever PRNG that is."""
    spec, X, Y = _small_stream(9)
    config = make_config(spec.apply, "categorical", "diag")
    state = config.family.init(jnp.asarray(spec.init_params(0)), jnp.float32(0.3))
    with jax.default_prng_impl(prng_impl):
        assert default_key(None).shape == jax.random.PRNGKey(0).shape
        state = run_filter(config, state, X, Y, Hyperparameters(1.0, 1.0, 0.0))
    assert np.all(np.isfinite(state.mean))


def test_an_estimator_switched_to_another_default_prng_draws_with_it():
    """A process that fitted under threefry and then sets jax_default_prng_impl="rbg": the
    estimator's compiled programs that make keys (the seed's streams, the network's
    initialiser) are cached per implementation, which jit's cache does not tell apart.
    Before, the fit raised (threefry-shaped keys under rbg) and the weights were drawn with
    threefry. Reference: the eager construction under rbg, which compiles nothing."""
    from flax import nnx

    from networks import assert_same_initial_weights
    from skbong.core import MLP, build_module, module_params

    X, y = load_digits(return_X_y=True)
    X, y = X[:60] / 16, y[:60]
    params = dict(hidden_layer_sizes=(4,), hessian="mc_ef", n_mc_samples=3, predictive="mc", n_predictive_samples=5)
    threefry = BONGClassifier(random_state=0, **params).fit(X, y)
    with jax.default_prng_impl("rbg"):
        rbg = BONGClassifier(random_state=0, **params).fit(X, y)
        assert np.all(np.isfinite(rbg.predict_proba(X)))
        eager = module_params(MLP((64, 4, 10), "relu", nnx.Rngs(7)))
        assert_same_initial_weights(module_params(build_module(MLP, ((64, 4, 10), "relu"), 7)), eager)
    assert not np.array_equal(module_params(MLP((64, 4, 10), "relu", nnx.Rngs(7))), eager)  # the PRNGs differ
    assert not np.array_equal(rbg.posterior_.mean, threefry.posterior_.mean)


def test_stochastic_filters_default_to_prng_key_zero():
    spec, X, Y = _small_stream(20)
    config = make_config(spec.apply, "categorical", "diag", algorithm="bong", hessian="mc_ef", n_mc_samples=3)
    state = config.family.init(jnp.asarray(spec.init_params(0)), jnp.float32(0.3))
    hyper = Hyperparameters(1.0, 1.0, 0.0)
    record = make_predictive("mc", "categorical", 5)
    default = run_filter(config, state, X, Y, hyper, record=record)
    zero = run_filter(config, state, X, Y, hyper, key=jax.random.PRNGKey(0), record=record, record_key=jax.random.PRNGKey(0))
    other = run_filter(config, state, X, Y, hyper, key=jax.random.PRNGKey(1), record=record, record_key=jax.random.PRNGKey(1))
    for a, b in zip(jax.tree_util.tree_leaves(default), jax.tree_util.tree_leaves(zero)):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(other[0].mean, default[0].mean)


def test_a_classifier_stream_of_calls_of_new_lengths_compiles_nothing_new(caplog):
    # The check for forgotten rows exponentiated its host log-probabilities with jnp.exp,
    # compiling one program per new call length (a probe: 76 of 80 calls, 77% of the time).
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 4)).astype(np.float32)
    y = (rng.random(3000) < 1 / (1 + np.exp(-(X @ np.array([1.5, -1.0, 0.5, 0.0]))))).astype(int)
    clf = BONGClassifier(hidden_layer_sizes=(), family="diag", sigma0=1.0, random_state=0)
    clf.partial_fit(X[:600], y[:600], classes=[0, 1])
    for n in (1, 5, 60, 600):  # every bucket of the scan compiled
        clf.partial_fit(X[:n], y[:n])
    start = 600
    with caplog.at_level("WARNING", logger="jax"), jax.log_compiles():
        for n in (50, 77, 123, 250, 301):
            clf.partial_fit(X[start : start + n], y[start : start + n])
            start += n
    assert not [r.getMessage() for r in caplog.records if r.getMessage().startswith("Compiling")]


def test_the_prior_pull_check_of_a_low_rank_belief_is_one_compiled_program(caplog):
    # It computed the belief's marginal variances op by op: 17 programs compiled in the
    # middle of a stream whose scans were all compiled (a probe: one call 4.8 s, 0.05 s the rest).
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 5)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    clf = BONGClassifier(hidden_layer_sizes=(7,), random_state=0)  # a shape of its own: P = 58
    clf.partial_fit(X[:600], y[:600], classes=[0, 1])
    for n in (1, 5, 60, 600):  # every bucket of the scan compiled
        clf.partial_fit(X[:n], y[:n])
    with caplog.at_level("WARNING", logger="jax"), jax.log_compiles(), pytest.warns(Warning):
        while clf.__dict__.get("_health_warning") != "prior_conflict":  # the same rows, over and over
            clf.partial_fit(X[:476], y[:476])
            assert clf.t_ < 20_000
    assert len([r for r in caplog.records if r.getMessage().startswith("Compiling")]) <= 1
