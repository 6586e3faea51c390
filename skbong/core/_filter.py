"""The filter: predict then update, scanned over observations inside one ``jit``.

The jitted entry points: :func:`run_filter` (update the belief over a stream, optionally
recording one-step-ahead predictions), :func:`run_sweep` (``K`` such filters with different
hyperparameters or initial beliefs, vectorised into one scan) and :func:`predict_distribution`
(the posterior predictive of a batch); :func:`predict_at` and :func:`sample_posterior` serve
posterior draws. The config is static; every continuous hyperparameter is a traced argument, so
tuning it never recompiles, with one exception: a static belief (decay 1, no process noise) has
a program of its own, without the predict step. Streams are cut into chunks whose lengths come
from a few fixed buckets, padded with rows of weight zero, so calls with new lengths reuse
compiled code.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from functools import lru_cache, partial, wraps
from numbers import Integral
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._config import PREDICTIVES, FilterConfig, _positive_int
from ._curvature import (
    LayeredVector,
    LinearizedEF,
    LinearizedHessian,
    LowRankCurvature,
    MonteCarloEF,
    n_params,
)
from ._dynamics import (
    HYPERPARAMETER_RANGES,
    LatentPrior,
    inflate,
    innovation_terms,
    latent_prior_at,
    latest_noise_scale,
    noise_scale,
    update_noise_estimate,
)
from ._families import (
    Diagonal,
    DiagonalLowRank,
    DiagonalMoment,
    DiagState,
    DLRGramState,
    DLRState,
    FullCovariance,
    FullCovarianceMoment,
)
from ._likelihoods import Categorical, Gaussian
from ._predictive import PluginPredictive
from ._rules import apply_rule

__all__ = [
    "Hyperparameters",
    "run_filter",
    "run_sweep",
    "init_sweep",
    "init_belief",
    "belief_is_valid",
    "predict_distribution",
    "forecast_belief",
    "predict_step",
    "predict_at",
    "sample_posterior",
    "trace_count",
    "update_step",
    "STEP_BUCKETS",
    "PREDICT_CHUNK",
    "DENSE_PREDICT_ROWS",
    "DENSE_PREDICT_FROM",
    "DENSE_CHUNK_BYTES",
    "MAX_STEP_WEIGHT",
    "MAX_SUBSTEPS",
]


#: Chunk lengths (in filter steps) that the scan is compiled for.
STEP_BUCKETS = (1, 8, 64, 512)
#: The most weight one step absorbs from a row, under a likelihood whose curvature in the
#: output moves with it (categorical): a row of weight ``w`` above it is absorbed in
#: ``k = ceil(w / MAX_STEP_WEIGHT)`` steps of weight ``w / k`` (at most ``MAX_SUBSTEPS``),
#: the model relinearised between them. One linearised step of weight ``w`` adds ``w``
#: times the curvature at the prior mean, ``diag(p) - p p^T``, which vanishes as the step
#: saturates ``p``: on standardised digits with every row of weight 30 or 100, one pass,
#: ``dlr`` diverged on each of five splits and now reaches a test log-loss of 0.18-0.22
#: (0.16 at weight 1; ``benchmarks/results/heavy_weights.md``). A Gaussian likelihood's
#: curvature ``R^{-1}`` is the same at every output, and cut steps did no better there
#: (diabetes, friedman1, a sine) and on diabetes worse: its heavy rows keep one step.
MAX_STEP_WEIGHT = 4.0
#: The most steps one row of heavy weight is cut into (its weight per step then exceeds
#: ``MAX_STEP_WEIGHT``): the cost of a call grows with its heaviest rows.
MAX_SUBSTEPS = 16
#: Rows per prediction call; every row is always computed in a batch of this size (of
#: ``DENSE_PREDICT_ROWS`` for a large full covariance), so predictions do not depend on
#: which other rows are predicted with it.
PREDICT_CHUNK = 256
#: Rows per prediction call for a full covariance (``"fc"``, ``"fc_mom"``) of at least
#: ``DENSE_PREDICT_FROM`` weights with a predictive that reads it: each row costs a product
#: with the ``P x P`` matrix, so padding a few rows to ``PREDICT_CHUNK`` cost most of a small
#: call. At ``P = 5,101`` (2 cores), 10 rows with ``return_std`` took 91 ms in blocks of 256,
#: 24 in blocks of 64 and 10 in blocks of 16; 1,000 rows 377, 379 and 611 ms. At ``P =
#: 1,101`` 1,000 rows took 1.5 times as long in blocks of 64 (``benchmarks/fc_calls.py``).
DENSE_PREDICT_ROWS = 64
DENSE_PREDICT_FROM = 2048
#: The most bytes of dense input rows that one compiled call takes (a sparse ``X`` is
#: densified one chunk at a time): wide rows take chunks of fewer steps, down to
#: ``STEP_BUCKETS[0]``, and prediction blocks of fewer rows, halving ``PREDICT_CHUNK``.
#: Text hashed to 2**18 columns is 1 MB a row in float32: a 125-step call of 8-row steps,
#: padded to 512 steps, would densify 4,096 rows, 4.3 GB (a probe measured 2.6 GB of memory
#: for 1,000 such rows at 2**16 columns).
DENSE_CHUNK_BYTES = 64 << 20

#: XLA options of every compiled entry point, on CPU: nothing goes to YNNPACK. XLA (jaxlib
#: 0.10) hands dots and loop fusions to it by default. It ran the loop fusions that mix pads,
#: reductions and elementwise work (the per-row Jacobians of a flat parameter vector) about
#: 10x slower than XLA's own emitter (DIAG, P = 40k: 4.0 -> 0.4 ms per step), and the
#: tall-skinny products of the DLR step (P x 20 by 20 x 10) slower than XLA's own dots
#: (DLR-10, MLP 784-50-10: 1.59 -> 1.49 ms per step; P = 10k: 0.53 -> 0.48 ms). Per-computation
#: options leave the user's other JAX programs alone.
CPU_COMPILER_OPTIONS = {"xla_cpu_experimental_ynn_fusion_type": ""}
#: XLA options, on CPU, of the filter's scan for a network of at least :data:`SMALL_NETWORK`
#: parameters: copy insertion with region analysis. The scan's step is a ``lax.cond`` (rows
#: of no weight leave the belief as it was), and without it XLA copied the cond's result into
#: the loop's carry every step: the first layer's mean and variance (DIAG) or its block of W
#: (DLR), 19% of a DIAG step at P = 100k (``benchmarks/step_profile.py``). With it DIAG's
#: copies are gone and the results are bit for bit the same: on the 2-core Intel host, MLP
#: 784-h-10 in calls of 64 rows, DIAG LIN-HESS took 0.66-0.88 of its time a step from P =
#: 100k (``speed.py`` before and after). DLR's copy of W stays (2-3% of its step), and its
#: times moved within the host's noise. Smaller networks leave it off: it made the first fit
#: on digits compile 0.14-0.28 s longer.
CPU_SCAN_OPTIONS = {**CPU_COMPILER_OPTIONS, "xla_cpu_copy_insertion_use_region_analysis": True}
#: Precision of every product inside the compiled entry points: true float32 (or float64).
#: JAX's default lets an NVIDIA GPU run float32 products on TF32 tensor cores (10-bit
#: mantissa). On an H100 that broke the filter: a DLR posterior went non-finite on data a
#: CPU fits, a regressor's predictive std fell below the observation noise (the subtracted
#: Woodbury term of LO-FI Eq. 61 lost its digits) and float32 predictions moved 2e-2 from
#: float64 ones. The steps are bound by latency and bandwidth, not by matmul rate, so full
#: precision costs little; on a CPU it is what XLA does anyway.
MATMUL_PRECISION = "highest"


#: Parameters below which a filter's scan is compiled, on CPU, for compile time rather than
#: run time (:data:`CPU_SMALL_NETWORK_OPTIONS`, chosen by :func:`_scan_options`).
SMALL_NETWORK = 16_384
#: XLA options, on CPU, of the filter's scan for a network of fewer than
#: :data:`SMALL_NETWORK` parameters: XLA's older loop emitter and LLVM optimisation level 1.
#: Such a step takes a fraction of a millisecond, so a fit on scikit-learn-sized data spends
#: most of its time compiling: the first fit on digits (MLP 64-50-10, DLR-10, P = 3,760)
#: compiled its scan in 0.96 s with XLA's defaults and 0.47 s with these, for steps about 20%
#: slower (MNIST MLPs 784-h-10 through ``run_filter``, calls of 64 rows: 0.12 -> 0.145 ms at
#: P = 3k, 0.20 -> 0.24 ms at 10k). From P = 32k the older emitter costs 15-30% a step (and
#: 2x without level 1), so larger networks keep XLA's defaults (:data:`CPU_SCAN_OPTIONS`).
CPU_SMALL_NETWORK_OPTIONS = {
    **CPU_COMPILER_OPTIONS,
    "xla_cpu_use_fusion_emitters": False,
    "xla_backend_optimization_level": 1,
}
#: XLA options, on CPU, of the programs that run once per fit (the prior, the keys, the
#: prior predictive check): no backend optimisation, which took most of their compile
#: time, and XLA's older loop emitter instead of its fusion emitters, which halved what was
#: left (a first fit on digits: the prior 0.028 -> 0.010 s, the keys 0.049 -> 0.026 s, the
#: check 0.07 -> 0.02 s; the check's run on an MLP 784-200-200 stays at 0.06 s).
CPU_RUN_ONCE_OPTIONS = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}
#: XLA options, on CPU, of a network's initialiser (once per fit; see ``build_module``):
#: backend optimisation level 1, unlike 0, gives the eager construction's weights bit for
#: bit (level 0 moves the truncated normal's inverse error function by an ulp); the older
#: loop emitter keeps them too and takes the MLP's from 0.20 to 0.14 s.
CPU_INIT_OPTIONS = {"xla_backend_optimization_level": 1, "xla_cpu_use_fusion_emitters": False}


#: Option sets this jaxlib's compiler refused (an option it does not know, or a value it does
#: not accept): their programs compile with the set less its newest options instead.
_REFUSED_OPTIONS: set = set()


def _default_platform() -> str:
    """The platform (``"cpu"``, ``"gpu"``, ...) of the device that JAX computes on by
    default: that of ``jax.default_device`` where one is set (the estimators follow it, so
    a CPU device chosen on a machine with a GPU computes on the CPU), else the default
    backend's."""
    device = jax.config.jax_default_device
    if device is None:
        return jax.default_backend()
    return device if isinstance(device, str) else device.platform


def _compiler_options(backend: str, cpu_options: tuple[tuple, ...]) -> tuple[tuple, ...]:
    """``cpu_options`` on a CPU backend, less its newest (last) options while this jaxlib
    has refused the set; none (XLA's defaults) on other backends. The sets grow by adding
    options to an older set (:data:`CPU_SCAN_OPTIONS` is :data:`CPU_COMPILER_OPTIONS` and
    one more), so a jaxlib without the newest option keeps the older ones: without the
    opt-out of YNNPACK, DIAG steps ran about 10x slower."""
    if backend != "cpu":
        return ()
    while cpu_options in _REFUSED_OPTIONS:
        cpu_options = cpu_options[:-1]
    return cpu_options


def _refuses_options(error: Exception) -> bool:
    """Whether ``error`` is XLA refusing a compile option (a jaxlib without it, or with
    other values for it), not a failure of the program."""
    message = str(error)
    return "INVALID_ARGUMENT" in message and ("No such compile option" in message or "While setting option" in message)


def jit_with_options(fun, cpu_options, **jit_kwargs):
    """``jax.jit(fun, **jit_kwargs)`` compiled with ``cpu_options`` on a CPU backend.

    Options are chosen at the first call (not at import, which must not start a JAX
    backend); ``cpu_options`` is a dict, or a function of the call's arguments that returns
    one (see :func:`_scan_options`). A jaxlib that refuses them (XLA's options change
    between versions) costs one failed compilation, after which the option set is
    remembered as refused and the program compiles with the set less its newest option,
    down to XLA's defaults (:func:`_compiler_options`); trying them costs nothing where
    they are accepted, unlike a probe compilation before the first fit."""
    compiled = {}

    @wraps(fun)
    def call(*args, **kwargs):
        requested = tuple((cpu_options(*args, **kwargs) if callable(cpu_options) else cpu_options).items())
        options = _compiler_options(_default_platform(), requested)
        if options not in compiled:
            compiled[options] = jax.jit(fun, compiler_options=dict(options), **jit_kwargs)
        try:
            return compiled[options](*args, **kwargs)
        except jax.errors.JaxRuntimeError as error:
            if not options or not _refuses_options(error):
                raise
            _REFUSED_OPTIONS.add(options)
            return call(*args, **kwargs)

    return call


def _scan_options(config, state, *args, **kwargs) -> dict:
    """CPU options of a filter's scan (single or swept) over the belief ``state``: for
    compile time below :data:`SMALL_NETWORK` parameters, else :data:`CPU_SCAN_OPTIONS`."""
    del config, args, kwargs
    # Outside the scan the mean is a flat array: (P,), or (K, P) for a sweep's members.
    return CPU_SMALL_NETWORK_OPTIONS if state.mean.shape[-1] < SMALL_NETWORK else CPU_SCAN_OPTIONS


def _jit(static_argnames, cpu_options=CPU_COMPILER_OPTIONS):
    """:func:`jit_with_options` with ``cpu_options``, traced and run at ``MATMUL_PRECISION``."""

    def decorate(fun):
        compiled = jit_with_options(fun, cpu_options, static_argnames=static_argnames)

        @wraps(fun)
        def call(*args, **kwargs):
            with jax.default_matmul_precision(MATMUL_PRECISION):
                try:
                    return compiled(*args, **kwargs)
                except ValueError as error:
                    if "can only be passed to top-level" not in str(error):
                        raise
                    # JAX's words name an inner program and its XLA options.
                    raise TypeError(
                        "skbong's filter runs on the host, feeding compiled chunks of rows to the device, so "
                        "filter_posterior, run_filter and run_sweep cannot be traced by jax.jit or differentiated "
                        "by jax.grad (jax.vmap over a hyperparameter works). Inside a program of your own, call "
                        "predict_step and update_step in a jax.lax.scan."
                    ) from error

        return call

    return decorate


def default_key(reader):
    """The key a compiled program gets when its caller gives none, for ``reader``, the
    estimator or predictive that would draw from it (None: nothing reads it).

    ``PRNGKey(0)`` where the reader is stochastic (or does not say so with a ``stochastic``
    attribute); else zeros of the default PRNG's key shape, which nothing reads. The zeros
    cost no compilation; ``PRNGKey`` compiles a program of its own the first time it runs."""
    if reader is not None and getattr(reader, "stochastic", True):
        return jax.random.PRNGKey(0)
    return _placeholder_key(jax.config.jax_default_prng_impl)


@lru_cache(maxsize=None)
def _placeholder_key(prng_impl: str) -> np.ndarray:
    """Zeros of the shape and dtype of ``PRNGKey`` under ``prng_impl``, read-only (made
    once: finding the shape traces ``PRNGKey``, which a one-row call must not pay)."""
    # A function of its own: eval_shape caches by function, not by the PRNG in force.
    shape = jax.eval_shape(lambda: jax.random.PRNGKey(0))
    key = np.zeros(shape.shape, shape.dtype)
    key.setflags(write=False)
    return key


_TRACES: Counter = Counter()


def trace_count(name: str | None = None) -> int:
    """Number of times the jitted entry points were traced (compiled), for tests.

    Parameters
    ----------
    name : {"filter", "sweep", "predict"} or None
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
    inflation : array, scalar
        ``alpha`` of covariance inflation (LO-FI Appendix E); used only when the config's
        :class:`~skbong.core.Dynamics` names an inflation.
    obs_noise_rate : array, scalar
        ``eps_min`` of the online noise estimate (LO-FI Eq. 66): the weight of the newest
        residual once ``1 / (k + 2)`` falls below it; 0 averages all residuals. Used only
        when the config's dynamics estimate the noise.
    reference_obs_noise : array, scalar or ``(C,)``
        ``R_0`` at which a noise-scaled belief is held (``Dynamics.noise_scaled_belief``:
        the filter steps at it while ``obs_noise`` carries the estimate ``R_t``). Unused
        otherwise.
    """

    obs_noise: jax.Array
    dynamics_decay: jax.Array
    process_noise: jax.Array
    learning_rate: jax.Array = 1.0
    inflation: jax.Array = 0.0
    obs_noise_rate: jax.Array = 0.0
    reference_obs_noise: jax.Array = 1.0


def update_step(config: FilterConfig, prior, x, y, weight, hyper: Hyperparameters, key, curvature_scale=None):
    """One update of the predicted belief ``prior`` with the rows ``x, y``, each row's
    likelihood raised to the power ``weight``.

    The body of every filter step after the predict step (not jitted on its own; the
    benchmarks compile it alone to count its FLOPs).

    Parameters
    ----------
    config : FilterConfig
    prior : family state NamedTuple
        The belief after the predict step.
    x : array of shape (B, D)
    y : array of shape (B, C)
    weight : array of shape (B,)
        Non-negative row weights ``w_b``: the step uses the tempered (power) likelihood
        ``prod_b p(y_b | x_b, theta)^{w_b}``, so an integer weight counts a row as that
        many copies in the batch, and padding rows have weight 0.
    hyper : Hyperparameters
    key : PRNG key
        Randomness of the stochastic estimators.
    curvature_scale : array, scalar, optional
        ``s`` multiplying the estimated expected Hessian ``G`` (not the gradient): a
        noise-scaled belief's empirical-Fisher curvature (``Dynamics.noise_scaled_belief``).
        Low-rank curvatures only (every empirical-Fisher estimator's).

    Returns
    -------
    state : the updated family state.
    """

    def curvature_at(current, inner_key):
        curvature = config.estimator(
            config.apply_fn, config.likelihood, config.family, current, x, y, weight, hyper.obs_noise, inner_key
        )
        return curvature if curvature_scale is None else curvature.with_hessian_scale(curvature_scale)

    if config.backtrack:
        updated, move_quadratic = apply_rule(
            config.rule, config.family, prior, curvature_at, hyper.learning_rate, key, move_quadratic=True
        )
        return _backtracked(config, prior, updated, x, y, weight, hyper.obs_noise, move_quadratic)
    return apply_rule(config.rule, config.family, prior, curvature_at, hyper.learning_rate, key)


#: Halvings of the mean step that ``FilterConfig.backtrack`` tries before leaving the mean.
BACKTRACK_HALVINGS = 8


def _backtracked(config: FilterConfig, prior, updated, x, y, weight, obs_noise, move_quadratic=None):
    """``updated`` with its mean move ``delta`` from ``prior`` cut to ``2^-k delta``, ``k``
    the fewest halvings (at most :data:`BACKTRACK_HALVINGS`, else no move) after which the
    step's MAP objective ``-sum_b w_b log p(y_b | x_b, theta) + (theta - mu)^T Sigma^{-1}
    (theta - mu) / 2`` is no higher than at the prior mean ``mu`` (see :func:`make_config`).

    The full step is the common case: it is kept as computed (bit for bit) and costs two
    forward passes, the one at ``mu`` being the estimator's own where XLA merges them. It is
    tested first, and only when it fails does a conditional branch form the move and try the
    halvings, one after another, stopping at the first that passes. ``move_quadratic``,
    where the step gives it from its small matrices (the DLR step, the diagonal families'
    Kalman step), is ``delta^T Sigma^{-1} delta``; else the family computes it (a pass over
    the belief). So a step whose full move passes reads no ``P``-sized array for the search.
    (MNIST MLP 784-50-10, ``run_filter`` in calls of 100 rows, 2-core AMD EPYC: the DIAG
    step took 0.029-0.031 ms without the line search, 0.111-0.128 with it when the move and
    its quadratic were formed every step, 0.039-0.044 now; DLR-10 0.47-0.49, 0.54 and
    0.485-0.487.)"""
    # The means are arrays, or per layer (LayeredVector) on a belief the scan carries so.
    def move():
        return jax.tree.map(jnp.subtract, updated.mean, prior.mean)

    if move_quadratic is None:
        move_quadratic = config.family.precision_quadratic(prior, move())
    penalty = 0.5 * move_quadratic
    log_prob = jax.vmap(config.likelihood.log_prob, in_axes=(0, 0, None))

    def data_term(mean):
        return -jnp.sum(weight * log_prob(config.apply_fn(mean, x), y, obs_noise))

    at_prior = data_term(prior.mean)

    def passes(step, mean):
        return step**2 * penalty + data_term(mean) <= at_prior  # False for a NaN objective

    def search(full_passed):
        delta = move()

        def along(step):
            return jax.tree.map(lambda mean, move: mean + step * move, prior.mean, delta)

        def halve(carry):
            halvings, step, _ = carry
            step = 0.5 * step
            return halvings + 1, step, passes(step, along(step))

        # Entered with the full step failed, except under vmap, where the conditional runs
        # both branches for every member: those whose full step passed then take no halving.
        start = (jnp.zeros((), jnp.int32), jnp.ones((), jax.tree.leaves(delta)[0].dtype), full_passed)
        _, step, passed = jax.lax.while_loop(lambda carry: (carry[0] < BACKTRACK_HALVINGS) & ~carry[2], halve, start)
        return jax.tree.map(lambda new, old: jnp.where(passed, new, old), along(step), prior.mean)

    # The full step (no halving) is the update's own mean, bit for bit; the common case,
    # it reads no P-sized array beyond the forward pass at it.
    full_passed = passes(1.0, updated.mean)
    mean = jax.lax.cond(full_passed, lambda _: updated.mean, search, full_passed)
    return updated._replace(mean=mean)


def predict_step(config: FilterConfig, state, hyper: Hyperparameters, t, n_steps, latent=None, rows=None):
    """The predict step before the observation of index ``t``: covariance inflation (LO-FI
    Eqs. 79-81, 84-86, 89-91), then the dynamics ``mu <- gamma_t mu``,
    ``Sigma <- gamma_t^2 Sigma + q_t I`` (LO-FI Eq. 14). Traceable (not jitted on its own):
    the filter's scan calls it before each :func:`update_step`.

    The dynamics act per observation, whatever the rows of a step: before a step of rows
    ``t, ..., t + B - 1`` the belief moves as the predict steps of its rows in turn would
    move it, ``gamma = prod_i gamma_i``, ``q = sum_i q_i prod_{j > i} gamma_j^2`` (exact:
    the linear dynamics compose), and inflation by ``1 + alpha`` per row makes one by
    ``(1 + alpha)^n`` before them. Simple inflation scales the covariance, so it composes
    with the dynamics exactly: ``q = sum_i q_i prod_{j > i} (1 + alpha) gamma_j^2``. The
    hybrid and Bayesian forms add to the precision; with process noise they compose only
    approximately, and Bayesian inflation's mean is pulled once, towards the latent prior
    at ``n_steps`` (each form alone, without dynamics, is exact). So a schedule sees
    every row's index: ``jnp.where(t % 1000 == 0, ...)`` acts in the step that holds row
    1000 at any ``batch_size``, and a constant ``q`` adds ``q`` per row, as at
    ``batch_size=1`` (once per step, steps of 3 rows skipped a burst at row 1000 and
    stepped at a third of the noise: a probe's error after a change was 28 times that
    of ``batch_size=1``).

    Parameters
    ----------
    config : FilterConfig
    state : family state NamedTuple
        The belief after the previous update.
    hyper : Hyperparameters
        Only ``dynamics_decay``, ``process_noise`` and ``inflation`` are read.
    t : int or int32 array
        Index of the observation in the stream (rows before it), the argument of schedules;
        with ``rows``, that of the step's first row.
    n_steps : int or int32 array
        Predict steps (of one row each) taken before this one, for the latent prior of
        Bayesian and hybrid inflation; ``t`` where every row took one.
    latent : LatentPrior, optional
        The initial prior that Bayesian and hybrid inflation mix back in (else None).
    rows : bool array of shape (B,), optional
        Which rows of a step of ``B`` get their predict step (those of positive weight:
        a row of weight 0 changes nothing); None for the one row ``t``.

    Returns
    -------
    family state NamedTuple
        The predicted belief.
    """
    dynamics = config.dynamics
    decay, process_noise, alpha = hyper.dynamics_decay, hyper.process_noise, hyper.inflation
    if rows is None:
        gamma, q = dynamics.at(t, decay, process_noise)
    else:
        index = t + jnp.arange(rows.shape[0], dtype=jnp.asarray(t).dtype)
        gammas, qs = jax.vmap(lambda row: dynamics.at(row, decay, process_noise))(index)
        gammas = jnp.where(rows, jnp.broadcast_to(gammas, rows.shape), 1.0)
        qs = jnp.where(rows, jnp.broadcast_to(qs, rows.shape), 0.0)
        # prod_{j > i} gamma_j^2: what the rows after row i do to the noise it added; simple
        # inflation multiplies the covariance by 1 + alpha at each of them too.
        scales = gammas**2
        if dynamics.inflation == "simple":
            scales = scales * jnp.where(rows, 1.0 + alpha, 1.0)
        later = jnp.cumprod(scales[::-1])[::-1]
        later = jnp.concatenate([later[1:], jnp.ones((1,), later.dtype)])
        gamma, q = jnp.prod(gammas), jnp.sum(qs * later)
        if dynamics.inflation is not None:
            alpha = jnp.expm1(jnp.sum(rows) * jnp.log1p(alpha))
    belief = state
    if dynamics.inflation is not None:
        latent_mean = latent_precision = None
        if dynamics.needs_latent_prior:
            latent_mean, latent_precision = latent_prior_at(n_steps, latent, decay, process_noise)
        belief = inflate(config.family, state, dynamics.inflation, alpha, latent_mean, latent_precision)
    return config.family.predict(belief, gamma, q)


@_jit(static_argnames="config")
def _forecast(config: FilterConfig, state, hyper: Hyperparameters, t, n_steps, latent):
    return predict_step(config, state, hyper, t, n_steps, latent)


def forecast_belief(config: FilterConfig, state, hyper: Hyperparameters, t: int, n_steps: int, latent_prior=None):
    """The belief about the weights of the next observation: ``state`` after the predict
    step of the observation of index ``t`` (:func:`predict_step`), or ``state`` itself
    where every predict step is the identity (:func:`_is_static`).

    The filter scores each observation by its predictive under this belief (LO-FI
    Algorithm 1), so predictions made with it between two updates are the one-step-ahead
    forecasts that the filter's own records hold.

    Parameters
    ----------
    config, state, hyper, t, n_steps
        As for :func:`predict_step`, ``t`` the index of the next observation and ``state``
        the belief after the last update (host numbers or arrays).
    latent_prior : LatentPrior, optional
        ``(mu_0, eta_0)``; needed by Bayesian and hybrid inflation.

    Returns
    -------
    family state NamedTuple
    """
    if _is_static(config, hyper):
        return state
    dtype = state.mean.dtype
    latent = _latent_prior(config, latent_prior, dtype)
    decay, noise, inflation = (
        _as_hyper(value, dtype) for value in (hyper.dynamics_decay, hyper.process_noise, hyper.inflation)
    )
    hyper = Hyperparameters(np.zeros((), dtype), decay, noise, inflation=inflation)
    return _forecast(config, state, hyper, jnp.int32(t), jnp.int32(n_steps), latent)


def _scan_stream(
    config: FilterConfig, state, xs, ys, weights, hyper: Hyperparameters, key, t0, record, record_key, latent,
    n_steps, static_belief, check_valid, innovation_start=None, heavy_rows=False,
):
    """The scan of one filter over the first ``n_steps`` steps of ``xs, ys, weights`` (not
    jitted on its own); the later steps are padding of the compiled length. With
    ``static_belief`` (see :func:`_is_static`) the predict step is left out of the program.
    With ``heavy_rows`` (weights above :data:`MAX_STEP_WEIGHT`), a step's rows are absorbed
    in as many updates as their heaviest row needs (:func:`_absorbed`); the predict step, the
    record and the noise estimates stay one per step.

    Returns the final belief (with the final noise estimate when the dynamics estimate
    it), the records (zero for the padding steps) and, with ``check_valid``, whether the
    final belief is valid (``family.is_valid``; else None). With ``innovation_scale``,
    ``innovation_start`` holds the sums over the rows before these of the normalised
    squared innovations (per output) and of the row weights (see :func:`run_filter`), both
    None where the records stay the filter's own, and with ``innovation_window`` the
    window of the latest steps' sums before these rows, which the scan goes on from."""
    family, dynamics = config.family, config.dynamics
    rows_per_step = xs.shape[1]
    network = _layered_network(config, state, xs, record, static_belief)
    carries_gram = _carries_low_rank_gram(config, static_belief)
    if carries_gram:
        state = DLRGramState(*state, state.low_rank.T @ state.low_rank)
    if network is not None:
        state = _per_parameter(state, partial(LayeredVector.of, network=network))

    scaled_belief = dynamics.noise_scaled_belief
    scaled_records = dynamics.innovation_scale and innovation_start is not None and innovation_start[0] is not None
    scaled_curvature = scaled_belief and getattr(config.estimator, "empirical_fisher", False)

    def update(prior, x, y, m, key, step_hyper, noise):
        # A noise-scaled belief steps at R_0; the model's noise is R_t = noise and its
        # covariance c_t = mean(R_t / R_0) times the belief's.
        scale = 1.0 / jnp.mean(noise / step_hyper.obs_noise) if scaled_curvature else None
        return update_step(config, prior, x, y, m, step_hyper, key, scale)

    def body(carry, batch, base):
        # ``base`` (not None) is the dense covariance of a block of deferred steps: the
        # carried FullCovDeferred leaves it out, and it is put back only where the family
        # reads it, so that no lax.cond has it as an output (XLA would copy it every step).
        state, t, noise = carry
        attach = (lambda s: s) if base is None else (lambda s: s._replace(base=base))
        detach = (lambda s: s) if base is None else (lambda s: s._replace(base=None))
        x, y, m = batch
        # Randomness of a step depends only on the index of its first observation, so
        # cutting a stream into partial_fit calls differently gives the same draws.
        step_key = jax.random.fold_in(key, t)
        # Rows that get their predict step (LO-FI Eq. 14 per observation; see predict_step).
        dynamic_rows = None if rows_per_step == 1 else m > 0
        step_hyper = hyper
        if scaled_belief:
            step_hyper = hyper._replace(obs_noise=hyper.reference_obs_noise)
        elif dynamics.adaptive_obs_noise:
            step_hyper = hyper._replace(obs_noise=noise)

        def predicted(state, rows=dynamic_rows):
            return state if static_belief else predict_step(config, state, hyper, t, t, latent, rows)

        def scored(prior, x, y):
            if record is None:
                return None
            # One-step-ahead predictive of the rows before they are used (LO-FI Algorithm 1).
            predictive = record(config.apply_fn, config.likelihood, family, prior, x, step_hyper.obs_noise, record_key)
            if scaled_belief:  # the model's predictive: c_t (J Sigma J^T + R_0) per output, c_t = R_t / R_0
                predictive = predictive._replace(var=predictive.var * (noise / step_hyper.obs_noise))
            if scaled_records:
                scale = _innovation_scale(innovation_start, noise, y.shape[-1], dynamics.innovation_window is not None)
                predictive = predictive._replace(var=scale * predictive.var)
            return predictive.log_prob(y), predictive.mean

        def innovations(prior, x, y, m):
            if not dynamics.innovation_scale:
                return None
            return innovation_terms(config.apply_fn, family, prior, x, y, m, hyper.obs_noise)

        def step(state, x, y, m, key):
            prior = predicted(attach(state))
            if heavy_rows:
                updated = _absorbed(partial(update, step_hyper=step_hyper, noise=noise), prior, x, y, m, key)
            else:
                updated = update(prior, x, y, m, key, step_hyper, noise)
            return detach(updated), scored(prior, x, y), prior.mean, innovations(prior, x, y, m)

        def skip(state, x, y, *_):
            # Scored by the forecast of the next row (one row's predict step), as predict scores it.
            prior = predicted(attach(state), None)
            terms = None if not dynamics.innovation_scale else jnp.zeros(y.shape[-1:], y.dtype)
            return state, scored(prior, x, y), prior.mean, terms

        # Steps without a row of positive weight (padding, or rows of weight zero) leave
        # the belief untouched, predict step included. Every row counts towards t, weighed
        # or not, so a row's draws depend on its position alone (padding only ever ends a
        # call, so counting it changes no later key). The record is computed inside each
        # branch: beside the update, XLA shares the network's forward pass at the mean
        # between the two (the linearised estimators compute it too). The predict step is
        # inside the branches too, so that the belief is not live beside the predicted one
        # and a predict step that changes nothing (static dynamics) copies nothing: for a
        # dense covariance that copy was a pass over P^2 entries per step.
        state, out, prior_mean, terms = jax.lax.cond(jnp.any(m > 0), step, skip, state, x, y, m, step_key)
        if dynamics.innovation_scale:  # the carried sums of the normalised squared innovations and weights
            step_weight = jnp.sum(m)
            latest = noise[2]  # the latest steps' sums (Dynamics.innovation_window), shifted at a step of rows
            if dynamics.innovation_window is not None:
                shifted = jnp.roll(latest, -1, axis=0).at[-1].set(jnp.stack([jnp.sum(terms), step_weight]))
                latest = jnp.where(jnp.any(m > 0), shifted, latest)
            noise = (noise[0] + terms, noise[1] + step_weight, latest)
        elif dynamics.adaptive_obs_noise:
            # LO-FI Eq. 66 with the residual of the plug-in prediction at mu_{t|t-1}.
            residual = y - jax.vmap(config.likelihood.mean)(config.apply_fn(prior_mean, x))
            noise = update_noise_estimate(noise, residual, m, t, hyper.obs_noise_rate)
        return (state, t + jnp.asarray(m.shape[0], t.dtype), noise), out

    noise = hyper.obs_noise
    if dynamics.adaptive_obs_noise:  # one variance per output, carried from step to step
        noise = jnp.broadcast_to(noise, ys.shape[-1:])
    elif dynamics.innovation_scale:  # this call's sums, per output, and of the row weights; the latest steps' window
        window = _window_start(dynamics, innovation_start, ys.dtype)
        noise = (jnp.zeros(ys.shape[-1:], ys.dtype), jnp.zeros((), ys.dtype), window)
    carry = (state, jnp.asarray(t0, jnp.int32), noise)
    # Deferred downdates have room for one update a step.
    block_steps, width = (1, 0) if heavy_rows else _deferral(config, state, xs, ys, weights, hyper, key)
    if block_steps > 1:
        (state, _, noise), out = _deferred_scan(body, carry, (xs, ys, weights), n_steps, family, block_steps, width)
    else:
        (state, _, noise), out = _prefix_scan(partial(body, base=None), carry, (xs, ys, weights), n_steps)
    if network is not None:
        state = _per_parameter(state, _flat_parameters)
    if carries_gram:
        state = DLRState(state.mean, state.diag_precision, state.low_rank)
    valid = _chunk_is_valid(config, state, hyper) if check_valid else None
    if dynamics.innovation_scale:  # with a window, the latest steps' sums follow the outputs' sums
        noise = noise[0] if dynamics.innovation_window is None else jnp.concatenate([noise[0], noise[2].ravel()])
    return ((state, noise) if _carries_noise(dynamics) else state), out, valid


def _chunk_is_valid(config: FilterConfig, state, hyper: Hyperparameters) -> jax.Array:
    """The validity flag a compiled chunk returns for ``state`` (:func:`_checks_definiteness`)."""
    return config.family.is_valid(state, _checks_definiteness(config, hyper.learning_rate))


def _checks_definiteness(config: FilterConfig, learning_rate):
    """Whether a chunk's validity check must test that a full covariance is positive
    definite (a Cholesky factorisation, ``O(P^3 / 3)``), or may read its variances alone.

    Natural-gradient steps of ``fc`` with a negative semi-definite curvature (LIN-HESS,
    LIN-EF, MC-EF) keep the precision positive definite in exact arithmetic
    (``natural_steps_keep_definite``): BONG's for any rate; BLR's for any rate in one inner
    step, which starts at the prior (``precision' = precision_prior - lr G``), and for
    ``lr <= 1`` in more. So do the predict step and inflation in their ranges. Every other
    step can break it with every variance positive: plain-gradient steps (BOG, BBB;
    Eqs. 140, 223), moment-coordinate steps (FC_MOM, Eqs. 168, 178) and MC-HESS, whose
    Hessian can have either sign. The factorisation was most of a one-row ``partial_fit``
    of BONG on ``fc`` (``P = 3,385``: 174 ms against 50). Round-off can still leave such a
    covariance slightly indefinite; the variances show what reaches the diagonal.

    Returns a bool, or a traced one where it depends on the learning rate."""
    rule = config.rule
    keeps = (
        rule.geometry == "natural"
        and getattr(config.family, "natural_steps_keep_definite", False)
        and getattr(config.estimator, "semidefinite", False)
    )
    if not keeps:
        return True
    if not rule.with_kl or rule.unit_step or rule.n_inner_steps == 1:
        return False
    return jnp.any(jnp.asarray(learning_rate) > 1)


def _absorbed(update, prior, x, y, weights, key):
    """``update`` of ``prior`` by the rows ``x, y`` of ``weights`` in ``k = ceil(max(weights)
    / MAX_STEP_WEIGHT)`` updates (at most :data:`MAX_SUBSTEPS`) of ``weights / k`` each, every
    one linearised at the mean the one before left: ``k`` observations of a row, in a row
    (for a conjugate model, the one update of weight ``w`` by Bayes' rule for the powers
    ``p^(w/k)``). The later updates' Monte-Carlo keys are folded from the step's.
    ``update(prior, x, y, weights, key)`` is one update."""
    count = jnp.clip(jnp.ceil(jnp.max(weights) / MAX_STEP_WEIGHT), 1, MAX_SUBSTEPS)
    part = weights / count
    first = update(prior, x, y, part, key)
    return jax.lax.fori_loop(
        1, count.astype(jnp.int32), lambda i, belief: update(belief, x, y, part, jax.random.fold_in(key, i)), first
    )


def _layered_network(config: FilterConfig, state, xs, record, static_belief: bool):
    """The dense network whose layers the scan carries a diagonal belief by (as
    :class:`~skbong.core._curvature.LayeredVector` blocks), else None.

    The diagonal Kalman step on a dense network (``_diag_kalman_dense_step``) computes each
    layer's update from small factors; on the flat belief vector, writing those pieces
    back into one vector took 10-19x the arithmetic on this project's CPU hosts
    (``benchmarks/results/flat_loops.md``). Carried per layer, the belief is cut into
    blocks once a call and joined once a call. Only where every reader of the belief in the
    step reads it per layer: a BONG step (no KL term, one inner step) of ``diag`` or
    ``diag_mom`` with the Kalman update, from LIN-HESS or (one row a step) MC-EF's local
    draws, or of ``dlr`` from the same two, with no predict step, a plug-in record or none,
    and the network forward pass (``apply``) of :class:`~skbong.core.ModuleSpec`, which
    reads a layer's bias and kernel from its block (``apply.reads_layered_vector``).
    Everything else carries the flat vector.

    On a CPU only (:func:`_default_platform`). The cost it removes is XLA:CPU's loops; on
    a GPU the flat update is one fused kernel and the per-layer blocks add launches to a
    step that is bound by them: on an H200 the MNIST MLP's DIAG step took 0.13-0.14 ms
    flat (``speed_gpu.md`` of 2026-11-27) and 0.19-0.20 ms per layer (2026-11-28).

    The DLR step (``_dlr_factored_products``) takes its products with ``W`` layer by layer
    either way; carried flat, each step copies the layers' blocks out of ``W`` and joins
    the new ``W`` from them. Per layer, on the MLPs 784-h-10 on MNIST (DLR-10,
    ``run_filter`` in calls of 64 rows, 2-core AMD EPYC, alternating processes): LIN-HESS
    1.12-1.15 against 1.27-1.34 ms a step at P = 100k, 7.7-7.8 against 8.2-8.5 at 400k,
    the same (0.47-0.49) at 32k; MC-EF 0.575 against 0.62-0.63 at 32k, 1.43-1.46 against
    1.55-1.60 at 100k and 8.6-9.0 against 9.2 at 400k.
    """
    if _default_platform() != "cpu":
        return None
    network = getattr(config.apply_fn, "dense_network", None)
    if network is None or not getattr(config.apply_fn, "reads_layered_vector", False):
        return None  # a network function of the user's own may carry a layout, and read only flat vectors
    family, dynamics = config.family, config.dynamics
    kalman_diagonal = isinstance(family, (Diagonal, DiagonalMoment)) and family.kalman
    if not (kalman_diagonal or isinstance(family, DiagonalLowRank)):
        return None
    if not _only_bong_steps(config, static_belief):
        return None
    estimator = config.estimator
    if not (isinstance(estimator, LinearizedHessian) or (isinstance(estimator, MonteCarloEF) and xs.shape[1] == 1)):
        return None
    if dynamics.innovation_scale or dynamics.adaptive_obs_noise:
        return None
    if record is not None and not isinstance(record, PluginPredictive):
        return None
    if state.mean.ndim != 1 or not network.covers(n_params(state.mean), xs[0]):
        return None
    return network


def _per_parameter(state, convert):
    """``state`` with ``convert`` applied to its fields that have a row per parameter: the
    mean and variances of a diagonal belief; the mean, ``Upsilon`` and ``W`` of a DLR one."""
    if isinstance(state, DiagState):
        return state._replace(mean=convert(state.mean), var=convert(state.var))
    return state._replace(
        mean=convert(state.mean), diag_precision=convert(state.diag_precision), low_rank=convert(state.low_rank)
    )


def _flat_parameters(v: LayeredVector) -> jax.Array:
    """The flat array ``(P, ...)`` of a :class:`LayeredVector` whose blocks are
    ``(n_in + 1, n_out, ...)``."""
    return jnp.concatenate([block.reshape((-1,) + block.shape[2:]) for block in v.blocks], axis=0)


def _carries_low_rank_gram(config: FilterConfig, static_belief: bool) -> bool:
    """Whether the scan carries a DLR belief with the Gram matrix of its factor
    (:class:`~skbong.core._families.DLRGramState`): where every step that changes the
    belief is a BONG step (a natural step without the KL term, one inner step), which
    keeps that Gram matrix up to date from its own small matrices, from a low-rank
    curvature (LIN-HESS, LIN-EF, MC-EF). A predict step (the dynamics, inflation) or a
    plain-gradient step would change ``W`` without it.

    The carried matrix and one formed from ``W`` differ by round-off, so a stream cut
    into calls at other rows gives beliefs that differ by round-off, not bit for bit.
    ``W`` itself, whose columns MC-EF's local draws follow (``_dlr_pre_activation_draws``),
    also differs by round-off only, as the step fixes the sign of its eigenvectors
    (``_signed_by_largest_entry``), except where two kept eigenvalues are so close that
    round-off turns ``W``'s columns within their span: the draws then differ, not their
    law. Carried for MC-EF since 2026-11-28 (DLR-10 on the MNIST MLPs, ``run_filter`` in
    calls of 64 rows, 2-core AMD EPYC, with the belief per layer: 0.52 against 0.60 ms a
    step at P = 32k, 1.19-1.21 against 1.54-1.56 at 100k, 7.45 against 8.9 at 400k)."""
    return (
        isinstance(config.family, DiagonalLowRank)
        and isinstance(config.estimator, (LinearizedHessian, LinearizedEF, MonteCarloEF))
        and _only_bong_steps(config, static_belief)
    )


def _only_bong_steps(config: FilterConfig, static_belief: bool) -> bool:
    """Whether every step of the scan that changes the belief is one BONG step (a natural
    step without the KL term, one inner step) and there is no predict step: the steps that
    the scan's carried forms of a belief (per layer, or with its factor's Gram matrix)
    are written for."""
    rule = config.rule
    return rule.geometry == "natural" and not rule.with_kl and rule.n_inner_steps == 1 and static_belief


def _innovation_scale(start, running, n_outputs: int, windowed: bool):
    """The scale ``c`` of the predictive variances before a step (``noise_scale``, as
    the regressor's ``noise_scale_``): from the sum of the normalised squared innovations
    and the total row weight of the rows before it, ``start`` (earlier calls and chunks)
    plus ``running`` (this one's), each a pair ``(S per output, N)``
    (``innovation_terms`` explains why it scales every predictive variance). ``windowed``:
    or from the latest steps' sums, ``running[2]``, where that is smaller."""
    terms = jnp.sum(start[0]) + jnp.sum(running[0])
    weight = start[1] + running[1]
    scale = noise_scale(terms, n_outputs * weight)
    return latest_noise_scale(scale, running[2], n_outputs) if windowed else scale


def _window_shape(dynamics) -> tuple[int, int]:
    """The shape of the latest steps' sums a scan carries (``Dynamics.innovation_window``)."""
    return (dynamics.innovation_window or 0, 2)


def _window_start(dynamics, innovation_start, dtype):
    """The latest steps' sums a scan starts from: those of ``innovation_start``, or zeros."""
    if dynamics.innovation_window is None or innovation_start is None or len(innovation_start) < 3:
        return jnp.zeros(_window_shape(dynamics), dtype)
    return jnp.asarray(innovation_start[2], dtype)


def _carries_noise(dynamics) -> bool:
    """Whether the scan returns ``(belief, per-output value)``: the noise estimate
    (``adaptive_obs_noise``) or the sum of normalised squared innovations
    (``innovation_scale``)."""
    return dynamics.adaptive_obs_noise or dynamics.innovation_scale


def _deferral(config: FilterConfig, state, xs, ys, weights, hyper: Hyperparameters, key) -> tuple[int, int]:
    """Steps per block of deferred covariance downdates, and the width of their factor
    (``(1, 0)``: the belief is updated in full every step).

    Deferred (:class:`~skbong.core.FullCovDeferred`) where every step is a BONG-style
    natural step without the KL term on a low-rank curvature, the Woodbury form whose
    downdates can wait, and no inflation rescales the precision in between.
    """
    family, rule = config.family, config.rule
    woodbury = isinstance(family, FullCovariance) and rule.geometry == "natural" and not rule.with_kl
    if not woodbury or config.dynamics.inflation is not None:
        return 1, 0
    curv = jax.eval_shape(
        lambda s, x, y, w: config.estimator(
            config.apply_fn, config.likelihood, family, s, x, y, w, hyper.obs_noise, key
        ),
        state, xs[0], ys[0], weights[0],
    )
    if not isinstance(curv, LowRankCurvature):
        return 1, 0
    step_columns = rule.n_inner_steps * curv.root.shape[1]
    block_steps = family.steps_per_block(state.mean.shape[0], step_columns)
    return block_steps, block_steps * step_columns


def _recorded_step(body, xs):
    """The ``fori_loop`` body that runs ``body`` on step ``i`` of ``xs`` and stores its record."""

    def step(i, loop_carry):
        carry, outs = loop_carry
        carry, out = body(carry, jax.tree_util.tree_map(lambda a: a[i], xs))
        return carry, jax.tree_util.tree_map(lambda buf, o: buf.at[i].set(o), outs, out)

    return step


def _empty_records(body, carry, xs):
    """Zero buffers for the records of every step of ``xs``."""
    length = jax.tree_util.tree_leaves(xs)[0].shape[0]
    first = jax.tree_util.tree_map(lambda a: a[0], xs)
    out_shapes = jax.eval_shape(lambda c, x: body(c, x)[1], carry, first)
    return jax.tree_util.tree_map(lambda s: jnp.zeros((length, *s.shape), s.dtype), out_shapes)


def _deferred_scan(body, carry, xs, n_steps, family, block_steps: int, width: int):
    """:func:`_prefix_scan` in blocks of ``block_steps`` steps, for a dense covariance whose
    downdates wait in a ``P x width`` factor until the end of each block
    (:meth:`~skbong.core.FullCovariance.defer`, :meth:`~skbong.core.FullCovariance.settle`).

    Inside a block the covariance is only read: it is not part of the inner loop's carry,
    so XLA neither copies nor rewrites it per step.
    """
    state, t, noise = carry
    deferred = family.defer(state, width)
    outs = _empty_records(partial(body, base=deferred.base), (deferred._replace(base=None), t, noise), xs)

    def block(b, block_carry):
        (state, t, noise), outs = block_carry
        deferred = family.defer(state, width)
        base = deferred.base
        step = _recorded_step(partial(body, base=base), xs)
        start = b * block_steps
        end = jnp.minimum(start + block_steps, n_steps)
        (held, t, noise), outs = jax.lax.fori_loop(start, end, step, ((deferred._replace(base=None), t, noise), outs))
        return (family.settle(held._replace(base=base)), t, noise), outs

    n_blocks = (n_steps + block_steps - 1) // block_steps
    return jax.lax.fori_loop(0, n_blocks, block, (carry, outs))


def _prefix_scan(body, carry, xs, n_steps):
    """``jax.lax.scan(body, carry, xs)`` over the first ``n_steps`` (traced) steps only.

    The stacked outputs keep the full length, zero after ``n_steps``. A call's rows are
    padded to a step bucket so that one compiled program serves every call; a scan would
    run the padding steps too (100 rows in a bucket of 512: 412 steps that each copy the
    belief), a while loop with a traced trip count stops at the last row.
    """
    return jax.lax.fori_loop(0, n_steps, _recorded_step(body, xs), (carry, _empty_records(body, carry, xs)))


@_jit(static_argnames=("config", "record", "static_belief", "check_valid", "heavy_rows"), cpu_options=_scan_options)
def _scan(
    config: FilterConfig, state, xs, ys, weights, hyper: Hyperparameters, key, t0, record, record_key, latent, n_steps,
    static_belief, check_valid, innovation_start=None, heavy_rows=False,
):
    _TRACES["filter"] += 1
    return _scan_stream(
        config, state, xs, ys, weights, hyper, key, t0, record, record_key, latent, n_steps, static_belief, check_valid,
        innovation_start, heavy_rows,
    )


def _is_static(config: FilterConfig, hyper: Hyperparameters) -> bool:
    """Whether every predict step is known, before tracing, to be the identity: decay 1 and
    process noise 0 as constants (every member's, in a sweep), no inflation.

    The scan of such a belief has no predict step: for DLR that is a ``lax.switch`` between
    the predict step's three forms (in both branches of the step's ``lax.cond``), about a
    fifth of the first fit's compile time on digits. Tuning ``dynamics_decay`` or
    ``process_noise`` away from these values compiles the scan once more; other values
    share that program.
    """
    dynamics = config.dynamics
    if dynamics.decay is not None or dynamics.process_noise is not None or dynamics.inflation is not None:
        return False
    try:
        decay, noise = np.asarray(hyper.dynamics_decay), np.asarray(hyper.process_noise)
    except jax.errors.TracerArrayConversionError:  # traced by the caller's own jit
        return False
    return bool(np.all(decay == 1) and np.all(noise == 0))


@_jit(
    static_argnames=("config", "record", "static_belief", "check_valid", "hyper_axes", "vectorize", "heavy_rows"),
    cpu_options=_scan_options,
)
def _sweep_scan(
    config: FilterConfig,
    states,
    xs,
    ys,
    weights,
    hypers: Hyperparameters,
    keys,
    t0,
    record,
    record_key,
    latents,
    n_steps,
    static_belief,
    check_valid,
    hyper_axes,
    vectorize,
    active=None,
    innovation_start=None,
    heavy_rows=False,
):
    _TRACES["sweep"] += 1

    def run_member(state, hyper, key, latent, innovation_start):
        return _scan_stream(
            config, state, xs, ys, weights, hyper, key, t0, record, record_key, latent, n_steps, static_belief,
            check_valid, innovation_start, heavy_rows,
        )

    def frozen_member(state, hyper, key, latent, innovation_start):
        # What a member left out returns: its belief (and noise estimate) as they were,
        # records of NaN ("not computed").
        records = jax.eval_shape(run_member, state, hyper, key, latent, innovation_start)[1]
        records = jax.tree_util.tree_map(lambda s: jnp.full(s.shape, jnp.nan, s.dtype), records)
        belief = state
        if config.dynamics.adaptive_obs_noise:
            belief = (state, jnp.broadcast_to(hyper.obs_noise, ys.shape[-1:]).astype(ys.dtype))
        elif config.dynamics.innovation_scale:  # no sums of its own; its window as it was
            window = _window_start(config.dynamics, innovation_start, ys.dtype)
            belief = (state, jnp.concatenate([jnp.zeros(ys.shape[-1:], ys.dtype), window.ravel()]))
        return belief, records, _chunk_is_valid(config, state, hyper) if check_valid else None

    def one_member(state, hyper, key, latent, is_active, innovation_start):
        if is_active is None:
            return run_member(state, hyper, key, latent, innovation_start)
        # Inside lax.map a real branch: a member left out costs nothing. Under vmap both
        # branches run and the result is selected.
        return jax.lax.cond(is_active, run_member, frozen_member, state, hyper, key, latent, innovation_start)

    if vectorize:
        # The data and the step count are shared: the lax.cond on the weights stays a cond.
        # Shared hyperparameters stay unbatched, so branches chosen by their values (the DLR
        # predict step's lax.switch on q and gamma) are still taken, not all evaluated.
        return jax.vmap(one_member, in_axes=(0, Hyperparameters(*hyper_axes), 0, 0, 0, 0))(
            states, hypers, keys, latents, active, innovation_start
        )
    varying = Hyperparameters(*(h if axis == 0 else None for h, axis in zip(hypers, hyper_axes)))

    def member(args):
        state, values, key, latent, is_active, innovation_start = args
        return one_member(
            state, Hyperparameters(*(v if v is not None else h for v, h in zip(values, hypers))), key, latent,
            is_active, innovation_start,
        )

    return jax.lax.map(member, (states, varying, keys, latents, active, innovation_start))


def _bucket(n_steps: int) -> int:
    return next(b for b in STEP_BUCKETS if b >= n_steps)


def _steps_per_chunk(n_columns: int, batch_size: int, dtype) -> int:
    """The longest of ``STEP_BUCKETS`` whose steps of ``batch_size`` dense rows of
    ``n_columns`` fit in ``DENSE_CHUNK_BYTES`` (the shortest where none does)."""
    step_bytes = batch_size * n_columns * np.dtype(dtype).itemsize
    return max((b for b in STEP_BUCKETS if b * step_bytes <= DENSE_CHUNK_BYTES), default=STEP_BUCKETS[0])


def _rows_per_block(n_columns: int, dtype, block_rows: int) -> int:
    """``block_rows``, halved until that many dense rows of ``n_columns`` fit in
    ``DENSE_CHUNK_BYTES`` (at least one row)."""
    row_bytes = n_columns * np.dtype(dtype).itemsize
    while block_rows > 1 and block_rows * row_bytes > DENSE_CHUNK_BYTES:
        block_rows //= 2
    return block_rows


def run_filter(
    config: FilterConfig,
    state,
    X,
    Y,
    hyper: Hyperparameters,
    batch_size: int = 1,
    key: jax.Array | None = None,
    n_seen: int = 0,
    record=None,
    record_key: jax.Array | None = None,
    sample_weight=None,
    callback=None,
    latent_prior: LatentPrior | None = None,
    return_valid: bool = False,
    innovation_start: tuple | None = None,
):
    """Update the belief ``state`` with observations ``(X, Y)`` in order.

    Each filter step takes ``batch_size`` consecutive rows (the last step may be partial):
    a predict step, then one update with the summed log-likelihood of its rows, each
    row's term times its weight.

    Parameters
    ----------
    config : FilterConfig
    state : family state NamedTuple
    X : array or SciPy sparse matrix of shape (N, D)
        A sparse ``X`` is densified one compiled chunk of rows at a time, never whole.
    Y : array of shape (N, C)
        Targets: one-hot rows for a categorical likelihood.
    hyper : Hyperparameters
    batch_size : int, default=1
    key : PRNG key, optional
        Randomness of the stochastic estimators (MC-HESS, MC-EF); step ``t`` uses
        ``fold_in(key, n_seen + t * batch_size)``. Defaults to ``PRNGKey(0)``.
    n_seen : int, default=0
        Number of observations the belief has already absorbed.
    record : predictive value, optional
        When given (e.g. ``PluginPredictive()``), also evaluate each row's one-step-ahead
        predictive under the belief before the step that uses it (after the predict
        step), inside the scan.
    record_key : PRNG key, optional
        Randomness of a stochastic ``record`` predictive; the same key serves every step.
    sample_weight : array of shape (N,), optional
        Non-negative weight ``w_n`` of each row: its likelihood enters as the power
        ``p(y_n | x_n, theta)^{w_n}`` (a tempered likelihood; for a Gaussian, the
        observation variance ``R / w_n``). A step of rows all of weight zero leaves the
        belief as it was. Under the categorical likelihood, a step whose heaviest row
        weighs more than :data:`MAX_STEP_WEIGHT` (4) absorbs its rows in
        ``k = ceil(max w / 4)`` updates of weight ``w / k`` (``k`` at most
        :data:`MAX_SUBSTEPS`, 16), relinearised between them; its predict step and record
        stay one. Defaults to ones.
    callback : callable, optional
        ``callback(n_rows_done, records)``, called after each compiled chunk of at most
        ``STEP_BUCKETS[-1]`` steps (fewer for wide rows, :data:`DENSE_CHUNK_BYTES`) has been
        computed (for progress reports): ``n_rows_done`` counts the rows of ``X`` absorbed
        so far and ``records`` is the chunk's ``(log_prob, mean)`` (None without ``record``).
    latent_prior : LatentPrior, optional
        The initial prior ``N(mu_0, eta_0^{-1} I)``; required by Bayesian and hybrid
        inflation (``config.dynamics``), ignored otherwise. The prior before the row of
        index ``t`` is that of ``t`` predict steps (one per row) of the constant dynamics.
    return_valid : bool, default=False
        Also return whether the belief was valid (:func:`belief_is_valid`) at the end of
        each of the call's compiled programs (chunks of rows), every one of them: the
        updated belief's flag, and that of the beliefs the call passed through on its way.
        Computed by those programs rather than by one of their own. A full covariance
        (``fc``) whose steps keep it positive definite in exact arithmetic (BONG, and BLR
        in one inner step or at ``learning_rate <= 1``, with LIN-HESS, LIN-EF or MC-EF) is
        checked on its variances; every other is factorised (:func:`belief_is_valid`).
    innovation_start : tuple, optional
        With ``config.dynamics.innovation_scale``: ``(S, N)``, the sum of the normalised
        squared innovations (per output, shape ``(C,)``) and the total weight of the rows
        the belief has absorbed before ``X`` (``(0, 0)`` for a new belief). Each row's
        record is then that of the model whose prior covariance and noise are both scaled
        by ``c = noise_scale(S', C N')`` (``skbong.core._dynamics.noise_scale``), ``S'`` and
        ``N'`` those sums over the rows before its step: the maximum-likelihood scale so
        far, which ``BONGRegressor(obs_noise="calibrated")`` predicts with (the belief
        itself is the filter's at scale 1, see :class:`~skbong.core.Dynamics`). Without it
        the records are the filter's own, at scale 1. With
        ``config.dynamics.innovation_window``, ``(S, N, L)``: ``L`` is the window of the
        latest steps' sums before ``X`` (the ``latest`` an earlier call returned; zeros of
        shape ``(W, 2)`` for a new belief), which this call's window goes on from, and
        ``c`` is the smaller of that and the same scale from the window before the step.
        ``S`` and ``N`` may then be None: the window goes on, the records stay at scale 1.

    Returns
    -------
    state : the updated family state.
    log_prob, mean : ndarrays of shape (N,) and (N, C)
        Only with ``record``: ``log p(y_n | x_n, y_{<n})`` and the predictive mean of
        ``y_n`` (class probabilities for a categorical likelihood).
    obs_noise : array of shape (C,)
        Only when ``config.dynamics`` estimates the observation noise: the estimate
        after the last row, to pass as ``hyper.obs_noise`` to the next call. With
        ``innovation_scale`` instead, this call's sum of the normalised squared
        innovations per output (:class:`~skbong.core.Dynamics`).
    latest : array of shape (W, 2)
        Only with ``config.dynamics.innovation_window`` (``W``): the sums of those
        innovations over the outputs and the row weights of the latest ``W`` steps with
        rows of positive weight, oldest first, this call's after those of
        ``innovation_start``'s window (zeros in front where fewer were taken).
    valid : bool array of shape ()
        Last, only with ``return_valid``.
    """
    if key is None:
        key = default_key(config.estimator)
    dtype = state.mean.dtype
    # Same dtype and weak-type status on every call, so Python floats never retrace; numpy
    # converts them without compiling a conversion per dtype.
    hyper = Hyperparameters(*(_as_hyper(h, dtype) for h in hyper))
    if config.dynamics.adaptive_obs_noise:  # the estimate is carried as one value per output
        hyper = hyper._replace(obs_noise=jnp.broadcast_to(hyper.obs_noise, np.shape(Y)[1:]))
    if config.dynamics.noise_scaled_belief:
        hyper = hyper._replace(reference_obs_noise=jnp.broadcast_to(hyper.reference_obs_noise, np.shape(Y)[1:]))
    latent_prior = _latent_prior(config, latent_prior, dtype)
    return _run_chunks(
        _scan, config, state, X, Y, hyper, batch_size, key, n_seen, record, record_key, 0, sample_weight, callback,
        latent_prior, return_valid, innovation_start,
    )


def run_sweep(
    config: FilterConfig,
    states,
    X,
    Y,
    hypers: Hyperparameters,
    batch_size: int = 1,
    keys: jax.Array | None = None,
    n_seen: int = 0,
    record=None,
    record_key: jax.Array | None = None,
    vectorize: bool | None = None,
    sample_weight=None,
    callback=None,
    latent_prior: LatentPrior | None = None,
    return_valid: bool = False,
    active=None,
    innovation_start: tuple | None = None,
):
    """Run ``K`` filters side by side on the same stream, in one compiled scan.

    Member ``k`` starts from ``states[k]`` and uses the hyperparameters ``hypers[k]``: a
    sweep over prior scales (see :func:`init_sweep`), observation noise, learning rates,
    process noise or initial weights (seeds) costs one compilation and one call, and on
    an accelerator the members' steps are batched into the same products (``vectorize``).
    Every member sees the rows
    in the same order; member ``k`` matches :func:`run_filter` with ``states[k]``,
    ``hypers[k]`` and ``keys[k]``.

    Parameters
    ----------
    config : FilterConfig
    states : family state NamedTuple
        Every leaf with a leading axis of length ``K``, e.g. from :func:`init_sweep`.
    X : array or SciPy sparse matrix of shape (N, D)
        As for :func:`run_filter`.
    Y : array of shape (N, C)
    hypers : Hyperparameters
        A scalar field is shared by every member; any other field has leading axis
        ``K`` (``obs_noise`` of shape ``(K,)`` or ``(K, C)``).
    batch_size : int, default=1
    keys : PRNG keys of shape (K, 2), or one key, optional
        Randomness of the stochastic estimators per member; one key is shared by all.
        Defaults to ``PRNGKey(0)``.
    n_seen : int, default=0
    record : predictive value, optional
        As for :func:`run_filter`, evaluated for every member.
    record_key : PRNG key, optional
    vectorize : bool, optional
        True: batch the members' steps into the same products (``jax.vmap``). False: run
        them one after the other inside the compiled call (``lax.map``), each with the code
        of a single filter. Default: vectorised on a GPU or TPU, one after the other on a
        CPU, where batching gained little on two cores (``benchmarks/sweep.py``: 0.9-1.3x
        a loop of single runs either way) and a vectorised ``sigma0="auto"`` fit of the
        MNIST MLP (DLR-10, K = 5) took 7.1 single fits.
    sample_weight : array of shape (N,), optional
        Row weights shared by every member, as for :func:`run_filter`.
    callback : callable, optional
        As for :func:`run_filter`; the records have the members' leading axis.
    latent_prior : LatentPrior, optional
        As for :func:`run_filter`, with leading axis ``K`` (one initial prior per member).
    return_valid : bool, default=False
        As for :func:`run_filter`: one flag per member.
    active : bool array of shape (K,), optional
        Members to run; default all. A member left out keeps its belief (and its noise
        estimate) unchanged and gets records of NaN. Run one after the other (a CPU's
        default) it costs nothing; vectorised, its steps are computed and discarded.
        ``sigma0="auto"`` leaves out the prior scales its Occam's window has dropped.
    innovation_start : tuple, optional
        As for :func:`run_filter`, per member: sums of shape ``(K, C)`` and ``(K,)``, and
        windows of shape ``(K, W, 2)`` (or shared, broadcast).

    Returns
    -------
    states : the updated family states, leading axis ``K``.
    log_prob, mean : ndarrays of shape (K, N) and (K, N, C)
        Only with ``record``.
    obs_noise : array of shape (K, C)
        Only when ``config.dynamics`` estimates the observation noise (with
        ``innovation_scale``, each member's sums of the normalised squared innovations).
    latest : array of shape (K, W, 2)
        Only with ``config.dynamics.innovation_window``: each member's latest steps' sums.
    valid : bool array of shape (K,)
        Last, only with ``return_valid``.
    """
    dtype = states.mean.dtype
    if np.ndim(states.mean) != 2:
        raise ValueError(
            f"states must be the members' beliefs stacked on a leading axis (states.mean of shape (K, P)), got "
            f"states.mean of shape {np.shape(states.mean)}: e.g. jax.vmap(config.family.init)(means, sigma0s)."
        )
    n_members = states.mean.shape[0]
    if keys is None:
        keys = default_key(config.estimator)
    # numpy keys stay numpy: broadcasting them compiles nothing.
    xp = jnp if isinstance(keys, jax.Array) else np
    keys = xp.asarray(keys)
    if keys.ndim == 1:
        keys = xp.broadcast_to(keys, (n_members, *keys.shape))
    if keys.shape[0] != n_members:
        raise ValueError(f"keys must hold one key per member ({n_members}), got shape {keys.shape}.")
    hypers = Hyperparameters(*(_as_hyper(h, dtype) for h in hypers))
    def per_member_and_output(value):  # a scalar, one value per member, or (members, outputs)
        return jnp.broadcast_to(value[:, None] if value.ndim == 1 else value, (n_members, np.shape(Y)[1]))

    if config.dynamics.adaptive_obs_noise:  # one estimate per member and output
        hypers = hypers._replace(obs_noise=per_member_and_output(hypers.obs_noise))
    if config.dynamics.noise_scaled_belief:  # R_0 likewise
        hypers = hypers._replace(reference_obs_noise=per_member_and_output(hypers.reference_obs_noise))
    for name, h in zip(Hyperparameters._fields, hypers):
        if h.ndim and h.shape[0] != n_members:
            raise ValueError(
                f"hypers.{name} must be a scalar or have leading axis {n_members} (one value per member), "
                f"got shape {h.shape}."
            )
    if vectorize is None:
        vectorize = _default_platform() != "cpu"
    if active is not None:
        active = np.asarray(active, bool)
        if active.shape != (n_members,):
            raise ValueError(f"active must hold one flag per member ({n_members}), got shape {active.shape}.")
    scan = partial(
        _sweep_scan, hyper_axes=tuple(0 if h.ndim else None for h in hypers), vectorize=bool(vectorize), active=active
    )
    latent_prior = _latent_prior(config, latent_prior, dtype)
    return _run_chunks(
        scan, config, states, X, Y, hypers, batch_size, keys, n_seen, record, record_key, 1, sample_weight, callback,
        latent_prior, return_valid, innovation_start,
    )


def _as_hyper(value, dtype):
    """A hyperparameter as an array of ``dtype``: numpy for host values, JAX's for device
    arrays (an estimate carried over from the previous call)."""
    return value.astype(dtype) if isinstance(value, jax.Array) else np.asarray(value, dtype)


def _latent_prior(config: FilterConfig, latent_prior: LatentPrior | None, dtype) -> LatentPrior | None:
    """The latent prior in ``dtype`` when the dynamics need it, else None (never traced)."""
    if not config.dynamics.needs_latent_prior:
        return None
    if latent_prior is None:
        raise ValueError(
            f"inflation={config.dynamics.inflation!r} needs latent_prior=LatentPrior(mu_0, eta_0), the initial "
            "prior that it mixes back in (LO-FI Eqs. 74-79)."
        )
    return LatentPrior(*(jnp.asarray(a, dtype) for a in latent_prior))


@_jit(static_argnames="family", cpu_options=CPU_RUN_ONCE_OPTIONS)
def init_belief(family, mean0, sigma0):
    """The prior belief ``N(mean0, sigma0^2 I)`` of ``family``: ``family.init`` as one
    compiled program per family and shape (eagerly, each of its few ops compiles alone).

    Parameters
    ----------
    family : a Gaussian family (``config.family``)
    mean0 : array of shape (P,)
    sigma0 : scalar

    Returns
    -------
    family state NamedTuple
    """
    return family.init(jnp.asarray(mean0), jnp.asarray(sigma0, jnp.asarray(mean0).dtype))


@_jit(static_argnames="family")
def belief_is_valid(family, state) -> jax.Array:
    """``family.is_valid(state)`` compiled once per family and shape; a state with a
    leading members axis (a sweep) gives one flag per member.

    ``run_filter(..., return_valid=True)`` computes the flag inside the filter's own
    program, which saves this one's compilation (0.09 s of a first fit on digits) and a call.
    The two agree but for a full covariance whose steps keep it positive definite (BONG,
    BLR): the filter reads its variances there, and this check always factorises it.
    """
    if state.mean.ndim == 2:
        return jax.vmap(family.is_valid)(state)
    return family.is_valid(state)


def init_sweep(family, mean0, sigma0):
    """Prior beliefs ``N(mean0[k], sigma0[k]^2 I)`` of a sweep, stacked on a leading axis.

    Parameters
    ----------
    family : a Gaussian family (``config.family``)
    mean0 : array of shape (P,) or (K, P)
        One initial mean shared by every member, or one per member (e.g. per seed).
    sigma0 : scalar or array of shape (K,)

    Returns
    -------
    family state NamedTuple whose leaves have leading axis ``K``.
    """
    mean0 = jnp.asarray(mean0)
    sigma0 = jnp.asarray(sigma0, mean0.dtype)
    n_members = max(mean0.shape[0] if mean0.ndim == 2 else 1, sigma0.shape[0] if sigma0.ndim else 1)
    mean0 = jnp.broadcast_to(mean0, (n_members, mean0.shape[-1]))
    sigma0 = jnp.broadcast_to(sigma0, (n_members,))
    return _init_members(family, mean0, sigma0)


@_jit(static_argnames="family", cpu_options=CPU_RUN_ONCE_OPTIONS)
def _init_members(family, mean0, sigma0):
    return jax.vmap(family.init)(mean0, sigma0)


def _run_chunks(
    scan, config, state, X, Y, hyper, batch_size, key, n_seen, record, record_key, n_lead, weights, callback, latent,
    check_valid, innovation_start=None,
):
    """Feed ``(X, Y)`` and the row weights to the jitted ``scan`` in bucket-sized chunks;
    ``n_lead`` leading axes (the members of a sweep) precede the step axes of its records.
    ``callback(n_rows_done, chunk_records)`` runs after each chunk has been computed.
    ``check_valid``: each chunk's program also checks the belief it ends with, and whether
    every chunk's was valid is returned, last in the tuple (one compiled program per call,
    not two).

    A program that the device cannot hold raises ``MemoryError`` with what to change (XLA's
    own error names only the bytes); the call waits for its result so that this happens
    here, not where the caller first reads the belief."""
    X = _row_source(X)
    Y = np.asarray(Y)
    _check_stream(config, state, X, Y, hyper, batch_size, n_lead)
    if isinstance(n_seen, bool) or not isinstance(n_seen, Integral) or n_seen < 0:
        raise ValueError(f"n_seen must be a non-negative integer (the rows absorbed before this call), got {n_seen!r}.")
    rows_per_step = _step_rows(X.shape[0], batch_size)
    try:
        return jax.block_until_ready(
            _run_chunks_unchecked(
                scan, config, state, X, Y, hyper, rows_per_step, key, n_seen, record, record_key, n_lead, weights,
                callback, latent, check_valid, innovation_start,
            )
        )
    except jax.errors.JaxRuntimeError as error:
        oversized = _oversized_array(str(error))
        if "RESOURCE_EXHAUSTED" not in str(error) and oversized is None:
            raise
        n_members = int(np.prod(np.shape(state.mean)[:n_lead]))
        full = config.family.name in ("fc", "fc_mom")
        remedies = [f"a smaller batch_size (now {batch_size})"] if rows_per_step > 1 else []
        if full:
            remedies.append("family='dlr' or 'diag', which keep no P x P matrix")
        if n_members > 1:
            remedies.append(f"fewer than the {n_members} filters run side by side")
        remedies.append("a smaller network")
        advice = " or ".join(filter(None, [", ".join(remedies[:-1]), remedies[-1]]))
        if "RESOURCE_EXHAUSTED" in str(error):
            # XLA:GPU's message spans lines (its autotuner's report); one line reads better.
            cause = " ".join(str(error).split()).rstrip(".")
        else:
            array, size, limit, device = oversized
            cause = (
                f"a step needs an array {array} of {size / 1e9:,.4g} GB, more than the {limit / 1e9:,.4g} GB "
                f"available on {device}"
            )
        raise MemoryError(
            f"The filter ran out of device memory ({cause}). Its steps take {rows_per_step} "
            f"row(s) of {Y.shape[1]} output(s) for a {config.family.name!r} belief over P = "
            f"{np.shape(state.mean)[-1]:,} parameters: a step's memory grows with the square of its rows "
            f"times outputs{', and with P^2' if full else ''}. Use {advice}."
        ) from error


#: An array in XLA's messages: its element type and dimensions, as in ``f32[2061584302080,2]``.
_XLA_ARRAY = re.compile(r"\b(pred|bf16|[fsuc]\d+)\[(\d+(?:,\d+)*)\]")


def _oversized_array(message: str) -> tuple[str, int, int, str] | None:
    """The largest array that an XLA error names, its bytes, and the memory available on the
    default device and its name (:func:`_device_memory`), where that array alone is larger
    than that memory; else ``None``.

    Some programs too large for the device fail before any allocation: XLA:GPU cannot
    compile a matrix product of 2e12 rows (its GEMM autotuner finds no kernel and raises an
    INTERNAL error) where a CPU reports ``RESOURCE_EXHAUSTED`` on allocating it."""
    largest = None
    for element, dims in _XLA_ARRAY.findall(message):
        bits = 8 if element == "pred" else int(re.sub(r"\D", "", element))
        size = int(np.prod([int(d) for d in dims.split(",")], dtype=object)) * bits // 8
        if largest is None or size > largest[1]:
            largest = (f"{element}[{dims}]", size)
    if largest is None:
        return None
    limit, device = _device_memory()
    return (*largest, limit, device) if limit is not None and largest[1] > limit else None


def _device_memory() -> tuple[int | None, str]:
    """Bytes of memory that a fit may still take on JAX's default device, and the device's
    name: on an accelerator, the allocator's limit less what it holds; on a CPU, the host's
    available memory (``MemAvailable`` of ``/proc/meminfo``, else its physical memory), or
    the container's headroom (cgroup v2 ``memory.max`` less ``memory.current``) where that
    is lower. Not the physical memory: a probe's fit that needed 23.0 GB of a 25.3 GB host,
    about 21 GB of it free, passed the check against the total, and the kernel killed the
    process. ``None`` where none is known."""
    device = jax.devices()[0]
    name = f"{device.platform}:{device.id}"
    try:
        stats = device.memory_stats()
    except (NotImplementedError, RuntimeError):  # a backend that keeps no statistics
        stats = None
    if stats and stats.get("bytes_limit"):
        return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0)), name
    try:
        limit = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows)
        return None, name
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    limit = min(limit, int(line.split()[1]) * 1024)  # in kB
                    break
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open("/sys/fs/cgroup/memory.max") as cgroup:
            text = cgroup.read().strip()
        if text.isdigit():
            used = 0
            try:
                with open("/sys/fs/cgroup/memory.current") as cgroup:
                    used = int(cgroup.read().strip())
            except (OSError, ValueError):
                pass
            limit = min(limit, int(text) - used)
    except OSError:
        pass
    return limit, "this host" if device.platform == "cpu" else name


def _check_stream(config: FilterConfig, state, X, Y, hyper, batch_size, n_lead: int) -> None:
    """Refuse a stream whose pieces do not fit together, which the padded, reshaped chunks
    would otherwise take silently: ``Y`` shorter than ``X`` was padded with targets of 0
    and weight 1, a ``Y`` narrower than the network's outputs broadcast against them."""
    _positive_int("run_filter", "batch_size", batch_size)
    expected = _state_class(config.family)
    if type(state) is not expected:
        raise ValueError(
            f"state is a {type(state).__name__}, the belief of another family: family {config.family.name!r} "
            f"keeps a {expected.__name__} (config.family.init(mean0, sigma0) makes one)."
        )
    n_params = state.mean.shape[-1]
    _check_belief_shapes(config.family, state, n_params, n_lead)
    if np.ndim(Y) == 0 or X.shape[0] != Y.shape[0]:
        raise ValueError(f"X and Y must have one row per observation: X has {X.shape[0]} rows, Y has shape {np.shape(Y)}.")
    n_outputs = int(np.prod(Y.shape[1:], dtype=np.int64))
    width = _output_width(config.apply_fn, n_params, int(np.prod(X.shape[1:], dtype=np.int64)), str(state.mean.dtype))
    if width != n_outputs:
        one_hot = " (one-hot rows for a categorical likelihood)" if isinstance(config.likelihood, Categorical) else ""
        raise ValueError(
            f"apply_fn returns {width} output(s) per row and Y has {n_outputs} column(s){one_hot}: they must match."
        )
    if isinstance(config.likelihood, Gaussian):
        _check_obs_noise(hyper.obs_noise, n_outputs, n_lead)
    if not np.all(np.isfinite(Y)):
        raise ValueError("Y holds NaN or infinite values.")
    # (A row of zeros, no class observed, adds the curvature alone: tests use it.)
    if isinstance(config.likelihood, Categorical) and Y.size and (
        np.any(Y < 0) or np.any(Y.reshape(Y.shape[0], -1).sum(axis=1) > 1.0 + 1e-4)
    ):
        raise ValueError(
            "Y must hold one-hot rows (or class probabilities: non-negative, summing to at most 1) for a "
            "categorical likelihood; a row of other values is a target no class can match."
        )
    _check_hyperparameter_ranges(hyper)


def _check_obs_noise(noise, n_outputs: int, n_lead: int = 0) -> None:
    """Refuse an observation noise that is not one positive variance or one per output
    (after ``n_lead`` leading axes, a sweep's members)."""
    if np.shape(noise)[n_lead:] not in ((), (1,), (n_outputs,)):
        raise ValueError(
            f"obs_noise must be one variance or one per output ({n_outputs}), got shape {np.shape(noise)[n_lead:]}."
        )
    noise = _concrete(noise)
    if noise is not None and not np.all(np.isfinite(noise) & (noise > 0)):
        raise ValueError(f"obs_noise must be positive and finite (a variance), got {noise}.")


def _check_hyperparameter_ranges(hyper) -> None:
    """Refuse a hyperparameter outside its range, as a schedule is refused
    (:meth:`Dynamics.check_schedule_ranges`): NumPy values and JAX arrays alike (a JAX user's
    ``jnp.asarray(-1.0)`` ran to a NaN posterior); only values traced by the caller's
    ``vmap`` pass unchecked."""
    for name, (valid, expected) in HYPERPARAMETER_RANGES.items():
        value = _concrete(getattr(hyper, name))
        if value is not None and not np.all(np.isfinite(value) & valid(value)):
            raise ValueError(f"{name} must be finite and {expected}, got {value}.")


def _concrete(value) -> np.ndarray | None:
    """``value`` on the host, or ``None`` for a value traced by the caller (``jax.vmap`` of
    :func:`filter_posterior`), whose entries are not known here."""
    return None if isinstance(value, jax.core.Tracer) else np.asarray(value)


def _state_class(family) -> type:
    """The NamedTuple class of ``family``'s beliefs."""
    return type(_belief_template(family, 2, "float32"))


def _check_belief_shapes(family, state, n_params: int, n_lead: int) -> None:
    """Refuse a belief whose arrays do not have the shapes ``family.init`` gives for its
    mean's ``n_params`` parameters (after ``n_lead`` leading axes): a covariance of another
    size, or a low-rank factor of another rank than the config's, failed inside the step
    with XLA's message about contracting dimensions or ``lax.cond``'s about branch types."""
    template = _belief_template(family, n_params, str(state.mean.dtype))
    for field, leaf, expected in zip(state._fields, state, template):
        shape = tuple(np.shape(leaf))
        if len(shape) < n_lead or shape[n_lead:] != expected.shape:
            raise ValueError(
                f"state.{field} has shape {shape[n_lead:]} where the {family.name!r} belief of "
                f"{n_params} parameters (its mean's length) has {expected.shape}: a belief made for "
                f"another network or another rank (config.family.init(mean0, sigma0) makes one)."
            )


@lru_cache(maxsize=256)
def _belief_template(family, n_params: int, dtype: str):
    """``family``'s belief of ``n_params`` parameters as shapes and dtypes (traced once, never run)."""
    return jax.eval_shape(family.init, jax.ShapeDtypeStruct((n_params,), dtype), jax.ShapeDtypeStruct((), dtype))


@lru_cache(maxsize=256)
def _output_width(apply_fn, n_params: int, n_features: int, dtype: str) -> int:
    """Outputs per row of ``apply_fn`` for ``n_params`` parameters and rows of ``n_features``
    (traced once per shape, never run)."""
    params = jax.ShapeDtypeStruct((n_params,), dtype)
    try:
        out = jax.eval_shape(apply_fn, params, jax.ShapeDtypeStruct((1, n_features), dtype))
    except Exception as error:  # noqa: BLE001 - any failure of a user's function, named
        raise ValueError(
            f"apply_fn(params, x) fails for params of shape ({n_params},) (the prior mean) and rows of "
            f"{n_features} feature(s): {type(error).__name__}: {error}"
        ) from error
    if len(out.shape) < 2 or out.shape[0] != 1:
        raise ValueError(
            f"apply_fn(params, x) must return one row of outputs per row of x, shape (B, C): for one row "
            f"it returns shape {tuple(out.shape)} (reshape a (B,) output to (B, 1))."
        )
    return int(np.prod(out.shape[1:], dtype=np.int64))


def _step_rows(n_rows: int, batch_size: int) -> int:
    """Rows of each compiled filter step of a call with ``n_rows`` rows: ``batch_size``,
    except that a call with fewer rows takes one partial step padded to the next power of
    two of its rows, not to ``batch_size``. Padding rows weigh zero, so the step is the
    same (the dynamics, the latent prior of Bayesian and hybrid inflation included, count
    rows), and a step's cost and memory grow with the square of its rows or worse."""
    if n_rows < batch_size:
        return 1 << max(int(n_rows) - 1, 0).bit_length()
    return batch_size


def _chunk_start(innovation_sum, start_terms, start_weight, latest, dtype):
    """The ``innovation_start`` of a chunk: the sums of the rows before it (``innovation_sum``
    of the call's earlier chunks added to the call's start, for the scale of its records; None
    where its records stay the filter's own) and the window it goes on from (``latest``, with
    ``innovation_window``); None where neither is needed."""
    scaled = innovation_sum is not None and start_terms is not None
    sums = (None, None)
    if scaled:
        sums = (np.asarray(start_terms + innovation_sum, dtype), np.asarray(start_weight, dtype))
    if latest is not None:
        return (*sums, np.asarray(latest, dtype))
    return sums if scaled else None


def _run_chunks_unchecked(
    scan, config, state, X, Y, hyper, batch_size, key, n_seen, record, record_key, n_lead, weights, callback, latent,
    check_valid, innovation_start,
):
    """:func:`_run_chunks` for ``batch_size`` rows per step, without the memory check."""
    dtype = state.mean.dtype
    adaptive = config.dynamics.adaptive_obs_noise
    innovation_sum = 0.0 if config.dynamics.innovation_scale else None
    window = config.dynamics.innovation_window
    weights = _row_weights(weights, X.shape[0], dtype)
    lead_shape = state.mean.shape[:n_lead]
    scaled_records = innovation_start is not None and innovation_start[0] is not None
    if scaled_records:  # the sums before each chunk, for the scale of its records
        start_terms = np.broadcast_to(np.asarray(innovation_start[0], np.float64), (*lead_shape, Y.shape[1]))
        start_weight = np.broadcast_to(np.asarray(innovation_start[1], np.float64), lead_shape)
    if window is not None:  # the latest steps' sums, carried from chunk to chunk
        latest = np.zeros((*lead_shape, window, 2))
        if innovation_start is not None and len(innovation_start) > 2:
            latest = np.broadcast_to(np.asarray(innovation_start[2], np.float64), latest.shape)
    if record_key is None:
        record_key = default_key(record)
    static_belief = _is_static(config, hyper)
    # One program more, only where such rows are and the likelihood's curvature moves with the output.
    heavy_rows = bool(np.max(weights, initial=0.0) > MAX_STEP_WEIGHT) and not getattr(
        config.likelihood, "fixed_output_curvature", False
    )
    n_steps = -(-X.shape[0] // batch_size)
    most_steps = _steps_per_chunk(int(np.prod(X.shape[1:])), batch_size, dtype)
    records = []
    valid = None
    start = 0
    while start < n_steps:
        length = min(n_steps - start, most_steps)
        bucket = _bucket(length)
        rows = slice(start * batch_size, (start + length) * batch_size)
        xs = _dense_padded(X, rows, bucket * batch_size, dtype).reshape(bucket, batch_size, -1)
        ys = _pad_rows(Y[rows], bucket * batch_size).reshape(bucket, batch_size, -1)
        # Padding rows weigh zero.
        ws = _pad_rows(weights[rows], bucket * batch_size).reshape(bucket, batch_size)
        # numpy inputs go straight to the compiled call, whose C++ dispatch transfers them
        # (jnp.asarray first cost ~50 us each: a third of a one-row partial_fit's overhead).
        state, out, chunk_valid = scan(
            config,
            state,
            xs,
            np.asarray(ys, dtype),
            np.asarray(ws, dtype),
            hyper,
            key,
            n_seen + start * batch_size,
            record,
            record_key,
            latent,
            length,
            static_belief,
            check_valid,
            innovation_start=_chunk_start(
                innovation_sum if scaled_records else None,
                start_terms if scaled_records else None,
                start_weight + weights[: rows.start].sum() if scaled_records else None,
                latest if window is not None else None,
                dtype,
            ),
            heavy_rows=heavy_rows,
        )
        # Every chunk's belief, not only the last: a belief that broke down in one chunk is
        # not mended by the next, whose steps start from it.
        valid = chunk_valid if valid is None or chunk_valid is None else valid & chunk_valid
        if adaptive:  # the noise estimate goes on to the next chunk
            state, noise = state
            hyper = hyper._replace(obs_noise=noise)
        elif innovation_sum is not None:  # each chunk's sum starts at zero
            state, terms = state
            terms = np.asarray(terms, np.float64)
            innovation_sum = innovation_sum + terms[..., : Y.shape[1]]
            if window is not None:  # the window after the chunk, which went on from the one before
                latest = terms[..., Y.shape[1] :].reshape(*terms.shape[:-1], window, 2)
        if record is not None:
            n_rows = min(rows.stop, X.shape[0]) - rows.start
            records.append(
                tuple(
                    np.asarray(a).reshape(*a.shape[:n_lead], bucket * batch_size, *a.shape[n_lead + 2 :])[
                        (slice(None),) * n_lead + (slice(0, n_rows),)
                    ]
                    for a in out
                )
            )
        start += length
        if callback is not None:
            jax.block_until_ready(state)  # the chunk is computed, not only dispatched
            callback(min(start * batch_size, X.shape[0]), records[-1] if record is not None else None)
    extra = (hyper.obs_noise,) if adaptive else ()
    if innovation_sum is not None:
        extra = (np.broadcast_to(innovation_sum, (*lead_shape, Y.shape[1])).copy(),)
        if window is not None:
            extra = (*extra, latest)
    if check_valid:
        # A chunk's flag is that of the belief it ends with; without rows, that given.
        extra = (*extra, belief_is_valid(config.family, state) if valid is None else valid)
    if record is None:
        return (state, *extra) if extra else state
    lead = state.mean.shape[:n_lead]
    if not records:
        return state, np.zeros((*lead, 0)), np.zeros((*lead, 0, Y.shape[1])), *extra
    return (
        state,
        np.concatenate([r[0] for r in records], axis=n_lead),
        np.concatenate([r[1] for r in records], axis=n_lead),
        *extra,
    )


def _row_weights(weights, n_rows: int, dtype) -> np.ndarray:
    """Row weights as a finite, non-negative ``(n_rows,)`` array (ones when None)."""
    if weights is None:
        return np.ones(n_rows, dtype)
    given = np.asarray(weights)
    if given.shape != (n_rows,):
        raise ValueError(f"sample_weight must have shape ({n_rows},), one weight per row, got {given.shape}.")
    if not (np.all(np.isfinite(given)) and np.all(given >= 0)):
        raise ValueError("sample_weight must be finite and non-negative.")
    largest, limit = float(np.max(given, initial=0.0)), float(np.finfo(dtype).max)
    if largest > limit:
        raise ValueError(
            f"sample_weight holds {largest:.3g}, beyond the largest {np.dtype(dtype).name} ({limit:.3g}) "
            "the filter runs in: rescale the weights (only their ratios and their size against the prior matter)."
        )
    return given.astype(dtype, copy=False)


def _pad_rows(a: np.ndarray, n: int) -> np.ndarray:
    if a.shape[0] == n:  # a full chunk: no copy
        return a
    return np.concatenate([a, np.zeros((n - a.shape[0], *a.shape[1:]), a.dtype)])


def _is_sparse(X) -> bool:
    """Whether ``X`` is a SciPy sparse matrix or array (anything with ``tocsr``)."""
    return hasattr(X, "tocsr")


def _row_source(X):
    """``X`` ready to be cut into rows: a sparse ``X`` in CSR form, which
    :func:`_dense_rows` densifies one block of rows at a time, so that it is never dense
    as a whole; anything else as an ndarray."""
    return X.tocsr() if _is_sparse(X) else np.asarray(X)


def _dense_rows(X, rows) -> np.ndarray:
    """The rows ``X[rows]`` of a :func:`_row_source` as a dense ndarray."""
    block = X[rows]
    return block.toarray() if _is_sparse(block) else block


def _dense_padded(X, rows: slice, n_rows: int, dtype) -> np.ndarray:
    """The rows ``X[rows]`` of a :func:`_row_source` as a dense ``(n_rows, ...)`` array of
    ``dtype``, zero-padded: a sparse block is written straight into it, with no dense copy
    in its own dtype and no second one to pad (wide rows: a probe's 64 rows of 2**18 columns
    took 0.8 GB for 0.07 GB of float32 rows)."""
    block = X[rows]
    if not _is_sparse(block):
        return np.asarray(_pad_rows(block, n_rows), dtype)
    out = np.zeros((n_rows, block.shape[1]), dtype)
    block.astype(dtype, copy=False).toarray(out=out[: block.shape[0]])
    return out


def _padded_blocks(X, dtype, block_rows: int = PREDICT_CHUNK):
    """``(block, n_rows)`` for consecutive blocks of ``X`` of ``block_rows`` rows (fewer for
    wide rows, :func:`_rows_per_block`), each zero-padded to that many rows so every call
    reuses one compiled shape."""
    X = _row_source(X)
    block_rows = _rows_per_block(int(np.prod(X.shape[1:])), dtype, block_rows)
    for start in range(0, X.shape[0], block_rows):
        rows = slice(start, start + block_rows)
        yield _dense_padded(X, rows, block_rows, dtype), min(X.shape[0], start + block_rows) - start


@_jit(static_argnames=("config", "predictive"))
def _predict_chunk(config: FilterConfig, predictive, state, x, obs_noise, key):
    _TRACES["predict"] += 1
    return predictive(config.apply_fn, config.likelihood, config.family, state, x, obs_noise, key)


def predict_distribution(
    config: FilterConfig, predictive, state, X, obs_noise=1.0, key=None, block_rows: int | None = None
):
    """Predictive distribution of the targets of ``X`` under the belief ``state``.

    Parameters
    ----------
    config : FilterConfig
    predictive : predictive value
        E.g. ``Probit()`` or ``LinearizedGaussian()`` (see :func:`make_predictive`).
    state : family state NamedTuple
    X : array or SciPy sparse matrix of shape (N, D)
        A sparse ``X`` is densified one block of rows at a time.
    obs_noise : float or array of shape (C,), default=1.0
        Observation variance ``R`` (Gaussian likelihood).
    key : PRNG key, optional
        Randomness of a stochastic predictive; every chunk of rows uses the same key, so
        a row's prediction does not depend on the rows predicted with it.
    block_rows : int, optional
        Rows per compiled call (the last block zero-padded), halved for wide rows until a
        block's dense rows fit in :data:`DENSE_CHUNK_BYTES`. The padding rows are computed
        too: a few rows of a large network (per-row Jacobians) cost less in a small block.
        Default :data:`PREDICT_CHUNK`, or :data:`DENSE_PREDICT_ROWS` for a full covariance
        of at least ``DENSE_PREDICT_FROM`` weights and a predictive other than
        ``PluginPredictive``.

    Returns
    -------
    CategoricalPredictive or GaussianPredictive
        With numpy fields of leading dimension N.
    """
    if isinstance(predictive, (str, type)):  # a name or a class: "'str' object is not callable" deep inside
        raise TypeError(
            f"predictive must be a predictive value such as Probit() or LinearizedGaussian(), got {predictive!r}; "
            "make_predictive(name, likelihood) builds one from a name."
        )
    dtype = state.mean.dtype
    if key is None:
        key = default_key(predictive)
    obs_noise = _as_hyper(obs_noise, dtype)
    X = _row_source(X)
    if block_rows is None:
        block_rows = _default_block_rows(config, predictive, state.mean.shape[0])
    _check_prediction(config, predictive, state, X, obs_noise, block_rows)
    outs = []
    for block, n_rows in _padded_blocks(X, dtype, block_rows):
        out = _predict_chunk(config, predictive, state, block, obs_noise, key)
        outs.append(type(out)(*(np.asarray(a)[:n_rows] for a in out)))
    return type(outs[0])(*(np.concatenate(fields) for fields in zip(*outs)))


def _default_block_rows(config: FilterConfig, predictive, n_params: int) -> int:
    """:data:`PREDICT_CHUNK`, or :data:`DENSE_PREDICT_ROWS` where each row costs a product with
    a full covariance of at least ``DENSE_PREDICT_FROM`` weights."""
    dense = isinstance(config.family, (FullCovariance, FullCovarianceMoment)) and n_params >= DENSE_PREDICT_FROM
    return DENSE_PREDICT_ROWS if dense and not isinstance(predictive, PluginPredictive) else PREDICT_CHUNK


def _check_prediction(config: FilterConfig, predictive, state, X, obs_noise, block_rows) -> None:
    """Refuse what :func:`predict_distribution` cannot predict with, as the filter refuses
    it: rows that are no rows, a predictive of the other likelihood (probabilities of 1
    for a Gaussian), a non-positive noise (negative variances), NaN inputs."""
    _positive_int("predict_distribution", "block_rows", block_rows)
    if X.ndim < 2 or X.shape[0] == 0:
        raise ValueError(f"X must hold one row per observation, at least one, got shape {X.shape}.")
    if not np.all(np.isfinite(X.data if _is_sparse(X) else X)):
        raise ValueError("X holds NaN or infinite values.")
    likelihood = "gaussian" if isinstance(config.likelihood, Gaussian) else "categorical"
    for name, (predictive_cls, likelihoods) in PREDICTIVES.items():
        if type(predictive) is predictive_cls and likelihood not in likelihoods:
            raise ValueError(
                f"predictive {name!r} ({predictive_cls.__name__}) applies to the {' and '.join(likelihoods)} "
                f"likelihood only; this config's is {likelihood}."
            )
    n_features = int(np.prod(X.shape[1:], dtype=np.int64))
    width = _output_width(config.apply_fn, state.mean.shape[-1], n_features, str(state.mean.dtype))
    if likelihood == "gaussian":
        _check_obs_noise(obs_noise, width)


def prior_output_spread(config: FilterConfig, mean, sigma0: float, X) -> float:
    """Standard deviation of the network's outputs under the prior ``N(mean, sigma0^2 I)``,
    linearised at ``mean``: ``sigma0 sqrt(mean_{n,c} ||d f_c(x_n) / d theta||^2)``, the
    prior predictive check of the estimators (``skbong._health``). One compiled program of
    per-row Jacobians, for the few rows of ``X`` (shape ``(N, D)``)."""
    rows = _dense_rows(_row_source(X), slice(None))
    return sigma0 * float(np.sqrt(_mean_squared_jacobian(config, mean, np.asarray(rows, mean.dtype))))


@_jit(static_argnames="config", cpu_options=CPU_RUN_ONCE_OPTIONS)
def _mean_squared_jacobian(config: FilterConfig, mean, x):
    _TRACES["predict"] += 1

    def row_mean_square(row):
        jac = jax.jacrev(lambda theta: config.apply_fn(theta, row[None])[0])(mean)  # (C, P)
        return jnp.mean(jnp.sum(jac**2, axis=-1))

    # One row at a time: a C x P Jacobian at most in memory, not N x C x P.
    return jnp.mean(jax.lax.map(row_mean_square, x))


@_jit(static_argnames="config")
def _outputs_at(config: FilterConfig, params, x):
    _TRACES["predict"] += 1
    f = jax.vmap(config.apply_fn, in_axes=(0, None))(params, x)
    return jax.vmap(jax.vmap(config.likelihood.mean))(f)


def predict_at(config: FilterConfig, params, X) -> np.ndarray:
    """Conditional means ``E[y | x, theta_s]`` at given parameter vectors ``theta_s``.

    Parameters
    ----------
    config : FilterConfig
    params : array of shape (S, P)
        E.g. posterior draws from ``family.sample``.
    X : array or SciPy sparse matrix of shape (N, D)
        A sparse ``X`` is densified one block of rows at a time.

    Returns
    -------
    ndarray of shape (S, N, C)
        Class probabilities (categorical) or regression means (Gaussian).
    """
    params = jnp.asarray(params)
    if params.ndim != 2:
        raise ValueError(
            f"params must hold one flat parameter vector per row, shape (S, P), got shape {params.shape} "
            "(one vector: params[None])."
        )
    outs = []
    for block, n_rows in _padded_blocks(X, params.dtype):
        outs.append(np.asarray(_outputs_at(config, params, block))[:, :n_rows])
    return np.concatenate(outs, axis=1)


@_jit(static_argnames=("config", "n_samples"))
def _sample(config: FilterConfig, state, key, n_samples: int):
    return config.family.sample(state, key, n_samples)


def sample_posterior(config: FilterConfig, state, n_samples: int, key) -> np.ndarray:
    """``n_samples`` draws of the flat parameter vector from the belief, shape ``(S, P)``."""
    _positive_int("sample_posterior", "n_samples", n_samples)
    return np.asarray(_sample(config, state, key, int(n_samples)))
