"""Recursive variational Gaussian approximation (R-VGA) for generalised linear models.

Lambert, Bonnabel and Bach, "The recursive variational Gaussian approximation (R-VGA)":
at each observation the belief ``q_t = N(mu_t, P_t)`` is the Gaussian closest in KL to
``p(y_t | theta) q_{t-1}(theta)`` (Algorithm 1). Its stationarity conditions are the
implicit scheme, Eqs. 3-4 (= 28-29),

``mu_t = mu_{t-1} + P_{t-1} E_{q_t}[grad log p(y_t | theta)]`` and
``P_t^{-1} = P_{t-1}^{-1} - E_{q_t}[hess log p(y_t | theta)]``,

and the explicit scheme, Eqs. 30-31, takes the expectations under ``q_{t-1}`` instead and
moves the mean with ``P_t``.

For a likelihood that depends on ``theta`` only through ``a = x^T theta`` the expectations
are ``x E[g(a)]`` and ``x x^T E[h(a)]`` with ``g, h`` the first two derivatives of
``log p(y | a)`` in ``a`` and ``a ~ N(x^T mu, x^T P x)`` (R-VGA Sec. 5.1). Both schemes then
need only these two 1-D expectations, and the implicit one only the two scalars
``alpha = x^T mu_t`` and ``v = x^T P_t x`` (Sec. 5.2, Eqs. 64-66). Once they are known the
update is a rank-one Woodbury step in ``O(d^2)`` (Eqs. 76-77).

Three values choose a run, each passed in (none is a branch hidden in a name):

* the scheme: :class:`ImplicitRVGA` (Eqs. 73-77) or :class:`ExplicitRVGA` (Eqs. 78-80);
* the model: :class:`Logistic` (Sec. 5) or :class:`LinearGaussian` (Sec. 4.1);
* for :class:`Logistic`, the 1-D integrals: :class:`InverseProbit`, the paper's closed forms
  (Eq. 58), or :class:`GaussHermite` quadrature, which converges to the exact expectations
  of Eqs. 56-57.

The belief is a :class:`~skbong.core.FullCovState`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Union

import jax
import jax.numpy as jnp
import numpy as np

from ._config import _positive_int
from ._families import FullCovState

__all__ = [
    "InverseProbit",
    "GaussHermite",
    "Logistic",
    "LinearGaussian",
    "ImplicitRVGA",
    "ExplicitRVGA",
    "rvga_step",
    "run_rvga",
]

_BETA = math.sqrt(8.0 / math.pi)  # beta = 1 / lambda of the inverse-probit fit sigma(a) ~ Phi(lambda a)


@dataclass(frozen=True)
class InverseProbit:
    """The R-VGA paper's closed forms for the logistic expectations (Sec. 5.1, Eq. 58).

    With ``a ~ N(m, v)`` and ``k = beta / sqrt(v + beta^2)``, ``beta = sqrt(8 / pi)`` (Eq. 59):
    ``E[sigma(a)] ~ sigma(k m)`` and ``E[sigma'(a)] ~ k sigma'(k m)``, from
    ``sigma(a) ~ Phi(a / beta)`` (Barber and Bishop) and ``sigma'(a) ~ N(a | 0, beta^2)``
    (Daunizeau). Both are exact in the limits ``v -> 0`` and ``|m| -> inf``.
    """

    def logistic_moments(self, mean: jax.Array, var: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(E[sigma(a)], E[sigma'(a)])`` for ``a ~ N(mean, var)``; scalars."""
        k = _BETA / jnp.sqrt(var + _BETA**2)
        s = jax.nn.sigmoid(k * mean)
        return s, k * s * (1 - s)


@dataclass(frozen=True)
class GaussHermite:
    """Gauss-Hermite quadrature of the logistic expectations (R-VGA Eqs. 56-57, no fit).

    ``E[f(a)] ~ sum_i w_i f(m + sqrt(v) z_i)`` with the ``n_points`` nodes of the weight
    ``exp(-z^2 / 2)``. Exact for polynomials of degree ``< 2 n_points``; for the sigmoid the
    error falls exponentially in ``sqrt(n_points)`` at a rate set by ``pi / sqrt(v)``, the
    distance of its poles from the real axis, so wide beliefs need more points.

    Parameters
    ----------
    n_points : int, default=32
    """

    n_points: int = 32

    def __post_init__(self):
        _positive_int("GaussHermite", "n_points", self.n_points)

    def logistic_moments(self, mean: jax.Array, var: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(E[sigma(a)], E[sigma'(a)])`` for ``a ~ N(mean, var)``; scalars."""
        nodes, weights = np.polynomial.hermite_e.hermegauss(self.n_points)
        nodes = jnp.asarray(nodes, jnp.result_type(mean))
        weights = jnp.asarray(weights / math.sqrt(2 * math.pi), nodes.dtype)
        s = jax.nn.sigmoid(mean + jnp.sqrt(var) * nodes)
        return weights @ s, weights @ (s * (1 - s))


@dataclass(frozen=True)
class Logistic:
    """Binary labels ``y in {0, 1}`` with ``p(y = 1 | theta) = sigma(x^T theta)`` (R-VGA Sec. 5).

    Parameters
    ----------
    integrals : InverseProbit or GaussHermite, default=InverseProbit()
        How the 1-D expectations of Eqs. 56-57 are computed.
    """

    integrals: Union[InverseProbit, GaussHermite] = InverseProbit()

    def __post_init__(self):
        if not isinstance(self.integrals, (InverseProbit, GaussHermite)):
            raise TypeError(f"Logistic: integrals must be InverseProbit() or GaussHermite(n), got {self.integrals!r}")

    def expected_derivatives(self, mean, var, y, obs_noise) -> tuple[jax.Array, jax.Array]:
        """``E[d log p / da]`` and ``E[d^2 log p / da^2]`` for ``a ~ N(mean, var)``: Eqs. 56-57,
        ``y - E[sigma(a)]`` and ``-E[sigma'(a)]``. ``obs_noise`` is unused."""
        del obs_noise
        s, ds = self.integrals.logistic_moments(mean, var)
        return y - s, -ds

    def score_bracket(self, alpha0, y, obs_noise) -> tuple[jax.Array, jax.Array]:
        """Bounds ``y - 1 <= E[g] <= y`` of the expected score under any belief (Eq. 71)."""
        del alpha0, obs_noise
        return y - 1, y

    def max_curvature(self, obs_noise) -> float:
        """Bound ``1/4`` of ``-E[h] = E[sigma'(a)]`` (Eq. 72)."""
        del obs_noise
        return 0.25


@dataclass(frozen=True)
class LinearGaussian:
    """``y ~ N(x^T theta, obs_noise)``: Bayesian linear regression (R-VGA Sec. 4.1).

    The derivatives of ``log p`` in ``a`` are ``(y - a) / R`` and ``-1 / R``, so their
    expectations are exact in closed form and both schemes are the Kalman filter (Theorem 2).
    """

    def expected_derivatives(self, mean, var, y, obs_noise) -> tuple[jax.Array, jax.Array]:
        """``((y - mean) / R, -1 / R)``; ``var`` is unused."""
        del var
        return (y - mean) / obs_noise, -jnp.ones_like(mean) / obs_noise

    def score_bracket(self, alpha0, y, obs_noise) -> tuple[jax.Array, jax.Array]:
        """Bounds of ``E_{q_t}[g] = (y - x^T mu_t) / R``: ``x^T mu_t`` lies between the prior
        prediction ``alpha_0`` and the target ``y``."""
        return jnp.zeros_like(alpha0), (y - alpha0) / obs_noise

    def max_curvature(self, obs_noise):
        """``-E[h] = 1 / R``."""
        return 1 / obs_noise


_Model = Union[Logistic, LinearGaussian]


@dataclass(frozen=True)
class ExplicitRVGA:
    """The explicit (approximate) R-VGA, Eqs. 30-31, for logistic regression Eqs. 78-80.

    Expectations under ``q_{t-1}``: ``alpha_0 = x^T mu_{t-1}``, ``v_0 = x^T P_{t-1} x``. The
    mean moves with ``P_t`` (the paper's choice, exact in the linear-Gaussian case), i.e.
    ``P_t x = P_{t-1} x / (1 + v_0 c)`` with ``c = -E[h]``.
    """

    def step_scalars(self, model: _Model, alpha0, v0, y, obs_noise) -> tuple[jax.Array, jax.Array]:
        """``(gain, c)``: ``mu_t = mu_{t-1} + gain P_{t-1} x`` and ``P_t^{-1} = P_{t-1}^{-1} + c x x^T``."""
        g, h = model.expected_derivatives(alpha0, v0, y, obs_noise)
        return g / (1 - v0 * h), -h


def _illinois(fn, lo, hi, max_iter: int):
    """A root of the scalar ``fn`` between ``lo`` and ``hi``, where its values differ in sign.

    Regula falsi with the Illinois modification (the stale end's value is halved), which
    keeps the bracket and converges superlinearly. Stops at an exact zero, a bracket of a
    few ulps, or ``max_iter`` evaluations.
    """
    f_lo, f_hi = fn(lo), fn(hi)
    eps = jnp.finfo(jnp.result_type(lo)).eps

    def unfinished(carry):
        a, fa, b, fb, it = carry
        return (it < max_iter) & (fb != 0) & (jnp.abs(b - a) > 4 * eps * jnp.maximum(jnp.abs(b), 1.0))

    def secant(carry):
        a, fa, b, fb, it = carry
        c = b - (b - a) * (fb / (fb - fa))  # the ratio in [0, 1] first: fb (b - a) may underflow
        # Rounding may put c outside the bracket when fa ~ fb; bisect then.
        inside = (c - jnp.minimum(a, b)) * (jnp.maximum(a, b) - c) >= 0
        c = jnp.where(inside & jnp.isfinite(c), c, 0.5 * (a + b))
        fc = fn(c)
        flips = jnp.signbit(fc) != jnp.signbit(fb)  # not fc * fb < 0, which underflows to 0
        a, fa = jnp.where(flips, b, a), jnp.where(flips, fb, 0.5 * fa)
        return a, fa, c, fc, it + 1

    start = (lo, f_lo, hi, f_hi, jnp.zeros((), jnp.int32))
    start = jax.tree_util.tree_map(lambda x, y: jnp.where(f_lo == 0, y, x), start, (hi, f_hi, lo, f_lo, start[4]))
    return jax.lax.while_loop(unfinished, secant, start)[2]


@dataclass(frozen=True)
class ImplicitRVGA:
    """The implicit (exact) R-VGA, Eqs. 3-4, for logistic regression Eqs. 73-77.

    Left-multiplying Eq. 3 by ``x^T`` and Eq. 4 (after Woodbury, Eq. 65) by ``x^T . x`` gives
    two scalar equations in ``alpha = x^T mu_t`` and ``v = x^T P_t x`` (Eqs. 64 and 66,
    written for any model), with ``a ~ N(alpha, v)``:

    ``alpha = alpha_0 + v_0 E[g]`` and ``v = v_0 / (1 + v_0 c)``, ``c = -E[h]``.

    The paper finds the root with hybrid Powell, which it reports to converge for moderate
    ``alpha_0, v_0`` only (App. 9.5, Fig. 13). Here it is bracketed instead, so it is found
    for any prior: given ``v``, the first equation has a unique root in ``alpha`` (its left
    side minus its right side increases with ``alpha`` since ``E[h] <= 0``), and the unknown
    ``E[g] = (alpha - alpha_0) / v_0`` lies in the model's bracket (Eq. 71 for the logistic
    model). Writing ``v = v_0 e^{-u}``, the second equation is
    ``u = log(1 + v_0 c(alpha(u), u))``, a scalar root in
    ``u in [0, log(1 + v_0 c_max)]`` (Eq. 72 for the logistic model, ``c_max = 1/4``), at
    whose ends the two sides compare in opposite ways. Both roots are found by the Illinois
    method, nested (inner ``alpha``, outer ``u``), to a few ulps or ``max_iter`` evaluations.
    The root is unique when ``log p`` is concave in ``a`` and the expectations exact: the
    equations are then the stationarity conditions of a function strictly convex in
    ``(alpha, sqrt(v))`` (Gaussian variational inference, Challis and Barber).

    Parameters
    ----------
    max_iter : int, default=100
        Cap on the evaluations of each of the two nested root searches.
    """

    max_iter: int = 100

    def __post_init__(self):
        _positive_int("ImplicitRVGA", "max_iter", self.max_iter)

    def solve(self, model: _Model, alpha0, v0, y, obs_noise) -> tuple[jax.Array, jax.Array]:
        """The root ``(alpha, v)`` of Eqs. 64 and 66 (Eqs. 67-72 for the logistic model)."""
        score_lo, score_hi = model.score_bracket(alpha0, y, obs_noise)

        def alpha_given(v):
            # In the unknown E[g] = (alpha - alpha_0) / v_0 rather than alpha: its bracket
            # ends are exact (alpha_0 + v_0 y - alpha_0 rounds when |alpha_0| >> v_0).
            def eq_64(score):
                return score - model.expected_derivatives(alpha0 + v0 * score, v, y, obs_noise)[0]

            return alpha0 + v0 * _illinois(eq_64, score_lo, score_hi, self.max_iter)

        def eq_66(u):
            v = v0 * jnp.exp(-u)
            curvature = -model.expected_derivatives(alpha_given(v), v, y, obs_noise)[1]
            return u - jnp.log1p(v0 * curvature)

        u_max = jnp.log1p(v0 * model.max_curvature(obs_noise))
        v = v0 * jnp.exp(-_illinois(eq_66, jnp.zeros_like(u_max), u_max, self.max_iter))
        return alpha_given(v), v

    def step_scalars(self, model: _Model, alpha0, v0, y, obs_noise) -> tuple[jax.Array, jax.Array]:
        """``(gain, c)``: ``mu_t = mu_{t-1} + gain P_{t-1} x`` (Eq. 76) and
        ``P_t^{-1} = P_{t-1}^{-1} + c x x^T`` (Eq. 61), expectations under ``q_t``."""
        alpha, v = self.solve(model, alpha0, v0, y, obs_noise)
        g, h = model.expected_derivatives(alpha, v, y, obs_noise)
        return g, -h


_Scheme = Union[ImplicitRVGA, ExplicitRVGA]


def rvga_step(scheme: _Scheme, model: _Model, state: FullCovState, x: jax.Array, y, obs_noise) -> FullCovState:
    """One R-VGA update with observation ``(x, y)``, ``x`` of shape ``(d,)``.

    ``mu_t = mu_{t-1} + gain P_{t-1} x`` and, by Woodbury (Eqs. 65, 77),
    ``P_t = P_{t-1} - c / (1 + c v_0) P_{t-1} x x^T P_{t-1}``, with ``(gain, c)`` from the
    scheme. ``O(d^2)``.
    """
    px = state.cov @ x
    alpha0, v0 = x @ state.mean, x @ px
    gain, curvature = scheme.step_scalars(model, alpha0, v0, y, obs_noise)
    mean = state.mean + gain * px
    cov = state.cov - (curvature / (1 + curvature * v0)) * jnp.outer(px, px)
    return FullCovState(mean, cov)


@partial(jax.jit, static_argnums=(0, 1))
def _scan(scheme: _Scheme, model: _Model, state: FullCovState, X, y, obs_noise) -> FullCovState:
    def body(belief, row):
        return rvga_step(scheme, model, belief, row[0], row[1], obs_noise), None

    return jax.lax.scan(body, state, (X, y))[0]


def run_rvga(scheme: _Scheme, model: _Model, state: FullCovState, X, y, obs_noise=1.0) -> FullCovState:
    """Run R-VGA over the rows of ``(X, y)`` in order, one pass, in one compiled scan.

    Parameters
    ----------
    scheme : ImplicitRVGA or ExplicitRVGA
    model : Logistic or LinearGaussian
    state : FullCovState
        The prior ``q_0 = N(mu_0, P_0)``; its dtype is the computation dtype.
    X : array of shape (N, d)
    y : array of shape (N,)
        Labels in ``{0, 1}`` for :class:`Logistic`, real targets for :class:`LinearGaussian`.
    obs_noise : float, default=1.0
        Observation variance ``R`` of :class:`LinearGaussian`; unused by :class:`Logistic`.
        Passed to the compiled step as a traced value, so a new one does not recompile
        (the function runs on the host and is not differentiable by ``jax.grad``).

    Returns
    -------
    state : FullCovState
        ``q_N``.
    """
    if not isinstance(scheme, (ImplicitRVGA, ExplicitRVGA)):
        raise TypeError(f"run_rvga: scheme must be ImplicitRVGA(...) or ExplicitRVGA(), got {scheme!r}")
    if not isinstance(model, (Logistic, LinearGaussian)):
        raise TypeError(f"run_rvga: model must be Logistic(...) or LinearGaussian(), got {model!r}")
    if not isinstance(state, FullCovState):
        raise TypeError(f"run_rvga: state must be a FullCovState(mean, cov), got {type(state).__name__}")
    mean, cov = jnp.asarray(state.mean), jnp.asarray(state.cov)
    if mean.ndim != 1 or cov.shape != (mean.shape[0], mean.shape[0]):
        raise ValueError(f"run_rvga: state needs mean (d,) and cov (d, d), got {mean.shape} and {cov.shape}")
    dtype = mean.dtype
    X_host, y_host = np.asarray(X), np.asarray(y)
    if X_host.ndim != 2 or X_host.shape[1] != mean.shape[0]:
        raise ValueError(f"run_rvga: X must have shape (N, {mean.shape[0]}), got {X_host.shape}")
    if y_host.shape != (X_host.shape[0],):
        raise ValueError(f"run_rvga: y must have shape ({X_host.shape[0]},), got {y_host.shape}")
    if not (np.all(np.isfinite(X_host)) and np.all(np.isfinite(y_host))):
        raise ValueError("run_rvga: X and y must be finite")
    if isinstance(model, Logistic) and not np.all((y_host == 0) | (y_host == 1)):
        raise ValueError(f"run_rvga: Logistic labels must be 0 or 1, got {np.unique(y_host)[:5]}")
    noise = np.asarray(obs_noise)
    if noise.shape != () or not np.isfinite(noise) or noise <= 0:
        raise ValueError(f"run_rvga: obs_noise must be a positive finite scalar, got {obs_noise!r}")
    return _scan(
        scheme,
        model,
        FullCovState(mean, cov.astype(dtype)),
        jnp.asarray(X_host, dtype),
        jnp.asarray(y_host, dtype),
        jnp.asarray(noise, dtype),
    )
