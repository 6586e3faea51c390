"""Gaussian variational families: belief states, prior, predict step and update steps.

Five final classes, one per family of the BONG paper (Sec. 3, Appendix E):

========================  =====================  ==========================================
name                      state                  coordinates ``psi`` of the steps
========================  =====================  ==========================================
``FullCovariance``        ``FullCovState``       natural (precision-mean, precision)
``FullCovarianceMoment``  ``FullCovState``       moment (mean, covariance)
``Diagonal``              ``DiagState``          natural (diagonal precision)
``DiagonalMoment``        ``DiagState``          moment (diagonal variance)
``DiagonalLowRank``       ``DLRState``           ``(mu, Upsilon, W)``, precision ``Upsilon + W W^T``
========================  =====================  ==========================================

``DiagonalLowRank(rank, spherical=True)`` is spherical LO-FI (LO-FI Appendix F): the same
state with ``Upsilon = eta I`` kept isotropic.

Each family takes two kinds of step on the objective ``l = E_q[log p(y | theta)]``
(BONG, BOG) or ``l = E_q[log p(y | theta)] - KL(q || q_prior)`` (BLR, BBB), whose
gradients with respect to ``(mu, Sigma)`` are (Bonnet and Price; BONG Eqs. 149-152)

``grad_mu l = g - [KL] Sigma_prior^{-1} (mu - mu_prior)`` and
``grad_Sigma l = G / 2 - [KL] (Sigma_prior^{-1} - Sigma^{-1}) / 2``:

* ``natural_step``: ``psi += lr F^{-1} grad_psi l``. In natural coordinates this is
  ``psi += lr grad_rho l`` with ``rho`` the dual (expectation) coordinates (BONG Sec. 3);
  in moment coordinates it uses the Fisher of Eq. 166.
* ``plain_step``: ``psi += lr grad_psi l`` in the family's own coordinates (Eqs. 29, 32).

For a full matrix the gradient is taken with respect to a *symmetric* matrix (the
symmetric part of the free-entry gradient). The printed Eqs. 140, 142, 146 and 148 keep
the non-symmetric term ``Sigma g mu^T``; its symmetric part is used here so that the
precision stays symmetric.

The curvature ``G`` arrives as a value from :mod:`skbong.core._curvature` (low-rank
factor, dense or diagonal); the diagonal and low-rank families never form a ``P x P``
matrix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from ._curvature import (
    Curvature,
    DenseFactors,
    DenseNetwork,
    LayeredVector,
    LowRankCurvature,
    factor_dot,
    layer_block,
    with_bias_input,
)
from ._random import standard_normal

__all__ = [
    "FullCovState",
    "FullCovDeferred",
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


class FullCovDeferred(NamedTuple):
    """``N(mean, scale base + shift I - factor factor^T)``: the form in which
    :class:`FullCovariance` holds its belief inside a block of filter steps.

    Each BONG step's downdate ``A A^T`` of the covariance goes into the next columns of
    ``factor`` (the first ``n_columns`` hold downdates, the rest are zero), and a predict
    step scales the three terms; ``base`` is only read. :meth:`FullCovariance.settle`
    applies everything in one pass at the end of the block.
    """

    mean: jax.Array  # (P,)
    base: jax.Array  # (P, P)
    scale: jax.Array  # ()
    shift: jax.Array  # ()
    factor: jax.Array  # (P, W)
    n_columns: jax.Array  # () int32


class DiagState(NamedTuple):
    """``N(mean, diag(var))``."""

    mean: jax.Array  # (P,)
    var: jax.Array  # (P,)


class DLRState(NamedTuple):
    """``N(mean, (diag(diag_precision) + low_rank low_rank^T)^{-1})`` (BONG Eq. 262)."""

    mean: jax.Array  # (P,)
    diag_precision: jax.Array  # (P,)  Upsilon
    low_rank: jax.Array  # (P, R)  W


class DLRGramState(NamedTuple):
    """A :class:`DLRState` with the Gram matrix ``W^T W`` beside it, as the filter's scan
    carries a BONG belief within a call (``_scan_stream``).

    The BONG step's projection (Eqs. 273-275) takes the eigendecomposition of the small
    Gram matrix of ``W~ = [W, sqrt(lr) U]``, whose block ``W^T W`` is a pass over the
    ``P x R`` factor. The new ``W`` is ``W~ V_R`` (the top ``R`` eigenvectors), so its Gram
    matrix is ``V_R^T (W~^T W~) V_R``, from matrices of size ``R + K``: carried, it spares
    each step that pass (MLPs 784-h-10 on MNIST, DLR-10 LIN-HESS through ``run_filter`` in
    calls of 64 rows, 2-core AMD EPYC: 10-18% less time a step at P = 32k-400k; MC-EF
    13-22%). It is formed from ``W`` once a call, so float round-off cannot accumulate over
    more than one call's steps.
    """

    mean: jax.Array  # (P,)
    diag_precision: jax.Array  # (P,)  Upsilon
    low_rank: jax.Array  # (P, R)  W
    low_rank_gram: jax.Array  # (R, R)  W^T W


def _full_init(mean0: jax.Array, sigma0: jax.Array) -> FullCovState:
    eye = jnp.eye(mean0.shape[0], dtype=mean0.dtype)
    return FullCovState(mean0, sigma0**2 * eye)


def _full_predict(state: FullCovState, decay, process_noise) -> FullCovState:
    # LO-FI Eqs. 15-16 with Q = q I. A static belief (gamma = 1, q = 0) is returned as it
    # is: the general branch reads and writes all P^2 entries.
    def moved(state):
        diagonal = jnp.arange(state.mean.shape[0])
        cov = (decay**2 * state.cov).at[diagonal, diagonal].add(process_noise)
        return FullCovState(decay * state.mean, cov)

    return jax.lax.cond((decay == 1) & (process_noise == 0), lambda state: state, moved, state)


def _diag_init(mean0: jax.Array, sigma0: jax.Array) -> DiagState:
    return DiagState(mean0, jnp.full_like(mean0, sigma0**2))


def _diag_predict(state: DiagState, decay, process_noise) -> DiagState:
    return DiagState(decay * state.mean, decay**2 * state.var + process_noise)


def _full_rescale(state: FullCovState, scale, shift) -> FullCovState:
    if isinstance(shift, (int, float)) and shift == 0:  # a plain rescaling needs no solve
        return FullCovState(state.mean, state.cov / scale)
    # (scale Sigma^-1 + shift I)^-1 = (scale I + shift Sigma)^-1 Sigma, symmetrised.
    eye = jnp.eye(state.mean.shape[0], dtype=state.mean.dtype)
    cov = jnp.linalg.solve(scale * eye + shift * state.cov, state.cov)
    return FullCovState(state.mean, 0.5 * (cov + cov.T))


def _diag_rescale(state: DiagState, scale, shift) -> DiagState:
    return DiagState(state.mean, state.var / (scale + shift * state.var))


def _is_finite_and_positive(finite: tuple, positive: tuple = ()) -> jax.Array:
    """Whether every entry of the arrays ``finite`` is finite and every entry of the
    arrays ``positive`` is positive and finite; each array has the first dimension ``P``.

    ``x * 0`` is 0 where ``x`` is finite and NaN where it is not (NaN, +-inf), and a
    positive entry is mapped the same way, anything else to NaN. The zeros of all the arrays
    are summed down their first axis by one product with a vector of ones (any NaN makes
    the sum NaN): one fused pass and one matrix-vector product. XLA's CPU backend compiles
    each boolean reduction (``jnp.all(jnp.isfinite(x))``) as an is-finite kernel and a tree
    of reduce-window kernels, ten kernels for a DLR belief; this form saved 0.034 s of the
    compile time of a first fit on digits.
    """
    zeros = [jnp.where(x > 0, x * 0, jnp.nan) for x in positive] + [x * 0 for x in finite]
    columns = [z.reshape(z.shape[0], -1) for z in zeros]
    total = sum(columns[1:], columns[0])  # (P, k): columns of width 1 broadcast
    return jnp.all(jnp.ones(total.shape[0], total.dtype) @ total == 0)


def _full_valid(state: FullCovState, check_definite=True) -> jax.Array:
    """Finite, with a positive definite covariance: its Cholesky factor exists (JAX returns
    NaN where it does not), ``O(P^3 / 3)``. Positive variances alone are not enough: a
    plain-gradient step on natural coordinates (BOG, Eq. 140) made a digits MLP's
    ``Sigma`` indefinite (smallest eigenvalue -0.73) with every variance positive, and that
    posterior, accepted, predicted below chance from then on.

    ``check_definite`` False (a bool, or a traced one chosen by ``lax.cond``) checks the
    finite entries and positive variances alone, ``O(P^2)``: for a caller that knows its
    steps keep ``Sigma`` positive definite (see :func:`skbong.core._filter._checks_definiteness`).
    """

    def definite(state):
        factor = jnp.linalg.cholesky(state.cov)
        return _is_finite_and_positive((state.mean, factor), (jnp.diagonal(factor),))

    def variances(state):
        return _is_finite_and_positive((state.mean, state.cov), (jnp.diagonal(state.cov),))

    if isinstance(check_definite, bool):
        return (definite if check_definite else variances)(state)
    return jax.lax.cond(check_definite, definite, variances, state)


def _diag_valid(state: DiagState, check_definite=True) -> jax.Array:
    del check_definite  # exact in O(P) anyway
    return _is_finite_and_positive((state.mean,), (state.var,))


def _diag_precision_quadratic(state: DiagState, v: jax.Array) -> jax.Array:
    """``v^T Sigma^{-1} v`` in ``O(P)`` (``v`` and the belief flat, or both per layer)."""
    terms = jax.tree.map(lambda a, var: jnp.sum(a * a / var), v, state.var)
    return sum(jax.tree.leaves(terms))


def _full_sample(state: FullCovState, key: jax.Array, n_samples: int) -> jax.Array:
    chol = jnp.linalg.cholesky(state.cov)
    z = standard_normal(key, (n_samples, state.mean.shape[0]), state.mean.dtype)
    return state.mean + z @ chol.T


def _diag_sample(state: DiagState, key: jax.Array, n_samples: int) -> jax.Array:
    z = standard_normal(key, (n_samples, state.mean.shape[0]), state.mean.dtype)
    return state.mean + z * jnp.sqrt(state.var)


def _row_gram(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a_i b_i^T`` for every row ``i`` of ``(B, C, P)`` stacks: ``(B, C, C)``.

    A loop of 2-D products: XLA's CPU batched dot is several times slower here."""
    return jax.lax.map(lambda pair: pair[0] @ pair[1].T, (a, b))


def _full_output_cov(state: FullCovState, jac: jax.Array) -> jax.Array:
    b, c, p = jac.shape
    return _row_gram((jac.reshape(b * c, p) @ state.cov).reshape(b, c, p), jac)


def _diag_output_cov(state: DiagState, jac: jax.Array) -> jax.Array:
    return _row_gram(jac * state.var, jac)


def _factor_row_gram(factors: DenseFactors, weight) -> jax.Array:
    """``J_b diag(weight) J_b^T`` ``(B, K, K)`` for each row ``b`` of a Jacobian in factored
    form (``J_b^T`` the root's columns ``(b, k)``, :class:`~skbong.core.DenseFactors`): on
    layer ``l`` entry ``(k, j)`` is ``sum_o D_bko D_bjo sum_i h_bi^2 weight_io`` (``h_b0 = 1``,
    the bias), ``O(B P)`` instead of the ``O(B K P)`` of the dense Jacobian."""
    gram = 0.0
    for layer, h, d in zip(factors.network.layers, factors.inputs, factors.sens):
        through = with_bias_input(h) ** 2 @ layer_block(weight, layer)  # (B, n_out)
        gram = gram + jnp.einsum("bko,bjo,bo->bkj", d, d, through)
    return gram


def _diag_output_cov_of_factors(state: DiagState, factors: DenseFactors, jacobian) -> jax.Array:
    """``J diag(var) J^T`` of Jacobians in factored form; ``jacobian`` (the dense ones,
    which :meth:`DiagonalLowRank.output_covariance_of_factors` may need) is not used."""
    del jacobian
    return _factor_row_gram(factors, state.var)


class _Dense:
    """Matrix algebra of the full-covariance families."""

    inv = staticmethod(jnp.linalg.inv)

    @staticmethod
    def dot(a, b):
        return a @ b

    @staticmethod
    def sym_outer(a, b):
        return 0.5 * (jnp.outer(a, b) + jnp.outer(b, a))

    @staticmethod
    def curvature(curv: Curvature):
        return curv.matrix()


class _Elementwise:
    """The same algebra for diagonal matrices stored as vectors."""

    @staticmethod
    def inv(a):
        return 1.0 / a

    @staticmethod
    def dot(a, b):
        return a * b

    @staticmethod
    def sym_outer(a, b):
        return a * b

    @staticmethod
    def curvature(curv: Curvature):
        return curv.diagonal()


def _objective_grads(ops, state, prior, curv: Curvature, with_kl: bool):
    """``(grad_mu l, grad_Sigma l)``, BONG Eqs. 102-105, 149-152, 188-189."""
    (mean, cov), (prior_mean, prior_cov) = state, prior
    grad_mean = curv.grad
    grad_cov = 0.5 * ops.curvature(curv)
    if with_kl:
        prior_prec = ops.inv(prior_cov)
        grad_mean = grad_mean - ops.dot(prior_prec, mean - prior_mean)
        grad_cov = grad_cov - 0.5 * (prior_prec - ops.inv(cov))
    return grad_mean, grad_cov


def _natural_coords_ngd(ops, state, grad_mean, grad_cov, lr):
    # grad_rho1 = grad_mu - 2 grad_Sigma mu, grad_rho2 = grad_Sigma (Eqs. 106-111), so
    # precision' = precision - 2 lr grad_Sigma and precision' mu' = precision' mu + lr grad_mu
    # (Eqs. 118-119, 133-134, 210-211, 226-227).
    mean, cov = state
    cov_new = ops.inv(ops.inv(cov) - 2 * lr * grad_cov)
    return type(state)(mean + lr * ops.dot(cov_new, grad_mean), cov_new)


def _natural_coords_gd(ops, state, grad_mean, grad_cov, lr):
    # grad_psi1 = Sigma grad_mu, grad_psi2 = 2 sym(Sigma grad_mu mu^T) + 2 Sigma grad_Sigma Sigma
    # (Eqs. 112-113, 200-203); precision = -2 psi2 and mu = precision^{-1} psi1
    # (Eqs. 139-140, 145-146, 218-219, 234-235).
    mean, cov = state
    prec = ops.inv(cov)
    cov_grad_mean = ops.dot(cov, grad_mean)
    grad_psi2 = 2 * ops.sym_outer(cov_grad_mean, mean) + 2 * ops.dot(ops.dot(cov, grad_cov), cov)
    cov_new = ops.inv(prec - 2 * lr * grad_psi2)
    return type(state)(ops.dot(cov_new, ops.dot(prec, mean) + lr * cov_grad_mean), cov_new)


def _moment_coords_ngd(ops, state, grad_mean, grad_cov, lr):
    # The Fisher of (mu, Sigma) is blockdiag(Sigma^{-1}, (Sigma^{-1} kron Sigma^{-1}) / 2),
    # Eq. 166 (Eqs. 167-172, 246-253).
    mean, cov = state
    return type(state)(mean + lr * ops.dot(cov, grad_mean), cov + 2 * lr * ops.dot(ops.dot(cov, grad_cov), cov))


def _moment_coords_gd(ops, state, grad_mean, grad_cov, lr):
    # Eqs. 173-182, 254-261.
    mean, cov = state
    return type(state)(mean + lr * grad_mean, cov + lr * grad_cov)


@dataclass(frozen=True)
class _GaussianFamily:
    """Shared body of the four full/diagonal families; subclasses fix the algebra."""


    def init(self, mean0, sigma0):
        """Prior ``N(mean0, sigma0^2 I)``."""
        return self._init(mean0, sigma0)

    def predict(self, state, decay, process_noise):
        """Predict step ``mu <- gamma mu``, ``Sigma <- gamma^2 Sigma + q I`` (LO-FI Eqs. 15-16)."""
        return self._predict(state, decay, process_noise)

    def is_valid(self, state, check_definite=True) -> jax.Array:
        """Whether the belief is finite with a positive definite covariance (moment steps and
        plain-gradient steps can break this). ``check_definite`` False lets a full
        covariance through on positive variances (:func:`_full_valid`); the diagonal
        families' check is exact and ``O(P)`` either way."""
        return self._is_valid(state, check_definite)

    def sample(self, state, key: jax.Array, n_samples: int) -> jax.Array:
        """``n_samples`` draws of the parameters, shape ``(n_samples, P)``."""
        return self._sample(state, key, n_samples)

    def sample_pre_activation(self, state, key: jax.Array, n_samples: int, x: jax.Array, network: DenseNetwork):
        """``n_samples`` draws, for one row ``x`` ``(1, n_in)``, of the first layer's
        pre-activation and the other layers' weights, jointly as under the belief
        (:func:`_diag_pre_activation_draws`); None for the full-covariance families, whose
        draws of every weight take ``O(P^2)`` anyway."""
        if not self.diagonal:
            return None
        return _diag_pre_activation_draws(state.mean, self.marginal_variance(state), key, n_samples, x, network)

    def covariance(self, state) -> jax.Array:
        """Dense ``Sigma`` (for tests and small models)."""
        return self._covariance(state)

    def marginal_variance(self, state) -> jax.Array:
        """``diag(Sigma)``, the posterior variance of each weight, shape ``(P,)``."""
        return jnp.diagonal(self.covariance(state))

    def output_covariance(self, state, jac: jax.Array) -> jax.Array:
        """``J Sigma J^T`` for Jacobians ``jac`` of shape ``(B, C, P)``: ``(B, C, C)``
        (LO-FI Eq. 60); ``O(B C^2 P)`` for the diagonal families."""
        return self._output_cov(state, jac)

    def rescale_precision(self, state, scale, shift):
        """The belief with precision ``scale Sigma^{-1} + shift I`` and the same mean
        (covariance inflation, LO-FI Appendix E)."""
        return self._rescale(state, scale, shift)

    def covariance_dot(self, state, v: jax.Array) -> jax.Array:
        """``Sigma v`` for a vector ``v`` of shape ``(P,)``."""
        return self._cov_dot(state, v)

    def natural_step(self, state, prior, curv: Curvature, lr, with_kl: bool):
        """Natural-gradient step ``psi += lr F^{-1} grad_psi l`` (BONG Eqs. 3, 30)."""
        return self._ngd(self._ops, state, *_objective_grads(self._ops, state, prior, curv, with_kl), lr)

    def plain_step(self, state, prior, curv: Curvature, lr, with_kl: bool):
        """Gradient step ``psi += lr grad_psi l`` in the family's coordinates (Eqs. 29, 32)."""
        return self._gd(self._ops, state, *_objective_grads(self._ops, state, prior, curv, with_kl), lr)


@dataclass(frozen=True)
class FullCovariance(_GaussianFamily):
    """Full covariance, natural parameters (FC).

    BONG-LIN-HESS here is CM-EKF; BONG-MC-HESS is explicit R-VGA (BONG Eqs. 118-119).

    Parameters
    ----------
    deferred_columns : int, default=256
        Inside a filter's scan, for ``P >= defer_from``, the downdates ``Sigma -= A A^T``
        of BONG steps on a low-rank curvature (``K`` columns a step) are held in a ``P x W``
        factor, ``W`` about ``deferred_columns``, and applied together once it is full
        (:class:`FullCovDeferred`). One product of inner dimension ``W`` runs near the
        machine's matmul rate; a rank-``K`` update of all ``P^2`` entries every step does
        not (about 50 GFLOP/s against 330 on a 2-core CPU for ``K = 10``). The result is
        the same up to round-off.
    defer_from : int, default=2048
        Smallest ``P`` at which downdates are deferred; below it a step's products are
        too small for the difference to matter.
    """

    deferred_columns: int = 256
    defer_from: int = 2048
    name = "fc"
    diagonal = False
    # Natural steps set precision' = precision - lr G (BONG, Eq. 118) or (1 - lr) precision
    # + lr precision_prior - lr G (BLR, Eq. 133): positive definite in exact arithmetic
    # whenever G is negative semi-definite and, with the KL term, lr <= 1 or the step is
    # the first from the prior (:func:`skbong.core._filter._checks_definiteness`).
    natural_steps_keep_definite = True
    _ops, _ngd, _gd = _Dense, staticmethod(_natural_coords_ngd), staticmethod(_natural_coords_gd)
    # The methods that also take a FullCovDeferred belief (predict, is_valid, sample,
    # covariance, output_covariance, covariance_dot) are defined below.
    _init, _rescale = staticmethod(_full_init), staticmethod(_full_rescale)

    def steps_per_block(self, n_params: int, step_columns: int) -> int:
        """Filter steps whose downdates one :class:`FullCovDeferred` block holds, for a
        step that adds ``step_columns`` columns; 1 means no deferral."""
        if n_params < self.defer_from:
            return 1
        return max(1, self.deferred_columns // step_columns)

    def defer(self, state: FullCovState, width: int) -> FullCovDeferred:
        """The belief ``state`` with an empty ``P x width`` factor of pending downdates."""
        dtype = state.cov.dtype
        factor = jnp.zeros((state.mean.shape[0], width), dtype)
        one, zero = jnp.ones((), dtype), jnp.zeros((), dtype)
        return FullCovDeferred(state.mean, state.cov, one, zero, factor, jnp.zeros((), jnp.int32))

    def settle(self, state: FullCovDeferred) -> FullCovState:
        """``scale base + shift I - factor factor^T`` as one dense covariance.

        The product takes the factor's first ``w`` columns, ``w`` the least power of two
        (from 8) that holds its ``n_columns`` filled ones; the others are zero. A call of a
        few rows fills a few of its ``W`` columns, and the whole product, ``2 P^2 W`` FLOPs
        for any call, was most of its time (``P = 5,101``: 245 ms for a one-row call)."""
        width = state.factor.shape[1]
        widths = [w for w in (8, 16, 32, 64, 128) if w < width] + [width]

        def downdate(w):
            return lambda factor: factor[:, :w] @ factor[:, :w].T

        which = jnp.sum(state.n_columns > jnp.asarray(widths[:-1], state.n_columns.dtype))
        product = jax.lax.switch(which, [downdate(w) for w in widths], state.factor)
        diagonal = jnp.arange(state.mean.shape[0])
        cov = (state.scale * state.base - product).at[diagonal, diagonal].add(state.shift)
        return FullCovState(state.mean, cov)

    def predict(self, state, decay, process_noise):
        """Predict step ``mu <- gamma mu``, ``Sigma <- gamma^2 Sigma + q I`` (LO-FI Eqs. 15-16);
        on a :class:`FullCovDeferred` belief it scales the terms and leaves ``base`` alone."""
        if not isinstance(state, FullCovDeferred):
            return _full_predict(state, decay, process_noise)
        return state._replace(
            mean=decay * state.mean,
            scale=decay**2 * state.scale,
            shift=decay**2 * state.shift + process_noise,
            factor=decay * state.factor,
        )

    def covariance(self, state) -> jax.Array:
        return self._as_dense(state).cov

    def is_valid(self, state, check_definite=True) -> jax.Array:
        return _full_valid(self._as_dense(state), check_definite)

    def sample(self, state, key: jax.Array, n_samples: int) -> jax.Array:
        return _full_sample(self._as_dense(state), key, n_samples)

    def output_covariance(self, state, jac: jax.Array) -> jax.Array:
        if not isinstance(state, FullCovDeferred):
            return _full_output_cov(state, jac)
        b, c, p = jac.shape
        flat = jac.reshape(b * c, p)
        through_base = _row_gram((flat @ state.base).reshape(b, c, p), jac)
        jac_factor = (flat @ state.factor).reshape(b, c, -1)
        return state.scale * through_base + state.shift * _row_gram(jac, jac) - _row_gram(jac_factor, jac_factor)

    def covariance_dot(self, state, v: jax.Array) -> jax.Array:
        if not isinstance(state, FullCovDeferred):
            return state.cov @ v
        return state.scale * (state.base @ v) + state.shift * v - state.factor @ (state.factor.T @ v)

    def natural_step(self, state, prior, curv: Curvature, lr, with_kl: bool):
        """Natural-gradient step: BONG Eqs. 118-119 (``lr = 1``, no KL), BLR Eqs. 133-134.

        ``precision' = (1 - lr) precision + lr precision_prior - lr G`` with the KL term
        (``precision - lr G`` without) and ``mu' = mu + lr Sigma' grad_mu l``. Without the
        KL term and with ``G = -U U^T`` the Woodbury (Kalman) form of Eqs. 126-130 costs
        ``O(K P^2)``: ``Sigma' = Sigma - A A^T`` with ``A = S L^{-T}``, ``S = Sigma U`` and
        ``L L^T = I / lr + U^T S``; on a :class:`FullCovDeferred` belief ``A`` joins the
        pending downdates. Otherwise the step inverts ``P x P`` matrices, ``O(P^3)`` (E.1.3).
        """
        deferred = isinstance(state, FullCovDeferred)
        if not (isinstance(curv, LowRankCurvature) and not with_kl):
            if deferred:
                raise TypeError("a deferred full covariance takes BONG steps on a low-rank curvature only")
            return super().natural_step(state, prior, curv, lr, with_kl)
        root = jnp.sqrt(lr) * curv.root
        k = root.shape[1]
        # One pass over Sigma for both products: S = Sigma U and Sigma g.
        products = self.covariance_dot(state, jnp.concatenate([root, curv.grad[:, None]], axis=1))
        s, cov_grad = products[:, :k], products[:, k]
        gram = jnp.eye(k, dtype=s.dtype) + root.T @ s
        # A A^T is symmetric by construction, so no P x P transpose is needed;
        # Sigma' g = Sigma g - A (A^T g).
        a = s @ _lower_inverse(jnp.linalg.cholesky(gram)).T
        mean = state.mean + lr * (cov_grad - a @ (a.T @ curv.grad))
        if not deferred:
            return FullCovState(mean, state.cov - a @ a.T)
        factor = jax.lax.dynamic_update_slice(state.factor, a, (jnp.zeros_like(state.n_columns), state.n_columns))
        return state._replace(mean=mean, factor=factor, n_columns=state.n_columns + k)

    def _as_dense(self, state) -> FullCovState:
        return self.settle(state) if isinstance(state, FullCovDeferred) else state


@dataclass(frozen=True)
class FullCovarianceMoment(_GaussianFamily):
    """Full covariance, moment parameters (FC_MOM).

    The BONG step (Eqs. 167-168) is the Kalman step without the ``H Sigma H^T`` term of
    the innovation covariance (E.2.1); it keeps ``Sigma`` positive definite only while
    ``U^T Sigma U < I``.
    """

    name = "fc_mom"
    diagonal = False
    _ops, _ngd, _gd = _Dense, staticmethod(_moment_coords_ngd), staticmethod(_moment_coords_gd)
    _init, _predict, _is_valid = staticmethod(_full_init), staticmethod(_full_predict), staticmethod(_full_valid)
    _sample, _covariance = staticmethod(_full_sample), staticmethod(lambda state: state.cov)
    _output_cov, _rescale = staticmethod(_full_output_cov), staticmethod(_full_rescale)
    _cov_dot = staticmethod(lambda state, v: state.cov @ v)


    def natural_step(self, state: FullCovState, prior: FullCovState, curv: Curvature, lr, with_kl: bool):
        """Natural-gradient step in moment coordinates: BONG Eqs. 167-168, BLR Eqs. 171-172.

        ``mu' = mu + lr Sigma grad_mu l``, ``Sigma' = Sigma + 2 lr Sigma grad_Sigma l Sigma``;
        for BONG with ``G = -U U^T`` this is ``Sigma - lr S S^T``, ``S = Sigma U``, in
        ``O(K P^2)`` without forming ``G``.
        """
        if not (isinstance(curv, LowRankCurvature) and not with_kl):
            return super().natural_step(state, prior, curv, lr, with_kl)
        s = state.cov @ curv.root
        return FullCovState(state.mean + lr * (state.cov @ curv.grad), state.cov - lr * (s @ s.T))


def _lower_inverse(chol: jax.Array) -> jax.Array:
    """``L^{-1}`` of a small ``(K, K)`` Cholesky factor of ``I + (positive semi-definite)``.

    Its singular values are at least 1, so ``L^{-1}`` is well conditioned, and applying it
    as a matrix product to ``P`` right-hand sides is about ten times faster on XLA:CPU than
    a triangular solve with ``P`` columns (0.16 against 1.9 ms at ``K = 10, P = 40k``).
    """
    return solve_triangular(chol, jnp.eye(chol.shape[0], dtype=chol.dtype), lower=True)


def _layer_noise(key, n_samples: int, layer, dtype) -> jax.Array:
    """``n_samples`` standard normal draws of a dense layer's bias and kernel as one block
    ``(n_samples, n_in + 1, n_out)``, the layout of :func:`layer_block`."""
    shape = (layer.n_in + 1, layer.n_out)
    return standard_normal(key, (n_samples, shape[0] * shape[1]), dtype).reshape((n_samples,) + shape)


def _diag_pre_activation_draws(mean, var, key, n_samples: int, x: jax.Array, network: DenseNetwork):
    """Under ``N(mean, diag(var))``, the first layer's pre-activation ``z = x~ [b; W]``
    (``x~ = (1, x)``) has independent units, Gaussian with mean ``x~ [mu_b; mu_W]`` and
    variance ``x~^2 [v_b; v_W]``, independent of the other layers' weights.

    Returns ``(z, weights)``: ``z`` ``(M, n_out)`` and, per later layer, its
    ``(kernel, bias)`` draws ``(M, n_in, n_out)``, ``(M, n_out)``.
    """
    dtype = mean.dtype
    first, rest = network.layers[0], network.layers[1:]
    keys = jax.random.split(key, len(network.layers))
    x_bias = with_bias_input(x.astype(dtype))
    z_mean = x_bias @ layer_block(mean, first)
    z_scale = jnp.sqrt((x_bias * x_bias) @ layer_block(var, first))
    z = z_mean + z_scale * standard_normal(keys[0], (n_samples, first.n_out), dtype)
    weights = []
    for layer, layer_key in zip(rest, keys[1:]):
        noise = _layer_noise(layer_key, n_samples, layer, dtype)
        block = layer_block(mean, layer) + jnp.sqrt(layer_block(var, layer)) * noise
        weights.append((block[:, 1:], block[:, 0]))
    return z, weights


def _dlr_pre_activation_draws(state: DLRState, key, n_samples: int, x: jax.Array, network: DenseNetwork):
    """:func:`_diag_pre_activation_draws` under the DLR belief ``N(mu, (Upsilon + W W^T)^{-1})``.

    :meth:`DiagonalLowRank.sample` draws ``theta = mu + Upsilon^{-1/2} e + Upsilon^{-1} W c``
    with ``e ~ N(0, I_P)`` and ``c = V diag(phi) V^T A^T e`` (``A = Upsilon^{-1/2} W``). The
    first layer's block ``e_1`` of ``e`` enters the pre-activation
    ``z = x~ [mu_b; mu_W] + u + G c`` and ``c`` only through ``u = x~ (Upsilon_1^{-1/2} e_1)``
    (``n_out`` numbers) and ``a_1 = A_1^T e_1`` (``R``), with ``G = x~ (Upsilon_1^{-1} W_1)``
    ``(n_out, R)``. Those are jointly Gaussian, with ``Cov(u) = D`` diagonal
    (``D_o = x~^2 Upsilon_1^{-1}``), ``Cov(a_1, u) = G^T`` and ``Cov(a_1) = E = A_1^T A_1``.
    Drawn as ``u = D^{1/2} nu`` and ``a_1 = G^T D^{-1} u + S^{1/2} xi`` with the Schur
    complement ``S = E - G^T D^{-1} G`` (positive semi-definite; its root from an ``R x R``
    eigenproblem), they have that law. The other layers' ``e`` is drawn as it is.
    ``O(R^2 P)``, like the sampler, and ``M (P - P_1 + n_out + R)`` normal numbers. Unlike
    :meth:`DiagonalLowRank.sample`, whose draws from a key depend on the precision alone,
    these depend on ``W``'s columns (``xi`` is taken along them): two beliefs whose ``W``
    differ by a rotation draw other numbers, with the same law.
    """
    dtype = state.mean.dtype
    first, rest = network.layers[0], network.layers[1:]
    keys = jax.random.split(key, len(network.layers) + 1)
    rank = _factor_rank(state.low_rank)
    ups_blocks = [layer_block(state.diag_precision, layer) for layer in network.layers]
    # Upsilon^{-1} W is read by the Gram matrices and by G.
    w_blocks, scaled = _low_rank_blocks(state, network.layers)
    # A_l^T A_l = W_l^T Upsilon_l^{-1} W_l, as products of flat (P_l, R) matrices.
    grams = [w.reshape(-1, rank).T @ s.reshape(-1, rank) for w, s in zip(w_blocks, scaled)]
    s, v = jnp.linalg.eigh(sum(grams))
    root_s = jnp.sqrt(1.0 + jnp.maximum(s, 0.0))
    phi = -1.0 / (root_s * (1.0 + root_s))

    x_bias = with_bias_input(x.astype(dtype))[0]
    d = (x_bias * x_bias) @ (1.0 / ups_blocks[0])  # (n_out,), positive: x~ holds the bias's 1
    g = (x_bias @ scaled[0].reshape(first.n_in + 1, -1)).reshape(first.n_out, rank)
    lam, vecs = jnp.linalg.eigh(grams[0] - (g / d[:, None]).T @ g)
    schur_root = (vecs * jnp.sqrt(jnp.maximum(lam, 0.0))) @ vecs.T
    u = jnp.sqrt(d) * standard_normal(keys[0], (n_samples, first.n_out), dtype)
    a = (u / d) @ g + standard_normal(keys[1], (n_samples, rank), dtype) @ schur_root  # A^T e so far

    noises = []
    for layer, ups, w, layer_key in zip(rest, ups_blocks[1:], w_blocks[1:], keys[2:]):
        noise = _layer_noise(layer_key, n_samples, layer, dtype) * jax.lax.rsqrt(ups)  # Upsilon^{-1/2} e
        a = a + jnp.einsum("mio,ior->mr", noise, w)  # A^T e = W^T Upsilon^{-1/2} e
        noises.append(noise)
    c = ((a @ v) * phi) @ v.T
    z = x_bias @ layer_block(state.mean, first) + u + c @ g.T
    weights = []
    for layer, noise, s_block in zip(rest, noises, scaled[1:]):
        block = layer_block(state.mean, layer) + noise + jnp.einsum("mr,ior->mio", c, s_block)
        weights.append((block[:, 1:], block[:, 0]))
    return z, weights


def _diag_kalman_step(state: DiagState, curv: LowRankCurvature, lr, moment: bool) -> tuple[DiagState, jax.Array]:
    """Linearised (Kalman) update with the full covariance, projected onto a diagonal, and
    ``delta^T S^{-1} delta`` of its mean move ``delta`` under the prior precision.

    The FC natural step without the KL term (BONG Eqs. 118-119, 126-130) from the diagonal
    prior ``S = diag(var)`` with ``G = -U U^T`` and ``g = U z`` is the Kalman update
    ``mu' = mu + S U' (I + U'^T S U')^{-1} z'`` with ``U' = sqrt(lr) U``, ``z' = sqrt(lr) z``
    (for LIN-HESS ``S U (I + U^T S U)^{-1} z`` is the gain ``S H^T (R + H S H^T)^{-1}`` applied
    to the innovation). The new belief keeps that mean and projects the covariance:

    * natural family (``moment=False``): the diagonal of the posterior *precision*,
      ``1 / var' = 1 / var + rowsum(U'^2)`` (Eq. 213), the ``KL(q || p)`` projection onto
      diagonal Gaussians (VD-EKF, Chang et al. 2022);
    * moment family: the diagonal of the posterior *covariance*,
      ``var' = var - rowsum((S U' L^{-T})^2)`` with ``L L^T = I + U'^T S U'``, the
      ``KL(p || q)`` (moment-matching) projection, positive whatever ``sigma0``.

    Unlike Eq. 212, whose mean step uses the projected precision, the gain never
    overshoots the observation: ``U^T (mu' - mu) = A (I + A)^{-1} z`` with ``A = U^T S U``.
    ``O(K^2 P)`` for ``K`` columns of ``U``; no ``P x P`` matrix. The move is ``S U' c``
    with ``c = (I + A')^{-1} z'``, so ``delta^T S^{-1} delta = c^T A' c`` (``A'`` of
    ``U'``), from the step's ``K x K`` matrices: the line search's penalty
    (``FilterConfig.backtrack``) without a pass over ``P``.
    """
    if curv.factors is not None:
        return _diag_kalman_dense_step(state, curv.factors, curv.coords, lr, moment)
    root = jnp.sqrt(lr).astype(state.mean.dtype) * curv.root  # (P, K)
    coords = jnp.sqrt(lr).astype(state.mean.dtype) * curv.coords
    if not moment:
        # The precision's diagonal needs no solve: only the gain's K coordinates do. The
        # Gram matrix is that of S^{1/2} U and the gain S (U c): no pass reads S U, which
        # takes the MNIST MLP's step (P = 40k, K = 10) from 0.86 to 0.80 ms.
        half = jnp.sqrt(state.var)[:, None] * root
        gram = half.T @ half
        chol = jnp.linalg.cholesky(jnp.eye(root.shape[1], dtype=root.dtype) + gram)
        gain_coords = jax.scipy.linalg.cho_solve((chol, True), coords)
        var = 1.0 / (1.0 / state.var + jnp.sum(root**2, axis=1))
        return DiagState(state.mean + state.var * (root @ gain_coords), var), gain_coords @ gram @ gain_coords
    cov_root = state.var[:, None] * root  # S U
    chol = jnp.linalg.cholesky(jnp.eye(root.shape[1], dtype=root.dtype) + root.T @ cov_root)
    # One product serves both: a = L^{-1} U^T S, and the gain coordinates L^{-T} L^{-1} z.
    lower_inverse = _lower_inverse(chol)
    a = lower_inverse @ jnp.concatenate([cov_root.T, coords[:, None]], axis=1)
    mean = state.mean + a[:, :-1].T @ a[:, -1]
    # c^T A c with c = L^{-T} w, w = L^{-1} z and A = L L^T - I: |w|^2 - |c|^2.
    gain_coords = lower_inverse.T @ a[:, -1]
    move_quadratic = a[:, -1] @ a[:, -1] - gain_coords @ gain_coords
    return DiagState(mean, state.var - jnp.sum(a[:, :-1] ** 2, axis=0)), move_quadratic


def _factor_gram(factors: DenseFactors, sens, weight) -> jax.Array:
    """``U^T diag(weight) U`` ``(B K, B K)`` for the root ``U`` in factored form with
    sensitivities ``sens`` (the factors' own, or scaled); ``weight=None`` for ``U^T U``.

    Entry ``(b k, c j)`` is, summed over layers,
    ``sum_o D_bko D_cjo sum_i h_bi h_ci weight_io`` on the layer's block
    (:func:`layer_block`, ``h_b0 = 1``): ``O(B^2 P)``.
    """
    n_cols = sens[0].shape[0] * sens[0].shape[1]
    gram = 0.0
    for layer, h, d in zip(factors.network.layers, factors.inputs, sens):
        h = with_bias_input(h)
        if weight is None:
            inner = (h @ h.T)[:, :, None]
        else:
            inner = jnp.einsum("bi,ci,io->bco", h, h, layer_block(weight, layer))
        gram = gram + jnp.einsum("bko,cjo,bco->bkcj", d, d, inner).reshape(n_cols, n_cols)
    return gram


def _written_once(fn, *args):
    """``fn(*args)``, written out once for all its consumers.

    XLA's CPU backend fuses a cheap producer (a slice, an elementwise product) into each of
    its consumers and computes it again in each: the first layer's block of ``W`` at
    P = 400k (16 MB) was copied twice and ``W / Upsilon`` formed twice. The outputs of a
    conditional are written out, as its branches are compiled apart; both branches are
    ``fn``, so the predicate, which XLA cannot evaluate at compile time, does not matter.
    (Under ``vmap`` with a batched predicate the conditional becomes a select of two equal
    values and the barrier is lost, not the result.)
    """
    first = jnp.ravel(jax.tree.leaves(args)[0])[0]
    return jax.lax.cond(first == first, fn, fn, *args)


def _signed_by_largest_entry(vecs: jax.Array) -> jax.Array:
    """The columns of ``vecs``, each with the sign that makes its largest entry (in
    absolute value) positive.

    An eigensolver fixes each eigenvector up to its sign, and round-off can flip that
    sign: the same DLR step compiled into two programs gave ``W`` columns of opposite
    signs. The belief does not see it, but MC-EF's local draws are taken along ``W``'s
    columns (:func:`_dlr_pre_activation_draws`), so the two programs then drew other
    numbers from the same key. With this sign, ``W`` is a continuous function of the step's
    inputs (except where two entries tie for the largest)."""
    largest = jnp.take_along_axis(vecs, jnp.argmax(jnp.abs(vecs), axis=0)[None], axis=0)
    return vecs * jnp.where(largest < 0, -1.0, 1.0).astype(vecs.dtype)


def _factor_rank(w) -> int:
    """The number of columns of a DLR factor ``W``, flat ``(P, R)`` or per layer."""
    return w.blocks[0].shape[-1] if isinstance(w, LayeredVector) else w.shape[1]


def _low_rank_blocks(state: DLRState, layers) -> tuple[list, list]:
    """``W``'s and ``Upsilon^{-1} W``'s blocks ``(n_in + 1, n_out, R)`` per layer
    (:func:`layer_block`), written once for all their consumers (:func:`_written_once`).

    Slicing a layer out of the flat ``W`` copies it, so each block is sliced once and
    ``W / Upsilon`` formed block by block from it. The MLP 784-503-10 (P = 400k): three
    16 MB copies of the first layer's block fewer, 11.2 -> 8.9 ms a DLR-10 step.
    """

    def weighted(w_blocks, ups):
        return [b / layer_block(ups, layer)[..., None] for layer, b in zip(layers, w_blocks)]

    def blocks(w, ups):
        w_blocks = [layer_block(w, layer) for layer in layers]
        return w_blocks, weighted(w_blocks, ups)

    if isinstance(state.low_rank, LayeredVector):  # the blocks are carried: no slice to copy
        w_blocks = [layer_block(state.low_rank, layer) for layer in layers]
        return w_blocks, _written_once(weighted, w_blocks, state.diag_precision)
    return _written_once(blocks, state.low_rank, state.diag_precision)


def _factor_cross(factors: DenseFactors, sens, blocks) -> jax.Array:
    """``A^T U`` ``(m, B K)`` for a ``(P, m)`` array ``A``, given as its layers' blocks
    ``(n_in + 1, n_out, m)`` (:func:`layer_block`), and the factored root ``U``: per
    layer ``sum_o D_bko sum_i h_bi A_iom`` with ``h_b0 = 1``, one pass over ``A``."""
    cross = 0.0
    for h, d, block in zip(factors.inputs, sens, blocks):
        through = jnp.einsum("bi,iom->bom", with_bias_input(h), block)
        cross = cross + jnp.einsum("bko,bom->mbk", d, through).reshape(block.shape[-1], -1)
    return cross


def _flat_layout(pieces) -> jax.Array:
    """The flat vector that the ``(offset, piece)`` pairs cover, each piece raveled at its
    offset.

    Built as a sum of zero-padded pieces, not a concatenation: XLA's CPU backend fuses a
    concatenation into the elementwise update that consumes it as one loop that looks up
    each element's piece, and that loop falls off a cliff once the pieces leave the cache.
    The diagonal LIN-HESS step on an MLP 784-h-10 (2-core AMD EPYC, a fresh process) took
    0.063, 4.3 and 14 ms at P = 32k, 100k and 400k; with the padding (and a piece per layer,
    not per bias and kernel) 0.078, 0.18 and 0.60. (The ``P x K`` products of the low-rank
    step, whose pieces have ``K`` columns, are faster concatenated.)
    """
    pieces = sorted(((offset, jnp.ravel(piece)) for offset, piece in pieces), key=lambda pair: pair[0])
    size = pieces[-1][0] + pieces[-1][1].shape[0]
    return sum(jnp.pad(piece, (offset, size - offset - piece.shape[0])) for offset, piece in pieces)


def _diag_kalman_dense_step(
    state: DiagState, factors: DenseFactors, coords, lr, moment: bool
) -> tuple[DiagState, jax.Array]:
    """:func:`_diag_kalman_step` on a dense network, from the root's factors.

    On a layer with inputs ``h_b``, sensitivities ``D_bk`` and prior variances ``V`` (kernel,
    ``n_in x n_out``) and ``v`` (bias), every quantity of the step is a product of small
    factors (``b, c`` rows, ``k, j`` columns, ``i`` inputs, ``o`` outputs):

    * the Gram matrix ``U^T S U``: ``sum_o D_bko D_cjo (sum_i h_bi h_ci V_io + v_o)``;
    * the gain direction ``U g``: ``h_bi sum_k D_bko g_bk`` summed over ``b``;
    * the diagonal ``diag(U M U^T)``: ``sum_bc h_bi h_ci sum_kj D_bko M_bkcj D_cjo``
      (``M = I`` for the natural step's precision, ``(I + U^T S U)^{-1}`` for the moment
      step's covariance), and without ``h`` on the bias; taken on the bias and kernel as
      one block, the bias the row of an input fixed at 1.

    The same update as the root's (tested), reading each variance and mean once: for the
    MNIST MLP (``P = 40k``, ``K = 10``) no ``P x K`` array is formed.
    """
    dtype = state.mean.dtype
    scale = jnp.sqrt(lr).astype(dtype)
    coords = scale * coords
    layers = factors.network.layers
    sens = [scale * d for d in factors.sens]
    n_cols = sens[0].shape[0] * sens[0].shape[1]

    gram = _factor_gram(factors, sens, state.var)
    chol = jnp.linalg.cholesky(jnp.eye(n_cols, dtype=dtype) + gram)
    if moment:
        middle = jax.scipy.linalg.cho_solve((chol, True), jnp.eye(n_cols, dtype=dtype))
        gain_coords = middle @ coords
    else:
        gain_coords = jax.scipy.linalg.cho_solve((chol, True), coords)
    # Per layer, the mean's move U g and the diagonal of U M U^T on its bias and kernel,
    # which follow each other in the flat vector (DenseLayer): one (n_in + 1, n_out) block,
    # whose first input is the bias's 1.
    moves, diagonals = [], []
    for layer, h, d in zip(layers, factors.inputs, sens):
        h = with_bias_input(h.astype(dtype))
        split = d.shape[:2]  # this layer's split of the columns (DenseFactors)
        direction = jnp.einsum("bko,bk->bo", d, gain_coords.reshape(split))  # U g = h^T direction
        if moment:
            paired = jnp.einsum("bko,bkcj,cjo->bco", d, middle.reshape(split + split), d)
            diagonals.append((layer.bias, jnp.einsum("bi,ci,bco->io", h, h, paired)))
        else:
            diagonals.append((layer.bias, (h**2).T @ jnp.sum(d**2, axis=1)))
        moves.append((layer.bias, h.T @ direction))
    if isinstance(state.mean, LayeredVector):
        # Per layer, on the blocks: no flat vector is written.
        move, diagonal = dict(moves), dict(diagonals)
        move = LayeredVector(tuple(move[offset] for offset in state.mean.offsets), state.mean.offsets)
        diagonal = LayeredVector(tuple(diagonal[offset] for offset in state.mean.offsets), state.mean.offsets)
    else:
        # The update is taken on flat vectors (see _flat_layout).
        move, diagonal = _flat_layout(moves), _flat_layout(diagonals)
    mean = jax.tree.map(lambda m, var, step: m + var * step, state.mean, state.var, move)
    move_quadratic = gain_coords @ gram @ gain_coords
    if moment:
        return DiagState(mean, jax.tree.map(lambda var, dg: var - var**2 * dg, state.var, diagonal)), move_quadratic
    # 1 / (1 / var + d) with one division, not two.
    return DiagState(mean, jax.tree.map(lambda var, dg: var / (1.0 + var * dg), state.var, diagonal)), move_quadratic


class _DiagonalFamily(_GaussianFamily):
    """Shared body of the two diagonal families: the belief is a mean and a variance per
    weight; the subclasses fix the coordinates of the plain steps and ``_moment``, which
    :func:`_diag_kalman_step` projects onto (the precision, or the covariance)."""

    #: MC-HESS gives these families the diagonal of the Hessian (Hutchinson), not a matrix.
    diagonal = True
    _moment: bool
    _init, _predict, _is_valid = staticmethod(_diag_init), staticmethod(_diag_predict), staticmethod(_diag_valid)
    _sample, _covariance = staticmethod(_diag_sample), staticmethod(lambda state: jnp.diag(state.var))
    _output_cov, _rescale = staticmethod(_diag_output_cov), staticmethod(_diag_rescale)
    output_covariance_of_factors = staticmethod(_diag_output_cov_of_factors)
    _cov_dot = staticmethod(lambda state, v: state.var * v)
    marginal_variance = staticmethod(lambda state: state.var)

    precision_quadratic = staticmethod(_diag_precision_quadratic)

    def natural_step(self, state: DiagState, prior: DiagState, curv: Curvature, lr, with_kl: bool) -> DiagState:
        """The Kalman step projected on the diagonal (see ``kalman``), else the printed
        steps (the subclass's docstring names their equations)."""
        return self.natural_step_with_move_quadratic(state, prior, curv, lr, with_kl)[0]

    def natural_step_with_move_quadratic(self, state: DiagState, prior: DiagState, curv: Curvature, lr, with_kl: bool):
        """:meth:`natural_step` and ``delta^T S^{-1} delta`` of its mean move ``delta`` where
        the Kalman step gives it from its small matrices (:func:`_diag_kalman_step`), else
        None."""
        if self.kalman and isinstance(curv, LowRankCurvature) and not with_kl:
            return _diag_kalman_step(state, curv, lr, moment=self._moment)
        return super().natural_step(state, prior, curv, lr, with_kl), None


@dataclass(frozen=True)
class Diagonal(_DiagonalFamily):
    """Diagonal covariance, natural parameters (DIAG).

    Its natural step is the Kalman step projected on the diagonal precision (see
    ``kalman``), else Eqs. 210-213 (BONG), 226-227 (BLR).

    Parameters
    ----------
    kalman : bool, default=True
        Take the BONG step (natural step without the KL term) with a low-rank curvature
        (LIN-HESS, LIN-EF, MC-EF) as the full Kalman update projected onto the diagonal
        precision (:func:`_diag_kalman_step`, VD-EKF). False takes Eqs. 210-213 as printed,
        whose mean step uses the projected precision and overshoots once
        ``sigma0^2 ||J||^2`` exceeds about ``1 / R``. MC-HESS (a diagonal Hessian, no
        factor) and BLR (the KL term) always take the printed steps.

    BONG-LIN-HESS here is VD-EKF; BLR-MC-EF is VON (E.3.3).
    """

    kalman: bool = True
    name = "diag"
    _moment = False
    _ops, _ngd, _gd = _Elementwise, staticmethod(_natural_coords_ngd), staticmethod(_natural_coords_gd)


@dataclass(frozen=True)
class DiagonalMoment(_DiagonalFamily):
    """Diagonal covariance, moment parameters (DIAG_MOM).

    Its natural step is the Kalman step projected on the diagonal covariance (see
    ``kalman``), else Eqs. 246-247 (BONG), 252-253 (BLR).

    Parameters
    ----------
    kalman : bool, default=True
        Take the BONG step with a low-rank curvature as the full Kalman update projected
        onto the diagonal covariance (moment matching, :func:`_diag_kalman_step`), which
        stays positive for any ``sigma0``. False takes Eqs. 246-247 as printed, which lose
        positivity once ``sigma0^2`` times the curvature exceeds 1.

    BBB-MC-EF here is BBB (E.4.7).
    """

    kalman: bool = True
    name = "diag_mom"
    _moment = True
    _ops, _ngd, _gd = _Elementwise, staticmethod(_moment_coords_ngd), staticmethod(_moment_coords_gd)


@dataclass(frozen=True)
class DiagonalLowRank:
    """Diagonal-plus-low-rank precision ``Upsilon + W W^T`` of rank ``rank`` (DLR).

    BONG-LIN-HESS on this family is LO-FI (BONG Appendix E.5.2).

    Parameters
    ----------
    rank : int
        ``R``, the columns of ``W``.
    spherical : bool, default=False
        Keep ``Upsilon = eta I`` isotropic: spherical LO-FI (LO-FI Appendix F, "SLR"). The
        data then only enter ``W``: the natural step does not add the discarded directions
        to the diagonal (Algorithm 7), and ``eta`` moves only with the dynamics. The predict
        step of this class is then exactly Algorithm 6 (Eqs. 108-110): with
        ``Upsilon = eta I`` and the orthogonal columns ``W = U Lambda`` that the update
        leaves, Eq. 19 gives Eq. 108 and the ``W`` update gives Eq. 109 column by column.
        Only the natural steps (BONG, BLR) keep the diagonal spherical.
    """

    rank: int
    spherical: bool = False

    @property
    def name(self) -> str:
        return "slr" if self.spherical else "dlr"

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
        With ``q = 0`` (the default, static belief) this is ``Upsilon' = Upsilon / gamma^2``,
        ``W' = W / gamma``; a ``lax.switch`` takes that branch and skips the ``P x R x R``
        products, about 1 ms per step at ``P = 40k``. With also ``gamma = 1`` the belief is
        returned as it is, which saves two passes over ``W`` (4 ms per step at ``P = 400k``).
        """
        ups, w = state.diag_precision, state.low_rank

        def with_noise(_):
            ups_pred = 1.0 / (decay**2 / ups + process_noise)
            scale = ups_pred / ups  # Upsilon_{t|t-1} Upsilon_{t-1}^{-1}
            inner = jnp.eye(w.shape[1], dtype=w.dtype) + w.T @ ((process_noise * scale)[:, None] * w)
            # chol(inner^{-1}) may be replaced by any A with A A^T = inner^{-1}: L^{-T}.
            chol = jnp.linalg.cholesky(inner)
            root = solve_triangular(chol, jnp.eye(w.shape[1], dtype=w.dtype), lower=True).T
            return ups_pred, decay * (scale[:, None] * w) @ root

        def without_noise(_):
            # q = 0: the precision is scaled by gamma^-2, so inner = I and W' = W / gamma.
            return ups / decay**2, w / decay

        def unchanged(_):
            return ups, w

        branch = jnp.where(process_noise == 0, jnp.where(decay == 1, 2, 1), 0)
        ups_pred, w_pred = jax.lax.switch(branch, (with_noise, without_noise, unchanged), None)
        return DLRState(decay * state.mean, ups_pred, w_pred)

    def is_valid(self, state: DLRState, check_definite=True) -> jax.Array:
        """Whether the belief is finite with a positive diagonal precision (exact, ``O(R P)``;
        ``check_definite`` changes nothing)."""
        del check_definite
        return _is_finite_and_positive((state.mean, state.low_rank), (state.diag_precision,))

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
        z = standard_normal(key, (n_samples, state.mean.shape[0]), state.mean.dtype)
        # z (I + A V diag(phi) V^T A^T) with the small factor V diag(phi) V^T applied
        # between the two passes over A, so that A V (P x R) is never formed.
        white = z + ((((z @ a) @ v) * phi) @ v.T) @ a.T
        return state.mean + white * ups_isqrt

    diagonal = False

    def sample_pre_activation(self, state: DLRState, key: jax.Array, n_samples: int, x: jax.Array, network):
        """``n_samples`` draws, for one row ``x`` ``(1, n_in)``, of the first layer's
        pre-activation and the other layers' weights, jointly as under the belief
        (:func:`_dlr_pre_activation_draws`)."""
        return _dlr_pre_activation_draws(state, key, n_samples, x, network)

    def natural_step(self, state: DLRState, prior: DLRState, curv: Curvature, lr, with_kl: bool) -> DLRState:
        """FC natural-parameter step, then projection to rank ``R``: BONG E.5.1-E.5.4
        (see :meth:`natural_step_with_move_quadratic`)."""
        return self.natural_step_with_move_quadratic(state, prior, curv, lr, with_kl)[0]

    def natural_step_with_move_quadratic(self, state: DLRState, prior: DLRState, curv: Curvature, lr, with_kl: bool):
        """FC natural-parameter step, then projection to rank ``R``: BONG E.5.1-E.5.4.

        The FC precision update (Eq. 119 for BONG, Eq. 134 for BLR) keeps the form
        ``Upsilon~ + W~ W~^T`` with ``W~ = [W, sqrt(lr) U]`` (Eqs. 277-279) or, with the KL
        term, ``Upsilon~ = (1 - lr) Upsilon + lr Upsilon_prior`` and
        ``W~ = [sqrt(1 - lr) W, sqrt(lr) W_prior, sqrt(lr) U]`` (Eqs. 291-294, 304-306;
        ``0 < lr <= 1``). The mean step uses that unprojected precision through Woodbury
        (Eqs. 281, 285, 296). The projection keeps the top ``R`` singular directions of
        ``W~`` (Eqs. 273-274; from an eigendecomposition of the small Gram matrix
        ``W~^T W~``, which gives the same left singular vectors times singular values) and
        adds the discarded part's diagonal to ``Upsilon`` so that the diagonal of the
        precision is preserved (Eq. 275). ``U`` must be a low-rank factor: MC-HESS has
        none, and the seeds leave that combination undefined (E.5). Without the KL term and
        with the root in factored form (:class:`~skbong.core.DenseFactors`, a dense
        network), the small matrices come from :func:`_dlr_factored_products` and neither ``U``
        nor ``W~`` is formed.

        Returns
        -------
        state : DLRState
            The belief after the step.
        move_quadratic : scalar array or None
            ``delta^T (Upsilon + W W^T) delta`` for the mean move ``delta`` under the
            precision of ``state``, from the step's small Gram matrix (the line search's
            penalty, ``FilterConfig.backtrack``); None with the KL term.
        """
        lr_root = jnp.sqrt(lr).astype(state.mean.dtype)
        # The mean step is the Woodbury solve of _dlr_solve (Eq. 320), folded into the Gram
        # and rotation products below so that no pass over the P x (R + C) factor W~ is
        # spent on it alone. The gradient is W~ e (e from LowRankCurvature.coords), so with
        # H = W~^T Upsilon^-1 W~ its part of the step is Upsilon^-1 W~ (I + H)^-1 e. The KL
        # term's pull d = (Upsilon_prior + W_prior W_prior^T)(mu_prior - mu) is not in the
        # span of W~: it adds Upsilon^-1 d - Upsilon^-1 W~ (I + H)^-1 W~^T Upsilon^-1 d, with
        # W~^T Upsilon^-1 d one more column of the weighted Gram.
        n_coords = curv.coords.shape[0]
        pull = 0.0
        if curv.factors is not None and not with_kl:
            ups = state.diag_precision
            weighted, gram, extended_dot = _dlr_factored_products(state, curv.factors, lr_root)
        else:
            if with_kl:
                ups = (1 - lr) * state.diag_precision + lr * prior.diag_precision
                blocks = [jnp.sqrt(1 - lr) * state.low_rank, lr_root * prior.low_rank, lr_root * curv.root]
            else:
                ups = state.diag_precision
                blocks = [state.low_rank, lr_root * curv.root]
            w_ext = jnp.concatenate(blocks, axis=1)
            if with_kl:
                pull = _dlr_precision_dot(prior, prior.mean - state.mean) / ups
                weighted = w_ext.T @ jnp.concatenate([w_ext / ups[:, None], pull[:, None]], axis=1)
            else:
                weighted = w_ext.T @ (w_ext / ups[:, None])
            gram = w_ext.T @ w_ext
            extended_dot = lambda m: w_ext @ m  # noqa: E731
        k = gram.shape[0]
        rhs = jnp.zeros(k, ups.dtype).at[k - n_coords :].set(curv.coords / lr_root)
        if with_kl:
            weighted, rhs = weighted[:, :k], rhs - weighted[:, k]
        coef = jnp.linalg.solve(jnp.eye(k, dtype=ups.dtype) + weighted, rhs)
        _, vecs = jnp.linalg.eigh(gram)  # ascending eigenvalues
        vecs = _signed_by_largest_entry(vecs[:, ::-1])
        # Columns of W~ V = singular vectors x singular values; the kept ones go straight into
        # the new W, the dropped ones only into the diagonal.
        kept = extended_dot(vecs[:, : self.rank])
        rest = extended_dot(jnp.concatenate([vecs[:, self.rank :], coef[:, None]], axis=1))
        mean = jax.tree.map(lambda m, r, u: m + lr * (pull + r[..., -1] / u), state.mean, rest, ups)
        # Without the KL term the move is delta = lr Upsilon^-1 W~ c (c = coef) and W is the
        # first R columns of W~, so delta^T (Upsilon + W W^T) delta = lr^2 (c^T H c +
        # |H[:R] c|^2) with the Gram H = W~^T Upsilon^-1 W~ already at hand: O(K^2), no pass
        # over W. (H c as a sum of products, not a matrix-vector product: XLA's CPU backend
        # compiles the latter as a kernel of its own, 0.017 s of a first fit.)
        move_quadratic = None
        if not with_kl:
            weighted_coef = jnp.sum(weighted * coef, axis=1)
            head = weighted_coef[: k - n_coords]  # the rows of W
            move_quadratic = lr**2 * (coef @ weighted_coef + head @ head)
        if not self.spherical:  # LO-FI Eqs. 115-116 drop the discarded directions
            ups = jax.tree.map(lambda u, r: u + jnp.sum(r[..., :-1] ** 2, axis=-1), ups, rest)
        if isinstance(state, DLRGramState):
            top = vecs[:, : self.rank]
            return DLRGramState(mean, ups, kept, top.T @ gram @ top), move_quadratic
        return DLRState(mean, ups, kept), move_quadratic

    def plain_step(self, state: DLRState, prior: DLRState, curv: Curvature, lr, with_kl: bool) -> DLRState:
        """Gradient step on ``(mu, Upsilon, W)``: BOG Eqs. 307-309, BBB Eqs. 317-319.

        With ``grad_Sigma l = M / 2`` the chain rule through ``Sigma = (Upsilon + W W^T)^{-1}``
        gives ``grad_Upsilon l = -diag(Sigma M Sigma) / 2`` and
        ``grad_W l = -Sigma M Sigma W`` (Eqs. 265-266). Here
        ``M = G - [KL] (Upsilon_prior - Upsilon + W_prior W_prior^T - W W^T)`` is a
        diagonal plus signed low-rank matrix, ``M = D + Z S Z^T``, so every product with
        ``Sigma`` goes through Woodbury (Eq. 320) in ``O((R + K)^2 P)``. The KL gradient
        with respect to ``mu`` uses the prior *precision*,
        ``(Upsilon_prior + W_prior W_prior^T)(mu - mu_prior)``, as in Eq. 317 (Eq. 263
        prints its inverse).
        """
        ups, w = state.diag_precision, state.low_rank
        grad_mean = curv.grad
        columns, signs = [curv.root], [-jnp.ones(curv.root.shape[1], ups.dtype)]
        diag_part = jnp.zeros_like(ups)
        if with_kl:
            grad_mean = grad_mean - _dlr_precision_dot(prior, state.mean - prior.mean)
            diag_part = ups - prior.diag_precision
            columns += [prior.low_rank, w]
            signs += [-jnp.ones(w.shape[1], ups.dtype), jnp.ones(w.shape[1], ups.dtype)]
        z = jnp.concatenate(columns, axis=1)
        sign = jnp.concatenate(signs)
        cov_z = _dlr_solve(ups, w, z)  # Sigma Z
        cov_w = _dlr_solve(ups, w, w)  # Sigma W
        # diag(Sigma D Sigma) and Sigma D Sigma W, with Sigma D Sigma = Sigma (D (Sigma .)).
        cov_d_cov_diag = _dlr_diag_sandwich(ups, w, diag_part)
        cov_d_cov_w = _dlr_solve(ups, w, diag_part[:, None] * cov_w)
        sandwich_diag = cov_d_cov_diag + jnp.sum(cov_z**2 * sign, axis=1)
        sandwich_w = cov_d_cov_w + (cov_z * sign) @ (cov_z.T @ w)
        return DLRState(
            state.mean + lr * grad_mean,
            ups - 0.5 * lr * sandwich_diag,
            w - lr * sandwich_w,
        )

    def rescale_precision(self, state: DLRState, scale, shift) -> DLRState:
        """Precision ``scale (Upsilon + W W^T) + shift I``: ``Upsilon <- scale Upsilon + shift``,
        ``W <- sqrt(scale) W`` (LO-FI Eqs. 80-81, 85-86, 90-91)."""
        return DLRState(state.mean, scale * state.diag_precision + shift, jnp.sqrt(scale) * state.low_rank)

    def covariance_dot(self, state: DLRState, v: jax.Array) -> jax.Array:
        """``(Upsilon + W W^T)^{-1} v`` by Woodbury."""
        return _dlr_solve(state.diag_precision, state.low_rank, v[:, None])[:, 0]

    def precision_quadratic(self, state: DLRState, v: jax.Array) -> jax.Array:
        """``v^T (Upsilon + W W^T) v`` in ``O(R P)``."""
        return jnp.sum(state.diag_precision * v * v) + jnp.sum((state.low_rank.T @ v) ** 2)

    def marginal_variance(self, state: DLRState) -> jax.Array:
        """``diag((Upsilon + W W^T)^{-1})`` by Woodbury (Eq. 320) in ``O(R^2 P)``:
        ``1 / Upsilon - rowsum((V C) * V)`` with ``V = Upsilon^{-1} W`` and
        ``C = (I + W^T V)^{-1}``."""
        ups = state.diag_precision
        v, inner = _woodbury_factors(ups, state.low_rank)
        return 1.0 / ups - jnp.sum(v * jnp.linalg.solve(inner, v.T).T, axis=1)

    def covariance(self, state: DLRState) -> jax.Array:
        """Dense ``(Upsilon + W W^T)^{-1}`` (for tests and small models)."""
        prec = jnp.diag(state.diag_precision) + state.low_rank @ state.low_rank.T
        return jnp.linalg.inv(prec)

    def output_covariance(self, state: DLRState, jac: jax.Array) -> jax.Array:
        """``J Sigma J^T`` for Jacobians ``jac`` (B, C, P) without forming ``Sigma``, in
        ``O(B C (C + R) P)``: LO-FI Eq. 61, ``J Upsilon^{-1} J^T - (J V) (I + W^T V)^{-1}
        (J V)^T`` with ``V = Upsilon^{-1} W``.

        Once the data pin the posterior far inside the prior, the two terms nearly cancel
        (in float32, variances of 0 and below 0 came out where the exact one was 1e-6 of
        ``J Upsilon^{-1} J^T``). For a row where a variance keeps less than ``1e4 eps`` of its
        first term, the row's result is taken instead as ``M M^T`` with ``M = J Sigma^{1/2}``
        from the square root of :meth:`sample`: it carries the cancellation to first order
        only, and is positive semi-definite. It costs an ``R x R`` eigendecomposition and
        one more ``B C x R x P`` product, which the common case does without."""
        ups = state.diag_precision
        v, inner = _woodbury_factors(ups, state.low_rank)
        b, c, p = jac.shape
        jv = (jac.reshape(b * c, p) @ v).reshape(b, c, -1)
        first = _row_gram(jac / ups, jac)
        cov = first - jnp.einsum("bcr,rs,bds->bcd", jv, jnp.linalg.inv(inner), jv)
        return _dlr_uncancelled(state, cov, first, lambda: jac)

    def output_covariance_of_factors(self, state: DLRState, factors: DenseFactors, jacobian) -> jax.Array:
        """:meth:`output_covariance` for Jacobians in factored form
        (:class:`~skbong.core.DenseFactors`, column ``(b, k)`` of the root ``J_b^T e_k``),
        ``O(B R P)`` (:func:`_dlr_output_cov_of_factors`); ``jacobian()`` gives them dense
        ``(B, C, P)``, for rows whose two terms cancel (see :meth:`output_covariance`)."""
        cov, first = _dlr_output_cov_of_factors(state, factors)
        return _dlr_uncancelled(state, cov, first, jacobian)


def _dlr_uncancelled(state: DLRState, cov: jax.Array, first: jax.Array, jacobian) -> jax.Array:
    """``cov`` (LO-FI Eq. 61), but for rows where a variance keeps less than ``1e4 eps`` of
    the first term ``first``: those take :func:`_dlr_output_cov_from_root` of the dense
    Jacobians ``jacobian()`` (computed only then)."""
    resolution = 1e4 * jnp.finfo(cov.dtype).eps
    cancelled = jnp.any(jnp.diagonal(cov, axis1=1, axis2=2) < resolution * jnp.diagonal(first, axis1=1, axis2=2), 1)
    # Row by row, so that a row's covariance does not depend on the rows computed with it.
    return jax.lax.cond(
        jnp.any(cancelled),
        lambda: jnp.where(cancelled[:, None, None], _dlr_output_cov_from_root(state, jacobian()), cov),
        lambda: cov,
    )


def _dlr_output_cov_of_factors(state: DLRState, factors: DenseFactors) -> tuple[jax.Array, jax.Array]:
    """:meth:`DiagonalLowRank.output_covariance` of Jacobians in factored form, and its
    first term ``J Upsilon^{-1} J^T``: each ``(B, K, K)``.

    LO-FI Eq. 61 as there, with ``J Upsilon^{-1} J^T`` from :func:`_factor_row_gram` and
    ``J V`` (``V = Upsilon^{-1} W``) from :func:`_factor_cross`: ``O(B R P)``, where the
    dense Jacobian costs ``O(B K R P)`` and ``B K P`` numbers."""
    v, inner = _woodbury_factors(state.diag_precision, state.low_rank)
    first = _factor_row_gram(factors, 1 / state.diag_precision)
    v_blocks = [layer_block(v, layer) for layer in factors.network.layers]
    b, k = factors.sens[0].shape[:2]
    jv = _factor_cross(factors, factors.sens, v_blocks).reshape(v.shape[1], b, k).transpose(1, 2, 0)
    return first - jnp.einsum("bcr,rs,bds->bcd", jv, jnp.linalg.inv(inner), jv), first


def _dlr_output_cov_from_root(state: DLRState, jac: jax.Array) -> jax.Array:
    """``J Sigma J^T`` as ``M M^T``, ``M = J Upsilon^{-1/2} (I + A A^T)^{-1/2}`` with
    ``A = Upsilon^{-1/2} W`` and the square root of :meth:`DiagonalLowRank.sample`."""
    ups_isqrt = jax.lax.rsqrt(state.diag_precision)
    a = state.low_rank * ups_isqrt[:, None]
    s, vecs = jnp.linalg.eigh(a.T @ a)
    root_s = jnp.sqrt(1.0 + jnp.maximum(s, 0.0))
    phi = -1.0 / (root_s * (1.0 + root_s))
    b, c, p = jac.shape
    white = jac.reshape(b * c, p) * ups_isqrt
    root = (white + ((((white @ a) @ vecs) * phi) @ vecs.T) @ a.T).reshape(b, c, p)
    return _row_gram(root, root)


def _dlr_factored_products(state: DLRState, factors: DenseFactors, lr_root):
    """The small matrices of :meth:`DiagonalLowRank.natural_step_with_move_quadratic`
    without the KL term, on a dense network, from the root's factors.

    With ``W~ = [W, sqrt(lr) U]`` the Gram matrices ``W~^T W~`` and
    ``W~^T Upsilon^-1 W~`` have the blocks ``W^T W``, ``W^T Upsilon^-1 W`` (two passes
    over ``W``), ``W^T U``, ``W^T Upsilon^-1 U`` (:func:`_factor_cross`: one pass each)
    and ``U^T U``, ``U^T Upsilon^-1 U`` (:func:`_factor_gram`, ``O(B^2 P)``), and
    ``W~ M = W M_W + U M_U`` with :func:`factor_dot`. The ``P x (R + K)`` matrix ``W~``
    and the ``P x K`` root are never formed: at ``R = K = 10`` the Gram products cost
    ``4 R^2 P`` flops instead of ``4 (R + K)^2 P``. Every product with ``W`` is taken
    layer by layer, on each layer's bias and kernel as one block (:func:`layer_block`).
    The belief's per-parameter fields may be flat arrays or, as the filter's scan carries
    them on a CPU, :class:`~skbong.core._curvature.LayeredVector` blocks; ``W~ M`` then
    comes in blocks too.

    Returns
    -------
    weighted, gram : arrays (R + B K, R + B K)
        ``W~^T Upsilon^-1 W~`` and ``W~^T W~``.
    extended_dot : callable
        ``M -> W~ M`` for ``M`` of shape ``(R + B K, m)``: ``(P, m)``, or a LayeredVector
        of ``(n_in + 1, n_out, m)`` blocks where ``W`` is one.
    """
    ups, w = state.diag_precision, state.low_rank
    rank = _factor_rank(w)
    layers = factors.network.layers
    sens = [lr_root * d for d in factors.sens]
    w_blocks, weighted_blocks = _low_rank_blocks(state, layers)
    w_flat = [b.reshape(-1, rank) for b in w_blocks]
    cross = _factor_cross(factors, sens, w_blocks)
    weighted_cross = _factor_cross(factors, sens, weighted_blocks)
    # Carried by the scan (DLRGramState), W^T W costs no pass over W.
    w_gram = getattr(state, "low_rank_gram", None)
    if w_gram is None:
        w_gram = sum(b.T @ b for b in w_flat)
    w_weighted_gram = sum(b.T @ c.reshape(-1, rank) for b, c in zip(w_flat, weighted_blocks))
    gram = jnp.block([[w_gram, cross], [cross.T, _factor_gram(factors, sens, None)]])
    ups_inverse = jax.tree.map(jnp.reciprocal, ups)
    weighted_u_gram = _factor_gram(factors, sens, ups_inverse)
    weighted = jnp.block([[w_weighted_gram, weighted_cross], [weighted_cross.T, weighted_u_gram]])
    offsets = [layer.bias for layer in layers]

    def extended_dot(m):
        if isinstance(w, LayeredVector):
            # W's part as a sum of R scaled slices of each block, which XLA fuses into the
            # elementwise work that consumes it (the new W, Upsilon and the mean) instead of
            # a matrix product written out and read back. m's rows must be written out
            # first: fused, the eigenvectors' sign rule is recomputed for every entry (a
            # step at P = 400k: 14.8 ms against 5.8). A product with the identity writes them
            # out, also under vmap, where _written_once's conditional becomes a select (a
            # sweep of 5 members at P = 100k: 26 ms a step with it, 13 with the product).
            m_w = m[:rank] @ jnp.eye(m.shape[1], dtype=m.dtype)
            products = zip(layers, w_blocks, factor_dot(factors, sens, m[rank:]))
            by_offset = {
                layer.bias: _summed_slices(block, m_w) + u.reshape(block.shape[:2] + (-1,))
                for layer, block, u in products
            }
            return LayeredVector(tuple(by_offset[offset] for offset in w.offsets), w.offsets)
        pieces = zip(offsets, w_flat, factor_dot(factors, sens, m[rank:]))
        # The layers' blocks cover the flat vector in the order of their offsets.
        return jnp.concatenate([b @ m[:rank] + u for _, b, u in sorted(pieces, key=lambda piece: piece[0])], axis=0)

    return weighted, gram, extended_dot


def _summed_slices(block: jax.Array, m: jax.Array) -> jax.Array:
    """``block @ m`` over ``block``'s last axis of length ``k = m.shape[0]``, as the sum of
    the ``k`` slices ``block[..., j:j+1] * m[j]``: one elementwise expression that XLA fuses
    into its consumers. On a CPU, XLA's matrix product of a tall ``(P, 10)`` block with a
    ``(10, 11)`` matrix runs at about 15 GB/s (packing both operands), and its result is
    written out and read back by each consumer."""
    out = block[..., 0:1] * m[0]
    for j in range(1, m.shape[0]):
        out = out + block[..., j : j + 1] * m[j]
    return out


def _woodbury_factors(ups: jax.Array, w: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``V = Upsilon^{-1} W`` and ``I + W^T V``, the pieces of Woodbury's identity
    ``(Upsilon + W W^T)^{-1} = Upsilon^{-1} - V (I + W^T V)^{-1} V^T`` (Eq. 320)."""
    v = w / ups[:, None]
    return v, jnp.eye(w.shape[1], dtype=w.dtype) + w.T @ v


def _dlr_solve(ups: jax.Array, w: jax.Array, rhs: jax.Array) -> jax.Array:
    """``(diag(ups) + w w^T)^{-1} rhs`` by Woodbury, ``O(K^2 P)``; ``rhs`` of shape (P, k)."""
    scaled = rhs / ups[:, None]
    ups_inv_w, inner = _woodbury_factors(ups, w)
    return scaled - ups_inv_w @ jnp.linalg.solve(inner, w.T @ scaled)


def _dlr_precision_dot(state: DLRState, v: jax.Array) -> jax.Array:
    """``(Upsilon + W W^T) v``."""
    return state.diag_precision * v + state.low_rank @ (state.low_rank.T @ v)


def _dlr_diag_sandwich(ups: jax.Array, w: jax.Array, d: jax.Array) -> jax.Array:
    """``diag(Sigma diag(d) Sigma)`` for ``Sigma = (diag(ups) + w w^T)^{-1}`` in ``O(R^2 P)``.

    With ``Sigma = Upsilon^{-1} - V C V^T``, ``V = Upsilon^{-1} W``,
    ``C = (I + W^T Upsilon^{-1} W)^{-1}`` (Eq. 320) and ``A = V C``:
    ``diag = d / Upsilon^2 - 2 (d / Upsilon) rowsum(A * V) + rowsum((A V^T D V) * A)``.
    """
    v, inner = _woodbury_factors(ups, w)
    c = jnp.linalg.inv(inner)
    a = v @ c
    return d / ups**2 - 2 * (d / ups) * jnp.sum(a * v, axis=1) + jnp.sum((a @ (v.T @ (d[:, None] * v))) * a, axis=1)
