"""Independent autodiff oracle for BONG / BLR / BOG / BBB in a linear-Gaussian model.

Derived only from Jones, Chang & Murphy (2024), Sec. 3-4.7 (Eqs. 2-5, 29-32) and App. E.
Likelihood ``y ~ N(H theta, R)``; variational ``q = N(mu, Sigma)``; prior ``q0 = q_{psi_{t|t-1}}``.
No App. E update formula is used: each step is ``jax.grad`` of the closed forms
``expected_loglik`` (ELL) and ``kl_gauss`` written in the family's own parameters ``psi``.

* BOG (Eq. 29) / BBB (Eq. 32): ``psi <- psi + alpha * grad_psi L`` (``L = ELL`` or ``ELL - KL``).
* BONG (Eqs. 3, 5, unit step, ``L = ELL``) / BLR (Eq. 30, ``L = ELL - KL``): natural gradient.
  Natural-parameter families (``fc``, ``diag``) use ``F^{-1} grad_psi = grad_rho`` with the dual
  ``rho = (mu, E[theta theta^T])`` (Sec. 3).  Moment families (``fc_mom``, ``diag_mom``) use
  ``F = -E_q[hess_psi log q_psi(theta)]`` (Eqs. 154, 159) computed exactly with 2P sigma points
  (the Hessian is quadratic in theta, the rule is exact up to degree 3), then ``pinv(F) @ grad``.

Symmetric vs free matrix entries (``sym``)
------------------------------------------
``sym=True`` (default): each P x P parameter A enters only through ``(A + A^T) / 2``, so
``grad_A`` is the symmetrised ``0.5 (G + G^T)`` and the Fisher lives on symmetric matrices
(``pinv`` drops the null antisymmetric directions).  ``sym=False``: entries are free and the
maps of Eqs. (93)-(94) (``Sigma = -1/2 psi2^{-1}``, ``mu = Sigma psi1``) are used literally.

Which one the paper uses: for BOG/BBB-FC (natural) the printed Eqs. (111), (113), (137)-(140)
are the FREE gradient, ``grad_psi2 ELL = 2 Sigma g mu^T + Sigma G Sigma`` (non-symmetric, so
Eq. 140 yields a non-symmetric "precision"); ``sym=True`` gives
``Sigma g mu^T + mu g^T Sigma + Sigma G Sigma``.  In every other case (BONG/BLR-FC via rho,
all FC_MOM Eqs. 167-182, diagonal and DLR families) the gradients are already symmetric and
both variants coincide.  Eq. (163) ``F_SS = 1/2 S^-1 kron S^-1`` is the free-entry Fisher only up
to the commutation matrix K (``-E[hess]`` is ``1/2 K (S^-1 kron S^-1)``); both give the
preconditioner of Eq. (166) on symmetric gradients.  Caveat: with free entries, BLR-FC is
unstable in the antisymmetric part of psi2 (the KL term contributes ``-alpha psi2^T``, so an
antisymmetric perturbation grows by ``(1 + alpha)`` per inner step), another reason to default
to ``sym=True``.
"""
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

ALGORITHMS = ("bong", "blr", "bog", "bbb")
FAMILIES = ("fc", "fc_mom", "diag", "diag_mom", "dlr")
NATURAL = ("fc", "diag")


def _sym(A, sym):
    return 0.5 * (A + A.T) if sym else A


def gauss_logpdf(x, mean, cov):
    """Log density of ``N(x | mean, cov)`` (``cov`` need not be symmetric for autodiff)."""
    d = x - mean
    return -0.5 * (d @ jnp.linalg.solve(cov, d) + jnp.linalg.slogdet(2 * jnp.pi * cov)[1])


def expected_loglik(mu, Sigma, H, y, R):
    """``E_{N(mu,Sigma)}[log N(y | H theta, R)] = log N(y|H mu,R) - tr(R^-1 H Sigma H^T)/2``."""
    return gauss_logpdf(y, H @ mu, R) - 0.5 * jnp.trace(jnp.linalg.solve(R, H @ Sigma @ H.T))


def kl_gauss(mu, Sigma, mu0, Sigma0):
    """``KL(N(mu, Sigma) || N(mu0, Sigma0))`` in closed form."""
    d = mu0 - mu
    return 0.5 * (jnp.trace(jnp.linalg.solve(Sigma0, Sigma)) + d @ jnp.linalg.solve(Sigma0, d)
                  - mu.shape[0] + jnp.linalg.slogdet(Sigma0)[1] - jnp.linalg.slogdet(Sigma)[1])


def to_psi(family, mu, rep):
    """Family parameters ``psi`` from ``mu`` and the covariance representation ``rep``.

    ``rep`` is Sigma (fc, fc_mom), the variance vector (diag, diag_mom) or
    ``(Upsilon, W)`` with precision ``diag(Upsilon) + W W^T`` (dlr).
    """
    if family == "fc":
        L = jnp.linalg.inv(rep)
        return (L @ mu, -0.5 * L)
    if family == "diag":
        return (mu / rep, -0.5 / rep)
    if family in ("fc_mom", "diag_mom"):
        return (mu, rep)
    if family == "dlr":
        return (mu, rep[0], rep[1])
    raise ValueError(f"unknown family {family!r}")


def psi_to_moments(family, psi, sym=True):
    """``(mu, Sigma)`` (Sigma a full P x P matrix) encoded by ``psi``."""
    if family == "fc":
        S = -0.5 * jnp.linalg.inv(_sym(psi[1], sym))
        return S @ psi[0], S
    if family == "fc_mom":
        return psi[0], _sym(psi[1], sym)
    if family == "diag":
        v = -0.5 / psi[1]
        return v * psi[0], jnp.diag(v)
    if family == "diag_mom":
        return psi[0], jnp.diag(psi[1])
    mu, ups, W = psi
    return mu, jnp.linalg.inv(jnp.diag(ups) + W @ W.T)


def from_psi(family, psi, sym=True):
    """Output representation: ``(mu, Sigma)``, ``(mu, var)`` or ``(mu, Upsilon, W)``."""
    if family in ("fc", "fc_mom"):
        return psi_to_moments(family, psi, sym)
    if family == "diag":
        v = -0.5 / psi[1]
        return v * psi[0], v
    return tuple(psi)


def to_rho(family, mu, rep):
    """Dual (expectation) parameters ``rho = (E[theta], E[T_2(theta)])`` of fc / diag."""
    return (mu, jnp.outer(mu, mu) + rep) if family == "fc" else (mu, mu ** 2 + rep)


def rho_to_moments(family, rho, sym=True):
    """``(mu, Sigma)`` from the dual parameters (inverse of :func:`to_rho`)."""
    if family == "fc":
        return rho[0], _sym(rho[1], sym) - jnp.outer(rho[0], rho[0])
    return rho[0], jnp.diag(rho[1] - rho[0] ** 2)


@partial(jax.jit, static_argnames=("family", "sym"))
def fisher(family, psi, sym=True):
    """``F = -E_q[hess_psi log q_psi(theta)]`` over ``ravel_pytree(psi)``, exact via sigma points."""
    v, unravel = ravel_pytree(psi)
    mu, S = psi_to_moments(family, psi, sym)
    L = jnp.linalg.cholesky(0.5 * (S + S.T))
    pts = mu + jnp.sqrt(mu.shape[0]) * jnp.concatenate([L.T, -L.T])
    logq = lambda w, th: gauss_logpdf(th, *psi_to_moments(family, unravel(w), sym))
    return -jnp.mean(jax.vmap(jax.hessian(logq), (None, 0))(v, pts), axis=0)


def natural_gradient(family, psi, grad, sym=True):
    """``F^+ grad`` with ``F`` from :func:`fisher` (``grad`` has the pytree shape of ``psi``)."""
    unravel = ravel_pytree(psi)[1]
    return unravel(jnp.linalg.pinv(fisher(family, psi, sym), rtol=1e-10) @ ravel_pytree(grad)[0])


def objective(algorithm, family, params, data, prior_ms, sym=True, dual=False):
    """ELL (bong, bog) or ELL - KL(q || q0) (blr, bbb) as a function of ``psi`` or ``rho``."""
    mu, S = (rho_to_moments if dual else psi_to_moments)(family, params, sym)
    val = expected_loglik(mu, S, *data)
    return val - kl_gauss(mu, S, *prior_ms) if algorithm in ("blr", "bbb") else val


@partial(jax.jit, static_argnames=("algorithm", "family", "sym"))
def _inner_step(algorithm, family, psi, data, prior_ms, alpha, sym):
    lr = 1.0 if algorithm == "bong" else alpha
    if algorithm in ("bong", "blr") and family in NATURAL:  # F^-1 grad_psi = grad_rho
        rho = to_rho(family, *from_psi(family, psi, sym))
        d = jax.grad(partial(objective, algorithm, family, data=data, prior_ms=prior_ms,
                             sym=sym, dual=True))(rho)
    else:
        d = jax.grad(partial(objective, algorithm, family, data=data, prior_ms=prior_ms,
                             sym=sym))(psi)
        if algorithm in ("bong", "blr"):
            d = natural_gradient(family, psi, d, sym)
    return jax.tree_util.tree_map(lambda p, g: p + lr * g, psi, d)


def oracle_step(algorithm, family, mu, Sigma_repr, H, y, R, prior=None, alpha=1.0,
                n_inner=1, sym=True):
    """One BONG/BOG step or ``n_inner`` BLR/BBB inner iterations, by autodiff (float64).

    Parameters
    ----------
    algorithm : {'bong', 'blr', 'bog', 'bbb'}
    family : {'fc', 'fc_mom', 'diag', 'diag_mom', 'dlr'}
        ``'dlr'`` supports only 'bog' and 'bbb' (plain gradient on ``(mu, Upsilon, W)``).
    mu, Sigma_repr : array_like
        Starting point ``psi_{t,0}``; see :func:`to_psi` for ``Sigma_repr``.
    H, y, R : array_like
        ``(C, P)`` design, ``(C,)`` observation, ``(C, C)`` SPD noise covariance.
    prior : tuple, optional
        ``(mu0, Sigma0_repr)`` of ``q_{psi_{t|t-1}}`` for the KL term; default
        ``(mu, Sigma_repr)``, i.e. the paper's start ``psi_{t,0} = psi_{t|t-1}``.
    alpha : float
        Learning rate (ignored by 'bong', which uses 1).
    n_inner : int
        Inner iterations I for 'blr' / 'bbb' ('bong' / 'bog' always do one step).
    sym : bool
        Symmetrised (default) or free gradients for matrix parameters; see module docstring.

    Returns
    -------
    tuple of numpy.ndarray
        float64 ``(mu, Sigma)`` for fc / fc_mom, ``(mu, var)`` for diag / diag_mom,
        ``(mu, Upsilon, W)`` for dlr.
    """
    if algorithm not in ALGORITHMS or family not in FAMILIES:
        raise ValueError(f"unknown algorithm/family {algorithm!r}/{family!r}")
    if family == "dlr" and algorithm in ("bong", "blr"):
        raise ValueError("dlr is only defined here for the plain-gradient 'bog' and 'bbb'")
    with jax.enable_x64(True):
        f64 = lambda t: jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), t)
        prior = (mu, Sigma_repr) if prior is None else prior
        mu, Sigma_repr, prior, alpha = f64((mu, Sigma_repr, tuple(prior), alpha))
        data = (jnp.atleast_2d(f64(H)), jnp.atleast_1d(f64(y)), jnp.atleast_2d(f64(R)))
        prior_ms = psi_to_moments(family, to_psi(family, *prior))
        psi = to_psi(family, mu, Sigma_repr)
        for _ in range(n_inner if algorithm in ("blr", "bbb") else 1):
            psi = _inner_step(algorithm, family, psi, data, prior_ms, alpha, sym)
        return tuple(np.asarray(a) for a in from_psi(family, psi, sym))
