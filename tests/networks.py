"""Custom flax NNX networks that the tests pass to the estimators through ``model=``."""

import jax.numpy as jnp
from flax import nnx


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
