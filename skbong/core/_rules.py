"""Update rules: how a step moves the variational parameters (BONG Sec. 3, Table 1).

A rule is a value ``(geometry, objective, n_inner_steps)``; BONG, BLR, BOG and BBB are
presets of it. BONG is one natural-gradient step of unit size on the expected
log-likelihood, started at the prior (BONG Eq. 5).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["UpdateRule", "BONG"]


@dataclass(frozen=True)
class UpdateRule:
    """An update rule of the BONG paper.

    Parameters
    ----------
    geometry : {"natural", "plain"}
        Natural-gradient (BONG, BLR) or plain-gradient (BOG, BBB) steps.
    objective : {"expected_loglik", "elbo"}
        Expected log-likelihood alone (BONG, BOG) or with the KL term to the prior (BLR, BBB).
    n_inner_steps : int
        Number of inner iterations ``I``.
    """

    geometry: str
    objective: str
    n_inner_steps: int = 1


BONG = UpdateRule("natural", "expected_loglik", 1)
