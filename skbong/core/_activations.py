"""Hidden-layer activations of the built-in MLP, by name (kept apart from the networks so
that validating a parameter does not import flax)."""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

__all__ = ["ACTIVATIONS"]

ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "identity": lambda x: x,
    "logistic": jax.nn.sigmoid,
    "tanh": jnp.tanh,
    "relu": jax.nn.relu,
}
