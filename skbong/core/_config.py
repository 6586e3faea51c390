"""The registry: the one place where method names live, and the frozen filter config.

``make_config`` turns names into a hashable :class:`FilterConfig`. Equal configs compare
equal, so estimators (and ``GridSearchCV`` clones) with the same structure share
compiled code. Combinations that are not available fail here with a clear message.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass
from typing import Callable

import jax

from ._curvature import LinearizedEF, LinearizedHessian, MonteCarloEF, MonteCarloHessian
from ._families import (
    Diagonal,
    DiagonalLowRank,
    DiagonalMoment,
    FullCovariance,
    FullCovarianceMoment,
)
from ._dynamics import Dynamics
from ._likelihoods import Categorical, Gaussian
from ._predictive import LinearizedGaussian, LinearizedMonteCarlo, MonteCarlo, PluginPredictive, Probit
from ._rules import BBB, BLR, BOG, BONG, UpdateRule

__all__ = [
    "FAMILIES",
    "EXTRA_FAMILIES",
    "ALGORITHMS",
    "HESSIANS",
    "LIKELIHOODS",
    "UNDEFINED",
    "DIAG_STEPS",
    "FilterConfig",
    "make_config",
    "PREDICTIVES",
    "make_predictive",
    "undefined_reason",
]

#: Gaussian families of the BONG paper (Sec. 3, Appendix E.1-E.5).
FAMILIES = ("fc", "fc_mom", "diag", "diag_mom", "dlr")
#: Families beyond the BONG grid: spherical-plus-low-rank precision, spherical LO-FI
#: (LO-FI Appendix F).
EXTRA_FAMILIES = ("slr",)
#: Update rules (BONG Table 2).
ALGORITHMS: dict[str, UpdateRule] = {"bong": BONG, "blr": BLR, "bog": BOG, "bbb": BBB}
#: Curvature estimators (BONG Table 1); the Monte-Carlo ones take the number of draws.
HESSIANS = {
    "lin_hess": LinearizedHessian,
    "lin_ef": LinearizedEF,
    "mc_hess": MonteCarloHessian,
    "mc_ef": MonteCarloEF,
}
_NO_LOW_RANK_FACTOR = (
    "the seeds leave MC-HESS with DLR (and its spherical variant SLR) undefined for BONG and BLR "
    "(BONG Appendix E.5): the SVD projection needs a low-rank factor of G, which a Monte-Carlo "
    "Hessian does not have"
)
_DENSE_SANDWICH = (
    "{} (Eqs. {}) needs diag(Sigma G Sigma) of a dense P x P Monte-Carlo Hessian, which defeats "
    "the low-rank family; the seeds give no estimator for it and it is not implemented"
)
_NOT_SPHERICAL = (
    "a plain-gradient step moves each diagonal entry of the precision by its own amount "
    "(Eqs. 308, 318), so it does not keep the spherical part isotropic; LO-FI Appendix F "
    "defines spherical LO-FI for the natural (Kalman) step only"
)
#: Cells of the (algorithm, hessian, family) grid that are not available, and why.
UNDEFINED = {
    ("bong", "mc_hess", "dlr"): _NO_LOW_RANK_FACTOR,
    ("blr", "mc_hess", "dlr"): _NO_LOW_RANK_FACTOR,
    ("bog", "mc_hess", "dlr"): _DENSE_SANDWICH.format("BOG-MC-HESS-DLR", "308-309"),
    ("bbb", "mc_hess", "dlr"): _DENSE_SANDWICH.format("BBB-MC-HESS-DLR", "318-319"),
    ("bong", "mc_hess", "slr"): _NO_LOW_RANK_FACTOR,
    ("blr", "mc_hess", "slr"): _NO_LOW_RANK_FACTOR,
    **{(rule, hessian, "slr"): _NOT_SPHERICAL for rule in ("bog", "bbb") for hessian in HESSIANS},
}
LIKELIHOODS = {"gaussian": Gaussian(), "categorical": Categorical()}
#: BONG steps of the diagonal families (the value is ``Diagonal.kalman``).
DIAG_STEPS = {"kalman": True, "projected": False}
#: Predictive distributions (LO-FI Appendix B) and the likelihoods each applies to.
PREDICTIVES = {
    "plugin": (PluginPredictive, ("gaussian", "categorical")),
    "linearized": (LinearizedGaussian, ("gaussian",)),
    "probit": (Probit, ("categorical",)),
    "linearized_mc": (LinearizedMonteCarlo, ("categorical",)),
    "mc": (MonteCarlo, ("categorical",)),
}


@dataclass(frozen=True)
class FilterConfig:
    """Everything static about a filter: the compile-time structure.

    Parameters
    ----------
    apply_fn : callable
        Pure network ``apply(params_flat, x) -> f`` for a batch ``x``.
    likelihood : Gaussian or Categorical
    family : one of the family classes
    estimator : curvature estimator
    rule : UpdateRule
    dynamics : Dynamics
        Schedules, covariance inflation and the online noise estimate.
    backtrack : bool
        Shorten a step's mean move when it raises the step's MAP objective (see
        :func:`make_config`).
    """

    apply_fn: Callable[[jax.Array, jax.Array], jax.Array]
    likelihood: Gaussian | Categorical
    family: FullCovariance | FullCovarianceMoment | Diagonal | DiagonalMoment | DiagonalLowRank
    estimator: LinearizedHessian | LinearizedEF | MonteCarloHessian | MonteCarloEF
    rule: UpdateRule
    dynamics: Dynamics = Dynamics()
    backtrack: bool = False


def _known(table, what: str, name: str):
    if name not in table:
        raise ValueError(f"Unknown {what} {name!r}; choose one of {sorted(table)}.")
    return table[name]


def undefined_reason(algorithm: str, hessian: str, family: str) -> str | None:
    """Why ``(algorithm, hessian, family)`` is not available, or None when it is."""
    return UNDEFINED.get((algorithm, hessian, family))


def _positive_int(owner: str, name: str, value) -> None:
    """Refuse ``value`` unless it is a positive integer (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{owner}: {name} must be a positive integer, got {value!r}.")


def make_config(
    apply_fn: Callable[[jax.Array, jax.Array], jax.Array],
    likelihood: str,
    family: str = "dlr",
    rank: int = 10,
    algorithm: str = "bong",
    hessian: str = "lin_hess",
    n_inner_steps: int = 1,
    n_mc_samples: int = 10,
    diag_step: str = "kalman",
    cov_floor: float = 0.0,
    dynamics: Dynamics | None = None,
    backtrack: bool | str = False,
) -> FilterConfig:
    """Build the frozen config for ``(likelihood, family, algorithm, hessian)``.

    Parameters
    ----------
    apply_fn : callable
        Pure ``apply(params_flat, x)`` mapping a batch ``(B, D)`` to outputs ``(B, C)``.
    likelihood : {"gaussian", "categorical"}
    family : {"fc", "fc_mom", "diag", "diag_mom", "dlr", "slr"}
        "slr" is spherical LO-FI (LO-FI Appendix F): ``eta I + W W^T``.
    rank : int
        Rank ``R`` of the low-rank part (``family="dlr"`` or "slr" only).
    algorithm : {"bong", "blr", "bog", "bbb"}
    hessian : {"lin_hess", "lin_ef", "mc_hess", "mc_ef"}
    n_inner_steps : int
        Inner iterations ``I`` of BLR and BBB (BONG and BOG take one step by definition).
    n_mc_samples : int
        Draws ``M`` of the Monte-Carlo estimators.
    diag_step : {"kalman", "projected"}
        BONG step of the diagonal families with a low-rank curvature: the full Kalman
        update projected onto the family ("kalman", VD-EKF), or the printed Eqs. 212-213 /
        246-247, whose mean step uses the projected covariance ("projected").
    cov_floor : float
        ``eps`` added to the categorical likelihood's linearised observation covariance
        (:class:`~skbong.core.Categorical`); ignored by the Gaussian likelihood.
    dynamics : Dynamics, optional
        Schedules, covariance inflation, online noise estimate (:class:`Dynamics`); the
        default keeps the constant dynamics of the hyperparameters and nothing else.
    backtrack : bool or "auto"
        Backtracking line search on the mean step (not in the seeds; off keeps every update
        exactly as derived there). The BONG LIN-HESS step is one Gauss-Newton step on the step's
        MAP objective ``-sum_b w_b log p(y_b | x_b, theta) + (theta - mu)^T Sigma^{-1}
        (theta - mu) / 2`` from the predicted belief ``N(mu, Sigma)`` (BONG Eq. 5 with the
        linearisation of Prop. 4.2). Where the linearisation is poor, for example a
        categorical row predicted confidently wrong (its curvature ``p (1 - p)`` nearly
        vanishes, so the step in logit space is about ``1 / p``), that step can raise the
        objective it minimises. With ``backtrack`` the mean move ``delta`` is then halved
        until the objective is no higher than at ``mu`` (up to 8 times; else the mean stays
        at ``mu``); the covariance update is kept. A step that lowers it is taken in full,
        so conjugate (linear-Gaussian) models are unchanged. Costs a forward pass and
        ``v^T Sigma^{-1} v`` a step, one forward pass per halving when it backtracks. Needs
        that quadratic form in ``O(P)``: the diagonal and low-rank families only. "auto":
        on for ``algorithm="bong"`` with a linearised estimator ("lin_hess", "lin_ef") and
        one of those families, off otherwise (the estimators' default). The Monte-Carlo
        estimators are left out: their move follows gradients averaged over posterior
        draws, which need not descend the objective at the mean, so the search can halve
        a useful step away (on the paper's MNIST CNN, BONG-MC-EF DLR-10 learned nothing
        with it). Off by default here.

    Returns
    -------
    FilterConfig

    Raises
    ------
    ValueError
        For an unknown name, or a combination the seeds leave undefined.
    TypeError
        If ``apply_fn`` is not callable.
    """
    if not callable(apply_fn):
        raise TypeError(f"apply_fn must be a function apply(params_flat, x) -> (B, C) outputs, got {apply_fn!r}.")
    rule = _known(ALGORITHMS, "algorithm", algorithm)
    estimator_cls = _known(HESSIANS, "hessian", hessian)
    _known(dict.fromkeys(FAMILIES + EXTRA_FAMILIES), "family", family)
    kalman = _known(DIAG_STEPS, "diag_step", diag_step)
    reason = undefined_reason(algorithm, hessian, family)
    if reason is not None:
        raise ValueError(f"{algorithm}-{hessian}-{family} is not available: {reason}.")
    counts = [("n_inner_steps", n_inner_steps), ("n_mc_samples", n_mc_samples)]
    for name, count in counts + ([("rank", rank)] if family in ("dlr", "slr") else []):
        _positive_int("make_config", name, count)
    if rule.with_kl:
        rule = dataclasses.replace(rule, n_inner_steps=int(n_inner_steps))
    monte_carlo = estimator_cls in (MonteCarloEF, MonteCarloHessian)
    estimator = estimator_cls(int(n_mc_samples)) if monte_carlo else estimator_cls()
    family_obj = {
        "fc": FullCovariance(),
        "fc_mom": FullCovarianceMoment(),
        "diag": Diagonal(kalman),
        "diag_mom": DiagonalMoment(kalman),
        "dlr": DiagonalLowRank(int(rank)),
        "slr": DiagonalLowRank(int(rank), spherical=True),
    }[family]
    likelihood_obj = _known(LIKELIHOODS, "likelihood", likelihood)
    try:
        floor = float(cov_floor)
    except (TypeError, ValueError):
        floor = math.nan
    if isinstance(cov_floor, (bool, str)) or not math.isfinite(floor) or floor < 0:
        raise ValueError(
            f"cov_floor must be a finite number >= 0 (a variance added to the covariance), got {cov_floor!r}."
        )
    if likelihood == "categorical" and floor:
        likelihood_obj = Categorical(floor)
    dynamics = Dynamics() if dynamics is None else dynamics
    if dynamics.adaptive_obs_noise and likelihood != "gaussian":
        raise ValueError("An adaptive observation noise (LO-FI Eq. 66) applies to the Gaussian likelihood only.")
    if dynamics.innovation_scale and likelihood != "gaussian":
        raise ValueError("The innovation scale (normalised squared innovations) applies to the Gaussian likelihood only.")
    if isinstance(backtrack, str):
        _known(dict.fromkeys(("auto",)), "backtrack", backtrack)
        backtrack = algorithm == "bong" and not monte_carlo and hasattr(family_obj, "precision_quadratic")
    if backtrack and not hasattr(family_obj, "precision_quadratic"):
        raise ValueError(
            f"backtrack=True needs the prior precision's quadratic form, which family {family!r} gives "
            "only through an O(P^3) solve; use family 'diag', 'diag_mom', 'dlr' or 'slr', or "
            "backtrack=False."
        )
    return FilterConfig(apply_fn, likelihood_obj, family_obj, estimator, rule, dynamics, bool(backtrack))


def make_predictive(name: str, likelihood: str, n_samples: int = 100):
    """The predictive value for ``name`` (LO-FI Appendix B), e.g. ``Probit()``.

    Parameters
    ----------
    name : {"plugin", "linearized", "probit", "linearized_mc", "mc"}
    likelihood : {"gaussian", "categorical"}
    n_samples : int
        Draws ``S`` of "mc" and "linearized_mc".

    Returns
    -------
    PluginPredictive, LinearizedGaussian, Probit, LinearizedMonteCarlo or MonteCarlo

    Raises
    ------
    ValueError
        For an unknown name or one that does not apply to ``likelihood``.
    """
    predictive_cls, likelihoods = _known(PREDICTIVES, "predictive", name)
    if likelihood not in likelihoods:
        raise ValueError(f"predictive {name!r} applies to the {' and '.join(likelihoods)} likelihood only.")
    return predictive_cls(int(n_samples)) if predictive_cls.stochastic else predictive_cls()
