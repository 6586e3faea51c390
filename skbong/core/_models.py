"""Networks as pure functions ``apply(params_flat, x)`` of a flat parameter vector."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.flatten_util import ravel_pytree

__all__ = ["ACTIVATIONS", "MLP", "MLPSpec", "flatten_module"]

ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "identity": lambda x: x,
    "logistic": jax.nn.sigmoid,
    "tanh": jnp.tanh,
    "relu": jax.nn.relu,
}


class MLP(nnx.Module):
    """Multi-layer perceptron; LeCun-normal weights and zero biases (LO-FI Sec. 3.4).

    Parameters
    ----------
    sizes : tuple of int
        Layer widths, input first and output last.
    activation : str
        Hidden-layer activation, one of ``ACTIVATIONS``; the output layer is linear.
    rngs : flax.nnx.Rngs
        Randomness of the initial weights.
    """

    def __init__(self, sizes: tuple[int, ...], activation: str, rngs: nnx.Rngs):
        self.layers = nnx.List(
            [nnx.Linear(n_in, n_out, rngs=rngs) for n_in, n_out in zip(sizes[:-1], sizes[1:])]
        )
        self.activation = ACTIVATIONS[activation]

    def __call__(self, x: jax.Array) -> jax.Array:
        """Outputs ``(B, sizes[-1])`` of a batch ``x`` ``(B, sizes[0])``."""
        for layer in self.layers[:-1]:
            x = self.activation(layer(x))
        return self.layers[-1](x)


def flatten_module(module: nnx.Module) -> tuple[Callable[[jax.Array, jax.Array], jax.Array], jax.Array]:
    """Turn a flax NNX module into ``(apply, params_flat)`` with ``apply(params_flat, x)`` pure.

    ``apply`` computes in the dtype of ``params_flat`` (float32 or float64), whatever the
    dtype the module was initialised in. Each call returns a new ``apply`` function, and
    the filter's compiled code is cached per function: call this once per module and
    reuse ``apply``, or every run compiles again.
    """
    graphdef, params = nnx.split(module)
    return _pure_apply(graphdef, params), ravel_pytree(params)[0]


def _pure_apply(graphdef, params) -> Callable[[jax.Array, jax.Array], jax.Array]:
    leaves, treedef = jax.tree_util.tree_flatten(params)
    shapes = [leaf.shape for leaf in leaves]
    offsets = np.cumsum([0] + [int(np.prod(shape)) for shape in shapes])

    def apply(params_flat: jax.Array, x: jax.Array) -> jax.Array:
        pieces = [
            params_flat[start:stop].reshape(shape)
            for start, stop, shape in zip(offsets[:-1], offsets[1:], shapes)
        ]
        state = jax.tree_util.tree_unflatten(treedef, pieces)
        return nnx.merge(graphdef, state)(x.astype(params_flat.dtype))

    return apply


@dataclass(frozen=True)
class MLPSpec:
    """Structure of an MLP: the hashable description from which it is rebuilt.

    Parameters
    ----------
    n_inputs, n_outputs : int
        Input and output widths.
    hidden_layer_sizes : tuple of int
        Hidden widths; ``()`` gives a linear (or logistic) model.
    activation : str
        One of ``ACTIVATIONS``.
    """

    n_inputs: int
    hidden_layer_sizes: tuple[int, ...]
    n_outputs: int
    activation: str

    @property
    def apply(self) -> Callable[[jax.Array, jax.Array], jax.Array]:
        """The pure ``apply(params_flat, x)``; the same object for equal specs."""
        return _build(self)[0]

    def init_params(self, seed: int) -> np.ndarray:
        """Initial mean: LeCun-normal weights, zero biases, drawn from ``seed``."""
        module = MLP(self._sizes, self.activation, nnx.Rngs(seed))
        return np.asarray(flatten_module(module)[1])

    @property
    def n_params(self) -> int:
        """Number of parameters ``P``."""
        return int(_build(self)[1])

    @property
    def _sizes(self) -> tuple[int, ...]:
        return (self.n_inputs, *self.hidden_layer_sizes, self.n_outputs)


@lru_cache(maxsize=None)
def _build(spec: MLPSpec) -> tuple[Callable[[jax.Array, jax.Array], jax.Array], int]:
    module = nnx.eval_shape(lambda: MLP(spec._sizes, spec.activation, nnx.Rngs(0)))
    graphdef, params = nnx.split(module)
    n_params = sum(int(np.prod(leaf.shape)) for leaf in jax.tree_util.tree_leaves(params))
    return _pure_apply(graphdef, params), n_params
