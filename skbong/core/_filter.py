"""The filter: predict then update, scanned over observations inside one ``jit``.

Two jitted entry points: :func:`run_filter` (update the belief over a stream) and
:func:`predict_mean` (conditional mean of ``y`` at the posterior mean). The config is
static; every continuous hyperparameter is a traced argument, so tuning it never
recompiles. Streams are cut into chunks whose lengths come from a few fixed buckets,
padded with a mask, so calls with new lengths reuse compiled code.
"""

from __future__ import annotations

from collections import Counter
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._config import FilterConfig
from ._rules import apply_rule

__all__ = [
    "Hyperparameters",
    "run_filter",
    "predict_mean",
    "predict_outputs",
    "trace_count",
    "STEP_BUCKETS",
    "PREDICT_CHUNK",
]

#: Chunk lengths (in filter steps) that the scan is compiled for.
STEP_BUCKETS = (1, 8, 64, 512)
#: Rows per prediction call; every row is always computed in a batch of this size,
#: so predictions do not depend on which other rows are predicted with it.
PREDICT_CHUNK = 256

_TRACES: Counter = Counter()


def trace_count(name: str | None = None) -> int:
    """Number of times the jitted entry points were traced (compiled), for tests.

    Parameters
    ----------
    name : {"filter", "predict"} or None
        One entry point, or the total when None.
    """
    return sum(_TRACES.values()) if name is None else _TRACES[name]


class Hyperparameters(NamedTuple):
    """Traced hyperparameters of a filter step.

    Attributes
    ----------
    obs_noise : array, scalar or ``(C,)``
        Observation variance ``R`` (Gaussian likelihood; ignored otherwise).
    dynamics_decay : array, scalar
        ``gamma`` of the predict step ``mu <- gamma mu``.
    process_noise : array, scalar
        ``q`` of the predict step ``Sigma <- gamma^2 Sigma + q I``.
    learning_rate : array, scalar
        ``alpha`` of BLR, BOG and BBB (BONG always takes a unit step).
    """

    obs_noise: jax.Array
    dynamics_decay: jax.Array
    process_noise: jax.Array
    learning_rate: jax.Array = 1.0


@partial(jax.jit, static_argnames="config")
def _scan(config: FilterConfig, state, xs, ys, mask, hyper: Hyperparameters, key, t0):
    _TRACES["filter"] += 1
    family = config.family

    def step(state, batch, key):
        x, y, m = batch
        prior = family.predict(state, hyper.dynamics_decay, hyper.process_noise)

        def curvature_at(current, inner_key):
            return config.estimator(
                config.apply_fn, config.likelihood, family, current, x, y, m, hyper.obs_noise, inner_key
            )

        return apply_rule(config.rule, family, prior, curvature_at, hyper.learning_rate, key)

    def body(carry, batch):
        state, t = carry
        # Randomness of a step depends only on the index of its first observation, so
        # cutting a stream into partial_fit calls differently gives the same draws.
        step_key = jax.random.fold_in(key, t)
        # Padded steps (no valid row) leave the belief untouched, predict step included.
        state = jax.lax.cond(
            jnp.any(batch[2]), step, lambda s, _b, _k: s, state, batch, step_key
        )
        return (state, t + jnp.sum(batch[2], dtype=t.dtype)), None

    (state, _), _ = jax.lax.scan(body, (state, jnp.asarray(t0, jnp.int32)), (xs, ys, mask))
    return state


def _bucket(n_steps: int) -> int:
    return next(b for b in STEP_BUCKETS if b >= n_steps)


def run_filter(
    config: FilterConfig,
    state,
    X,
    Y,
    hyper: Hyperparameters,
    batch_size: int = 1,
    key: jax.Array | None = None,
    n_seen: int = 0,
):
    """Update the belief ``state`` with observations ``(X, Y)`` in order.

    Each filter step takes ``batch_size`` consecutive rows (the last step may be partial):
    a predict step, then one update with the summed log-likelihood of its rows.

    Parameters
    ----------
    config : FilterConfig
    state : family state NamedTuple
    X : array of shape (N, D)
    Y : array of shape (N, C)
        Targets: one-hot rows for a categorical likelihood.
    hyper : Hyperparameters
    batch_size : int, default=1
    key : PRNG key, optional
        Randomness of the stochastic estimators (MC-HESS, MC-EF); step ``t`` uses
        ``fold_in(key, n_seen + t * batch_size)``. Defaults to ``PRNGKey(0)``.
    n_seen : int, default=0
        Number of observations the belief has already absorbed.

    Returns
    -------
    state : the updated family state.
    """
    X = np.asarray(X)
    Y = np.asarray(Y)
    if key is None:
        key = jax.random.PRNGKey(0)
    dtype = state.mean.dtype
    # Same dtype and weak-type status on every call, so Python floats never retrace.
    hyper = Hyperparameters(*(jnp.asarray(h, dtype) for h in hyper))
    n_steps = -(-X.shape[0] // batch_size)
    start = 0
    while start < n_steps:
        length = min(n_steps - start, STEP_BUCKETS[-1])
        bucket = _bucket(length)
        rows = slice(start * batch_size, (start + length) * batch_size)
        xs = _pad_rows(X[rows], bucket * batch_size).reshape(bucket, batch_size, -1)
        ys = _pad_rows(Y[rows], bucket * batch_size).reshape(bucket, batch_size, -1)
        mask = np.arange(bucket * batch_size) < X[rows].shape[0]
        state = _scan(
            config,
            state,
            jnp.asarray(xs, dtype),
            jnp.asarray(ys, dtype),
            jnp.asarray(mask.reshape(bucket, batch_size)),
            hyper,
            key,
            n_seen + start * batch_size,
        )
        start += length
    return state


def _pad_rows(a: np.ndarray, n: int) -> np.ndarray:
    return np.concatenate([a, np.zeros((n - a.shape[0], *a.shape[1:]), a.dtype)])


@partial(jax.jit, static_argnames="config")
def _predict_chunk(config: FilterConfig, mean, x):
    _TRACES["predict"] += 1
    f = config.apply_fn(mean, x)
    return f, jax.vmap(config.likelihood.mean)(f)


def predict_outputs(config: FilterConfig, mean, X) -> tuple[np.ndarray, np.ndarray]:
    """Network outputs ``f`` and conditional means ``h(f)`` at parameters ``mean``.

    Parameters
    ----------
    config : FilterConfig
    mean : array of shape (P,)
    X : array of shape (N, D)

    Returns
    -------
    f, h : ndarrays of shape (N, C)
    """
    X = np.asarray(X)
    outs = []
    for start in range(0, X.shape[0], PREDICT_CHUNK):
        chunk = X[start : start + PREDICT_CHUNK]
        f, h = _predict_chunk(config, mean, jnp.asarray(_pad_rows(chunk, PREDICT_CHUNK), mean.dtype))
        outs.append((np.asarray(f)[: chunk.shape[0]], np.asarray(h)[: chunk.shape[0]]))
    return np.concatenate([o[0] for o in outs]), np.concatenate([o[1] for o in outs])


def predict_mean(config: FilterConfig, mean, X) -> np.ndarray:
    """Plug-in prediction ``E[y | x, theta = mean]`` (softmax probabilities or regression mean)."""
    return predict_outputs(config, mean, X)[1]
