"""Gaussian variational families: belief states, prior, predict step and BONG step.

Five final classes, one per family of the BONG paper (Sec. 3, Appendix E):

========================  =====================  ==========================================
name                      state                  parameters updated by natural gradient
========================  =====================  ==========================================
``FullCovariance``        ``FullCovState``       natural (precision, precision-mean)
``FullCovarianceMoment``  ``FullCovState``       moment (mean, covariance)
``Diagonal``              ``DiagState``          natural (diagonal precision)
``DiagonalMoment``        ``DiagState``          moment (diagonal variance)
``DiagonalLowRank``       ``DLRState``           precision ``Upsilon + W W^T`` (LO-FI)
========================  =====================  ==========================================

Every BONG step consumes a :class:`~skbong.core.LowRankCurvature` ``(g, U)`` that stands
for the expected gradient ``g`` and expected Hessian ``G = -U U^T``, so no ``P x P``
matrix is formed for the diagonal and low-rank families.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from ._curvature import LowRankCurvature

__all__ = [
    "FullCovState",
    "DiagState",
    "DLRState",
    "FullCovariance",
    "FullCovarianceMoment",
    "Diagonal",
    "DiagonalMoment",
    "DiagonalLowRank",
]


class FullCovState(NamedTuple):
    """``N(mean, cov)`` with a dense covariance."""

    mean: jax.Array  # (P,)
    cov: jax.Array  # (P, P)


class DiagState(NamedTuple):
    """``N(mean, diag(var))``."""

    mean: jax.Array  # (P,)
    var: jax.Array  # (P,)


class DLRState(NamedTuple):
    """``N(mean, (diag(diag_precision) + low_rank low_rank^T)^{-1})`` (BONG Eq. 262)."""

    mean: jax.Array  # (P,)
    diag_precision: jax.Array  # (P,)  Upsilon
    low_rank: jax.Array  # (P, R)  W


def _full_init(mean0: jax.Array, sigma0: jax.Array) -> FullCovState:
    eye = jnp.eye(mean0.shape[0], dtype=mean0.dtype)
    return FullCovState(mean0, sigma0**2 * eye)


def _full_predict(state: FullCovState, decay, process_noise) -> FullCovState:
    # LO-FI Eqs. 15-16 with Q = q I.
    eye = jnp.eye(state.mean.shape[0], dtype=state.mean.dtype)
    return FullCovState(decay * state.mean, decay**2 * state.cov + process_noise * eye)


def _diag_init(mean0: jax.Array, sigma0: jax.Array) -> DiagState:
    return DiagState(mean0, jnp.full_like(mean0, sigma0**2))


def _diag_predict(state: DiagState, decay, process_noise) -> DiagState:
    return DiagState(decay * state.mean, decay**2 * state.var + process_noise)


def _full_valid(state: FullCovState) -> jax.Array:
    return jnp.all(jnp.isfinite(state.mean)) & jnp.all(jnp.isfinite(state.cov)) & jnp.all(jnp.diag(state.cov) > 0)


def _diag_valid(state: DiagState) -> jax.Array:
    return jnp.all(jnp.isfinite(state.mean)) & jnp.all(jnp.isfinite(state.var)) & jnp.all(state.var > 0)


def _full_sample(state: FullCovState, key: jax.Array, n_samples: int) -> jax.Array:
    chol = jnp.linalg.cholesky(state.cov)
    z = jax.random.normal(key, (n_samples, state.mean.shape[0]), state.mean.dtype)
    return state.mean + z @ chol.T


def _diag_sample(state: DiagState, key: jax.Array, n_samples: int) -> jax.Array:
    z = jax.random.normal(key, (n_samples, state.mean.shape[0]), state.mean.dtype)
    return state.mean + z * jnp.sqrt(state.var)


@dataclass(frozen=True)
class FullCovariance:
    """Full covariance, natural parameters (FC). BONG-LIN-HESS here is CM-EKF."""

    name = "fc"

    def init(self, mean0: jax.Array, sigma0: jax.Array) -> FullCovState:
        """Prior ``N(mean0, sigma0^2 I)``."""
        return _full_init(mean0, sigma0)

    def predict(self, state: FullCovState, decay, process_noise) -> FullCovState:
        """Predict step ``mu <- gamma mu``, ``Sigma <- gamma^2 Sigma + q I`` (LO-FI Eqs. 15-16)."""
        return _full_predict(state, decay, process_noise)

    def is_valid(self, state: FullCovState) -> jax.Array:
        """Whether the belief is finite with positive variances (moment steps can break this)."""
        return _full_valid(state)

    def sample(self, state: FullCovState, key: jax.Array, n_samples: int) -> jax.Array:
        """``n_samples`` draws of the parameters, shape ``(n_samples, P)``."""
        return _full_sample(state, key, n_samples)

    def natural_step(self, state: FullCovState, curv: LowRankCurvature) -> FullCovState:
        """BONG step, BONG Eqs. 118-119: ``Sigma'^{-1} = Sigma^{-1} - G``, ``mu' = mu + Sigma' g``.

        With ``G = -U U^T`` the Woodbury identity gives the Kalman form of Eqs. 128-130,
        ``Sigma' = Sigma - S (I + U^T S)^{-1} S^T`` with ``S = Sigma U``, in ``O(K P^2)``.
        """
        s = state.cov @ curv.root
        gram = jnp.eye(s.shape[1], dtype=s.dtype) + curv.root.T @ s
        # S (I + U^T S)^{-1} S^T = A A^T with A = S L^{-T}, L L^T = I + U^T S: the
        # subtracted term is symmetric by construction, so no P x P transpose is needed.
        a = solve_triangular(jnp.linalg.cholesky(gram), s.T, lower=True).T
        cov = state.cov - a @ a.T
        return FullCovState(state.mean + cov @ curv.grad, cov)

    def covariance(self, state: FullCovState) -> jax.Array:
        """Dense ``Sigma``."""
        return state.cov


@dataclass(frozen=True)
class FullCovarianceMoment:
    """Full covariance, moment parameters (FC_MOM)."""

    name = "fc_mom"

    def init(self, mean0: jax.Array, sigma0: jax.Array) -> FullCovState:
        """Prior ``N(mean0, sigma0^2 I)``."""
        return _full_init(mean0, sigma0)

    def predict(self, state: FullCovState, decay, process_noise) -> FullCovState:
        """Predict step ``mu <- gamma mu``, ``Sigma <- gamma^2 Sigma + q I`` (LO-FI Eqs. 15-16)."""
        return _full_predict(state, decay, process_noise)

    def is_valid(self, state: FullCovState) -> jax.Array:
        """Whether the belief is finite with positive variances (moment steps can break this)."""
        return _full_valid(state)

    def sample(self, state: FullCovState, key: jax.Array, n_samples: int) -> jax.Array:
        """``n_samples`` draws of the parameters, shape ``(n_samples, P)``."""
        return _full_sample(state, key, n_samples)

    def natural_step(self, state: FullCovState, curv: LowRankCurvature) -> FullCovState:
        """BONG step in moment coordinates, BONG Eqs. 167-168.

        ``mu' = mu + Sigma g`` and ``Sigma' = Sigma + Sigma G Sigma = Sigma - S S^T`` with
        ``S = Sigma U``. Unlike Eq. 119 this drops the ``U^T Sigma U`` term of the Kalman
        gain (Appendix E.2.1), so it over-shrinks the covariance.
        """
        s = state.cov @ curv.root
        return FullCovState(state.mean + state.cov @ curv.grad, state.cov - s @ s.T)

    def covariance(self, state: FullCovState) -> jax.Array:
        """Dense ``Sigma``."""
        return state.cov


@dataclass(frozen=True)
class Diagonal:
    """Diagonal covariance, natural parameters (DIAG). BONG-LIN-HESS here is VD-EKF."""

    name = "diag"

    def init(self, mean0: jax.Array, sigma0: jax.Array) -> DiagState:
        """Prior ``N(mean0, sigma0^2 I)``."""
        return _diag_init(mean0, sigma0)

    def predict(self, state: DiagState, decay, process_noise) -> DiagState:
        """Predict step ``mu <- gamma mu``, ``sigma^2 <- gamma^2 sigma^2 + q``."""
        return _diag_predict(state, decay, process_noise)

    def is_valid(self, state: DiagState) -> jax.Array:
        """Whether the belief is finite with positive variances (moment steps can break this)."""
        return _diag_valid(state)

    def sample(self, state: DiagState, key: jax.Array, n_samples: int) -> jax.Array:
        """``n_samples`` draws of the parameters, shape ``(n_samples, P)``."""
        return _diag_sample(state, key, n_samples)

    def natural_step(self, state: DiagState, curv: LowRankCurvature) -> DiagState:
        """BONG step, BONG Eqs. 210-211 (212-213 for LIN-HESS).

        ``sigma'^{-2} = sigma^{-2} - diag(G)`` with ``diag(G) = -sum_k U[:, k]^2``, then
        ``mu' = mu + sigma'^2 g``.
        """
        var = 1.0 / (1.0 / state.var + jnp.sum(curv.root**2, axis=1))
        return DiagState(state.mean + var * curv.grad, var)

    def covariance(self, state: DiagState) -> jax.Array:
        """Dense ``diag(sigma^2)``."""
        return jnp.diag(state.var)


@dataclass(frozen=True)
class DiagonalMoment:
    """Diagonal covariance, moment parameters (DIAG_MOM)."""

    name = "diag_mom"

    def init(self, mean0: jax.Array, sigma0: jax.Array) -> DiagState:
        """Prior ``N(mean0, sigma0^2 I)``."""
        return _diag_init(mean0, sigma0)

    def predict(self, state: DiagState, decay, process_noise) -> DiagState:
        """Predict step ``mu <- gamma mu``, ``sigma^2 <- gamma^2 sigma^2 + q``."""
        return _diag_predict(state, decay, process_noise)

    def is_valid(self, state: DiagState) -> jax.Array:
        """Whether the belief is finite with positive variances (moment steps can break this)."""
        return _diag_valid(state)

    def sample(self, state: DiagState, key: jax.Array, n_samples: int) -> jax.Array:
        """``n_samples`` draws of the parameters, shape ``(n_samples, P)``."""
        return _diag_sample(state, key, n_samples)

    def natural_step(self, state: DiagState, curv: LowRankCurvature) -> DiagState:
        """BONG step in moment coordinates, BONG Eqs. 246-247 (248-249 for LIN-HESS).

        ``mu' = mu + sigma^2 g`` and ``sigma'^2 = sigma^2 + sigma^4 diag(G)``.
        """
        var = state.var - state.var**2 * jnp.sum(curv.root**2, axis=1)
        return DiagState(state.mean + state.var * curv.grad, var)

    def covariance(self, state: DiagState) -> jax.Array:
        """Dense ``diag(sigma^2)``."""
        return jnp.diag(state.var)


@dataclass(frozen=True)
class DiagonalLowRank:
    """Diagonal-plus-low-rank precision ``Upsilon + W W^T`` of rank ``rank`` (DLR).

    BONG-LIN-HESS on this family is LO-FI (BONG Appendix E.5.2).
    """

    rank: int
    name = "dlr"

    def init(self, mean0: jax.Array, sigma0: jax.Array) -> DLRState:
        """Prior ``N(mean0, sigma0^2 I)``: ``Upsilon = sigma0^-2``, ``W = 0`` (LO-FI Sec. 3.4)."""
        p = mean0.shape[0]
        return DLRState(
            mean0,
            jnp.full_like(mean0, 1.0 / sigma0**2),
            jnp.zeros((p, self.rank), dtype=mean0.dtype),
        )

    def predict(self, state: DLRState, decay, process_noise) -> DLRState:
        """LO-FI predict step, Algorithm 2 (Appendix A.1, Eqs. 19-25).

        The result has precision ``(gamma^2 (Upsilon + W W^T)^{-1} + q I)^{-1}`` exactly,
        written again as diagonal plus rank ``R``:
        ``Upsilon' = (gamma^2 Upsilon^{-1} + q I)^{-1}`` (Eq. 19) and
        ``W' = gamma Upsilon' Upsilon^{-1} W chol((I + q W^T Upsilon' Upsilon^{-1} W)^{-1})``.
        Simplifying Eq. 24 gives this inner matrix; the printed Eq. 25 has
        ``Upsilon^{-1} Upsilon' Upsilon^{-1}`` in its place, one ``Upsilon^{-1}`` too many
        (it is not dimensionless), which the dense test of this step detects.
        """
        ups, w = state.diag_precision, state.low_rank
        ups_pred = 1.0 / (decay**2 / ups + process_noise)
        scale = ups_pred / ups  # Upsilon_{t|t-1} Upsilon_{t-1}^{-1}
        inner = jnp.eye(w.shape[1], dtype=w.dtype) + w.T @ ((process_noise * scale)[:, None] * w)
        # chol(inner^{-1}) may be replaced by any A with A A^T = inner^{-1}: L^{-T}.
        chol = jnp.linalg.cholesky(inner)
        root = solve_triangular(chol, jnp.eye(w.shape[1], dtype=w.dtype), lower=True).T
        w_pred = decay * (scale[:, None] * w) @ root
        return DLRState(decay * state.mean, ups_pred, w_pred)

    def is_valid(self, state: DLRState) -> jax.Array:
        """Whether the belief is finite with a positive diagonal precision."""
        finite = all(jnp.all(jnp.isfinite(leaf)) for leaf in state)
        return finite & jnp.all(state.diag_precision > 0)

    def sample(self, state: DLRState, key: jax.Array, n_samples: int) -> jax.Array:
        """``n_samples`` draws from ``N(mu, (Upsilon + W W^T)^{-1})`` in ``O((R + M) R P)``.

        With ``A = Upsilon^{-1/2} W`` the covariance is
        ``Upsilon^{-1/2} (I + A A^T)^{-1} Upsilon^{-1/2}``. From the eigendecomposition
        ``A^T A = V diag(s) V^T`` (an ``R x R`` problem) a square root of
        ``(I + A A^T)^{-1}`` is ``I + A V diag(phi(s)) V^T A^T`` with
        ``phi(s) = ((1 + s)^{-1/2} - 1) / s = -1 / (sqrt(1 + s) (1 + sqrt(1 + s)))``,
        which is finite at ``s = 0``; squaring it gives ``I - A (I + A^T A)^{-1} A^T``.
        """
        ups_isqrt = jax.lax.rsqrt(state.diag_precision)
        a = ups_isqrt[:, None] * state.low_rank
        s, v = jnp.linalg.eigh(a.T @ a)
        s = jnp.maximum(s, 0.0)
        root_s = jnp.sqrt(1.0 + s)
        phi = -1.0 / (root_s * (1.0 + root_s))
        av = a @ v  # (P, R)
        z = jax.random.normal(key, (n_samples, state.mean.shape[0]), state.mean.dtype)
        white = z + ((z @ av) * phi) @ av.T
        return state.mean + white * ups_isqrt

    def natural_step(self, state: DLRState, curv: LowRankCurvature) -> DLRState:
        """BONG step (LO-FI), BONG Eqs. 279-289.

        The FC update (Eq. 119) gives precision ``Upsilon + W~ W~^T`` with
        ``W~ = [W, U]`` (Eq. 279/289). The mean uses that unprojected precision via
        Woodbury (Eq. 281/285). The projection keeps the top ``R`` singular directions
        of ``W~`` (Eqs. 284/288; here from an eigendecomposition of the small Gram
        matrix ``W~^T W~``, which gives the same left singular vectors times singular
        values) and moves the discarded part's diagonal into ``Upsilon`` so that the
        diagonal of the precision is preserved (Eq. 283/287).
        """
        ups = state.diag_precision
        w_ext = jnp.concatenate([state.low_rank, curv.root], axis=1)  # (P, R + K)
        ups_inv_g = curv.grad / ups
        ups_inv_w = w_ext / ups[:, None]
        inner = jnp.eye(w_ext.shape[1], dtype=w_ext.dtype) + w_ext.T @ ups_inv_w
        delta = ups_inv_g - ups_inv_w @ jnp.linalg.solve(inner, w_ext.T @ ups_inv_g)
        _, vecs = jnp.linalg.eigh(w_ext.T @ w_ext)  # ascending eigenvalues
        rotated = w_ext @ vecs[:, ::-1]  # columns = singular vectors x singular values
        kept, dropped = rotated[:, : self.rank], rotated[:, self.rank :]
        ups_new = ups + jnp.sum(dropped**2, axis=1)
        return DLRState(state.mean + delta, ups_new, kept)

    def covariance(self, state: DLRState) -> jax.Array:
        """Dense ``(Upsilon + W W^T)^{-1}`` (for tests and small models)."""
        prec = jnp.diag(state.diag_precision) + state.low_rank @ state.low_rank.T
        return jnp.linalg.inv(prec)
