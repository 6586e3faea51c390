"""Estimators of the expected gradient and Hessian of the log-likelihood (BONG Sec. 4).

An estimator returns ``(g, G)`` for a batch of observations (the sum of the rows'
log-likelihoods) in the cheapest exact form:

* :class:`LowRankCurvature` ``G = -U U^T`` with a ``P x K`` factor (LIN-HESS, LIN-EF, MC-EF);
* :class:`DenseCurvature` a ``P x P`` matrix (MC-HESS for the full-covariance families);
* :class:`DiagonalCurvature` its diagonal only (MC-HESS for the diagonal families).

Every estimator has the same signature, so the filter treats them alike; the stochastic
ones draw from the current belief with ``family.sample``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import NamedTuple, Union

import jax
import jax.numpy as jnp

from ._activations import ACTIVATIONS

__all__ = [
    "Curvature",
    "DenseFactors",
    "DenseLayer",
    "DenseNetwork",
    "LowRankCurvature",
    "DenseCurvature",
    "DiagonalCurvature",
    "LinearizedHessian",
    "LinearizedEF",
    "MonteCarloHessian",
    "MonteCarloEF",
]


class DenseLayer(NamedTuple):
    """Where a dense layer ``z = h W + b`` keeps its weights in the flat parameter vector:
    the bias from offset ``bias`` and, right after it (``kernel = bias + n_out``), the
    ``(n_in, n_out)`` kernel row-major, so that ``[b; W]`` is one ``(n_in + 1, n_out)``
    block."""

    kernel: int
    bias: int
    n_in: int
    n_out: int


@dataclass(frozen=True)
class DenseNetwork:
    """A multi-layer perceptron laid out in the flat parameter vector: its layers in order
    and the hidden activation (a name of ``ACTIVATIONS``; the last layer is linear).

    A network ``apply_fn`` that carries one as ``apply_fn.dense_network`` (the ``apply``
    of the built-in :class:`MLP`, of an ``nnx.Linear`` and of an ``nnx.Sequential`` of
    ``nnx.Linear`` layers and activations does; see :class:`ModuleSpec`) lets
    :class:`LinearizedHessian` and :class:`MonteCarloEF` return the root of ``G`` also
    in factored form, :class:`DenseFactors`, which the diagonal families' Kalman step and
    the DLR family's BONG step use without ever forming the ``P x K`` root.
    """

    layers: tuple[DenseLayer, ...]
    activation: str

    def forward(self, theta: jax.Array, x: jax.Array, taps) -> tuple[jax.Array, list]:
        """Outputs ``(B, C)`` of the rows ``x`` with ``taps[l]`` ``(B, n_out)`` added to
        layer ``l``'s pre-activation, and each layer's inputs ``(B, n_in)``. The outputs'
        cotangents pulled back to the taps are the layers' sensitivities ``d f / d z``."""
        weights = [layer_weights(theta, layer) for layer in self.layers]
        h = x.astype(theta.dtype)
        kernel, bias = weights[0]
        f, inputs = self.forward_from(h @ kernel + bias + taps[0], weights[1:], taps[1:])
        return f, [h] + inputs

    def forward_from(self, z: jax.Array, weights, taps) -> tuple[jax.Array, list]:
        """:meth:`forward` from the first layer's pre-activation ``z`` ``(B, n_out)`` on,
        with the other layers' ``(kernel, bias)`` pairs ``weights`` and ``taps``: the
        outputs and the inputs of the layers after the first."""
        activation = ACTIVATIONS[self.activation]
        inputs = []
        for (kernel, bias), tap in zip(weights, taps):
            h = activation(z)
            inputs.append(h)
            z = h @ kernel + bias + tap
        return z, inputs

    def covers(self, n_params: int, x: jax.Array) -> bool:
        """Whether the layers' weights are exactly the ``n_params`` parameters and the
        rows ``x`` are a matrix ``(B, n_in)`` (a dense layer also maps the last axis of a
        larger array, which the factors do not)."""
        if x.ndim != 2 or x.shape[1] != self.layers[0].n_in:
            return False
        spans = sorted(
            [(layer.kernel, layer.n_in * layer.n_out) for layer in self.layers]
            + [(layer.bias, layer.n_out) for layer in self.layers]
        )
        end = 0
        for start, size in spans:
            if start != end:
                return False
            end += size
        return end == n_params


@partial(jax.tree_util.register_dataclass, data_fields=["inputs", "sens"], meta_fields=["network"])
@dataclass(frozen=True)
class DenseFactors:
    """The root of ``G`` on a :class:`DenseNetwork`, layer by layer.

    Column ``(b, k)`` of the root is, on layer ``l``'s kernel, the outer product
    ``inputs[l][b] (x) sens[l][b, k]`` (an input to the layer times a sensitivity of the
    layer's pre-activation) and, on its bias, ``sens[l][b, k]``: ``(n_in + n_out) B K``
    numbers for ``P B K``. For LIN-HESS, ``b`` is a row and column ``(b, k)`` is
    ``sqrt(w_b) J_b^T L_b e_k``; for MC-EF, ``b`` is a (draw, row) pair and ``K = 1``.

    A layer may split the same columns differently: ``B_l K_l`` columns, column
    ``(b, k)`` the root's ``b K_l + k``-th. MC-EF's local draws give the first layer one
    input (the row, the same under every draw, ``B_0 = 1``) and the draws as its ``K_0``
    sensitivities, so that its products cost ``O(P)``, not ``O(M P)``.
    """

    inputs: tuple  # per layer (B_l, n_in)
    sens: tuple  # per layer (B_l, K_l, n_out)
    network: DenseNetwork


@partial(jax.tree_util.register_dataclass, data_fields=["blocks"], meta_fields=["offsets"])
@dataclass(frozen=True)
class LayeredVector:
    """A vector over a :class:`DenseNetwork`'s ``P`` parameters stored as its layers'
    ``(n_in + 1, n_out)`` blocks (:func:`layer_block`, the bias the first row), in the order
    of their offsets ``offsets`` in the flat vector, which they tile.

    The diagonal families' Kalman step on a dense network updates each layer's block of
    the mean and variances from a few small factors. On the flat vector, XLA's CPU loops
    that write one vector from the layers' pieces take 10-19x the time of the update on
    the blocks (``benchmarks/results/flat_loops.md``); the filter therefore carries such a
    belief per layer through its scan (see ``_layered_network`` in ``_filter``).
    """

    blocks: tuple
    offsets: tuple

    @classmethod
    def of(cls, flat: jax.Array, network: "DenseNetwork") -> "LayeredVector":
        """The blocks of the flat vector ``flat`` ``(P,)``."""
        layers = sorted(network.layers, key=lambda layer: layer.bias)
        return cls(tuple(layer_block(flat, layer) for layer in layers), tuple(layer.bias for layer in layers))

    @property
    def dtype(self):
        return self.blocks[0].dtype

    @property
    def size(self) -> int:
        return sum(block.size for block in self.blocks)

    def block(self, offset: int) -> jax.Array:
        """The block that starts at ``offset`` in the flat vector."""
        return self.blocks[self.offsets.index(offset)]

    def piece(self, start: int, stop: int) -> jax.Array:
        """Entries ``start:stop`` of the flat vector, which must be whole rows of one block
        (a layer's bias, its kernel): a slice of that block, no concatenation."""
        for offset, block in zip(self.offsets, self.blocks):
            width = block.shape[1]
            if offset <= start and stop <= offset + block.size:
                if (start - offset) % width or (stop - offset) % width:
                    break
                return block[(start - offset) // width : (stop - offset) // width].reshape(-1)
        raise ValueError(f"entries {start}:{stop} are not whole rows of one layer's block")


def n_params(theta) -> int:
    """``P`` of a flat parameter vector or of a :class:`LayeredVector`."""
    return theta.size if isinstance(theta, LayeredVector) else theta.shape[0]


def flat_rows(v) -> jax.Array:
    """``v`` as flat arrays: a :class:`LayeredVector` whose blocks have leading axes
    ``(..., n_in + 1, n_out)`` becomes ``(..., P)``; an array is returned as it is."""
    if not isinstance(v, LayeredVector):
        return v
    return jnp.concatenate([block.reshape(block.shape[:-2] + (-1,)) for block in v.blocks], axis=-1)


def layer_block(flat, layer) -> jax.Array:
    """A :class:`DenseLayer`'s bias and kernel in ``flat`` (first axis over the ``P``
    parameters, or a :class:`LayeredVector`) as one ``(n_in + 1, n_out, ...)`` block, the
    bias its first row."""
    if isinstance(flat, LayeredVector):
        return flat.block(layer.bias)
    block = flat[layer.bias : layer.bias + (layer.n_in + 1) * layer.n_out]
    return block.reshape((layer.n_in + 1, layer.n_out) + flat.shape[1:])


def layer_weights(theta, layer) -> tuple[jax.Array, jax.Array]:
    """A :class:`DenseLayer`'s ``(kernel, bias)`` in the parameter vector ``theta``."""
    if isinstance(theta, LayeredVector):
        block = theta.block(layer.bias)
        return block[1:], block[0]
    kernel = theta[layer.kernel : layer.kernel + layer.n_in * layer.n_out].reshape(layer.n_in, layer.n_out)
    return kernel, theta[layer.bias : layer.bias + layer.n_out]


def with_bias_input(h: jax.Array) -> jax.Array:
    """Rows ``h`` ``(B, n_in)`` with a leading input fixed at 1, the bias's."""
    return jnp.concatenate([jnp.ones((h.shape[0], 1), h.dtype), h], axis=1)


def factor_dot(factors: DenseFactors, sens, m: jax.Array) -> list[jax.Array]:
    """``U M`` for the factored root ``U`` and ``M`` ``(B K, m)``, as each layer's block
    ``((n_in + 1) n_out, m)`` (bias rows first): ``sum_b h_bi E_bom`` with ``E = D M`` and
    ``h_b0 = 1``."""
    blocks = []
    for h, d in zip(factors.inputs, sens):
        through = jnp.einsum("bko,bkm->bom", d, m.reshape(d.shape[0], d.shape[1], -1))
        blocks.append(jnp.einsum("bi,bom->iom", with_bias_input(h), through).reshape(-1, m.shape[-1]))
    return blocks


class LowRankCurvature(NamedTuple):
    """Expected gradient ``grad`` (``g``, shape ``(P,)``) and Hessian ``-root root^T``.

    ``coords`` (shape ``(K,)``) gives the gradient in the columns of the root,
    ``g = root @ coords``. Every low-rank estimator has one: the gradient of each row or
    draw is a column of the root (LIN-EF, MC-EF), or ``J^T r`` with ``r = L z`` in the
    range of the likelihood's Hessian root ``L`` (LIN-HESS). The DLR natural step uses it to
    get its Woodbury products from the small Gram matrix instead of a pass over ``P``.
    ``factors``, when not None, is the same root in the factored form of
    :class:`DenseFactors`; a step that reads only it lets XLA drop ``root``'s computation.
    """

    grad: jax.Array  # (P,)
    root: jax.Array  # (P, K)
    coords: jax.Array  # (K,)
    factors: DenseFactors | None = None

    def matrix(self) -> jax.Array:
        """Dense ``G``."""
        return -self.root @ self.root.T

    def diagonal(self) -> jax.Array:
        """``diag(G)`` in ``O(K P)``."""
        return -jnp.sum(self.root**2, axis=1)

    def with_hessian_scale(self, scale) -> "LowRankCurvature":
        """The same gradient with ``G`` times ``scale`` (> 0): the root times ``sqrt(scale)``,
        its coordinates divided by it, so that ``g = root @ coords`` still holds."""
        root_scale = jnp.sqrt(scale).astype(self.root.dtype)
        factors = self.factors
        if factors is not None:
            factors = DenseFactors(factors.inputs, tuple(s * root_scale for s in factors.sens), factors.network)
        return LowRankCurvature(self.grad, self.root * root_scale, self.coords / root_scale, factors)


class DenseCurvature(NamedTuple):
    """Expected gradient and a dense expected Hessian ``hessian`` (P, P)."""

    grad: jax.Array
    hessian: jax.Array

    def matrix(self) -> jax.Array:
        """Dense ``G``."""
        return self.hessian

    def diagonal(self) -> jax.Array:
        """``diag(G)``."""
        return jnp.diag(self.hessian)


class DiagonalCurvature(NamedTuple):
    """Expected gradient and the diagonal ``hessian_diag`` (P,) of the expected Hessian."""

    grad: jax.Array
    hessian_diag: jax.Array

    def diagonal(self) -> jax.Array:
        """``diag(G)``."""
        return self.hessian_diag


Curvature = Union[LowRankCurvature, DenseCurvature, DiagonalCurvature]


def _row_log_likelihoods(apply_fn, likelihood, x, y, weight, obs_noise):
    """``theta -> (B,)`` tempered log-likelihood ``w_b log p(y_b | f(x_b, theta))`` of
    each row; exactly zero where ``w_b = 0`` (padding), whatever the row holds."""

    def rows(theta):
        f = apply_fn(theta, x)
        logp = jax.vmap(likelihood.log_prob, in_axes=(0, 0, None))(f, y, obs_noise)
        return jnp.where(weight > 0, weight * logp, 0.0)

    return rows


def _per_row_grads(apply_fn, likelihood, theta, x, y, weight, obs_noise):
    """Per-row gradients ``(B, P)`` of the untempered log-likelihood, zero where
    ``w_b = 0``, by one reverse pass with ``B`` cotangents."""
    rows = _row_log_likelihoods(apply_fn, likelihood, x, y, (weight > 0).astype(theta.dtype), obs_noise)
    _, vjp_fn = jax.vjp(rows, theta)
    (grads,) = jax.vmap(vjp_fn)(jnp.eye(x.shape[0], dtype=theta.dtype))
    return grads


@dataclass(frozen=True)
class LinearizedHessian:
    """LIN-HESS (BONG Prop. 4.2): linearise the network at the mean ``mu``.

    For rows ``b`` with Jacobians ``J_b = d f(x_b, mu) / d theta`` and weights ``w_b``:
    ``g = sum_b w_b J_b^T r_b`` and ``G = -sum_b w_b J_b^T L_b L_b^T J_b``, where ``r_b`` and
    ``L_b`` are the likelihood's score and Hessian root at ``f(x_b, mu)``. For a Gaussian
    this is ``g = H^T R^{-1} (y - yhat)``, ``G = -H^T R^{-1} H`` (Eqs. 21-22, 126-127); for
    a categorical it is the same with ``R^{-1}`` read as a pseudo-inverse (LO-FI
    footnote 2). ``U = [J_1^T L_1, ..., J_B^T L_B]`` comes from ``B C`` vector-Jacobian
    products; no ``P x P`` matrix is formed. On a dense network its factors
    (:class:`DenseFactors`) come from one pull-back of the whole batch per column of ``L_b``
    (:func:`pulled_back_factors`).
    """

    name = "lin_hess"
    semidefinite = True  # G = -U U^T for any weights and draws
    stochastic = False
    empirical_fisher = False

    def __call__(self, apply_fn, likelihood, family, state, x, y, weight, obs_noise, key) -> LowRankCurvature:
        """Curvature of a batch ``x`` (B, D), ``y`` (B, C) with row weights ``weight`` (B,)."""
        del family, key
        f, vjp_fn = jax.vjp(lambda theta: apply_fn(theta, x), state.mean)  # f: (B, C)
        score = jax.vmap(likelihood.score, in_axes=(0, 0, None))(f, y, obs_noise)
        (grad,) = vjp_fn(jnp.where(weight[:, None] > 0, score * weight[:, None], 0.0))
        root_weight = jnp.sqrt(weight)
        roots = jax.vmap(likelihood.hessian_root, in_axes=(0, None))(f, obs_noise)  # (B, C, K)
        roots = jnp.where(root_weight[:, None, None] > 0, roots * root_weight[:, None, None], 0.0)
        b, c, k = roots.shape
        # Cotangent (b, j) is zero except row b, which holds column j of L_b.
        cotangents = jnp.einsum("bcj,bd->bjdc", roots, jnp.eye(b, dtype=f.dtype))
        (root,) = jax.vmap(vjp_fn)(cotangents.reshape(b * k, b, c))
        # Column (b, j) of the root is sqrt(w_b) J_b^T L_b e_j and the score w_b L_b z_b:
        # coords sqrt(w_b) z_b.
        coords = jax.vmap(likelihood.score_coords, in_axes=(0, 0, None))(f, y, obs_noise)
        coords = jnp.where(root_weight[:, None] > 0, coords * root_weight[:, None], 0.0)
        network = getattr(apply_fn, "dense_network", None)
        factors = None
        if network is not None and network.covers(n_params(state.mean), x):
            # Cotangent j holds column j of every row's L_b.
            factors = pulled_back_factors(network, state.mean, x, jnp.transpose(roots, (2, 0, 1)))[1]
        # On a LayeredVector belief only the factors are read; XLA drops the flat root.
        return LowRankCurvature(flat_rows(grad), flat_rows(root).T, coords.reshape(b * k), factors)


def pulled_back_factors(network: DenseNetwork, theta, x, cotangents) -> tuple[jax.Array, DenseFactors]:
    """The network's outputs ``f(x, theta)`` ``(B, C)`` and the :class:`DenseFactors` whose
    column ``(b, k)`` is row ``b``'s pull-back ``J_b^T cotangents[k, b]`` of the ``K``
    cotangents ``(K, B, C)``: one reverse pass per ``k`` through the taps, no ``P``-sized
    array.

    Rows do not mix in a dense network's forward pass, so the sensitivities of one pass with
    cotangent ``k`` in every row are each row's own: ``K`` passes give the ``B K`` columns,
    where one pass per column (nonzero in its row only) takes ``B K``.
    """
    taps = [jnp.zeros((x.shape[0], layer.n_out), theta.dtype) for layer in network.layers]
    f, pull_back, inputs = jax.vjp(lambda t: network.forward(theta, x, t), taps, has_aux=True)
    (sens,) = jax.vmap(pull_back)(cotangents)  # per layer (K, B, n_out)
    return f, DenseFactors(tuple(inputs), tuple(jnp.swapaxes(d, 0, 1) for d in sens), network)


@dataclass(frozen=True)
class LinearizedEF:
    """LIN-EF (BONG Eqs. 27-28): ``g`` as LIN-HESS, ``G = -g g^T``, Jacobian-free.

    With a batch, each row contributes its own outer product,
    ``G = -sum_b w_b g_b g_b^T`` (the empirical Fisher of the summed log-likelihood, each
    row tempered by its weight ``w_b``: the Hessian of ``w_b log p`` is ``w_b`` times that
    of ``log p``); with one row of unit weight per step this is Eq. 28.
    """

    name = "lin_ef"
    semidefinite = True  # G = -U U^T for any weights and draws
    stochastic = False
    empirical_fisher = True

    def __call__(self, apply_fn, likelihood, family, state, x, y, weight, obs_noise, key) -> LowRankCurvature:
        """Curvature of a batch with row weights ``weight`` (B,)."""
        del family, key
        # At theta = mu the gradient of log p(y | f(x, theta)) is J^T r = g^LIN (Eq. 27).
        grads = _per_row_grads(apply_fn, likelihood, state.mean, x, y, weight, obs_noise)  # (B, P)
        root_weight = jnp.sqrt(weight).astype(grads.dtype)
        return LowRankCurvature(weight @ grads, grads.T * root_weight, root_weight)


@dataclass(frozen=True)
class MonteCarloEF:
    """MC-EF (BONG Eqs. 11, 26): ``M`` draws ``theta_m ~ q``; ``g`` the mean gradient and
    ``G = -(1 / M) sum_m g_m g_m^T`` (per row with a batch, each row's term times its
    weight as in :class:`LinearizedEF`).

    On a network that carries its :class:`DenseNetwork` (e.g. the built-in :class:`MLP`), the
    root also comes as :class:`DenseFactors`, from which the diagonal Kalman step and the
    DLR BONG step read without forming the ``M x P`` gradients.

    With one row per step and a family that can draw it (``family.sample_pre_activation``:
    the diagonal and DLR families), the first layer's weights are not drawn: its
    pre-activation is, jointly with the other layers' weights
    (:func:`_local_draw_factors`). Each draw's gradient depends on the first layer's
    weights only through that pre-activation, so the gradients have the same law as with
    every weight drawn: ``n_out`` normal numbers for ``(n_in + 1) n_out``. On the MLP
    784-503-10 (``P = 400k``) a step draws 50k numbers instead of 4M.
    """

    n_samples: int
    name = "mc_ef"
    semidefinite = True  # G = -U U^T for any weights and draws
    stochastic = True
    empirical_fisher = True

    def __call__(self, apply_fn, likelihood, family, state, x, y, weight, obs_noise, key) -> LowRankCurvature:
        """Curvature of a batch from ``n_samples`` draws of the belief ``state``."""
        # Column (m, b) of the root is sqrt(w_b / M) g_mb, with coordinate sqrt(w_b / M).
        root_weight = jnp.tile(jnp.sqrt(weight / self.n_samples), self.n_samples).astype(state.mean.dtype)
        network = getattr(apply_fn, "dense_network", None)
        covered = network is not None and network.covers(n_params(state.mean), x)
        draws = None
        if covered and x.shape[0] == 1:
            draws = family.sample_pre_activation(state, key, self.n_samples, x, network)
        if draws is not None:
            factors = _local_draw_factors(network, likelihood, draws, x, y, weight, obs_noise, root_weight)
            root = _factor_root(factors)
            return LowRankCurvature(root @ root_weight, root, root_weight, factors)
        thetas = family.sample(state, key, self.n_samples)  # (M, P)
        grads = jax.vmap(lambda theta: _per_row_grads(apply_fn, likelihood, theta, x, y, weight, obs_noise))(thetas)
        grad = jnp.einsum("b,mbp->p", weight, grads) / self.n_samples
        root = grads.reshape(-1, grads.shape[-1]).T * root_weight
        factors = None
        if covered:
            factors = _draw_factors(network, likelihood, thetas, x, y, weight, obs_noise, root_weight)
        return LowRankCurvature(grad, root, root_weight, factors)


def _factor_root(factors: DenseFactors) -> jax.Array:
    """The ``P x K`` root that :class:`DenseFactors` stand for, its layers' blocks in
    their places in the flat vector (which the layers tile)."""
    blocks = []
    for layer, h, d in zip(factors.network.layers, factors.inputs, factors.sens):
        block = jnp.einsum("bi,bko->iobk", with_bias_input(h.astype(d.dtype)), d)
        blocks.append((layer.bias, block.reshape((layer.n_in + 1) * layer.n_out, -1)))
    return jnp.concatenate([block for _, block in sorted(blocks, key=lambda pair: pair[0])])


def _local_draw_factors(network: DenseNetwork, likelihood, draws, x, y, weight, obs_noise, root_weight) -> DenseFactors:
    """:class:`DenseFactors` of MC-EF's root for one row ``x`` ``(1, n_in)`` from draws of
    the first layer's pre-activation in place of its weights (the local
    reparameterisation of Kingma, Salimans and Welling 2015, "Variational dropout and the
    local reparameterization trick").

    ``draws`` is ``(z, weights)`` from ``family.sample_pre_activation``: ``z`` ``(M, n_out)``
    the first layer's pre-activation ``x~ [b; W]`` (``x~ = (1, x)``) under each draw and
    ``weights`` the other layers' ``(kernel, bias)``, ``(M, n_in, n_out)`` and
    ``(M, n_out)``, drawn jointly with it. Each draw's log-likelihood, and its gradient
    ``(x~ (x) s_1, h_2 (x) s_2, ...)``, depend on the first layer's bias and kernel only
    through ``z``, so these gradients have the law they have with every weight drawn (for
    one row: rows sharing a draw of ``W`` would have correlated pre-activations).

    The first layer's factor is the row once with the ``M`` draws' sensitivities
    (``B_0 = 1``, ``K_0 = M``), so that its products cost ``O(P)``.
    """
    z_draws, weights = draws
    n_samples = z_draws.shape[0]
    dtype = z_draws.dtype
    valid = weight > 0

    def one_draw(z, weights):
        def total(taps):
            f, inputs = network.forward_from(z[None] + taps[0], weights, taps[1:])
            logp = jax.vmap(likelihood.log_prob, in_axes=(0, 0, None))(f, y, obs_noise)
            return jnp.sum(jnp.where(valid, logp, 0.0)), inputs

        taps = [jnp.zeros((1, layer.n_out), dtype) for layer in network.layers]
        return jax.grad(total, has_aux=True)(taps)

    sens, inputs = jax.vmap(one_draw)(z_draws, weights)  # per layer (M, 1, n_out) and (M, 1, n_in)
    # A padded row's sensitivities are exactly zero, as its root column is.
    sens = [s.reshape(n_samples, -1) * root_weight[:, None] for s in sens]
    inputs = [x.astype(dtype)] + [h.reshape(n_samples, -1) for h in inputs]
    sens = [sens[0][None]] + [s[:, None, :] for s in sens[1:]]
    return DenseFactors(tuple(inputs), tuple(sens), network)


def _draw_factors(network: DenseNetwork, likelihood, thetas, x, y, weight, obs_noise, root_weight) -> DenseFactors:
    """:class:`DenseFactors` of MC-EF's root, whose column ``(m, b)`` is
    ``root_weight[m B + b]`` times the gradient of row ``b``'s log-likelihood at draw
    ``theta_m``: on each layer the row's input under that draw times the sensitivity of
    its pre-activation, one factor column per ``(m, b)``.

    Each row has its own taps, so one reverse pass per draw, of the rows' summed
    log-likelihood, gives every row's sensitivities; no ``M x P`` gradient is formed.
    """
    n_rows = x.shape[0]
    dtype = thetas.dtype
    valid = weight > 0

    def one_draw(theta, x):
        def total(taps):
            f, inputs = network.forward(theta, x, taps)
            logp = jax.vmap(likelihood.log_prob, in_axes=(0, 0, None))(f, y, obs_noise)
            return jnp.sum(jnp.where(valid, logp, 0.0)), inputs

        taps = [jnp.zeros((n_rows, layer.n_out), dtype) for layer in network.layers]
        sens, inputs = jax.grad(total, has_aux=True)(taps)
        return inputs, sens

    # x goes in batched, one copy per draw, so that each layer's product is a batched
    # matrix product over the draws; with x shared, XLA transposes the stacked kernels of
    # the first layer into one wide matrix first (1.7 ms of a 10.7 ms step at P = 400k).
    copies = jnp.broadcast_to(x, (thetas.shape[0],) + x.shape)
    inputs, sens = jax.vmap(one_draw)(thetas, copies)  # per layer (M, B, n_in) and (M, B, n_out)
    inputs = tuple(h.reshape(-1, h.shape[-1]) for h in inputs)
    # A padded row's sensitivities are exactly zero, as its root column is.
    sens = tuple((s.reshape(-1, s.shape[-1]) * root_weight[:, None])[:, None, :] for s in sens)
    return DenseFactors(inputs, sens, network)


@dataclass(frozen=True)
class MonteCarloHessian:
    """MC-HESS (BONG Eqs. 11-12): mean gradient and mean Hessian over ``M`` draws.

    Full-covariance families get the dense ``P x P`` mean Hessian. Diagonal families get
    its diagonal by Hutchinson's estimator (BONG E.3), one Rademacher probe ``z`` per
    draw: ``diag(G) ~ (1 / M) sum_m z_m * (H(theta_m) z_m)``, with Hessian-vector
    products, unbiased and ``O(M P)`` per step.
    """

    n_samples: int
    name = "mc_hess"
    semidefinite = False  # a network's Hessian can have either sign
    stochastic = True
    empirical_fisher = False

    def __call__(self, apply_fn, likelihood, family, state, x, y, weight, obs_noise, key):
        """Curvature of a batch from ``n_samples`` draws of the belief ``state``."""
        sample_key, probe_key = jax.random.split(key)
        thetas = family.sample(state, sample_key, self.n_samples)
        rows = _row_log_likelihoods(apply_fn, likelihood, x, y, weight, obs_noise)
        total = lambda theta: jnp.sum(rows(theta))  # noqa: E731
        grad = jax.vmap(jax.grad(total))(thetas).mean(0)
        if family.diagonal:
            probes = jax.random.rademacher(probe_key, thetas.shape, thetas.dtype)
            hvp = jax.vmap(lambda theta, z: jax.jvp(jax.grad(total), (theta,), (z,))[1])(thetas, probes)
            return DiagonalCurvature(grad, jnp.mean(probes * hvp, axis=0))
        return DenseCurvature(grad, jax.vmap(jax.hessian(total))(thetas).mean(0))
