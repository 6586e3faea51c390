"""``model=``: any flax NNX network inside the estimators (issue 20 item 1).

The built-in MLP is one such network, so the estimator with ``model=None`` must equal
the estimator given the same MLP; a custom network must get every feature the MLP gets.
"""

import copy
import io
import pickle
import warnings

import jax
import jax.numpy as jnp
import joblib
import numpy as np
import pytest
from flax import nnx
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV

from networks import FeatureConv, ImageCNN  # noqa: E402 (tests/networks.py)
from skbong import BONGClassifier, BONGRegressor
from skbong.core import MLP, module_params, trace_count


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X / 16, y


def _mlp_factory(n_features, n_outputs, *, rngs):
    return MLP((n_features, 8, n_outputs), "tanh", rngs)


def _weights(module):
    return np.asarray(module_params(module)).copy()


@pytest.mark.parametrize("make", [BONGClassifier, BONGRegressor])
def test_builtin_mlp_is_the_same_network_given_as_a_factory(make, digits):
    X, y = digits[0][:200], digits[1][:200]
    builtin = make(hidden_layer_sizes=(8,), activation="tanh", random_state=3).fit(X, y)
    custom = make(model=_mlp_factory, random_state=3).fit(X, y)
    for a, b in zip(builtin.posterior_, custom.posterior_):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(builtin.predict(X), custom.predict(X))


def test_instance_weights_are_the_prior_mean_and_are_never_changed(digits):
    X, y = digits
    module = ImageCNN(rngs=nnx.Rngs(0))
    before = _weights(module)
    # A prior this narrow keeps the posterior mean at the prior mean: the estimator must
    # then predict what the module itself predicts.
    clf = BONGClassifier(model=module, sigma0=1e-7, random_state=0).fit(X[:50], y[:50])
    np.testing.assert_array_equal(_weights(module), before)
    with jax.default_matmul_precision("highest"):  # as the estimator computes (a GPU's default: TF32)
        expected = np.asarray(jax.nn.softmax(module(jnp.asarray(X[50:90], jnp.float32)), axis=-1))
    np.testing.assert_allclose(clf.predict_proba(X[50:90]), expected, rtol=1e-4, atol=1e-6)


def test_instance_and_factory_of_the_same_module_agree(digits):
    X, y = digits[0][:150], digits[1][:150]
    module = FeatureConv(64, 10, rngs=nnx.Rngs(5))
    by_instance = BONGClassifier(model=module, random_state=0).fit(X, y)
    by_factory = BONGClassifier(model=lambda n_in, n_out, rngs: module, random_state=0).fit(X, y)
    for a, b in zip(by_instance.posterior_, by_factory.posterior_):
        np.testing.assert_array_equal(a, b)


def test_cnn_on_digits_learns_in_one_pass(digits):
    X, y = digits
    clf = BONGClassifier(model=ImageCNN(rngs=nnx.Rngs(0)), random_state=0).fit(X[:1000], y[:1000])
    assert clf.score(X[1000:], y[1000:]) > 0.85


@pytest.mark.parametrize("predictive", ["plugin", "probit", "linearized_mc", "mc"])
def test_every_classifier_predictive_with_a_custom_model(predictive, digits):
    X, y = digits[0][:120], digits[1][:120]
    clf = BONGClassifier(model=FeatureConv, predictive=predictive, n_predictive_samples=8, random_state=0)
    clf.fit(X, y)
    proba = clf.predict_proba(X[:20])
    assert proba.shape == (20, 10) and np.all(proba >= 0)
    np.testing.assert_allclose(proba.sum(axis=1), 1, rtol=1e-5)
    np.testing.assert_array_equal(clf.predict(X[:20]), clf.classes_[np.argmax(clf.decision_function(X[:20]), axis=1)])


def test_regressor_return_std_with_a_custom_model(digits):
    X, y = digits[0][:120], digits[1][:120].astype(float)
    reg = BONGRegressor(model=FeatureConv, random_state=0).fit(X, y)
    mean, std = reg.predict(X[:30], return_std=True)
    assert mean.shape == std.shape == (30,) and np.all(std > 0)
    np.testing.assert_array_equal(mean, reg.predict(X[:30]))


def test_params_draws_and_prequential_records_with_a_custom_model(digits):
    X, y = digits[0][:100], digits[1][:100]
    clf = BONGClassifier(model=FeatureConv, prequential=True, random_state=0).fit(X, y)
    assert clf.prequential_log_prob_.shape == (100,) and np.all(np.isfinite(clf.prequential_log_prob_))
    draws = clf.sample_params(5, random_state=0)
    assert draws.shape == (5, clf.posterior_[0].shape[0])
    # At the posterior mean, predict_with_params is the plug-in predictive.
    at_mean = clf.predict_with_params(X[:10], np.asarray(clf.posterior_[0], np.float64))
    np.testing.assert_allclose(at_mean[0], clf.predict_proba(X[:10]), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("model", [FeatureConv, FeatureConv(64, 10, rngs=nnx.Rngs(1))], ids=["factory", "instance"])
def test_pickle_and_joblib_round_trip_then_partial_fit(model, digits):
    X, y = digits[0][:160], digits[1][:160]
    clf = BONGClassifier(model=model, random_state=0).fit(X[:100], y[:100])
    buffer = io.BytesIO()
    joblib.dump(clf, buffer)
    for copy_ in (pickle.loads(pickle.dumps(clf)), joblib.load(io.BytesIO(buffer.getvalue()))):
        np.testing.assert_array_equal(copy_.predict_proba(X[100:]), clf.predict_proba(X[100:]))
        copy_.partial_fit(X[100:], y[100:])
        assert copy_.t_ == 160
    clf.partial_fit(X[100:], y[100:])
    np.testing.assert_array_equal(copy_.predict_proba(X), clf.predict_proba(X))


def test_a_module_whose_class_lives_in_a_script_pickles_by_value(digits):
    # A class defined in a script or notebook (__main__) cannot be imported by loky's or
    # Dask's workers: stored by name, a search with n_jobs=2 failed to unpickle its tasks.
    # Here the class is not even in the __main__ of this process: only a copy by value loads.
    class ScriptNet(nnx.Module):
        def __init__(self, rngs):
            self.hidden, self.out = nnx.Linear(64, 6, rngs=rngs), nnx.Linear(6, 10, rngs=rngs)

        def __call__(self, x):
            return self.out(nnx.tanh(self.hidden(x)))

    ScriptNet.__module__, ScriptNet.__qualname__ = "__main__", "ScriptNet"
    X, y = digits[0][:80], digits[1][:80]
    clf = BONGClassifier(model=ScriptNet(nnx.Rngs(0)), random_state=0).fit(X[:60], y[:60])
    loaded = pickle.loads(pickle.dumps(clf))  # by name, the dump itself failed
    np.testing.assert_array_equal(loaded.predict_proba(X[60:]), clf.predict_proba(X[60:]))
    loaded.partial_fit(X[60:], y[60:])  # the structure is the fitted one
    clf.partial_fit(X[60:], y[60:])
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))


def test_a_factory_that_is_a_lambda_or_lives_in_a_script_pickles_by_value(digits):
    # Plain pickle refused a lambda factory ("Can't pickle local object") and stored a
    # factory class of a script by a name that another script cannot import (a probe),
    # where the user guide says that pickling works with model=.
    class ScriptFactory(nnx.Module):
        def __init__(self, n_features, n_outputs, *, rngs):
            self.hidden, self.out = nnx.Linear(n_features, 6, rngs=rngs), nnx.Linear(6, n_outputs, rngs=rngs)

        def __call__(self, x):
            return self.out(nnx.tanh(self.hidden(x)))

    ScriptFactory.__module__, ScriptFactory.__qualname__ = "__main__", "ScriptFactory"
    X, y = digits[0][:80], digits[1][:80]
    for factory in (lambda n_in, n_out, rngs: nnx.Linear(n_in, n_out, rngs=rngs), ScriptFactory):
        clf = BONGClassifier(model=factory, random_state=0).fit(X[:60], y[:60])
        loaded = pickle.loads(pickle.dumps(clf))
        np.testing.assert_array_equal(loaded.predict_proba(X[60:]), clf.predict_proba(X[60:]))
        loaded.partial_fit(X[60:], y[60:])
        clf.partial_fit(X[60:], y[60:])
        np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))
        refit = clone(loaded).fit(X[:60], y[:60])  # the factory itself came back, and builds
        np.testing.assert_array_equal(refit.posterior_[0], BONGClassifier(model=factory, random_state=0).fit(
            X[:60], y[:60]).posterior_[0])


def test_clones_and_a_sigma0_search_never_recompile(digits):
    X, y = digits[0][:120], digits[1][:120]
    module = ImageCNN(rngs=nnx.Rngs(0))
    # Compiles for both stream lengths of the search: its folds (60 rows) and its refit (120).
    BONGClassifier(model=module, random_state=0).fit(X[:60], y[:60])
    BONGClassifier(model=module, random_state=0).fit(X, y).predict_proba(X)
    before = trace_count()
    search = GridSearchCV(BONGClassifier(model=copy.deepcopy(module), random_state=0), {"sigma0": [0.1, 0.3]}, cv=2)
    search.fit(X, y)
    search.predict_proba(X)
    assert trace_count() == before
    assert clone(search.best_estimator_).model is not module  # clone copied the module


@pytest.mark.parametrize("activation", [nnx.relu, nnx.tanh, nnx.sigmoid], ids=["relu", "tanh", "sigmoid"])
def test_a_sequential_with_jax_activations_clones_pickles_and_keeps_its_dense_path(activation, digits):
    # JAX's activations are objects (custom_jvp, jitted functions) that neither pickle nor
    # survive a deep copy as themselves: a clone's copy was another object, so its graph
    # definition differed (the filter compiled again for each clone) and its chain of
    # dense layers went unrecognised; pickling the estimator failed in JAX.
    X, y = digits[0][:120], digits[1][:120]
    net = nnx.Sequential(nnx.Linear(64, 8, rngs=nnx.Rngs(0)), activation, nnx.Linear(8, 10, rngs=nnx.Rngs(1)))
    clf = BONGClassifier(model=net, random_state=0).fit(X[:100], y[:100])
    assert clf._spec.dense is not None
    predicted = clf.predict_proba(X)
    before = trace_count()
    twin = clone(clf).fit(X[:100], y[:100])
    assert twin.model is not net and twin._spec.dense is not None
    np.testing.assert_array_equal(twin.predict_proba(X), predicted)
    assert trace_count() == before
    for copy_ in (pickle.loads(pickle.dumps(clf)), copy.deepcopy(clf)):
        assert copy_.model.layers[1] is activation
        np.testing.assert_array_equal(copy_.predict_proba(X), predicted)
        assert trace_count() == before
    clf.partial_fit(X[100:], y[100:])
    copy_.partial_fit(X[100:], y[100:])
    np.testing.assert_array_equal(copy_.predict_proba(X), clf.predict_proba(X))


@pytest.mark.parametrize("make", [BONGClassifier, BONGRegressor])
def test_wrong_widths_are_refused_and_lose_nothing(make, digits):
    X, y = digits[0][:60], digits[1][:60]
    n_outputs = 10 if make is BONGClassifier else 1
    est = make(model=ImageCNN(n_outputs, rngs=nnx.Rngs(0)), random_state=0).fit(X, y)
    fitted = copy.deepcopy(est.__dict__)
    with pytest.raises(ValueError, match=r"cannot be applied to a batch of shape \(B, 10\)"):
        est.fit(X[:, :10], y)
    est.set_params(model=ImageCNN(3, rngs=nnx.Rngs(0)))
    with pytest.raises(ValueError, match=rf"to \(1, 3\); it must give \(1, {n_outputs}\)"):
        est.fit(X, y)
    assert est.__dict__.keys() == fitted.keys()
    for a, b in zip(est.posterior_, fitted["posterior_"]):
        np.testing.assert_array_equal(a, b)


def test_a_factory_must_return_a_module(digits):
    X, y = digits[0][:20], digits[1][:20]
    with pytest.raises(TypeError, match="returned ndarray"):
        BONGClassifier(model=lambda n_in, n_out, rngs: np.zeros(3)).fit(X, y)
    # A module class whose constructor takes only rngs (the docs' CNN) is not a factory:
    # the error says how the factory is called and how to wrap it.
    with pytest.raises(TypeError, match=r"model\(n_features, n_outputs, rngs=rngs\).*lambda n_in, n_out, rngs"):
        BONGClassifier(model=lambda rngs: nnx.Linear(64, 10, rngs=rngs)).fit(X, y)
    # A TypeError inside a factory of the right signature is its own bug: it reached the
    # user reworded as a wrong signature.

    def buggy_factory(n_in, n_out, rngs):
        raise TypeError("a bug inside the factory")

    with pytest.raises(TypeError, match="^a bug inside the factory$"):
        BONGClassifier(model=buggy_factory).fit(X, y)


def test_a_flax_linen_module_is_refused_as_such(digits):
    # A linen instance was told that its signature refuses the factory call and to pass
    # "a module instance", which it is (a probe); nothing said that only NNX is taken.
    import flax.linen as nn

    class LinenNet(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(10)(x)

    X, y = digits[0][:20], digits[1][:20]
    fitted = BONGClassifier(hidden_layer_sizes=(4,), random_state=0).fit(X, y)
    before = copy.deepcopy(fitted.__dict__)
    for model in (LinenNet(), LinenNet, nn.Dense(10)):
        with pytest.raises(TypeError, match=r"is a flax.linen module .*take flax NNX modules.*nnx.Linear for nn.Dense"):
            fitted.set_params(model=model).fit(X, y)
        assert set(fitted.__dict__) == set(before)
        np.testing.assert_array_equal(fitted.posterior_[0], before["posterior_"][0])
    # Wrapped for NNX, it draws from the wrapper's rngs at every call, in eval mode too: the
    # advice to call module.eval() cannot help, and the error says so.
    wrapped = nnx.bridge.ToNNX(LinenNet(), rngs=nnx.Rngs(0))
    nnx.bridge.lazy_init(wrapped, jnp.asarray(X[:1], jnp.float32))
    wrapped.eval()
    with pytest.raises(ValueError, match="nnx.bridge.ToNNX wrapper of a flax.linen module draws from its rngs"):
        BONGClassifier(model=wrapped).fit(X, y)


class _NormalisedNet(nnx.Module):
    """A linear layer, BatchNorm with given running statistics and Dropout, then a linear
    read-out. In evaluation mode the norm is a fixed affine map and the dropout the
    identity; in training mode a call changes the statistics and the RNG stream."""

    def __init__(self, rngs, mean, var):
        self.hidden = nnx.Linear(64, 8, rngs=rngs)
        self.norm = nnx.BatchNorm(8, rngs=rngs)
        self.norm.mean[...] = jnp.full(8, mean)
        self.norm.var[...] = jnp.full(8, var)
        self.drop = nnx.Dropout(0.5, rngs=rngs)
        self.out = nnx.Linear(8, 10, rngs=rngs)

    def __call__(self, x):
        return self.out(nnx.relu(self.drop(self.norm(self.hidden(x)))))


class _Affine(nnx.Module):
    def __init__(self, norm, mean, var):
        self.bias = nnx.Param(jnp.asarray(norm.bias[...]))
        self.scale = nnx.Param(jnp.asarray(norm.scale[...]))
        self.mean, self.root = mean, float(np.sqrt(var + norm.epsilon))

    def __call__(self, x):
        return (x - self.mean) / self.root * self.scale + self.bias


class _AffineNet(nnx.Module):
    """A _NormalisedNet in evaluation mode written out, its statistics as Python numbers:
    the same parameters in the same order, and no state besides them."""

    def __init__(self, net, mean, var):
        self.hidden = copy.deepcopy(net.hidden)
        self.norm = _Affine(net.norm, mean, var)
        self.out = copy.deepcopy(net.out)

    def __call__(self, x):
        return self.out(nnx.relu(self.norm(self.hidden(x))))


@pytest.mark.parametrize("mean, var", [(0.0, 1.0), (0.5, 4.0)])
def test_state_besides_the_weights_is_held_constant_and_training_mode_refused(digits, mean, var):
    # Two sets of statistics in one process: modules that differ only in their constants
    # must not share compiled code, which has the constants baked in.
    X, y = digits[0][:120], digits[1][:120]
    net = _NormalisedNet(nnx.Rngs(0), mean, var)
    with pytest.raises(ValueError, match=r"changes its state besides nnx.Param: .*\['norm'\]\['mean'\].*module.eval\(\)"):
        BONGClassifier(model=net).fit(X, y)
    net.eval()
    got = BONGClassifier(model=net, random_state=0, dtype="float64").fit(X, y)
    want = BONGClassifier(model=_AffineNet(net, mean, var), random_state=0, dtype="float64").fit(X, y)
    np.testing.assert_allclose(got.posterior_.mean, want.posterior_.mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got.predict_proba(X), want.predict_proba(X), rtol=1e-9, atol=1e-12)
    restored = pickle.loads(pickle.dumps(got))
    np.testing.assert_array_equal(restored.predict_proba(X), got.predict_proba(X))


def test_a_module_set_after_fit_warns_once_unless_it_is_a_copy_of_the_fitted_one(digits):
    # Its weights are a prior mean, which only fit takes: partial_fit going on without them,
    # silently, would let a user believe they act (as for sigma0, which warns alike).
    X, y = digits[0][:60], digits[1][:60]
    module = ImageCNN(rngs=nnx.Rngs(0))
    clf = BONGClassifier(model=module, random_state=0).fit(X[:30], y[:30])
    mean = clf.posterior_.mean.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        clf.set_params(model=nnx.clone(module)).partial_fit(X[30:40], y[30:40])  # the same weights
        restored = pickle.loads(pickle.dumps(clf))  # keeps which module is the fitted one
        restored.partial_fit(X[40:50], y[40:50])
    other = ImageCNN(rngs=nnx.Rngs(7))
    with pytest.warns(UserWarning, match="model was set to another module after the fit"):
        clf.set_params(model=other).partial_fit(X[40:50], y[40:50])
    np.testing.assert_array_equal(clf.posterior_.mean, restored.posterior_.mean)  # the weights did nothing
    assert not np.array_equal(clf.posterior_.mean, mean)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        clf.partial_fit(X[50:60], y[50:60])  # said once per module
        clf.fit(X[:30], y[:30]).partial_fit(X[30:40], y[30:40])  # a new fit adopted it


class _Scaled(nnx.Module):
    """A layer whose outputs are divided by a constant buffer (an nnx.Variable)."""

    def __init__(self, n_features, n_outputs, temperature):
        self.linear = nnx.Linear(n_features, n_outputs, rngs=nnx.Rngs(0))
        self.temperature = nnx.Variable(jnp.float32(temperature))

    def __call__(self, x):
        return self.linear(x) / self.temperature[...]


def test_a_model_of_another_structure_after_fit_is_refused(digits):
    X, y = digits[0][:60], digits[1][:60]
    clf = BONGClassifier(model=ImageCNN(rngs=nnx.Rngs(0)), random_state=0).fit(X, y)
    clf.set_params(model=ImageCNN(rngs=nnx.Rngs(7)))  # same structure, other weights: told they do nothing
    with pytest.warns(UserWarning, match=r"another module after the fit.*weights, a prior mean, have no effect"):
        clf.partial_fit(X, y)
    clf.predict(X)
    clf.set_params(model=FeatureConv(64, 10, rngs=nnx.Rngs(0)))
    with pytest.raises(ValueError, match=r"model changed since the posterior was fitted \(a network whose nnx.Param"):
        clf.predict(X)
    with pytest.raises(ValueError, match="model changed"):
        clf.partial_fit(X, y)
    clf.fit(X, y).predict(X)  # fit starts again from the new network's prior
    # What differs is said: state besides the weights, or the factory (a probe was told
    # only "another structure" for a module that differed in one buffer).
    fitted = BONGClassifier(model=_Scaled(64, 10, 1.0), random_state=0).fit(X, y)
    with pytest.raises(ValueError, match=r"same layers and weights but other state besides nnx.Param"):
        fitted.set_params(model=_Scaled(64, 10, 2.0)).predict(X)
    fitted = BONGClassifier(model=_mlp_factory, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match=r"fitted with the factory <function _mlp_factory.*now the built-in MLP"):
        fitted.set_params(model=None).predict(X)


def test_auto_sigma0_on_a_custom_cnn(digits):
    X, y = digits
    clf = BONGClassifier(model=ImageCNN(rngs=nnx.Rngs(0)), sigma0="auto", random_state=0).fit(X[:600], y[:600])
    fixed = BONGClassifier(model=ImageCNN(rngs=nnx.Rngs(0)), sigma0=clf.sigma0_, random_state=0).fit(X[:600], y[:600])
    # The kept posterior is the chosen scale's, the same as a fit at that scale alone.
    np.testing.assert_allclose(clf.posterior_[0], fixed.posterior_[0], rtol=1e-4, atol=1e-5)
    assert clf.sigma0_weights_.shape == (5,) and np.isclose(clf.sigma0_weights_.sum(), 1)
    assert clf.score(X[1000:], y[1000:]) > 0.8


def test_weights_stored_in_bfloat16_are_the_prior_mean_in_the_estimators_dtype(digits):
    # bfloat16 is a floating type numpy knows only through ml_dtypes (kind 'V'). The
    # network computes in the dtype of the flat vector, so the filter is that of a float32
    # network with the bfloat16 weights; one that computes in bfloat16 itself gets its
    # outputs cast back.
    X, y = digits[0][:100], digits[1][:100]
    stored = nnx.Linear(64, 10, param_dtype=jnp.bfloat16, rngs=nnx.Rngs(0))
    widened = nnx.Linear(64, 10, rngs=nnx.Rngs(0))
    widened.kernel[...] = stored.kernel[...].astype(jnp.float32)
    widened.bias[...] = stored.bias[...].astype(jnp.float32)
    got = BONGClassifier(model=stored, random_state=0).fit(X, y)
    want = BONGClassifier(model=widened, random_state=0).fit(X, y)
    assert got.posterior_.mean.dtype == np.float32
    np.testing.assert_array_equal(got.predict_proba(X), want.predict_proba(X))
    in_bfloat16 = nnx.Linear(64, 10, param_dtype=jnp.bfloat16, dtype=jnp.bfloat16, rngs=nnx.Rngs(0))
    proba = BONGClassifier(model=in_bfloat16, random_state=0).fit(X, y).predict_proba(X)
    assert np.all(np.isfinite(proba))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-5)


class _Chain(nnx.Sequential):
    """An ``nnx.Sequential`` under another name: the same network, which the estimators do
    not recognise as a dense chain (a subclass may compute something else)."""


@pytest.mark.parametrize("family, hessian, batch_size", [("diag", "lin_hess", 1), ("dlr", "mc_ef", 2)])
def test_a_sequential_of_linear_layers_takes_the_factored_path_to_the_same_fit(digits, family, hessian, batch_size):
    """An ``nnx.Sequential`` of ``nnx.Linear`` layers and one activation carries its layout
    (the steps read the per-layer factors of the root); a subclass of it does not (the
    ``P x K`` root). Both fit the same posterior, to float32 round-off. (MC-EF with one row
    per step draws the first layer's pre-activation on the factored path, other numbers
    with the same law, tested in ``tests/core/test_families.py``; with two rows a step both
    paths draw every weight from the same keys.)"""
    X, y = digits[0][:200], digits[1][:200]
    proba = {}
    for cls in (nnx.Sequential, _Chain):
        def build(n_features, n_outputs, rngs, cls=cls):
            return cls(nnx.Linear(n_features, 8, rngs=rngs), nnx.tanh, nnx.Linear(8, n_outputs, rngs=rngs))

        clf = BONGClassifier(model=build, family=family, hessian=hessian, rank=3, batch_size=batch_size,
                             random_state=0).fit(X, y)
        assert hasattr(clf._spec.apply, "dense_network") == (cls is nnx.Sequential)
        proba[cls] = clf.predict_proba(X)
    np.testing.assert_allclose(proba[nnx.Sequential], proba[_Chain], atol=1e-5)
    assert clf.score(X, y) > 0.5


def test_a_layer_used_twice_takes_the_general_path_to_the_same_fit(digits):
    """A weight-tied ``nnx.Sequential`` (one Linear layer at two places; flax keeps its
    weights once) is no chain of distinct dense layers: it carries no layout and fits
    what the same network fits through the general path (a subclass, never recognised)."""
    X, y = digits[0][:200], digits[1][:200]
    proba = {}
    for cls in (nnx.Sequential, _Chain):
        rngs = nnx.Rngs(0)
        block = nnx.Linear(8, 8, rngs=rngs)
        net = cls(nnx.Linear(64, 8, rngs=rngs), nnx.tanh, block, nnx.tanh, block, nnx.tanh, nnx.Linear(8, 10, rngs=rngs))
        clf = BONGClassifier(model=net, family="diag", random_state=0).fit(X, y)
        assert clf._spec.n_params == 64 * 8 + 8 + 8 * 8 + 8 + 8 * 10 + 10
        assert not hasattr(clf._spec.apply, "dense_network")
        proba[cls] = clf.predict_proba(X)
    np.testing.assert_allclose(proba[nnx.Sequential], proba[_Chain], atol=1e-6)


class _Float64Only(nnx.Module):
    """A network that refuses any input but float64."""

    def __init__(self, n_features, n_outputs, rngs):
        self.out = nnx.Linear(n_features, n_outputs, rngs=rngs)

    def __call__(self, x):
        if x.dtype != jnp.float64:
            raise TypeError(f"need float64 input, got {x.dtype}")
        return self.out(x)


def test_the_width_check_runs_in_the_estimators_dtype(digits):
    # The network is checked as the filter will run it: in float64 for dtype="float64",
    # whatever the dtype of the module's own weights (float32 here).
    X, y = digits[0][:60], digits[1][:60]
    clf = BONGClassifier(model=_Float64Only, dtype="float64", random_state=0).fit(X, y)
    assert clf.posterior_.mean.dtype == np.float64 and np.all(np.isfinite(clf.predict_proba(X)))
    with pytest.raises(ValueError, match="need float64 input, got float32"):
        BONGClassifier(model=_Float64Only, random_state=0).fit(X, y)


class _Squeezed(nnx.Module):  # squeezes its batch axis away when it holds one row
    def __init__(self, rngs):
        self.out = nnx.Linear(64, 10, rngs=rngs)

    def __call__(self, x):
        return self.out(x).squeeze()


class _NoWeights(nnx.Module):
    def __call__(self, x):
        return x[:, :10]


class _IntegerParam(nnx.Module):  # an index table stored as a weight by mistake
    def __init__(self, rngs):
        self.columns = nnx.Param(jnp.arange(64, dtype=jnp.int32))
        self.out = nnx.Linear(64, 10, rngs=rngs)

    def __call__(self, x):
        return self.out(x[:, self.columns[...]])


class _WithHidden(nnx.Module):  # returns its logits and its hidden layer
    def __init__(self, rngs):
        self.hidden, self.out = nnx.Linear(64, 8, rngs=rngs), nnx.Linear(8, 10, rngs=rngs)

    def __call__(self, x):
        h = nnx.relu(self.hidden(x))
        return self.out(h), h


class _BoolLogits(nnx.Module):  # thresholds its logits: no gradient in the weights
    def __init__(self, rngs):
        self.out = nnx.Linear(64, 10, rngs=rngs)

    def __call__(self, x):
        return self.out(x) > 0


class _Noisy(nnx.Module):  # draws from its own RNG stream on every call
    def __init__(self, rngs):
        self.out = nnx.Linear(64, 10, rngs=rngs)
        self.rngs = rngs

    def __call__(self, x):
        return self.out(x + 0.01 * jax.random.normal(self.rngs.noise(), x.shape))


@pytest.mark.parametrize(
    "build, error, match",
    [
        (_Squeezed, ValueError, r"maps a batch of shape \(1, 64\) to \(10,\); it must give \(1, 10\)"),
        (lambda rngs: _NoWeights(), ValueError, "has no nnx.Param weights"),
        (_IntegerParam, TypeError, "nnx.Param 'columns' holds int32 values.*nnx.Variable"),
        (_WithHidden, ValueError, "returned a tuple; it must return one array of shape"),
        (_Noisy, ValueError, r"\['rngs'\].*draws from an nnx.Rngs stream in its own __call__"),
        (_BoolLogits, ValueError, "returned bool values; it must return real floating-point logits"),
    ],
    ids=["squeezes-one-row", "no-weights", "integer-param", "tuple-output", "own-rng-stream", "bool-output"],
)
def test_networks_that_break_the_contract_say_what_to_change_and_lose_nothing(digits, build, error, match):
    X, y = digits[0][:60], digits[1][:60]
    clf = BONGClassifier(hidden_layer_sizes=(4,), random_state=0).fit(X, y)
    fitted = copy.deepcopy(clf.__dict__)
    clf.set_params(model=build(rngs=nnx.Rngs(0)))
    with pytest.raises(error, match=match):
        clf.fit(X, y)
    assert clf.__dict__.keys() == fitted.keys()
    for a, b in zip(clf.posterior_, fitted["posterior_"]):
        np.testing.assert_array_equal(a, b)


class _LogOfInputs(nnx.Module):  # log(1 + x): -inf where a feature is -1
    def __init__(self, rngs):
        self.out = nnx.Linear(64, 10, rngs=rngs)

    def __call__(self, x):
        return self.out(jnp.log1p(x))


def test_outputs_not_finite_at_the_prior_mean_are_blamed_on_the_network_not_sigma0(digits):
    """A network that computes NaN or inf from some inputs at its initial weights breaks
    any posterior; the error names the network and the first bad row, not sigma0."""
    X, y = digits[0][:60].copy(), digits[1][:60]
    X[37, 1] = -1.0  # the row on which the network's log goes non-finite
    for sigma0 in (0.3, 1e-4, "auto"):
        clf = BONGClassifier(model=_LogOfInputs(nnx.Rngs(0)), sigma0=sigma0, random_state=0)
        with pytest.raises(FloatingPointError, match=r"not finite .* at its initial weights.* on 1 of the 60 rows of X \(the first is row 37\)"):
            clf.fit(X, y)
        assert not hasattr(clf, "posterior_")
    BONGClassifier(model=_LogOfInputs(nnx.Rngs(0)), random_state=0).fit(np.delete(X, 37, axis=0), np.delete(y, 37))


class _SquareRootFeatures(nnx.Module):  # finite outputs, a NaN gradient where z <= 0
    def __init__(self, n_features, n_outputs, rngs):
        self.hidden = nnx.Linear(n_features, 8, rngs=rngs)
        self.out = nnx.Linear(8, n_outputs, rngs=rngs)

    def __call__(self, x):
        z = self.hidden(x)
        return self.out(jnp.where(z > 0, jnp.sqrt(z), 0.0))


@pytest.mark.parametrize("make", [BONGClassifier, BONGRegressor])
def test_a_gradient_not_finite_at_the_prior_mean_is_blamed_on_the_network_not_sigma0(make):
    # The untaken branch of jnp.where(z > 0, jnp.sqrt(z), 0) has an infinite derivative at
    # z <= 0: every update reads NaN, and the error used to advise a smaller sigma0.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    y = rng.integers(0, 3, 200) if make is BONGClassifier else X[:, 0]
    for sigma0 in (0.3, 1e-6):
        with pytest.raises(FloatingPointError, match="gradient of model's outputs in its weights is not finite"):
            make(model=_SquareRootFeatures, sigma0=sigma0, random_state=0).fit(X, y)


class _ScaledByConfig(nnx.Module):
    """A linear model with a plain dict among its static attributes (not hashable)."""

    def __init__(self, n_features, n_outputs, rngs):
        self.config = {"scale": 2.0}
        self.linear = nnx.Linear(n_features, n_outputs, rngs=rngs)

    def __call__(self, x):
        return self.linear(x) * self.config["scale"]


def test_a_module_with_an_unhashable_attribute_compiles_once():
    # Its spec cannot be hashed, so equal specs cannot share one apply; one spec object must
    # still keep its own, or every predict and partial_fit compiles the filter again.
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(100, 6)), rng.integers(0, 3, 100)
    clf = BONGClassifier(model=_ScaledByConfig(6, 3, nnx.Rngs(0)), random_state=0).fit(X, y)
    clf.predict_proba(X[:10])
    clf.partial_fit(X[:10], y[:10])
    before = trace_count()
    for _ in range(3):
        clf.predict_proba(X[:10])
        clf.partial_fit(X[:10], y[:10])
    assert trace_count() == before
    reloaded = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(reloaded.predict_proba(X), clf.predict_proba(X))


class _CountsCalls(nnx.Module):  # a Python int held in an nnx.Variable, a Python float in a Param
    def __init__(self, n_features, n_outputs, rngs):
        self.linear = nnx.Linear(n_features, n_outputs, rngs=rngs)
        self.calls = nnx.Variable(0)
        self.temperature = nnx.Param(1.0)

    def __call__(self, x):
        return self.linear(x) * self.temperature


def _tied_chain(n_features, n_outputs, rngs, chain=nnx.Sequential):
    """A chain of Linear layers, two of which share one bias nnx.Param."""
    first, second = nnx.Linear(n_features, 6, rngs=rngs), nnx.Linear(6, 6, rngs=rngs)
    second.bias = first.bias
    return chain(first, nnx.relu, second, nnx.relu, nnx.Linear(6, n_outputs, rngs=rngs))


def test_python_scalars_in_a_module_instance_fit_as_in_a_factory():
    # A factory's compiled initialiser turns them into arrays; an instance holds them as given.
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(80, 6)), rng.integers(0, 3, 80)
    instance = BONGClassifier(model=_CountsCalls(6, 3, nnx.Rngs(0)), random_state=0).fit(X, y)
    factory = BONGClassifier(model=_CountsCalls, random_state=0).fit(X, y)
    assert instance.posterior_[0].shape == factory.posterior_[0].shape == (6 * 3 + 3 + 1,)
    assert np.all(np.isfinite(instance.predict_proba(X)))


def test_weights_shared_inside_a_sequential_take_the_general_path():
    # flax keeps the shared bias once, under its first place: the recognised dense chain
    # cannot place the second layer's (a KeyError), so the network takes the general path,
    # as the same chain does when written as a subclass of nnx.Sequential.
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(80, 6)), rng.integers(0, 3, 80)
    params = dict(family="diag", dtype="float64", shuffle=False, random_state=0)
    plain = BONGClassifier(model=_tied_chain(6, 3, nnx.Rngs(0)), **params).fit(X, y)
    general = BONGClassifier(model=_tied_chain(6, 3, nnx.Rngs(0), chain=_Chain), **params).fit(X, y)
    for a, b in zip(plain.posterior_, general.posterior_):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


class _ScaledInputs(nnx.Module):
    """A layer behind a constant plain array attribute (not an nnx.Variable)."""

    def __init__(self, n_features, n_outputs, *, rngs):
        self.scale = jnp.linspace(0.5, 1.5, n_features)
        self.linear = nnx.Linear(n_features, n_outputs, rngs=rngs)

    def __call__(self, x):
        return self.linear(x * self.scale)


def test_a_factory_whose_module_keeps_a_plain_array_is_built_as_eagerly_and_fits():
    # Built abstractly, the array's tracer stayed in the graph and the factory's fit failed
    # with UnexpectedTracerError at its first compiled use (a probe); the instance fitted.
    from networks import assert_same_initial_weights
    from skbong.core import build_module

    built = build_module(_ScaledInputs, (6, 3), 7)
    eager = _ScaledInputs(6, 3, rngs=nnx.Rngs(7))
    assert isinstance(built.scale, jax.Array) and not isinstance(built.scale, jax.core.Tracer)
    np.testing.assert_array_equal(built.scale, eager.scale)
    assert_same_initial_weights(module_params(built), module_params(eager))
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6))
    y = np.argmax(X[:, :3], axis=1)
    params = dict(dtype="float64", shuffle=False, random_state=0)
    factory = BONGClassifier(model=_ScaledInputs, **params).fit(X[:200], y[:200])
    instance = BONGClassifier(model=_ScaledInputs(6, 3, rngs=nnx.Rngs(0)), **params).fit(X[:200], y[:200])
    assert factory.score(X[200:], y[200:]) > 0.8 and instance.score(X[200:], y[200:]) > 0.8


def test_images_given_as_arrays_of_images_are_told_to_come_as_rows(digits):
    # A CV probe gave (n, 8, 8) images and heard only scikit-learn's "Found array with dim 3".
    X, y = digits
    images = X.reshape(-1, 8, 8)
    clf = BONGClassifier(model=ImageCNN(rngs=nnx.Rngs(0)), random_state=0).fit(X[:100], y[:100])
    before = clf.predict_proba(X[100:110])
    for call in (
        lambda: BONGClassifier(model=ImageCNN(rngs=nnx.Rngs(0))).fit(images[:50], y[:50]),
        lambda: clf.partial_fit(images[100:150, :, :, None], y[100:150]),
        lambda: clf.predict(images[:3]),
        lambda: BONGRegressor().fit(images[:50], y[:50]),
    ):
        with pytest.raises(ValueError, match=r"got shape \(\d+, 8, 8.*X\.reshape\(len\(X\), -1\)"):
            call()
    np.testing.assert_array_equal(clf.predict_proba(X[100:110]), before)
    assert clf.t_ == 100
