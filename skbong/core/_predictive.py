"""Posterior predictive distributions ``p(y | x, D) = E_q[p(y | f(x, theta))]``.

A predictive is a value (a frozen dataclass) that maps a belief and a batch of inputs to
a distribution over the batch's targets, so the approximation is chosen by passing a
value, not by calling a differently named function (LO-FI Appendix B, BONG Appendix B.2):

=======================  ============  =======================================================
value                    likelihood    approximation
=======================  ============  =======================================================
``PluginPredictive``     both          ``p(y | f(x, mu))``: the posterior replaced by its mean
``LinearizedGaussian``   gaussian      ``N(f(x, mu), diag(J Sigma J^T) + R)`` (LO-FI Eqs. 59-61)
``MonteCarlo(S)``        categorical   ``(1/S) sum_s softmax(f(x, theta_s))``, ``theta_s ~ q``
``LinearizedMonteCarlo`` categorical   the same through the network linearised at ``mu``
                                       (LO-FI Eq. 62, Immer et al. 2021)
``Probit``               categorical   ``softmax(f_c / sqrt(1 + pi v_c / 8))``, ``v_c`` the
                                       diagonal of ``J Sigma J^T`` (LO-FI Eqs. 63-64)
=======================  ============  =======================================================

``J`` is the Jacobian of the network output (logits for classification) at the mean;
``J Sigma J^T`` comes from the family (``family.output_covariance``), so no ``P x P``
matrix is formed for the diagonal and low-rank families. Jacobians are built per row by
reverse mode in sub-batches whose ``B C P`` entries stay under ``JACOBIAN_BUDGET``; on a
dense network the diagonal and low-rank families take them in factored form instead
(:func:`output_moments`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._curvature import n_params, pulled_back_factors

__all__ = [
    "CategoricalPredictive",
    "GaussianPredictive",
    "PluginPredictive",
    "LinearizedGaussian",
    "MonteCarlo",
    "LinearizedMonteCarlo",
    "Probit",
    "output_moments",
    "JACOBIAN_BUDGET",
]

#: Largest number of Jacobian entries (rows x outputs x parameters) held at once.
JACOBIAN_BUDGET = 2**24


class CategoricalPredictive(NamedTuple):
    """Predictive class probabilities of a batch, stored as logarithms ``(B, C)``."""

    log_proba: jax.Array

    @property
    def mean(self) -> jax.Array:
        """Class probabilities (the mean of the one-hot target); numpy's for host arrays,
        which ``jnp.exp`` would compile a program for at each new number of rows."""
        if isinstance(self.log_proba, np.ndarray):
            return np.exp(self.log_proba)
        return jnp.exp(self.log_proba)

    def log_prob(self, y: jax.Array) -> jax.Array:
        """``log p(y_b | x_b, D)`` of one-hot targets ``y`` (B, C): shape ``(B,)``."""
        return jnp.sum(jnp.where(y > 0, y * self.log_proba, 0.0), axis=-1)


class GaussianPredictive(NamedTuple):
    """Independent Gaussian predictive of each output: ``mean`` and ``var`` ``(B, C)``."""

    mean: jax.Array
    var: jax.Array

    def log_prob(self, y: jax.Array) -> jax.Array:
        """``sum_c log N(y_bc | mean_bc, var_bc)``: shape ``(B,)``."""
        return -0.5 * jnp.sum(jnp.log(2 * jnp.pi * self.var) + (y - self.mean) ** 2 / self.var, axis=-1)


def output_moments(apply_fn, family, state, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Outputs ``f(x_b, mu)`` ``(B, C)`` and their linearised covariance ``J_b Sigma J_b^T``
    ``(B, C, C)`` (LO-FI Eq. 60 without ``R``).

    On a dense network (``apply_fn.dense_network``) and a family that takes Jacobians in
    factored form (``family.output_covariance_of_factors``: the diagonal and DLR families),
    the Jacobians are never formed: each layer's part of ``J_b`` is the outer product of
    the row's input to the layer with the outputs' sensitivities to its pre-activation
    (:class:`~skbong.core.DenseFactors`), from one forward pass and ``C`` pull-backs of the
    whole block, and ``J_b Sigma J_b^T`` costs ``O(R P)`` a row instead of ``O(C R P)``.
    """
    mean = state.mean
    n_rows = x.shape[0]
    n_out = jax.eval_shape(lambda: apply_fn(mean, x[:1])).shape[1]
    # The largest divisor of the batch whose Jacobians fit the budget.
    per_row = n_out * n_params(mean)
    sub = max((d for d in range(1, n_rows + 1) if n_rows % d == 0 and d * per_row <= JACOBIAN_BUDGET), default=1)

    def row(x_row):
        out = lambda theta: apply_fn(theta, x_row[None])[0]  # noqa: E731
        return out(mean), jax.jacrev(out)(mean)  # (C,), (C, P)

    network = getattr(apply_fn, "dense_network", None)
    factored = getattr(family, "output_covariance_of_factors", None)
    if network is not None and factored is not None and network.covers(n_params(mean), x):

        def block(x_block):
            # The dense Jacobians only for a block where the DLR family needs them.
            return _factored_moments(network, factored, state, x_block, lambda: jax.vmap(row)(x_block)[1])

    else:

        def block(x_block):
            f, jac = jax.vmap(row)(x_block)
            return f, family.output_covariance(state, jac)

    f, cov = jax.lax.map(block, x.reshape(n_rows // sub, sub, *x.shape[1:]))
    return f.reshape(n_rows, n_out), cov.reshape(n_rows, n_out, n_out)


def _factored_moments(network, output_covariance_of_factors, state, x: jax.Array, jacobian):
    """:func:`output_moments` of a block of rows ``x`` on a dense network, from the
    Jacobians' factors: the sensitivities of output ``k`` of every row at once (rows do not
    mix in the forward pass), ``C`` pull-backs in all."""
    n_out = network.layers[-1].n_out
    cotangents = jnp.broadcast_to(jnp.eye(n_out, dtype=state.mean.dtype)[:, None, :], (n_out, x.shape[0], n_out))
    f, factors = pulled_back_factors(network, state.mean, x, cotangents)
    return f, output_covariance_of_factors(state, factors, jacobian)


@dataclass(frozen=True)
class PluginPredictive:
    """``p(y | x, D) ~ p(y | f(x, mu))``: parameter uncertainty ignored (BONG Sec. 5, "NLL")."""

    name = "plugin"
    stochastic = False

    def __call__(self, apply_fn, likelihood, family, state, x, obs_noise, key):
        """Predictive of the batch ``x`` (B, D) under the belief ``state``."""
        del family, key
        return likelihood.plugin_predictive(apply_fn(state.mean, x), obs_noise)


@dataclass(frozen=True)
class LinearizedGaussian:
    """Regression predictive of the network linearised at the mean, LO-FI Eqs. 59-61:
    mean ``f(x, mu)``, variance ``diag(J Sigma J^T) + R`` (per output)."""

    name = "linearized"
    stochastic = False

    def __call__(self, apply_fn, likelihood, family, state, x, obs_noise, key):
        """Predictive of the batch ``x`` (B, D) under the belief ``state``."""
        del likelihood, key
        f, cov = output_moments(apply_fn, family, state, x)
        return GaussianPredictive(f, jnp.diagonal(cov, axis1=1, axis2=2) + obs_noise)


@dataclass(frozen=True)
class Probit:
    """Generalised probit approximation of the linearised softmax integral (LO-FI Eqs.
    63-64), ``softmax(f_c / sqrt(1 + pi v_c / 8))``, with ``v_c`` the variance of ``f_c``
    against the mean of the other logits, ``Var(f_c - mean_{k != c} f_k)`` under ``V = J
    Sigma J^T``: ``(K / (K - 1))^2 [C V C]_cc`` with ``C = I - 11^T / K``. With two classes
    it is the binary probit of the log-odds, ``sigmoid(d / sqrt(1 + pi Var(d) / 8))``.

    LO-FI's own ``v_c = V_cc`` includes the variance of a shift common to all logits:
    softmax ignores it and no row informs it, so it keeps its prior variance and flattened
    every prediction, the more the wider the prior. A probe's logistic regression (two
    logits, 5,000 rows): test log-loss 0.604 at ``sigma0 = 10`` against 0.405 for the
    linearised Monte-Carlo average, its probabilities up to 0.42 off, and a sweep over
    ``sigma0`` weighed by it chose a scale worse on held-out rows. Against the exact
    linearised integral (``benchmarks/results/probit_forms.md``) this form is as close as
    the pairwise mean-field form on two and three classes and as LO-FI's on ten.
    """

    name = "probit"
    stochastic = False

    def __call__(self, apply_fn, likelihood, family, state, x, obs_noise, key):
        """Predictive class probabilities of the batch ``x`` (B, D)."""
        del likelihood, obs_noise, key
        f, cov = output_moments(apply_fn, family, state, x)
        n_classes = f.shape[1]
        # [C V C]_cc = V_cc - 2 mean_k V_ck + mean_kl V_kl
        centred = (
            jnp.diagonal(cov, axis1=1, axis2=2) - 2.0 * jnp.mean(cov, axis=2) + jnp.mean(cov, axis=(1, 2))[:, None]
        )
        var = jnp.maximum(centred, 0.0) * (n_classes / max(n_classes - 1, 1)) ** 2
        # A variance past the dtype's range would scale the logits by 0, a uniform row that
        # looks valid (a probe's feature at 1e20 in float32); NaN lets the caller say why.
        finite = jnp.all(jnp.isfinite(cov), axis=(1, 2))[:, None]
        scaled = jnp.where(finite, f / jnp.sqrt(1.0 + math.pi / 8.0 * var), jnp.nan)
        return CategoricalPredictive(jax.nn.log_softmax(scaled))


@dataclass(frozen=True)
class LinearizedMonteCarlo:
    """Average of ``softmax`` over ``n_samples`` draws of the linearised logits (LO-FI Eq. 62).

    With ``theta ~ N(mu, Sigma)`` the linearised logits ``f(x, mu) + J (theta - mu)`` are
    exactly ``N(f(x, mu), J Sigma J^T)``, so they are drawn in the ``C``-dimensional output
    space (a ``C x C`` square root per row) rather than by pushing ``P``-dimensional draws
    through the Jacobian. The same standard-normal draws serve every row, so a row's
    prediction does not depend on the rows predicted with it.
    """

    n_samples: int
    name = "linearized_mc"
    stochastic = True

    def __call__(self, apply_fn, likelihood, family, state, x, obs_noise, key):
        """Predictive class probabilities of the batch ``x`` (B, D)."""
        del likelihood, obs_noise
        f, cov = output_moments(apply_fn, family, state, x)
        eigval, eigvec = jnp.linalg.eigh(cov)
        root = eigvec * jnp.sqrt(jnp.maximum(eigval, 0.0))[:, None, :]  # root root^T = cov
        z = jax.random.normal(key, (self.n_samples, f.shape[1]), f.dtype)
        logits = f[None] + jnp.einsum("bcd,sd->sbc", root, z)
        return CategoricalPredictive(_mean_of_softmax(logits))


@dataclass(frozen=True)
class MonteCarlo:
    """Average of ``softmax(f(x, theta_s))`` over ``n_samples`` draws ``theta_s ~ q``
    (BONG Sec. 5, "NLPD-MC"). The same draws serve every row."""

    n_samples: int
    name = "mc"
    stochastic = True

    def __call__(self, apply_fn, likelihood, family, state, x, obs_noise, key):
        """Predictive class probabilities of the batch ``x`` (B, D)."""
        del likelihood, obs_noise
        thetas = family.sample(state, key, self.n_samples)
        logits = jax.vmap(apply_fn, in_axes=(0, None))(thetas, x)  # (S, B, C)
        return CategoricalPredictive(_mean_of_softmax(logits))


def _mean_of_softmax(logits: jax.Array) -> jax.Array:
    """``log mean_s softmax(logits_s)`` over the leading axis, in log space."""
    return jax.nn.logsumexp(jax.nn.log_softmax(logits), axis=0) - jnp.log(logits.shape[0]).astype(logits.dtype)
