"""Self-tests of the independent autodiff oracle in ``tests/oracle.py`` (paper: BONG, App. E)."""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from oracle import (FAMILIES, NATURAL, fisher, from_psi, kl_gauss, natural_gradient,  # noqa: E402
                    objective, oracle_step, to_psi, to_rho)

P, C = 4, 2
TOL = 1e-10


def problem(seed=0):
    """Random linear-Gaussian problem; priors for every family."""
    rng = np.random.default_rng(seed)
    A, B = rng.normal(size=(P, P)), rng.normal(size=(C, C))
    d = dict(mu0=rng.normal(size=P), S0=A @ A.T / P + 0.5 * np.eye(P), H=rng.normal(size=(C, P)),
             y=rng.normal(size=C), R=B @ B.T / C + 0.5 * np.eye(C), var0=rng.uniform(0.5, 2, P),
             ups0=rng.uniform(0.5, 2, P), W0=0.5 * rng.normal(size=(P, 2)))
    rep = {"fc": d["S0"], "fc_mom": d["S0"], "diag": d["var0"], "diag_mom": d["var0"],
           "dlr": (d["ups0"], d["W0"])}
    d["prior"] = {f: (d["mu0"], r) for f, r in rep.items()}
    Ri = np.linalg.inv(d["R"])
    d["G"], d["g"] = -d["H"].T @ Ri @ d["H"], lambda m: d["H"].T @ Ri @ (d["y"] - d["H"] @ m)
    return d


def step(alg, fam, d, **kw):
    return oracle_step(alg, fam, *d["prior"][fam], d["H"], d["y"], d["R"], prior=d["prior"][fam], **kw)


def close(a, b, tol=TOL):
    for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), atol=tol, rtol=0)


def exact_posterior(d, S0):
    """Kalman update (E.1.2, Eqs. 128-130) = exact Bayes for y ~ N(H theta, R)."""
    K = S0 @ d["H"].T @ np.linalg.inv(d["R"] + d["H"] @ S0 @ d["H"].T)
    return d["mu0"] + K @ (d["y"] - d["H"] @ d["mu0"]), S0 - K @ d["H"] @ S0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bong_fc_is_exact_bayes(seed):
    d = problem(seed)
    mu, S = step("bong", "fc", d)
    mu_k, S_k = exact_posterior(d, d["S0"])
    assert np.abs(S_k - d["S0"]).max() > 1e-2  # the update is not trivial
    close((mu, S), (mu_k, S_k))


@pytest.mark.parametrize("fam", ["fc", "fc_mom", "diag", "diag_mom"])
def test_blr_one_unit_step_is_bong(fam):
    d = problem(3)
    close(step("blr", fam, d, alpha=1.0, n_inner=1), step("bong", fam, d))


@pytest.mark.parametrize("sym", [True, False])
@pytest.mark.parametrize("fam", FAMILIES)
def test_bbb_one_step_is_bog(fam, sym):
    d = problem(4)
    bog = step("bog", fam, d, alpha=0.05, sym=sym)
    close(step("bbb", fam, d, alpha=0.05, n_inner=1, sym=sym), bog)
    assert not np.allclose(bog[0], d["mu0"])


@pytest.mark.parametrize("fam", ["fc", "fc_mom", "diag", "diag_mom"])
def test_blr_converges_to_vi_optimum(fam):
    """FC: exact posterior. Diag prior: mean-field optimum = exact mean, precision diag(Lambda)."""
    d = problem(5)
    out = step("blr", fam, d, alpha=0.1, n_inner=400)
    if fam.startswith("fc"):
        close(out, exact_posterior(d, d["S0"]), 1e-9)
    else:
        mu_k, S_k = exact_posterior(d, np.diag(d["var0"]))
        close(out, (mu_k, 1 / np.diag(np.linalg.inv(S_k))), 1e-9)


def test_bong_fc_mom_eqs_167_168():
    d = problem(6)
    mu, S = step("bong", "fc_mom", d)
    close((mu, S), (d["mu0"] + d["S0"] @ d["g"](d["mu0"]), d["S0"] + d["S0"] @ d["G"] @ d["S0"]))


@pytest.mark.parametrize("fam", NATURAL)
def test_fisher_natgrad_equals_dual_gradient(fam, x64):
    """Sec. 3: F_psi^{-1} grad_psi l = grad_rho l, with F computed from its definition."""
    d = problem(7)
    mu = d["mu0"] + 0.3
    rep = d["S0"] * 1.3 if fam == "fc" else d["var0"] * 0.7
    prior_ms = (jnp.asarray(d["mu0"]), jnp.asarray(d["S0"] if fam == "fc" else np.diag(d["var0"])))
    data = tuple(jnp.asarray(d[k]) for k in "HyR")
    psi = to_psi(fam, jnp.asarray(mu), jnp.asarray(rep))
    ng = natural_gradient(fam, psi, jax.grad(lambda p: objective("blr", fam, p, data, prior_ms))(psi))
    rho = to_rho(fam, *from_psi(fam, psi))
    close(ng, jax.grad(lambda r: objective("blr", fam, r, data, prior_ms, dual=True))(rho), 1e-9)


def test_moment_fisher_blocks_eqs_166_245(x64):
    d = problem(8)
    S, v, rng = jnp.asarray(d["S0"]), jnp.asarray(d["var0"]), np.random.default_rng(0)
    gm, A = jnp.asarray(rng.normal(size=P)), jnp.asarray(rng.normal(size=(P, P)))
    for sym in (True, False):  # Eq. 166 on a symmetric gradient, either convention
        ng = natural_gradient("fc_mom", (jnp.zeros(P), S), (gm, A + A.T), sym)
        close(ng, (S @ gm, 2 * S @ (A + A.T) @ S), 1e-9)
    F = fisher("diag_mom", (jnp.zeros(P), v))  # Eqs. 238, 241, 244
    close(F, np.diag(np.concatenate([1 / d["var0"], 0.5 / d["var0"] ** 2])), 1e-9)


def paper(alg, fam, d, a, n):
    """Printed App. E updates (mu, Sigma | var | Upsilon, W) iterated n times."""
    m0, S0, v0, G, dG, g = d["mu0"], d["S0"], d["var0"], d["G"], np.diag(d["G"]), d["g"]
    L0, inv, mu, S, v = np.linalg.inv(S0), np.linalg.inv, d["mu0"], d["S0"], d["var0"]
    ups, W, Lam0 = d["ups0"], d["W0"], np.diag(d["ups0"]) + d["W0"] @ d["W0"].T
    for _ in range(n):
        gi = g(mu)
        if (alg, fam) == ("bong", "fc"):  # 118-119
            S = inv(L0 - G); mu = m0 + S @ gi
        elif (alg, fam) == ("bog", "fc"):  # 139-140 (free gradient, sym=False)
            S = inv(L0 - 4 * a * S0 @ np.outer(gi, m0) - 2 * a * S0 @ G @ S0)
            mu = S @ L0 @ m0 + a * S @ S0 @ gi
        elif (alg, fam) == ("blr", "fc"):  # 133-134
            S = inv((1 - a) * inv(S) + a * L0 - a * G); mu = mu + a * S @ (L0 @ (m0 - mu) + gi)
        elif (alg, fam) == ("blr", "fc_mom"):  # 171-172
            mu, S = mu + a * S @ (L0 @ (m0 - mu) + gi), (1 + a) * S + a * S @ (G - L0) @ S
        elif (alg, fam) == ("bog", "fc_mom"):  # 175-176
            mu, S = mu + a * gi, S + a / 2 * G
        elif (alg, fam) == ("bbb", "fc_mom"):  # 179-180
            mu, S = mu + a * L0 @ (m0 - mu) + a * gi, S + a / 2 * (inv(S) - L0 + G)
        elif (alg, fam) == ("bong", "diag"):  # 210-211
            v = 1 / (1 / v0 - dG); mu = m0 + v * gi
        elif (alg, fam) == ("blr", "diag"):  # 216-217
            vn = 1 / ((1 - a) / v + a / v0 - a * dG); mu, v = mu + a * vn * ((m0 - mu) / v0 + gi), vn
        elif (alg, fam) == ("bog", "diag"):  # 222-223
            v = 1 / (1 / v0 - 4 * a * v0 * m0 * gi - 2 * a * v0 ** 2 * dG); mu = v / v0 * m0 + a * v * v0 * gi
        elif (alg, fam) == ("bbb", "diag"):  # 226-227 (psi form; 228 as printed is wrong)
            p1 = mu / v + a * v * gi - a * v / v0 * (mu - m0)
            p2 = (-0.5 / v + 2 * a * v * mu * gi + a * v ** 2 * dG - 2 * a * v / v0 * mu * (mu - m0)
                  - a * v ** 2 * (1 / v0 - 1 / v))
            v = -0.5 / p2; mu = v * p1
        elif (alg, fam) == ("bong", "diag_mom"):  # 246-247
            mu, v = m0 + v0 * gi, v0 + v0 ** 2 * dG
        elif (alg, fam) == ("blr", "diag_mom"):  # 250-251
            mu, v = mu + a * v * ((m0 - mu) / v0 + gi), v + a * v ** 2 * (1 / v - 1 / v0) + a * v ** 2 * dG
        elif (alg, fam) == ("bog", "diag_mom"):  # 254-255
            mu, v = mu + a * gi, v + a / 2 * dG
        elif (alg, fam) == ("bbb", "diag_mom"):  # 258-259 (sigma_{t|i-1} read as sigma_{t|t-1})
            mu, v = mu + a * (m0 - mu) / v0 + a * gi, v + a / 2 * (1 / v - 1 / v0) + a / 2 * dG
        elif fam == "dlr":  # 307-309 (bog), 317-319 (bbb)
            S = inv(np.diag(ups) + W @ W.T)
            D = -G + (Lam0 - np.diag(ups) - W @ W.T if alg == "bbb" else 0)
            mu = mu + a * gi + (a * Lam0 @ (m0 - mu) if alg == "bbb" else 0)
            ups, W = ups + a / 2 * np.diag(S @ D @ S), W + a * S @ D @ S @ W
    return {"fc": (mu, S), "fc_mom": (mu, S), "dlr": (mu, ups, W)}.get(fam, (mu, v))


CASES = [("bong", "fc"), ("bog", "fc"), ("blr", "fc"), ("blr", "fc_mom"), ("bog", "fc_mom"),
         ("bbb", "fc_mom"), ("bong", "diag"), ("blr", "diag"), ("bog", "diag"), ("bbb", "diag"),
         ("bong", "diag_mom"), ("blr", "diag_mom"), ("bog", "diag_mom"), ("bbb", "diag_mom"),
         ("bog", "dlr"), ("bbb", "dlr")]


@pytest.mark.parametrize("alg,fam", CASES)
def test_matches_printed_appendix_e(alg, fam):
    d, a, n = problem(9), 0.03, (3 if alg in ("blr", "bbb") else 1)
    close(step(alg, fam, d, alpha=a, n_inner=n, sym=(alg, fam) != ("bog", "fc")), paper(alg, fam, d, a, n))


def test_bog_fc_symmetric_differs_from_eq_140():
    """Eq. 140 is the free (non-symmetric) gradient; the symmetrised step differs from it."""
    d = problem(9)
    mu_f, S_f = step("bog", "fc", d, alpha=0.03, sym=False)
    mu_s, S_s = step("bog", "fc", d, alpha=0.03)
    assert np.abs(S_f - S_f.T).max() > 1e-4 and np.abs(S_s - S_s.T).max() < 1e-12
    sg = d["S0"] @ np.outer(d["g"](d["mu0"]), d["mu0"])
    prec = np.linalg.inv(d["S0"]) - 2 * 0.03 * (sg + sg.T + d["S0"] @ d["G"] @ d["S0"])
    close(S_s, np.linalg.inv(prec))


def test_printed_typos_eq_228_and_263(x64):
    """Eq. 228's last term needs sigma_{t,i-1}^{+2}; Eq. 263 needs the prior precision, not Sigma0."""
    d, a = problem(9), 0.03
    mu1, v1 = step("bbb", "diag", d, alpha=a, n_inner=1)
    mu2, v2 = step("bbb", "diag", d, alpha=a, n_inner=2)
    m0, v0, g = d["mu0"], d["var0"], d["g"](mu1)
    term = lambda p: a * v2 * v1 ** p / v0 * (m0 - mu1)
    base = v2 / v1 * mu1 + a * v2 * v1 * g
    close(mu2, base + term(1))
    assert np.abs(mu2 - (base + term(-1))).max() > 1e-4
    Lam0 = np.diag(d["ups0"]) + d["W0"] @ d["W0"].T
    mu = jnp.asarray(d["mu0"] + 1.0)
    gk = jax.grad(kl_gauss)(mu, jnp.eye(P), jnp.asarray(d["mu0"]), jnp.asarray(np.linalg.inv(Lam0)))
    close(gk, Lam0 @ np.ones(P))
    assert np.abs(gk - np.linalg.inv(Lam0) @ np.ones(P)).max() > 1e-2
