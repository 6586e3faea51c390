"""The registry: the one place where method names live, and the frozen filter config.

``make_config`` turns names into a hashable :class:`FilterConfig`. Equal configs compare
equal, so estimators (and ``GridSearchCV`` clones) with the same structure share
compiled code. Combinations that are not available fail here with a clear message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import jax

from ._curvature import LinearizedHessian
from ._families import (
    Diagonal,
    DiagonalLowRank,
    DiagonalMoment,
    FullCovariance,
    FullCovarianceMoment,
)
from ._likelihoods import Categorical, Gaussian
from ._rules import BONG, UpdateRule

__all__ = ["FAMILIES", "ALGORITHMS", "HESSIANS", "LIKELIHOODS", "FilterConfig", "make_config"]

#: Gaussian families of the BONG paper (Sec. 3, Appendix E.1-E.5).
FAMILIES = ("fc", "fc_mom", "diag", "diag_mom", "dlr")
#: Update rules (BONG Table 1); ``None`` marks one not implemented yet.
ALGORITHMS: dict[str, UpdateRule | None] = {"bong": BONG, "blr": None, "bog": None, "bbb": None}
#: Curvature estimators (BONG Sec. 4); ``None`` marks one not implemented yet.
HESSIANS = {"lin_hess": LinearizedHessian(), "lin_ef": None, "mc_hess": None, "mc_ef": None}
LIKELIHOODS = {"gaussian": Gaussian(), "categorical": Categorical()}


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
    """

    apply_fn: Callable[[jax.Array, jax.Array], jax.Array]
    likelihood: Gaussian | Categorical
    family: FullCovariance | FullCovarianceMoment | Diagonal | DiagonalMoment | DiagonalLowRank
    estimator: LinearizedHessian
    rule: UpdateRule


def _available(table: dict, what: str, name: str):
    if name not in table:
        raise ValueError(f"Unknown {what} {name!r}; choose one of {sorted(table)}.")
    if table[name] is None:
        ready = sorted(key for key, value in table.items() if value is not None)
        raise ValueError(
            f"{what}={name!r} is part of the BONG space but not implemented yet; "
            f"available: {ready}."
        )
    return table[name]


def make_config(
    apply_fn: Callable[[jax.Array, jax.Array], jax.Array],
    likelihood: str,
    family: str = "dlr",
    rank: int = 10,
    algorithm: str = "bong",
    hessian: str = "lin_hess",
) -> FilterConfig:
    """Build the frozen config for ``(likelihood, family, algorithm, hessian)``.

    Parameters
    ----------
    apply_fn : callable
        Pure ``apply(params_flat, x)`` mapping a batch ``(B, D)`` to outputs ``(B, C)``.
    likelihood : {"gaussian", "categorical"}
    family : {"fc", "fc_mom", "diag", "diag_mom", "dlr"}
    rank : int
        Rank ``R`` of the low-rank part (``family="dlr"`` only).
    algorithm : {"bong", "blr", "bog", "bbb"}
    hessian : {"lin_hess", "lin_ef", "mc_hess", "mc_ef"}

    Returns
    -------
    FilterConfig

    Raises
    ------
    ValueError
        For an unknown name, or a combination that is not available.
    """
    rule = _available(ALGORITHMS, "algorithm", algorithm)
    estimator = _available(HESSIANS, "hessian", hessian)
    if family not in FAMILIES:
        raise ValueError(f"Unknown family {family!r}; choose one of {list(FAMILIES)}.")
    family_obj = {
        "fc": FullCovariance(),
        "fc_mom": FullCovarianceMoment(),
        "diag": Diagonal(),
        "diag_mom": DiagonalMoment(),
        "dlr": DiagonalLowRank(int(rank)),
    }[family]
    return FilterConfig(apply_fn, _available(LIKELIHOODS, "likelihood", likelihood), family_obj, estimator, rule)
