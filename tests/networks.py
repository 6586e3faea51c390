"""Custom flax NNX networks that the tests pass to the estimators through ``model=``, and
how the tests compare a network's weights across ways of building it."""

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx


def assert_same_initial_weights(compiled, eager):
    """Weights from ``build_module``'s compiled initialiser against the eager construction's:
    the same bits on a CPU (XLA's level-1 backend keeps the eager round-off). Elsewhere XLA
    fuses the initialisers' arithmetic, which moves a weight by a few ulps of the layer's
    scale, not of the weight (an H200: at most 1.2e-7 where the largest weight is about
    0.3, so up to 105 ulps of a weight near 0); allowed: 16 float32 eps of the largest."""
    compiled, eager = np.asarray(compiled), np.asarray(eager)
    if jax.default_backend() == "cpu":
        np.testing.assert_array_equal(compiled, eager)
    else:
        np.testing.assert_allclose(compiled, eager, rtol=0, atol=16 * np.finfo(np.float32).eps * np.abs(eager).max())


class FeatureConv(nnx.Module):
    """A 1-D convolution across the features (3 channels, width 3), then a dense layer.

    A network that is not an MLP, holds a convolution (so its flat weights are cut with
    one split) and is defined for any number of features, as ``check_estimator`` needs.
    Its constructor is the factory signature ``(n_features, n_outputs, rngs=rngs)``.
    """

    def __init__(self, n_features: int, n_outputs: int, *, rngs: nnx.Rngs):
        self.conv = nnx.Conv(1, 3, kernel_size=(3,), padding="SAME", rngs=rngs)
        self.out = nnx.Linear(3 * n_features, n_outputs, rngs=rngs)

    def __call__(self, x):
        hidden = jnp.tanh(self.conv(x[:, :, None]))  # (B, D, 3)
        return self.out(hidden.reshape(x.shape[0], -1))


class ImageCNN(nnx.Module):
    """A small CNN on 8 x 8 images given as rows of 64 pixels (the digits data)."""

    def __init__(self, n_outputs: int = 10, *, rngs: nnx.Rngs):
        self.conv = nnx.Conv(1, 4, kernel_size=(3, 3), padding="SAME", rngs=rngs)
        self.out = nnx.Linear(4 * 4 * 4, n_outputs, rngs=rngs)

    def __call__(self, x):
        images = x.reshape(x.shape[0], 8, 8, 1)
        hidden = nnx.avg_pool(nnx.relu(self.conv(images)), (2, 2), strides=(2, 2))
        return self.out(hidden.reshape(x.shape[0], -1))
