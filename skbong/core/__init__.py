"""Pure-JAX core of skbong: likelihoods, Gaussian families, curvature estimators,
update rules and the filter loop. Nothing here imports scikit-learn.

The functional entry point is :func:`filter_posterior`::

    import jax.numpy as jnp
    from skbong.core import filter_posterior

    def apply(theta, x):            # any pure f(params_flat, x_batch) -> (B, C)
        return x @ theta[:, None]

    state = filter_posterior(apply, jnp.zeros(3), X, y[:, None],
                             likelihood="gaussian", family="fc", sigma0=1.0, obs_noise=0.5)
    state.mean, state.cov

:func:`run_sweep` runs a batch of hyperparameter values (prior scales, observation noise,
learning rates, process noise, seeds) side by side in one compiled scan.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from ._config import (
    ALGORITHMS,
    DIAG_STEPS,
    EXTRA_FAMILIES,
    FAMILIES,
    HESSIANS,
    LIKELIHOODS,
    PREDICTIVES,
    UNDEFINED,
    FilterConfig,
    make_config,
    make_predictive,
    undefined_reason,
)
from ._curvature import (
    Curvature,
    DenseCurvature,
    DenseFactors,
    DenseLayer,
    DenseNetwork,
    DiagonalCurvature,
    LinearizedEF,
    LinearizedHessian,
    LowRankCurvature,
    MonteCarloEF,
    MonteCarloHessian,
)
from ._dynamics import INFLATIONS, Dynamics, LatentPrior
from ._families import (
    Diagonal,
    DiagonalLowRank,
    DiagonalMoment,
    DiagState,
    DLRState,
    FullCovariance,
    FullCovarianceMoment,
    FullCovDeferred,
    FullCovState,
)
from ._filter import (
    DENSE_CHUNK_BYTES,
    MAX_STEP_WEIGHT,
    MAX_SUBSTEPS,
    PREDICT_CHUNK,
    DENSE_PREDICT_FROM,
    DENSE_PREDICT_ROWS,
    STEP_BUCKETS,
    Hyperparameters,
    _is_sparse,
    belief_is_valid,
    forecast_belief,
    init_belief,
    init_sweep,
    predict_at,
    predict_distribution,
    predict_step,
    prior_output_spread,
    run_filter,
    run_sweep,
    sample_posterior,
    trace_count,
    update_step,
)
from ._likelihoods import Categorical, Gaussian
from ._activations import ACTIVATIONS
from ._predictive import (
    CategoricalPredictive,
    GaussianPredictive,
    LinearizedGaussian,
    LinearizedMonteCarlo,
    MonteCarlo,
    PluginPredictive,
    Probit,
    output_moments,
)
from ._rules import BBB, BLR, BOG, BONG, UpdateRule, apply_rule
from ._rvga import ExplicitRVGA, GaussHermite, ImplicitRVGA, InverseProbit, LinearGaussian, Logistic, run_rvga, rvga_step

#: Names defined in ``_models``, which imports flax (about 0.3 s, more where IPython is
#: installed): loaded at first use, so that ``import skbong`` does not pay for it.
_NETWORK_NAMES = frozenset(
    "MLP MLPSpec ModuleSpec PatchConv build_module flatten_module has_convolution module_params "
    "parameter_fan_in".split()
)


def __getattr__(name: str):
    if name in _NETWORK_NAMES:
        from . import _models

        return getattr(_models, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ACTIVATIONS",
    "ALGORITHMS",
    "BBB",
    "BLR",
    "BOG",
    "BONG",
    "Categorical",
    "Curvature",
    "DenseCurvature",
    "DIAG_STEPS",
    "DiagonalCurvature",
    "DLRState",
    "DiagState",
    "Diagonal",
    "DiagonalLowRank",
    "DiagonalMoment",
    "Dynamics",
    "EXTRA_FAMILIES",
    "FAMILIES",
    "FilterConfig",
    "FullCovDeferred",
    "FullCovState",
    "FullCovariance",
    "FullCovarianceMoment",
    "Gaussian",
    "HESSIANS",
    "Hyperparameters",
    "INFLATIONS",
    "LatentPrior",
    "LIKELIHOODS",
    "LinearizedEF",
    "LinearizedHessian",
    "LowRankCurvature",
    "DenseFactors",
    "DenseLayer",
    "DenseNetwork",
    "MLP",
    "MLPSpec",
    "ModuleSpec",
    "MonteCarloEF",
    "MonteCarloHessian",
    "PatchConv",
    "MAX_STEP_WEIGHT",
    "MAX_SUBSTEPS",
    "PREDICT_CHUNK",
    "DENSE_PREDICT_ROWS",
    "DENSE_PREDICT_FROM",
    "DENSE_CHUNK_BYTES",
    "STEP_BUCKETS",
    "UNDEFINED",
    "UpdateRule",
    "apply_rule",
    "build_module",
    "filter_posterior",
    "flatten_module",
    "has_convolution",
    "module_params",
    "parameter_fan_in",
    "make_config",
    "predict_at",
    "predict_distribution",
    "forecast_belief",
    "predict_step",
    "prior_output_spread",
    "sample_posterior",
    "CategoricalPredictive",
    "GaussianPredictive",
    "LinearizedGaussian",
    "LinearizedMonteCarlo",
    "MonteCarlo",
    "PluginPredictive",
    "Probit",
    "PREDICTIVES",
    "make_predictive",
    "output_moments",
    "run_filter",
    "run_sweep",
    "init_sweep",
    "init_belief",
    "belief_is_valid",
    "trace_count",
    "update_step",
    "undefined_reason",
    "ExplicitRVGA",
    "GaussHermite",
    "ImplicitRVGA",
    "InverseProbit",
    "LinearGaussian",
    "Logistic",
    "run_rvga",
    "rvga_step",
]


def filter_posterior(
    apply_fn: Callable[[jax.Array, jax.Array], jax.Array],
    init_mean: jax.Array,
    X,
    Y,
    *,
    likelihood: str = "gaussian",
    family: str = "dlr",
    rank: int = 10,
    algorithm: str = "bong",
    hessian: str = "lin_hess",
    sigma0: float = 1.0,
    obs_noise: float = 1.0,
    dynamics_decay: float = 1.0,
    process_noise: float = 0.0,
    learning_rate: float = 1.0,
    n_inner_steps: int = 1,
    n_mc_samples: int = 10,
    diag_step: str = "kalman",
    cov_floor: float = 0.0,
    dynamics: Dynamics | None = None,
    backtrack: bool | str = False,
    inflation: float = 0.0,
    obs_noise_rate: float = 0.0,
    reference_obs_noise: float | None = None,
    batch_size: int = 1,
    state=None,
    n_seen: int = 0,
    key: jax.Array | None = None,
    sample_weight=None,
):
    """Run an online Bayesian filter over ``(X, Y)`` and return the posterior belief.

    It runs on the host, feeding compiled chunks of rows to the device, so it cannot itself
    be traced by ``jax.jit`` or differentiated by ``jax.grad`` (``jax.vmap`` over a
    hyperparameter such as ``sigma0`` works); inside a program of your own, call
    :func:`predict_step` (where the weights drift) and :func:`update_step` in a
    ``jax.lax.scan``. Gradients through such a scan are those of the recursion for
    ``fc``, ``diag`` and ``dlr`` of rank 1 (a probe: finite differences agree to 5 digits);
    for ``dlr`` and ``slr`` of rank 2 or more they are NaN, since the low-rank projection
    takes an eigendecomposition (Eqs. 273-275) whose eigenvalues repeat (the factor starts
    at zero), where its derivative is undefined.

    Parameters
    ----------
    apply_fn : callable
        Pure ``apply_fn(params_flat, x)`` mapping parameters ``(P,)`` and a batch
        ``(B, D)`` to outputs ``(B, C)`` (means for "gaussian", logits for "categorical").
        Compiled code is cached per function object: pass the same object to reuse it.
    init_mean : array of shape (P,)
        Prior mean ``mu_0``; its dtype is the computation dtype.
    X : array of shape (N, D)
    Y : array of shape (N, C)
        Targets; one-hot rows for "categorical".
    likelihood : {"gaussian", "categorical"}, default="gaussian"
    family : {"fc", "fc_mom", "diag", "diag_mom", "dlr", "slr"}, default="dlr"
        "slr": spherical LO-FI (LO-FI Appendix F).
    rank : int, default=10
        Rank of the low-rank precision term (``family="dlr"`` or "slr").
    algorithm : str, default="bong"
    hessian : str, default="lin_hess"
    sigma0 : float or array of shape (P,), default=1.0
        Prior standard deviation: ``theta ~ N(init_mean, sigma0^2 I)``, or
        ``N(init_mean, diag(sigma0^2))`` with one scale per parameter.
    obs_noise : float or array of shape (C,), default=1.0
        Observation variance ``R`` of the Gaussian likelihood.
    dynamics_decay, process_noise : float
        ``gamma`` and ``q`` of the predict step ``mu <- gamma mu``, ``Sigma <- gamma^2 Sigma +
        q I`` (``1`` and ``0``: static parameters). ``gamma < 1`` needs ``q > 0``: without it
        every step shrinks the mean and the covariance until the belief collapses to 0 and
        learns nothing, without an error (``q = (1 - gamma^2) sigma0^2`` keeps the prior's
        variance). The estimators warn of it; this function does not check.
    learning_rate : float, default=1.0
        ``alpha`` of BLR, BOG and BBB; BONG always takes a unit step.
    n_inner_steps : int, default=1
        Inner iterations ``I`` of BLR and BBB.
    n_mc_samples : int, default=10
        Draws ``M`` of the Monte-Carlo estimators.
    diag_step : {"kalman", "projected"}, default="kalman"
        BONG step of the diagonal families (see :func:`make_config`).
    cov_floor : float, default=0.0
        ``eps`` of the categorical linearised observation covariance
        ``diag(p) - p p^T + eps I`` (:class:`Categorical`).
    dynamics : Dynamics, optional
        Decay and process-noise schedules, covariance inflation, online noise estimate.
        A schedule is evaluated at the indices ``t`` of this call's rows, from
        ``n_seen``; one that leaves its range there (``0 < gamma_t <= 1``, ``q_t >= 0``,
        finite) raises ``ValueError`` before the filter runs.
    backtrack : bool or "auto", default=False
        Backtracking line search on the mean step (see :func:`make_config`).
    inflation : float, default=0.0
        ``alpha`` of the inflation that ``dynamics`` names.
    obs_noise_rate : float, default=0.0
        ``eps_min`` of the online noise estimate (LO-FI Eq. 66).
    reference_obs_noise : float or array of shape (C,), optional
        ``R_0`` of a noise-scaled belief (``Dynamics(noise_scaled_belief=True)``);
        ``obs_noise`` by default, where the estimate starts. A call that goes on from an
        earlier one's ``state`` and final ``obs_noise`` passes the first call's.
    batch_size : int, default=1
        Observations per filter step.
    state : belief state, optional
        Continue from this belief instead of the prior.
    n_seen : int, default=0
        Number of rows that ``state`` has already absorbed. This call's rows are then rows
        ``n_seen, n_seen + 1, ...`` of the stream: for the schedules of ``dynamics``, for
        the prior that inflation pulls towards, and for the random draws of the
        stochastic estimators (step ``t`` draws with ``fold_in(key, n_seen + t *
        batch_size)``). A stream fed in chunks, each call passing the rows absorbed so
        far, then gives the belief of one call over all of its rows (for a
        ``batch_size`` that divides the chunks' lengths), to round-off: bit for bit
        except for ``dlr``, whose carried Gram matrix is formed anew at each call.
    key : PRNG key, optional
        Randomness of stochastic estimators.
    sample_weight : array of shape (N,), optional
        Non-negative row weights: row ``n`` enters as the tempered likelihood
        ``p(y_n | x_n, theta)^{w_n}`` (see :func:`run_filter`).

    Returns
    -------
    state : FullCovState, DiagState or DLRState
        As the filter left it, checked for nothing: a belief that broke down (a step that
        overshot, e.g. ``fc_mom`` at a large ``sigma0``) comes back with NaN or a covariance
        that is not positive definite. Test it with :func:`belief_is_valid`, or take
        ``run_filter(..., return_valid=True)``; the estimators raise ``FloatingPointError``.
    obs_noise : array of shape (C,)
        Only when ``dynamics`` estimates the observation noise: the final estimate.
    """
    config = make_config(
        apply_fn, likelihood, family, rank, algorithm, hessian, n_inner_steps, n_mc_samples, diag_step, cov_floor,
        dynamics, backtrack,
    )
    if dynamics is not None:
        dynamics.check_schedule_ranges(n_seen, jnp.shape(Y)[0])
    mean0 = jnp.asarray(init_mean)
    if mean0.ndim != 1 or mean0.dtype not in (jnp.float32, jnp.float64):
        # float16 and bfloat16 are floating-point too, but the filter's linear algebra
        # (eigh, Cholesky) has no kernels for them: a NotImplementedError(KeyError) before.
        raise ValueError(
            f"init_mean must be a 1-D float32 or float64 array (the prior mean of the P parameters, in the "
            f"dtype the filter computes in), got shape {mean0.shape} and dtype {mean0.dtype}."
        )
    if np.shape(sigma0) not in ((), (1,), mean0.shape):
        # A (P, P) matrix was taken elementwise, its off-diagonal entries silently dropped.
        raise ValueError(
            f"sigma0 must be one prior standard deviation or one per parameter, shape {mean0.shape}; got shape "
            f"{np.shape(sigma0)} (a prior covariance matrix is not accepted: pass its square-root diagonal)."
        )
    if not isinstance(sigma0, jax.core.Tracer) and not np.all(np.isfinite(sigma0) & (np.asarray(sigma0) > 0)):
        # (vmap may trace it)
        raise ValueError(f"sigma0 must be positive and finite (the prior standard deviation), got {sigma0!r}.")
    for name, value, used in (
        ("inflation", inflation, dynamics is not None and dynamics.inflation is not None),
        ("obs_noise_rate", obs_noise_rate, dynamics is not None and dynamics.adaptive_obs_noise),
    ):
        if not used and not isinstance(value, jax.core.Tracer) and np.any(np.asarray(value) != 0):
            raise ValueError(
                f"{name}={value!r} has no effect: the dynamics do not name "
                f"{'an inflation' if name == 'inflation' else 'an online noise estimate'} "
                f"(pass dynamics=Dynamics({'inflation=...' if name == 'inflation' else 'adaptive_obs_noise=True'}))."
            )
    if not _is_sparse(X) and not np.all(np.isfinite(np.asarray(X))):
        raise ValueError("X holds NaN or infinite values.")
    if state is None:
        state = config.family.init(mean0, jnp.asarray(sigma0, mean0.dtype))
    reference = obs_noise if reference_obs_noise is None else reference_obs_noise
    hyper = Hyperparameters(obs_noise, dynamics_decay, process_noise, learning_rate, inflation, obs_noise_rate, reference)
    return run_filter(
        config, state, X, Y, hyper, batch_size=batch_size, key=key, n_seen=n_seen, sample_weight=sample_weight,
        latent_prior=LatentPrior(mean0, 1.0 / jnp.asarray(sigma0, mean0.dtype) ** 2),
    )
