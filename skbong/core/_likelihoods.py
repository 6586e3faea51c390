"""Observation models: log-probability and the derivatives the curvature estimators need.

A likelihood maps the network output ``f`` (shape ``(C,)``) and a target ``y`` to
``log p(y | f)``. The linearised estimators of the BONG paper (Prop. 4.2) need the
gradient ``r = d log p / d f`` and a square root ``L`` of the negative Hessian,
``L L^T = -d^2 log p / d f^2``. For the Gaussian this is ``R^{-1/2}``. For the
categorical likelihood with ``h = softmax(f)`` and ``R = diag(p) - p p^T``, the
linearised-Gaussian terms of the BONG paper, ``H^T R^+ (y - p)`` and ``H^T R^+ H``
with ``H = R J``, reduce to ``J^T (y - p)`` and ``J^T R J``: the pseudo-inverse
route of footnote 2 of the LO-FI paper, computed without inverting ``R``.
Both also give coordinates ``z`` of the gradient in the columns of the root, ``r = L z``
(:class:`~skbong.core.LowRankCurvature` explains what they save).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from ._predictive import CategoricalPredictive, GaussianPredictive

__all__ = ["Gaussian", "Categorical"]


@dataclass(frozen=True)
class Gaussian:
    """Gaussian observations ``y ~ N(f, diag(obs_noise))`` (LO-FI Eq. 10, regression)."""

    #: Whether the curvature of ``log p`` in the output is the same at every ``f``
    #: (``-R^{-1}``): a heavy row's linearised step is then not cut into smaller ones
    #: (``skbong.core.MAX_STEP_WEIGHT``).
    fixed_output_curvature: ClassVar[bool] = True

    def log_prob(self, f: jax.Array, y: jax.Array, obs_noise: jax.Array) -> jax.Array:
        """``log N(y | f, diag(obs_noise))`` for one observation; ``f, y`` of shape ``(C,)``."""
        var = jnp.broadcast_to(obs_noise, f.shape)
        return -0.5 * jnp.sum(jnp.log(2 * jnp.pi * var) + (y - f) ** 2 / var)

    def mean(self, f: jax.Array) -> jax.Array:
        """Conditional mean ``h = E[y | f] = f``."""
        return f

    def variance(self, f: jax.Array, obs_noise: jax.Array) -> jax.Array:
        """Diagonal of the conditional covariance ``R``, shape ``(C,)``."""
        return jnp.broadcast_to(obs_noise, f.shape)

    def score(self, f: jax.Array, y: jax.Array, obs_noise: jax.Array) -> jax.Array:
        """``d log p / d f = R^{-1} (y - f)``."""
        return (y - f) / obs_noise

    def hessian_root(self, f: jax.Array, obs_noise: jax.Array) -> jax.Array:
        """``L`` with ``L L^T = R^{-1}``, shape ``(C, C)``."""
        return jnp.diag(jnp.broadcast_to(obs_noise, f.shape) ** -0.5)

    def score_coords(self, f: jax.Array, y: jax.Array, obs_noise: jax.Array) -> jax.Array:
        """``z`` with ``L z = score(f, y)``: ``R^{-1/2} (y - f)``."""
        return (y - f) * jnp.broadcast_to(obs_noise, f.shape) ** -0.5

    def plugin_predictive(self, f: jax.Array, obs_noise: jax.Array) -> GaussianPredictive:
        """``N(y | f, R)`` for a batch of outputs ``f`` (B, C)."""
        return GaussianPredictive(f, jnp.broadcast_to(obs_noise, f.shape))


@dataclass(frozen=True)
class Categorical:
    """Categorical observations with logits ``f`` and one-hot targets ``y``.

    Parameters
    ----------
    cov_floor : float, default=0.0
        ``eps`` of the linearised (EKF) observation covariance ``R = diag(p) - p p^T + eps I``.
        With ``eps = 0`` the linearised terms use the pseudo-inverse of ``R`` (exact for the
        categorical Hessian, LO-FI footnote 2). With ``eps > 0`` they are those of a Gaussian
        observation of ``p = softmax(f)`` with covariance ``R``: ``H = R_0 J`` with
        ``R_0 = diag(p) - p p^T``, gradient ``J^T R_0 R^{-1} (y - p)`` and curvature
        ``-J^T R_0 R^{-1} R_0 J`` (LO-FI Eqs. 8-10; the BONG paper's reference code uses
        ``eps = 1e-5`` on MNIST). It is static: a new value compiles anew. Only the
        linearised estimators use it; the log-likelihood itself is unchanged.
    """

    cov_floor: float = 0.0
    #: The curvature ``-(diag(p) - p p^T)`` vanishes as ``p`` saturates along a step.
    fixed_output_curvature: ClassVar[bool] = False

    def log_prob(self, f: jax.Array, y: jax.Array, obs_noise: jax.Array) -> jax.Array:
        """``sum_c y_c log softmax(f)_c``; ``obs_noise`` is unused."""
        del obs_noise
        return jnp.sum(y * jax.nn.log_softmax(f))

    def mean(self, f: jax.Array) -> jax.Array:
        """Conditional mean ``h = softmax(f)``."""
        return jax.nn.softmax(f)

    def variance(self, f: jax.Array, obs_noise: jax.Array) -> jax.Array:
        """Diagonal of ``R = diag(p) - p p^T``."""
        del obs_noise
        p = jax.nn.softmax(f)
        return p * (1 - p)

    def _floored(self, f: jax.Array):
        """``R_0 = diag(p) - p p^T`` and the Cholesky factor of ``R_0 + eps I``."""
        p = jax.nn.softmax(f)
        cov = jnp.diag(p) - jnp.outer(p, p)
        return p, cov, jnp.linalg.cholesky(cov + self.cov_floor * jnp.eye(p.shape[0], dtype=p.dtype))

    def score(self, f: jax.Array, y: jax.Array, obs_noise: jax.Array) -> jax.Array:
        """``d log p / d f = y - softmax(f)``; with a floor, ``R_0 R^{-1} (y - p)``."""
        del obs_noise
        if self.cov_floor == 0:
            return y - jax.nn.softmax(f)
        p, cov, chol = self._floored(f)
        return cov @ jax.scipy.linalg.cho_solve((chol, True), y - p)

    def hessian_root(self, f: jax.Array, obs_noise: jax.Array) -> jax.Array:
        """``L = diag(s) - p s^T`` with ``s = sqrt(p)``, so ``L L^T = diag(p) - p p^T``;
        with a floor, ``L = R_0 C^{-T}`` with ``C C^T = R_0 + eps I``.

        The identity uses ``sum(p) = 1``. ``L`` has rank ``C - 1`` like ``R`` itself. ``s`` is
        floored (``_sqrt_probabilities``) so that ``1 / s`` stays finite.
        """
        del obs_noise
        if self.cov_floor > 0:
            _, cov, chol = self._floored(f)
            return solve_triangular(chol, cov, lower=True).T
        sqrt_p = _sqrt_probabilities(f)
        return jnp.diag(sqrt_p) - jnp.outer(jax.nn.softmax(f), sqrt_p)

    def score_coords(self, f: jax.Array, y: jax.Array, obs_noise: jax.Array) -> jax.Array:
        """``z = y / s`` with ``L z = y - p sum(y)``, the gradient of ``log_prob`` in ``f``
        (which is ``score`` for targets that sum to one), whatever the positive ``s``; with
        a floor, ``z = C^{-1} (y - p)``."""
        del obs_noise
        if self.cov_floor > 0:
            p, _, chol = self._floored(f)
            return solve_triangular(chol, y - p, lower=True)
        return y / _sqrt_probabilities(f)

    def plugin_predictive(self, f: jax.Array, obs_noise: jax.Array) -> CategoricalPredictive:
        """``softmax(f)`` for a batch of logits ``f`` (B, C); ``obs_noise`` is unused."""
        del obs_noise
        return CategoricalPredictive(jax.nn.log_softmax(f))


def _sqrt_probabilities(f: jax.Array) -> jax.Array:
    """``sqrt(softmax(f))``, each probability floored at ``sqrt(tiny)`` of the dtype.

    The floor keeps ``1 / sqrt(p)`` finite and the squares of the root's entries (its Gram
    matrices) in the normal range: XLA flushes subnormal numbers to zero, and its float32
    eigensolver returned NaN on a Gram matrix with entries near them (scikit-learn's
    ``check_fit_check_is_fitted``, inputs around 100, with a floor of ``e^-160``). It moves
    ``L L^T`` away from ``diag(p) - p p^T`` by less than ``1e-19`` (float32) next to entries of
    at least ``1 / C``, beneath the working precision, and ``L z = y - p sum(y)`` holds
    whatever the floor.
    """
    log_floor = 0.5 * jnp.log(jnp.finfo(f.dtype).tiny)
    return jnp.exp(0.5 * jnp.maximum(jax.nn.log_softmax(f), log_floor))
