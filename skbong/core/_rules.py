"""Update rules: how a step moves the variational parameters (BONG Sec. 4.6, Table 2).

A rule is a value ``(geometry, objective, n_inner_steps)``; BONG, BLR, BOG and BBB are
presets of it, and :func:`apply_rule` runs any of them with one ``lax.fori_loop``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import jax

__all__ = ["UpdateRule", "BONG", "BLR", "BOG", "BBB", "apply_rule"]


@dataclass(frozen=True)
class UpdateRule:
    """An update rule of the BONG paper.

    Parameters
    ----------
    geometry : {"natural", "plain"}
        Natural-gradient (BONG, BLR) or plain-gradient (BOG, BBB) steps.
    objective : {"expected_loglik", "vi_loss"}
        Expected log-likelihood alone (BONG, BOG) or minus the KL divergence to the prior
        ``q_{t|t-1}`` as well (BLR, BBB): the online VI loss of Eq. 2.
    n_inner_steps : int
        Iterations ``I`` per observation, each from the previous iterate, the first from
        the prior ``q_{t|t-1}``.
    unit_step : bool
        Use the learning rate 1 whatever the configured one (BONG, Eq. 5).
    """

    geometry: str
    objective: str
    n_inner_steps: int = 1
    unit_step: bool = False

    @property
    def with_kl(self) -> bool:
        """Whether the objective includes ``-KL(q || q_{t|t-1})``."""
        return self.objective == "vi_loss"


BONG = UpdateRule("natural", "expected_loglik", 1, unit_step=True)
"""One natural-gradient step of unit size on the expected log-likelihood (Eq. 5)."""
BLR = UpdateRule("natural", "vi_loss")
"""Natural-gradient steps on the VI loss (Eq. 30; Khan and Rue's Bayesian learning rule)."""
BOG = UpdateRule("plain", "expected_loglik")
"""One gradient step on the expected log-likelihood (Eq. 29)."""
BBB = UpdateRule("plain", "vi_loss")
"""Gradient steps on the VI loss (Eq. 32; Bayes by backprop)."""


def apply_rule(
    rule: UpdateRule, family, prior, curvature_at: Callable, learning_rate, key: jax.Array, move_quadratic=False
):
    """Run ``rule`` from ``prior``: ``I`` steps of the family's natural or plain step.

    Parameters
    ----------
    rule : UpdateRule
    family : a family object
    prior : belief state ``q_{t|t-1}``
    curvature_at : callable
        ``curvature_at(state, key) -> Curvature`` at the current iterate.
    learning_rate : scalar array
        ``alpha``; replaced by 1 when ``rule.unit_step``.
    key : PRNG key
        Inner step ``i`` uses ``fold_in(key, i)``.
    move_quadratic : bool, default=False
        Also return ``delta^T Sigma^{-1} delta`` of the mean move ``delta`` under the prior
        precision where the family's step computes it as a by-product (one natural step
        without the KL term, ``natural_step_with_move_quadratic``), else None.

    Returns
    -------
    The belief after the update (and, with ``move_quadratic``, the quadratic or None).
    """
    step = family.natural_step if rule.geometry == "natural" else family.plain_step
    lr = 1.0 if rule.unit_step else learning_rate
    # One step from the prior: its move is the whole update's, so the family's by-product
    # (None where the step has the KL term) is the quadratic asked for.
    by_product = (
        move_quadratic
        and rule.geometry == "natural"
        and rule.n_inner_steps == 1
        and hasattr(family, "natural_step_with_move_quadratic")
    )
    if by_product:
        step = family.natural_step_with_move_quadratic

    def inner(i, state):
        curv = curvature_at(state, jax.random.fold_in(key, i))
        return step(state, prior, curv, lr, rule.with_kl)

    if rule.n_inner_steps == 1:
        updated = inner(0, prior)
    else:
        updated = jax.lax.fori_loop(0, rule.n_inner_steps, inner, prior)
    if by_product:
        return updated
    return (updated, None) if move_quadratic else updated
