"""Placement: the estimators compute on JAX's default device and pickle to plain NumPy.

Run in a subprocess with two forced host devices (``XLA_FLAGS`` must be set before JAX
starts), as a machine with two accelerators would present them."""

import os
import subprocess
import sys
import textwrap

_SCRIPT = textwrap.dedent(
    """
    import pickle

    import jax
    import numpy as np
    from sklearn.datasets import load_iris

    from skbong import BONGClassifier, BONGRegressor

    first, second = jax.devices()
    X, y = load_iris(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    X, y = X[order] / 8, y[order]
    for make, target in ((BONGClassifier, y), (BONGRegressor, X[:, 0] + y)):
        on_first = make(hidden_layer_sizes=(4,), random_state=0, shuffle=False).fit(X[:100], target[:100])
        on_first.partial_fit(X[100:], target[100:])
        with jax.default_device(second):
            on_second = make(hidden_layer_sizes=(4,), random_state=0, shuffle=False).fit(X[:100], target[:100])
            on_second.partial_fit(X[100:], target[100:])
            predicted = on_second.predict(X)
        assert all(leaf.devices() == {first} for leaf in on_first.posterior_), "not on the default device"
        assert all(leaf.devices() == {second} for leaf in on_second.posterior_), "not on the chosen device"
        np.testing.assert_allclose(predicted, on_first.predict(X), rtol=1e-6)
        loaded = pickle.loads(pickle.dumps(on_second))
        assert all(type(leaf) is np.ndarray for leaf in loaded.posterior_), "pickle keeps device arrays"
        np.testing.assert_allclose(loaded.predict(X), predicted, rtol=1e-6)
    print("ok")
    """
)


def test_fit_follows_the_default_device_and_pickles_to_numpy(tmp_path):
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu"}
    result = subprocess.run(
        [sys.executable, "-c", _SCRIPT], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")


def test_programs_are_chosen_for_the_platform_of_the_default_device():
    """The CPU-only choices (compiler options, the per-layer belief, sequential sweeps)
    follow the device the estimators compute on: ``jax.default_device`` where it is set,
    as a device or a platform name, else the default backend."""
    import jax

    from skbong.core._filter import _default_platform

    assert _default_platform() == jax.devices()[0].platform
    for device in (jax.devices("cpu")[0], "cpu"):
        with jax.default_device(device):
            assert _default_platform() == "cpu"
    assert _default_platform() == jax.devices()[0].platform
