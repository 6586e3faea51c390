"""The state-space side of the filter: time-varying dynamics, covariance inflation and an
online estimate of the observation noise (LO-FI Eq. 14, Appendices C.2 and E).

:class:`Dynamics` is a frozen value of the filter config. Its continuous parameters (the
inflation factor ``alpha``, the noise-estimate rate ``eps_min``) are traced
hyperparameters; what it holds statically is the *form*: which inflation, whether the
noise is estimated, and optional schedules ``t -> gamma_t`` and ``t -> q_t``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular

from ._predictive import output_moments

__all__ = [
    "INFLATIONS",
    "Dynamics",
    "LatentPrior",
    "latent_prior_at",
    "inflate",
    "innovation_terms",
    "noise_scale",
    "update_noise_estimate",
]

#: Covariance inflation of LO-FI Appendix E: discount the likelihood only ("bayesian",
#: E.1), the whole posterior ("simple", E.2), or the likelihood with the prior's
#: variance about the posterior mean ("hybrid", E.3).
INFLATIONS = ("bayesian", "simple", "hybrid")


class LatentPrior(NamedTuple):
    """The initial prior ``N(mean, precision^{-1} I)`` of the state-space model (LO-FI Eq. 75
    at ``t = 0``), which Bayesian and hybrid inflation mix back in.

    Attributes
    ----------
    mean : array of shape (P,)
        ``mu_0``.
    precision : array, scalar
        ``eta_0 = sigma0^{-2}``.
    """

    mean: jax.Array
    precision: jax.Array


#: The range of each hyperparameter (a constant, or a schedule's value) outside which the
#: filter's steps are not the model's: the predict step (LO-FI Eqs. 19-20) flips or inflates the mean for ``gamma``
#: outside (0, 1] and makes the covariance indefinite for ``q < 0``; a step of rate
#: ``alpha <= 0`` moves away from the data or not at all.
HYPERPARAMETER_RANGES = {
    "dynamics_decay": (lambda v: (v > 0) & (v <= 1), "in (0, 1]"),
    "process_noise": (lambda v: v >= 0, ">= 0"),
    "learning_rate": (lambda v: v > 0, "> 0"),
    "inflation": (lambda v: v >= 0, ">= 0"),
    "obs_noise_rate": (lambda v: (v >= 0) & (v <= 1), "in [0, 1]"),
}


@dataclass(frozen=True)
class Dynamics:
    """How the belief moves between observations and what the filter estimates online.

    Parameters
    ----------
    decay : callable or None
        ``decay(t) -> gamma_t``, a JAX-traceable function of the index ``t`` (int32) of a
        row in the stream, evaluated at every row of a step (see ``predict_step``),
        replacing the constant ``Hyperparameters.dynamics_decay``. None keeps the constant.
    process_noise : callable or None
        ``process_noise(t) -> q_t``, likewise (e.g. a burst of noise where the user knows
        that the task changes). None keeps the constant.
    inflation : {"bayesian", "simple", "hybrid"} or None
        Covariance inflation by ``1 + alpha`` before the predict step of each row (LO-FI
        Eqs. 79-81, 84-86, 89-91; compounded over the rows of a step), with ``alpha =
        Hyperparameters.inflation``. "bayesian" and "hybrid" need the latent prior of Eq.
        75, computed in closed form from constant dynamics: they refuse schedules.
    adaptive_obs_noise : bool
        Estimate the Gaussian observation variance online from the one-step-ahead
        residuals (LO-FI Eq. 66, per output) instead of keeping it fixed.
    noise_scaled_belief : bool
        With ``adaptive_obs_noise``: keep the belief of the model whose prior covariance
        shares the noise's scale (the noise-scaled prior of the normal-inverse-gamma model,
        ``Sigma_0 = c sigma0^2 I`` with noise ``c R_0``), at ``c = 1``. The filter steps at
        ``R_0 = Hyperparameters.reference_obs_noise`` and carries the online estimate
        ``R_t`` (LO-FI Eq. 66) as ``adaptive_obs_noise`` does; the model's covariance after
        a step is the belief's times ``c_t``, the mean over the outputs of ``R_t / R_0``. A
        Hessian curvature's updates are the same for every ``c`` (``J^T J / R`` scales as
        the prior), so its means are those of the fixed ``R_0``. An empirical-Fisher
        curvature's are not: ``J^T e e^T J / R^2`` estimates ``J^T J / R`` without bias only
        where the squared residuals average ``R`` (BONG Sec. 4.5), so its outer products are
        taken at the model's noise, i.e. divided by ``c_t`` in the belief's units. The
        recorded one-step-ahead predictives are the model's: their variances are scaled by
        ``R_t / R_0`` per output.
    innovation_scale : bool
        Keep the Gaussian observation variance fixed and also return the sum over the
        rows of the squared normalised innovation ``e^T (J Sigma_{t|t-1} J^T + R / w)^{-1}
        e``, ``e = y - f(x, mu_{t|t-1})`` (``innovation_terms``, one entry per output):
        divided by the outputs times the weight of the rows, it is the
        maximum-likelihood scale of the predictive variances (see
        ``BONGRegressor(obs_noise="calibrated")``). Given ``run_filter``'s
        ``innovation_start``, the recorded predictives of each step are scaled by the
        value of that scale before it.
    innovation_window : int, optional
        With ``innovation_scale``: also return, for each of the latest ``innovation_window``
        steps that had rows of positive weight, oldest first, the sum of its rows'
        normalised squared innovations over the outputs and its rows' total weight (an
        array of shape ``(innovation_window, 2)``, zeros in front where fewer steps were
        taken). Their sums give the scale's maximum-likelihood value on the latest rows
        alone; ``run_filter``'s ``innovation_start`` carries the window from a call to the
        next.
    """

    decay: Callable | None = None
    process_noise: Callable | None = None
    inflation: str | None = None
    adaptive_obs_noise: bool = False
    innovation_scale: bool = False
    noise_scaled_belief: bool = False
    innovation_window: int | None = None

    def __post_init__(self):
        for name, schedule in (("dynamics_decay", self.decay), ("process_noise", self.process_noise)):
            if schedule is not None:
                try:
                    hash(schedule)
                except TypeError:
                    # The compiled filter is keyed by its configuration, schedules included.
                    raise TypeError(
                        f"The {name} schedule must be hashable, as the filter compiled for it is cached by it; "
                        f"{type(schedule).__name__} is not. Use a function, or a frozen dataclass "
                        "(@dataclass(frozen=True)) with a __call__, which also pickles."
                    ) from None
                _check_schedule(name, schedule)
        if self.adaptive_obs_noise and self.innovation_scale:
            raise ValueError("adaptive_obs_noise and innovation_scale exclude each other: the one moves R, the other needs it fixed.")
        window = self.innovation_window
        if window is not None and not (self.innovation_scale and isinstance(window, int) and window >= 1):
            raise ValueError(
                "innovation_window is a number of steps, a positive int, of the innovation sums that innovation_scale "
                f"returns: it needs innovation_scale=True, got {window!r} with "
                f"innovation_scale={self.innovation_scale}."
            )
        if self.noise_scaled_belief and not self.adaptive_obs_noise:
            raise ValueError(
                "noise_scaled_belief scales the belief by the online noise estimate: it needs adaptive_obs_noise."
            )
        if self.inflation is not None and self.inflation not in INFLATIONS:
            raise ValueError(f"Unknown inflation {self.inflation!r}; choose one of {list(INFLATIONS)} or None.")
        if self.inflation in ("bayesian", "hybrid") and (self.decay is not None or self.process_noise is not None):
            raise ValueError(
                f"inflation={self.inflation!r} mixes in the latent prior of LO-FI Eq. 75, which skbong computes in "
                "closed form for constant dynamics; it cannot follow a decay or process-noise schedule. Use "
                "inflation='simple' with a schedule, or constant dynamics."
            )

    @property
    def needs_latent_prior(self) -> bool:
        """Whether the filter needs :class:`LatentPrior` (Bayesian and hybrid inflation)."""
        return self.inflation in ("bayesian", "hybrid")

    def check_schedule_ranges(self, first: int, n_rows: int) -> None:
        """Refuse a schedule that leaves its range at a row index ``t`` in ``[first, first +
        n_rows)``, the rows of a call over ``n_rows`` rows (passes included).

        Its constant must lie in the same range: ``0 < gamma_t <= 1`` and ``q_t >= 0``,
        finite. Outside it the predict step (LO-FI Eqs. 19-20) flips or inflates the mean
        and can make the covariance indefinite, which the filter would otherwise report as
        a generic invalid posterior, or not at all (a negative ``gamma`` learns at chance).
        Evaluated before the filter runs, so a refusal loses nothing; one small compiled
        program per schedule and power-of-two number of rows.

        Raises
        ------
        ValueError
            Naming the schedule, the first offending ``t`` and its value.
        """
        size = 1 << max(int(n_rows) - 1, 0).bit_length()
        t = np.arange(first, first + size, dtype=np.int32)
        for name, schedule in (("dynamics_decay", self.decay), ("process_noise", self.process_noise)):
            valid, expected = HYPERPARAMETER_RANGES[name]
            if schedule is None:
                continue
            values = np.asarray(_schedule_values(schedule, t))[:n_rows]
            bad = ~(np.isfinite(values) & valid(values))
            if bad.any():
                at = int(np.argmax(bad))
                raise ValueError(
                    f"The {name} schedule gave {float(values[at]):.6g} at t = {first + at} (the index of the row); it "
                    f"must be finite and {expected} at every row, as a constant {name} must."
                )

    def at(self, t: jax.Array, decay: jax.Array, process_noise: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(gamma_t, q_t)`` of the predict step before the row of index ``t``."""
        dtype = decay.dtype
        gamma = decay if self.decay is None else jnp.asarray(self.decay(t), dtype)
        q = process_noise if self.process_noise is None else jnp.asarray(self.process_noise(t), dtype)
        return gamma, q


@partial(jax.jit, static_argnums=0)
def _schedule_values(schedule: Callable, t: jax.Array) -> jax.Array:
    """``schedule`` at every index of ``t`` (compiled once per schedule and length)."""
    return jax.vmap(schedule)(t)


@lru_cache(maxsize=128)
def _check_schedule(name: str, schedule: Callable) -> None:
    """Refuse a schedule ``t -> value`` that does not give one real number per row.

    The filter calls it inside its compiled scan with ``t`` a JAX int32 scalar; traced here
    once (``jax.eval_shape``: nothing is computed), what is wrong with it is said in its
    own terms instead of those of the filter's internals. A schedule that passed is not
    traced again: the estimators build their :class:`Dynamics` on every call, and the
    trace cost a one-row ``partial_fit`` about 0.5 ms (a refusal raises, so it is never
    cached)."""
    try:
        out = jax.eval_shape(schedule, jax.ShapeDtypeStruct((), jnp.int32))
    except Exception as error:  # whatever the user's function raised while traced
        raise TypeError(
            f"The {name} schedule could not be traced. The filter calls it inside its compiled scan with t, the "
            "index of the row, a JAX int32 scalar: write it with jax.numpy (e.g. "
            f"jnp.where(t < 1000, a, b), not Python if/else on t). Tracing it raised {type(error).__name__}: {error}"
        ) from error
    real = isinstance(out, jax.ShapeDtypeStruct) and (
        jnp.issubdtype(out.dtype, jnp.floating) or jnp.issubdtype(out.dtype, jnp.integer)
    )
    if not (real and out.shape == ()):
        got = f"shape {out.shape} and dtype {out.dtype}" if isinstance(out, jax.ShapeDtypeStruct) else repr(out)
        raise TypeError(f"The {name} schedule must return one real number (a scalar) per row; it returned {got}.")


def latent_prior_at(n_steps: jax.Array, prior: LatentPrior, decay, process_noise) -> tuple[jax.Array, jax.Array]:
    """``(Gamma_k mu_0, eta_k)`` after ``k = n_steps`` predict steps of constant dynamics.

    LO-FI Eqs. 76-77: ``eta_k^{-1} = gamma^2 eta_{k-1}^{-1} + q`` and ``Gamma_k = gamma^k``, so
    ``eta_k^{-1} = gamma^{2k} / eta_0 + q (1 - gamma^{2k}) / (1 - gamma^2)`` (``q k`` at
    ``gamma = 1``), written with ``expm1`` so that ``gamma`` near 1 loses no digits.
    """
    k = jnp.asarray(n_steps, decay.dtype)
    log_decay = jnp.log(decay)
    ratio = jnp.where(decay == 1, k, jnp.expm1(2 * k * log_decay) / jnp.where(decay == 1, 1.0, jnp.expm1(2 * log_decay)))
    variance = jnp.exp(2 * k * log_decay) / prior.precision + process_noise * ratio
    return jnp.exp(k * log_decay) * prior.mean, 1.0 / variance


def inflate(family, state, kind: str, alpha, latent_mean=None, latent_precision=None):
    """Inflate the posterior before the predict step (LO-FI Appendix E; F.6 for spherical).

    With the belief's precision ``Lambda`` and ``eta = latent_precision``:

    * "simple" (Eqs. 84-86): ``Lambda / (1 + alpha)``, mean unchanged;
    * "hybrid" (Eqs. 89-91): ``(Lambda + alpha eta I) / (1 + alpha)``, mean unchanged;
    * "bayesian" (Eqs. 79-81): the hybrid precision, and the mean pulled towards the
      latent prior mean ``Gamma mu_0``:
      ``mu + alpha eta / (1 + alpha) Lambda_hat^{-1} (Gamma mu_0 - mu)``.

    For diagonal-plus-low-rank precisions ``Upsilon + W W^T`` these are Eqs. 80-81:
    ``Upsilon`` moves and ``W`` is divided by ``sqrt(1 + alpha)``; a spherical ``Upsilon =
    eta I`` stays as it is under the Bayesian and hybrid forms (Eqs. 121, 127).
    """
    scale = 1.0 / (1.0 + alpha)
    if kind == "simple":
        return family.rescale_precision(state, scale, 0.0)
    shift = alpha * latent_precision * scale
    inflated = family.rescale_precision(state, scale, shift)
    if kind == "hybrid":
        return inflated
    pull = family.covariance_dot(inflated, latent_mean - state.mean)
    return inflated._replace(mean=state.mean + shift * pull)


def innovation_terms(apply_fn, family, prior, x, y, weight, obs_noise):
    """Squared whitened one-step-ahead innovations of the rows of one step, summed over
    the rows: one entry per output, whose sum is ``sum_b e_b^T (V_b + R / w_b)^{-1} e_b``.

    ``e = y - f(x, mu_{t|t-1})`` is the residual of a row before its update and ``V =
    J Sigma_{t|t-1} J^T`` its linearised output covariance (LO-FI Eqs. 59-61). A row of
    weight ``w`` is an observation with noise ``R / w`` (the tempered likelihood), so it
    counts as ``w`` repeated rows: ``e^T (V + R / w)^{-1} e`` is the squared norm of their
    mean's innovation, and the repeats add nothing more because they agree. A row of
    weight 0 adds 0. The entries come from a Cholesky factor of ``w V + R``; only their
    sum is meaningful when the outputs are correlated.

    For a Gaussian likelihood with linearised updates the filter is invariant under
    ``Sigma_0 -> c Sigma_0, R -> c R`` (and ``q -> c q``): every Kalman gain, hence every
    mean, is unchanged, and every ``V + R`` is multiplied by ``c``. The log-likelihood of
    the one-step-ahead predictions of ``N`` (weighted) rows of ``C`` outputs is therefore
    maximised at ``c = S / (C N)``, ``S`` the sum of these terms over the stream: the
    normalised innovation squared of Kalman-filter consistency tests, ``C`` in
    expectation per row when the model's scale is right. In a linear-Gaussian model ``S``
    is the quadratic form of the joint marginal of all the targets, whatever their order.
    """
    f, cov = output_moments(apply_fn, family, prior, x)
    w = weight[:, None, None]
    joint = w * cov + jnp.eye(cov.shape[-1], dtype=cov.dtype) * obs_noise  # w V + diag(R)
    chol = jnp.linalg.cholesky(joint)
    whitened = solve_triangular(chol, (y - f)[..., None], lower=True)[..., 0]
    return jnp.sum(weight[:, None] * whitened**2, axis=0)


def noise_scale(terms, n_observations):
    """The fitted scale ``c`` of the noise and the prior covariance, from the sum ``S`` of
    the normalised squared innovations (``innovation_terms``) of ``N`` observations
    (outputs times the rows' total weight): ``c = (S / N)^(N / (N + 1))``, and 1 before
    any observation.

    ``S / N`` maximises the likelihood of the one-step-ahead predictions. As a function of
    ``log c`` that log-likelihood, ``-N/2 log c - S / (2c)``, has its peak at ``log(S / N)``
    with curvature ``N / 2``: each observation carries information ``1 / 2`` on ``log c``.
    One pseudo-observation at ``c = 1`` of that weight, a Gaussian prior on ``log c`` of
    variance 2, moves the peak of the log-likelihood's quadratic approximation there to
    ``N / (N + 1)`` of ``log(S / N)``: a first row cannot set ``c`` alone
    (one row's ``S / N`` of 0.01 or 4 gives 0.1 or 2), and the pull is the same factor
    whether ``c`` is far below 1 (targets nearly free of noise) or above. A pseudo-row
    added to ``S`` and ``N`` instead pulls ``c`` up by ``1 / (N + 1)``: on 150 rows of a
    linear target whose noise is 0.03% of ``R_0``, 25 times the scale. ``S / N`` is
    floored at the square of the dtype's resolution, for innovations that are all 0
    (a constant target). On host values (numpy) it is computed in float64 by numpy, so that
    equal sums give the same scale to the last digit."""
    xp = jnp if isinstance(terms, jax.Array) or isinstance(n_observations, jax.Array) else np
    terms = xp.asarray(terms, None if xp is jnp else np.float64)
    count = xp.asarray(n_observations, terms.dtype)
    floor = xp.finfo(terms.dtype).eps ** 2
    mean = xp.maximum(terms / xp.maximum(count, floor), floor)
    return xp.exp(count / (count + 1.0) * xp.log(mean))


def latest_noise_scale(scale, latest, n_outputs: int):
    """The scale ``c`` from ``scale`` (:func:`noise_scale` of the sums over all the rows) and
    the window of the latest steps' sums ``latest`` (``(W, 2)``, ``Dynamics.innovation_window``):
    the window's own scale where it is smaller. The mean over all the rows keeps the errors
    of the first rows, predicted near the prior, which can set it alone. A window without a
    step of weight leaves ``scale`` (its own would be 1, the scale before any row). On host
    values computed by numpy, as :func:`noise_scale`."""
    xp = jnp if isinstance(scale, jax.Array) or isinstance(latest, jax.Array) else np
    latest_terms, latest_weight = xp.sum(latest, axis=0)
    windowed = xp.minimum(scale, noise_scale(latest_terms, n_outputs * latest_weight))
    return xp.where(latest_weight > 0, windowed, scale)


def update_noise_estimate(obs_noise, residual, weight, n_rows, rate):
    """LO-FI Eq. 66 per output, ``R <- (1 - eps) R + eps e^2``, over the rows of one step.

    ``e^2`` is the weighted mean over the step's rows of the squared one-step-ahead residual
    ``y - h(x, mu_{t|t-1})``; ``eps = max(rate, 1 / (k + 2))`` at the row that follows ``k``
    rows, so the initial value counts as one observation (Eq. 66 with ``eps_t = max(eps_min,
    1/t)`` would replace it by the first squared residual). The estimate moves per
    observation, whatever the rows of a step, and row weights count as repeats, as in the
    update: rows of total weight ``W`` with that mean residual, after ``k = n_rows`` rows,
    move ``R`` as ``W`` rows of it would, ``R <- c R + (1 - c) e^2`` with ``c`` the product
    of their ``1 - eps``: ``(k + 1) / (k + 1 + m)`` over the ``m`` rows at which
    ``1 / (k + 2 + i)`` exceeds ``rate`` (a running mean: ``R = (R_0 + sum e^2) / (k + 1)``
    at ``rate = 0``), times ``(1 - rate)`` for each later row. So ``rate`` is a forgetting
    rate per row and the running mean is the same at any ``batch_size`` (steps of 8 rows
    gave 3.13 for a running mean of 3.49 when each took ``(1 - 1/(k + 2))^W``); a step
    without weight leaves ``R``.
    """
    total = jnp.sum(weight)
    squared = jnp.sum(weight[:, None] * residual**2, axis=0) / jnp.where(total > 0, total, 1.0)
    seen = jnp.asarray(n_rows, obs_noise.dtype) + 1.0  # the initial value counts as one
    # Rows (of the step's weight) taken while 1 / (k + 2 + i) > rate: all of them at rate 0.
    harmonic = jnp.where(rate > 0, jnp.ceil(1.0 / jnp.where(rate > 0, rate, 1.0) - seen - 1.0), jnp.inf)
    harmonic = jnp.clip(harmonic, 0.0, total)
    keep = seen / (seen + harmonic) * (1 - rate) ** (total - harmonic)
    return keep * obs_noise + (1 - keep) * squared
