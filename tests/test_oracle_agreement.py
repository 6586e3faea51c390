"""skbong's update steps against the independent autodiff oracle of ``tests/oracle.py``.

Everything here lives in the linear-Gaussian model ``y ~ N(H theta, R)`` (BONG Sec. 4,
App. E), where each of the paper's updates has an exact answer:

1. **LIN-HESS.** Linearising a linear model is exact, so ``(g, G) = (H^T R^-1 (y - H mu),
   -H^T R^-1 H)`` are the exact expected gradient and Hessian and one skbong step must
   equal the oracle's step, which differentiates the closed-form expected log-likelihood
   and KL (float64, no App. E formula used). Every (algorithm, family) the oracle knows is
   checked from a random non-isotropic start, BLR / BBB with ``I = 1`` and ``I = 3`` and
   ``alpha < 1``; BONG is given a learning rate that it must ignore.
2. **LIN-EF.** ``(g, -g g^T)`` is the LIN-HESS curvature of the pseudo-observation
   ``H' = g^T`` (1 x P), ``R' = 1``, ``y' = g^T mu + 1`` (then ``y' - H' mu = 1``), so a LIN-EF
   step is the oracle's step on that pseudo-observation, with ``g`` recomputed at each
   inner iterate's mean for ``I > 1`` (the KL prior stays fixed).
3. **DLR with BONG / BLR** (not in the oracle): skbong takes the FC natural step and
   projects the precision to rank ``R`` (Eqs. 272-275). (a) Without truncation the DLR
   step is the oracle's FC step. (b) With truncation it equals a dense slow reference:
   ``Lambda' - diag(Upsilon~)`` from the oracle's FC precision, its top-``R``
   eigenpairs, the discarded diagonal added to ``Upsilon~``, the mean unprojected.
4. **MC estimators** against their closed forms: MC-HESS has mean gradient ``g(mu)`` and
   Hessian exactly ``-A`` (``A = sum_b H_b^T R^-1 H_b``), its Hutchinson diagonal has mean
   ``-diag(A)``; MC-EF has ``E[G] = -sum_b (g_b g_b^T + A_b Sigma A_b)``; the gradient
   estimate has covariance ``A Sigma A / M``. Checked over many keys, within a few
   standard errors computed from the sample; a batch of rows makes ``A`` full rank, so the
   covariance check sees all of the belief's ``Sigma`` (and thereby ``family.sample``).
5. **MC-HESS steps**: BONG on fc / fc_mom is affine in the gradient estimate with a
   deterministic covariance, so the mean of the MC-HESS step over keys is the LIN-HESS
   oracle step, and the covariance equals it for every key.

skbong is driven through :func:`run_filter` on one row (identity predict step:
``dynamics_decay = 1``, ``process_noise = 0``) for LIN-HESS with two outputs and BLR with
``I = 3`` on DLR, and through :func:`apply_rule` with ``config.estimator`` otherwise.

The oracle is always called with a two-row observation: a one-output problem gets a zero
row of ``H`` with unit noise and target 0, which adds a ``theta``-independent constant to
the log-likelihood. This lets every oracle call of a cell share one compiled function.
"""
import os
import sys
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from skbong.core import (ALGORITHMS, FAMILIES, HESSIANS, DiagState, DLRState, FullCovState,
                         Hyperparameters, apply_rule, make_config, run_filter)

sys.path.insert(0, os.path.dirname(__file__))
from oracle import oracle_step  # noqa: E402

P = 6  # number of parameters, for both C = 1 (D = 6) and C = 2 (D = 3)
TOL = 1e-8  # absolute, float64 (all quantities are O(1)-O(10))
MIN_MOVE = 1e-4  # a checked step must move the mean and the covariance by more than this
Z = 4.5  # standard errors allowed for Monte-Carlo means
KL_RULES = ("blr", "bbb")  # algorithms with inner iterations and a KL term
LEARNING_RATE = {"bong": 0.37, "blr": 0.6, "bog": 0.1, "bbb": 0.1}  # bong must ignore its


def linear_apply(theta, x):
    """Linear model ``f = x @ Theta`` with ``Theta = theta.reshape(D, C)``; ``x`` (B, D)."""
    return x @ theta.reshape(x.shape[-1], -1)


def design(x, n_out):
    """Jacobian ``H = x^T kron I_C`` (C, P) of :func:`linear_apply` for one row ``x`` (D,)."""
    return np.kron(x[None, :], np.eye(n_out))


def problem(n_out, seed=0, rank=2):
    """A random linear-Gaussian problem and random non-isotropic starts for every family.

    Returns
    -------
    dict
        ``x`` (D,), ``y`` (C,), ``noise`` (C,) the diagonal of ``R``, ``H``, ``mu0``,
        ``start`` mapping each family to its covariance representation (oracle
        convention), and the DLR start ``ups0``, ``W0`` (P, rank).
    """
    rng = np.random.default_rng(seed)
    D = P // n_out
    A = rng.normal(size=(P, P))
    S0 = A @ A.T / (2 * P) + 0.3 * np.eye(P)
    var0 = rng.uniform(0.3, 1.5, P)
    ups0, W0 = rng.uniform(0.7, 2.0, P), 0.5 * rng.normal(size=(P, rank))
    x = 0.6 * rng.normal(size=D) / np.sqrt(D)
    noise = rng.uniform(1.0, 2.0, n_out)
    mu0 = rng.normal(size=P)
    H = design(x, n_out)
    y = H @ mu0 + rng.normal(size=n_out)
    start = {"fc": S0, "fc_mom": S0, "diag": var0, "diag_mom": var0, "dlr": (ups0, W0)}
    return dict(x=x, y=y, noise=noise, H=H, mu0=mu0, start=start, ups0=ups0, W0=W0)


def to_state(family, mu, rep):
    """skbong belief state from the oracle's ``(mu, Sigma_repr)``."""
    mu = jnp.asarray(mu)
    if family in ("fc", "fc_mom"):
        return FullCovState(mu, jnp.asarray(rep))
    if family in ("diag", "diag_mom"):
        return DiagState(mu, jnp.asarray(rep))
    return DLRState(mu, jnp.asarray(rep[0]), jnp.asarray(rep[1]))


def from_state(state):
    """The oracle's output tuple from a skbong state."""
    return tuple(np.asarray(leaf) for leaf in state)


def split(family, out):
    """Oracle output ``(mu, ...)`` -> ``(mu, Sigma_repr)`` to start the next step from."""
    return (out[0], (out[1], out[2])) if family == "dlr" else (out[0], out[1])


def padded(H, y, R):
    """Two-output observation equivalent to ``(H, y, R)`` (a zero row, unit noise)."""
    if H.shape[0] == 2:
        return H, y, R
    return (np.vstack([H, np.zeros_like(H)]), np.append(y, 0.0),
            np.diag([R[0, 0], 1.0]))


def observation(hessian, prob, mu):
    """The observation whose LIN-HESS curvature at ``mu`` is the ``hessian`` estimator's.

    ``lin_hess``: the data. ``lin_ef``: the pseudo-observation ``H' = g^T``, ``R' = 1``,
    ``y' = g^T mu + 1``, whose LIN-HESS pair is ``(g, -g g^T)``.
    """
    H, R = prob["H"], np.diag(prob["noise"])
    if hessian == "lin_hess":
        return padded(H, prob["y"], R)
    g = H.T @ np.linalg.solve(R, prob["y"] - H @ mu)
    return padded(g[None, :], np.array([g @ mu + 1.0]), np.eye(1))


def oracle_run(algorithm, family, hessian, prob, mu0, rep0, lr, n_inner):
    """Oracle result of a whole update (``n_inner`` inner steps for BLR / BBB)."""
    if hessian == "lin_hess":
        return oracle_step(algorithm, family, mu0, rep0, *observation(hessian, prob, mu0),
                           alpha=lr, n_inner=n_inner)
    mu, rep = mu0, rep0
    for _ in range(n_inner if algorithm in KL_RULES else 1):
        out = oracle_step(algorithm, family, mu, rep, *observation(hessian, prob, mu),
                          prior=(mu0, rep0), alpha=lr, n_inner=1)
        mu, rep = split(family, out)
    return out


def impl_step(config, state, prob, lr, via):
    """One skbong update on the problem's single row.

    ``via="filter"``: :func:`run_filter` on one row with an identity predict step
    (``dynamics_decay=1``, ``process_noise=0``). ``via="rule"``: :func:`apply_rule` with
    ``config.estimator`` (eager, no compilation of the whole step).
    """
    x, y, noise = (jnp.asarray(prob[k]) for k in ("x", "y", "noise"))
    key = jax.random.PRNGKey(0)
    if via == "filter":
        hyper = Hyperparameters(noise, 1.0, 0.0, lr)
        return run_filter(config, state, np.asarray(x)[None], np.asarray(y)[None], hyper, key=key)

    def curvature_at(current, inner_key):
        return config.estimator(config.apply_fn, config.likelihood, config.family, current,
                                x[None], y[None], jnp.ones(1, bool), noise, inner_key)

    return apply_rule(config.rule, config.family, state, curvature_at, jnp.asarray(lr), key)


def assert_close(actual, expected, tol=TOL):
    for a, e in zip(actual, expected, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), atol=tol, rtol=0)


def max_change(out, family, mu0, rep0):
    """Largest change of the mean and of the covariance parameters."""
    start = (mu0, *rep0) if family == "dlr" else (mu0, rep0)
    moves = [np.abs(np.asarray(a) - np.asarray(b)).max() for a, b in zip(out, start)]
    return moves[0], max(moves[1:])


def assert_valid(family, out):
    """Setup check: the oracle's belief is a proper Gaussian (moment steps can break this)."""
    if family in ("fc", "fc_mom"):
        assert np.linalg.eigvalsh(0.5 * (out[1] + out[1].T)).min() > 0, "choose a smaller step"
    elif family in ("diag", "diag_mom"):
        assert out[1].min() > 0, "choose a smaller step"


def oracle_cells():
    """``(algorithm, family, n_inner, n_out)`` for every cell the oracle covers.

    BLR / BBB: ``I = 1`` with one output and ``I = 3`` with two; BONG / BOG: one and two
    outputs.
    """
    cells = []
    for algorithm in ALGORITHMS:
        for family in FAMILIES:
            if family == "dlr" and algorithm not in ("bog", "bbb"):
                continue  # DLR natural steps are a projection: test_dlr_* below
            inner = (1, 3) if algorithm in KL_RULES else (1, 1)
            cells += [pytest.param(algorithm, family, i, c, id=f"{algorithm}-{family}-I{i}-C{c}")
                      for i, c in zip(inner, (1, 2))]
    return cells


@pytest.mark.parametrize("hessian", ["lin_hess", "lin_ef"])
@pytest.mark.parametrize("algorithm,family,n_inner,n_out", oracle_cells())
def test_step_matches_oracle(algorithm, family, n_inner, n_out, hessian, x64):
    """Tests 1 and 2: one LIN-HESS / LIN-EF update equals the oracle's, to 1e-8.

    LIN-HESS with two outputs goes through :func:`run_filter`, the other cases through
    :func:`apply_rule` (a compilation of the filter costs more than the whole eager step).
    """
    prob = problem(n_out)
    mu0, rep0 = prob["mu0"], prob["start"][family]
    lr = LEARNING_RATE[algorithm]
    rank = prob["W0"].shape[1]
    # The oracle writes the printed steps; the diagonal families' default BONG step is the
    # Kalman one (tests/core/test_families.py checks it against its own dense oracle).
    config = make_config(linear_apply, "gaussian", family, rank, algorithm, hessian, n_inner, 4, "projected")
    out = from_state(impl_step(config, to_state(family, mu0, rep0), prob, lr,
                               "filter" if (n_out, hessian) == (2, "lin_hess") else "rule"))
    expected = oracle_run(algorithm, family, hessian, prob, mu0, rep0, lr, n_inner)
    assert_valid(family, expected)
    assert min(max_change(expected, family, mu0, rep0)) > MIN_MOVE
    assert_close(out, expected)


# --------------------------------------------------------------------------------------
# DLR under BONG / BLR: FC natural step + rank-R projection (Eqs. 272-275)


def dlr_start(prob, rank, n_used):
    """DLR start with ``rank`` columns of which the first ``n_used`` are non-zero."""
    W0 = np.zeros((P, rank))
    W0[:, :n_used] = prob["W0"][:, :n_used]
    return prob["ups0"], W0


def dense_precision(ups, W):
    return np.diag(ups) + W @ W.T


def dlr_reference(algorithm, hessian, prob, ups0, W0, lr, n_inner, rank):
    """Dense slow reference of a BONG / BLR DLR update; returns ``(mu, Upsilon, W W^T)``.

    Each inner step: the oracle's FC step from the current (projected) iterate, with the
    FC prior ``(mu0, (Upsilon0 + W0 W0^T)^-1)``; then ``Lambda' - diag(Upsilon~)`` is
    eigendecomposed, its top ``rank`` eigenpairs give ``W W^T``, and the rest's diagonal
    is added to ``Upsilon~ = Upsilon`` (BONG) or ``(1 - lr) Upsilon + lr Upsilon0`` (BLR).
    """
    mu0 = prob["mu0"]
    S0 = np.linalg.inv(dense_precision(ups0, W0))
    mu, ups, WW = mu0, ups0, W0 @ W0.T
    for _ in range(n_inner if algorithm in KL_RULES else 1):
        S = np.linalg.inv(np.diag(ups) + WW)
        mu_new, S_new = oracle_step(algorithm, "fc", mu, S, *observation(hessian, prob, mu),
                                    prior=(mu0, S0), alpha=lr, n_inner=1)
        ups_t = ups if algorithm == "bong" else (1 - lr) * ups + lr * ups0
        M = np.linalg.inv(S_new) - np.diag(ups_t)
        evals, evecs = np.linalg.eigh(0.5 * (M + M.T))
        top = evecs[:, -rank:] * evals[-rank:]
        WW = top @ evecs[:, -rank:].T
        mu, ups = mu_new, ups_t + np.diag(M - WW)
    return mu, ups, WW


DLR_CASES = [pytest.param(a, h, i, id=f"{a}-{h}-I{i}") for h in ("lin_hess", "lin_ef")
             for a, i in (("bong", 1), ("blr", 1), ("blr", 3))]


@pytest.mark.parametrize("algorithm,hessian,n_inner", DLR_CASES)
def test_dlr_natural_without_truncation_is_fc(algorithm, hessian, n_inner, x64):
    """Test 3a: rank >= rank of the extended factor, so no truncation: the DLR update
    (precision ``Upsilon + W W^T`` and mean) is the oracle's FC update.

    ``W0`` has one non-zero column out of 4, ``C = 2``: the extended factor has rank at
    most 1 + 2 (LIN-HESS, ``U = H^T R^-1/2`` is constant) or 1 + I (LIN-EF), both <= 4.
    """
    prob, rank, lr = problem(2), 4, LEARNING_RATE[algorithm]
    ups0, W0 = dlr_start(prob, rank, 1)
    config = make_config(linear_apply, "gaussian", "dlr", rank, algorithm, hessian, n_inner, 4)
    mu, ups, W = from_state(impl_step(config, to_state("dlr", prob["mu0"], (ups0, W0)), prob, lr,
                                      "filter" if n_inner > 1 else "rule"))
    S0 = np.linalg.inv(dense_precision(ups0, W0))
    mu_fc, S_fc = oracle_run(algorithm, "fc", hessian, prob, prob["mu0"], S0, lr, n_inner)
    assert np.abs(np.linalg.inv(S_fc) - dense_precision(ups0, W0)).max() > MIN_MOVE
    assert_close((mu, dense_precision(ups, W)), (mu_fc, np.linalg.inv(S_fc)))
    # Nothing was discarded: Upsilon~ (= Upsilon0 at every inner step here) is kept.
    assert_close((ups,), (ups0,))


@pytest.mark.parametrize("algorithm,hessian,n_inner", DLR_CASES)
def test_dlr_natural_with_truncation_matches_dense_projection(algorithm, hessian, n_inner, x64):
    """Test 3b: rank 2 with a full random ``W0`` and ``C = 2``, so the extended factor has
    ``R + C`` (LIN-HESS) or ``R + 1`` (LIN-EF) columns for BONG and ``2R + C`` or ``2R + 1``
    for BLR and is truncated: ``Upsilon``, ``W W^T`` (``W`` is unique up to a rotation) and
    the mean equal :func:`dlr_reference`."""
    prob, rank, lr = problem(2, seed=1), 2, LEARNING_RATE[algorithm]
    ups0, W0 = dlr_start(prob, rank, rank)
    config = make_config(linear_apply, "gaussian", "dlr", rank, algorithm, hessian, n_inner, 4)
    mu, ups, W = from_state(impl_step(config, to_state("dlr", prob["mu0"], (ups0, W0)), prob, lr,
                                      "filter" if n_inner > 1 else "rule"))
    mu_r, ups_r, WW_r = dlr_reference(algorithm, hessian, prob, ups0, W0, lr, n_inner, rank)
    # The projection is not trivial: the rank-R belief differs from the FC one.
    S0 = np.linalg.inv(dense_precision(ups0, W0))
    _, S_fc = oracle_run(algorithm, "fc", hessian, prob, prob["mu0"], S0, lr, n_inner)
    assert np.abs(np.diag(ups_r) + WW_r - np.linalg.inv(S_fc)).max() > MIN_MOVE
    assert W.shape == (P, rank)
    assert_close((mu, ups, W @ W.T), (mu_r, ups_r, WW_r))


# --------------------------------------------------------------------------------------
# Monte-Carlo estimators against closed forms


N_KEYS = 20000


def mc_problem(seed=3, rank=2, n_rows=3):
    """Batch of ``n_rows`` rows with ``C = 2`` outputs (P = 6): ``A`` is full rank."""
    rng = np.random.default_rng(seed)
    C, D = 2, P // 2
    X = rng.normal(size=(n_rows, D)) / np.sqrt(D)
    noise = rng.uniform(0.5, 1.5, C)
    mu = rng.normal(size=P)
    Hs = [design(x, C) for x in X]
    Y = np.stack([H @ mu for H in Hs]) + rng.normal(size=(n_rows, C))
    A_ = rng.normal(size=(P, P))
    S = A_ @ A_.T / (2 * P) + 0.3 * np.eye(P)
    reps = {"fc": S, "diag": rng.uniform(0.3, 1.5, P),
            "dlr": (rng.uniform(0.7, 2.0, P), rng.normal(size=(P, rank)))}
    Rinv = np.diag(1 / noise)
    A_rows = [H.T @ Rinv @ H for H in Hs]
    g_rows = [H.T @ Rinv @ (y - H @ mu) for H, y in zip(Hs, Y)]
    return dict(X=X, Y=Y, noise=noise, mu=mu, reps=reps, A_rows=A_rows, g_rows=g_rows,
                A=sum(A_rows), g=sum(g_rows), rank=rank)


def dense_cov(family, rep):
    if family == "fc":
        return rep
    if family == "diag":
        return np.diag(rep)
    return np.linalg.inv(dense_precision(*rep))


@partial(jax.jit, static_argnames=("config", "estimator"))
def _estimates(config, estimator, state, X, Y, noise, keys):
    """The estimator's curvature for each key (vmapped; one compilation per config)."""
    mask = jnp.ones(X.shape[0], bool)
    return jax.vmap(lambda k: estimator(config.apply_fn, config.likelihood, config.family, state,
                                        X, Y, mask, noise, k))(keys)


def estimates(family, hessian, n_samples, prob, n_keys=N_KEYS, seed=0):
    """``n_keys`` curvature estimates from independent keys at the problem's belief."""
    # make_config's lin_hess cell gives the family object (mc_hess x dlr is not a
    # filter cell, but its estimator is well defined and samples through family.sample).
    config = make_config(linear_apply, "gaussian", family, prob["rank"], "bong", "lin_hess")
    keys = jax.random.split(jax.random.PRNGKey(seed), n_keys)
    state = to_state(family, prob["mu"], prob["reps"][family])
    return _estimates(config, HESSIANS[hessian](n_samples), state, jnp.asarray(prob["X"]),
                      jnp.asarray(prob["Y"]), jnp.asarray(prob["noise"]), keys)


def assert_mean_within_se(samples, expected, z=Z):
    """The sample mean over axis 0 is within ``z`` standard errors of ``expected``."""
    samples = np.asarray(samples)
    se = samples.std(axis=0, ddof=1) / np.sqrt(samples.shape[0])
    assert se.max() > 1e-4, "no randomness: the check would be vacuous"
    err = np.abs(samples.mean(axis=0) - expected)
    assert np.all(err <= z * se + 1e-12), f"max |err| / se = {np.max(err / (se + 1e-300)):.2f}"


def assert_cov_close(samples, expected, rtol=0.05):
    """Sample covariance over axis 0 within ``rtol`` (relative Frobenius) of ``expected``."""
    cov = np.cov(np.asarray(samples), rowvar=False)
    rel = np.linalg.norm(cov - expected) / np.linalg.norm(expected)
    assert rel < rtol, f"relative error of the covariance {rel:.3f}"


MC_CASES = [pytest.param(f, h, id=f"{h}-{f}") for h in ("mc_hess", "mc_ef") for f in ("fc", "diag", "dlr")]


@pytest.mark.parametrize("family,hessian", MC_CASES)
def test_mc_estimator_moments(family, hessian, x64):
    """Test 4: unbiasedness of ``g`` and ``G`` and the ``1 / M`` covariance of ``g``."""
    prob = mc_problem()
    Sigma = dense_cov(family, prob["reps"][family])
    A = prob["A"]
    grad_cov = {}
    # The 1 / M scaling is the estimator's, not the family's: M = 16 for fc only.
    for n_samples in (4, 16) if family == "fc" else (4,):
        est = estimates(family, hessian, n_samples, prob, seed=n_samples)
        grads = np.asarray(est.grad)
        assert_mean_within_se(grads, prob["g"])
        grad_cov[n_samples] = np.cov(grads, rowvar=False)
        assert_cov_close(grads, A @ Sigma @ A / n_samples)
        if n_samples != 4:
            continue
        if hessian == "mc_ef":
            # Each draw's gradient is a root column, so g = root @ coords for every key.
            np.testing.assert_allclose(np.einsum("kpi,ki->kp", est.root, est.coords), grads, rtol=1e-10, atol=1e-12)
            G = -np.einsum("kpi,kqi->kpq", est.root, est.root).reshape(N_KEYS, -1)
            EG = -sum(np.outer(g, g) + Ab @ Sigma @ Ab for g, Ab in zip(prob["g_rows"], prob["A_rows"]))
            assert_mean_within_se(G, EG.ravel())
        elif family == "diag":  # Hutchinson: unbiased, variance sum_{k != j} A_jk^2 / M
            diag = np.asarray(est.hessian_diag)
            assert_mean_within_se(diag, -np.diag(A))
            off = A - np.diag(np.diag(A))
            np.testing.assert_allclose(diag.var(axis=0, ddof=1), (off ** 2).sum(1) / n_samples, rtol=0.05)
        else:  # the Hessian of a linear-Gaussian model is constant: exact for every key
            np.testing.assert_allclose(np.asarray(est.hessian), np.broadcast_to(-A, est.hessian.shape),
                                       atol=TOL, rtol=0)
    if 16 in grad_cov:
        ratio = np.trace(grad_cov[4]) / np.trace(grad_cov[16])
        assert 2.5 < ratio < 6, ratio


@partial(jax.jit, static_argnames="config")
def _mc_steps(config, state, x, y, noise, keys):
    """One update per key through :func:`apply_rule` (vmapped)."""

    def one(key):
        def curvature_at(current, inner_key):
            return config.estimator(config.apply_fn, config.likelihood, config.family, current,
                                    x[None], y[None], jnp.ones(1, bool), noise, inner_key)

        return apply_rule(config.rule, config.family, state, curvature_at, jnp.asarray(1.0, x.dtype), key)

    return jax.vmap(one)(keys)


@pytest.mark.parametrize("family", ["fc", "fc_mom"])
def test_bong_mc_hess_step_is_unbiased_lin_hess_step(family, x64):
    """Test 5: BONG-MC-HESS on fc / fc_mom: deterministic covariance equal to the LIN-HESS
    oracle's; mean unbiased for the oracle's, with covariance ``K (A Sigma A / M) K^T``
    where ``K`` is the gain of the mean step (Eq. 118: new Sigma; Eq. 167: old Sigma)."""
    prob, M, n_keys = problem(2, seed=2), 4, N_KEYS
    mu0, S0 = prob["mu0"], prob["start"][family]
    config = make_config(linear_apply, "gaussian", family, 2, "bong", "mc_hess", 1, M)
    keys = jax.random.split(jax.random.PRNGKey(5), n_keys)
    data = (jnp.asarray(prob[k]) for k in ("x", "y", "noise"))
    out = _mc_steps(config, to_state(family, mu0, S0), *data, keys)
    mu_o, S_o = oracle_run("bong", family, "lin_hess", prob, mu0, S0, 1.0, 1)
    assert np.abs(S_o - S0).max() > MIN_MOVE
    np.testing.assert_allclose(np.asarray(out.cov), np.broadcast_to(S_o, out.cov.shape), atol=TOL, rtol=0)
    means = np.asarray(out.mean)
    assert_mean_within_se(means, mu_o)
    A = prob["H"].T @ np.diag(1 / prob["noise"]) @ prob["H"]
    gain = S_o if family == "fc" else S0
    assert_cov_close(means, gain @ A @ S0 @ A @ gain.T / M)
