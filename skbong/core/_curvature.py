"""Estimators of the expected gradient and Hessian of the log-likelihood (BONG Sec. 4).

An estimator returns ``(g, G)`` for a batch of observations, in the cheapest exact form:
:class:`LowRankCurvature` stands for ``G = -U U^T`` with a ``P x K`` root ``U``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["LowRankCurvature", "LinearizedHessian"]


class LowRankCurvature(NamedTuple):
    """Expected gradient ``grad`` (``g``, shape ``(P,)``) and Hessian ``-root root^T``."""

    grad: jax.Array  # (P,)
    root: jax.Array  # (P, K)


@dataclass(frozen=True)
class LinearizedHessian:
    """LIN-HESS (BONG Prop. 4.2): linearise the mean function at ``mu``.

    For a batch ``x`` (rows ``b``) with Jacobians ``J_b = d f(x_b, mu) / d theta``,

    ``g = sum_b J_b^T r_b``, ``G = -sum_b J_b^T L_b L_b^T J_b``

    where ``r_b`` and ``L_b`` are the likelihood's score and Hessian root at
    ``f(x_b, mu)``. For a Gaussian this is ``g = H^T R^{-1} (y - yhat)``,
    ``G = -H^T R^{-1} H`` (BONG Eqs. 126-127); for a categorical it is the same
    expression with ``R^{-1}`` read as a pseudo-inverse (LO-FI footnote 2).
    ``U = [J_1^T L_1, ..., J_B^T L_B]`` comes from ``B C`` vector-Jacobian products,
    as cheap as one reverse-mode Jacobian; no ``P x P`` matrix is formed.
    """

    name = "lin_hess"

    def __call__(
        self,
        apply_fn: Callable[[jax.Array, jax.Array], jax.Array],
        likelihood,
        mean: jax.Array,
        x: jax.Array,
        y: jax.Array,
        mask: jax.Array,
        obs_noise: jax.Array,
    ) -> LowRankCurvature:
        """Curvature for a batch ``x`` ``(B, D)``, ``y`` ``(B, C)``; rows with ``mask=False`` count zero."""
        f, vjp_fn = jax.vjp(lambda theta: apply_fn(theta, x), mean)  # f: (B, C)
        weight = mask.astype(f.dtype)
        score = jax.vmap(likelihood.score, in_axes=(0, 0, None))(f, y, obs_noise)
        (grad,) = vjp_fn(score * weight[:, None])
        roots = jax.vmap(likelihood.hessian_root, in_axes=(0, None))(f, obs_noise)  # (B, C, K)
        roots = roots * weight[:, None, None]
        b, c, k = roots.shape
        # Cotangent (b, j) is zero except row b, which holds column j of L_b.
        cotangents = jnp.einsum("bcj,bd->bjdc", roots, jnp.eye(b, dtype=f.dtype))
        (root,) = jax.vmap(vjp_fn)(cotangents.reshape(b * k, b, c))
        return LowRankCurvature(grad, root.T)
