"""The R-VGA paper's synthetic logistic-regression experiments (Sec. 6, App. 9.6): implicit
against explicit R-VGA and the EKF, one pass, KL to the posterior against t (issue 21, item 2).

Protocol (R-VGA Sec. 6): ``N`` inputs, half from each of two Gaussians with means
``+-mu_1``, ``||2 mu_1|| = s`` (a random direction), covariance
``C = M^T diag(1, 1/2^c, .., 1/d^c) M`` with ``M`` a random rotation (``c = 0``: "isotropic"),
each class's deviations divided by the norm of their per-coordinate standard deviations
(the paper's ``x_i <- mu_i + (x_i - mu_i) / ||std(x_i)||``); label 1 for the first class; the
stream in random order; prior ``N(mu_0, sigma_0^2 I)`` with ``mu_0`` along the all-ones
direction. Algorithms, float64, one pass:

* implicit R-VGA, Eqs. 73-77 (``ImplicitRVGA()``, ``Logistic(InverseProbit())``);
* explicit R-VGA, Eqs. 78-80 (``ExplicitRVGA()``, same integrals);
* the EKF, Eq. 81: BONG-LIN-HESS-FC on the two-class logits ``[0, x^T theta]``
  (``tests/core/test_rvga.py`` checks that it is Eq. 81);
* the batch Laplace approximation on all ``N`` rows (Newton to convergence), a constant line.

Metrics at 20 equally spaced ``t``: (a) the paper's unnormalised ``KL(q_t || p(theta | Y_N))``
(Eq. 93 with ``log Z_p = 0``), its expectations computed by a fine 1-D quadrature per row
instead of the paper's Monte Carlo (Eq. 94), so exact differences between methods; (b) the
closed-form ``KL(q_t || Laplace)``; (c) in ``d = 2``, the true ``KL(q_t || p(theta | Y_N))``, with
``log Z_p`` from a grid (the paper's own 2-D reference). Mean +- standard error over seeds.

    python benchmarks/rvga_logistic.py [--seeds 8]
"""

from __future__ import annotations

import argparse
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from _report import RESULTS, markdown_table, write  # noqa: E402
from skbong.core import (  # noqa: E402
    ExplicitRVGA,
    FullCovState,
    Hyperparameters,
    ImplicitRVGA,
    Logistic,
    make_config,
    run_filter,
    run_rvga,
)

N_CHECKPOINTS = 20
# name: (figure of the paper, d, N, s, c, sigma0, norm of mu0)
CONFIGS = {
    "2-D, sigma0=1, mu0 norm 0.1": ("Fig. 3", 2, 300, 2.0, 0.0, 1.0, 0.1),
    "2-D, sigma0=10, mu0 norm 1": ("Fig. 4", 2, 300, 2.0, 0.0, 10.0, 1.0),
    "2-D, sigma0=100, mu0 norm 10": ("Fig. 5", 2, 300, 2.0, 0.0, 100.0, 10.0),
    "d=30, sigma0=1": ("Fig. 7", 30, 500, 2.0, 0.0, 1.0, 0.0),
    "d=70, sigma0=1": ("Fig. 7", 70, 500, 2.0, 0.0, 1.0, 0.0),
    "d=100, sigma0=1": ("Fig. 7", 100, 500, 2.0, 0.0, 1.0, 0.0),
    "d=30, sigma0=30": ("Fig. 8", 30, 500, 2.0, 0.0, 30.0, 0.0),
    "d=70, sigma0=30": ("Fig. 8", 70, 500, 2.0, 0.0, 30.0, 0.0),
    "d=100, sigma0=30": ("Fig. 8", 100, 500, 2.0, 0.0, 30.0, 0.0),
    "d=100, s=1, sigma0=10": ("Fig. 9", 100, 200, 1.0, 0.0, 10.0, 0.0),
    "d=100, s=5, sigma0=10": ("Fig. 9", 100, 200, 5.0, 0.0, 10.0, 0.0),
    "d=100, ill-cond. c=1, sigma0=10": ("Fig. 10", 100, 200, 2.0, 1.0, 10.0, 0.0),
}
METHODS = ("implicit R-VGA", "explicit R-VGA", "EKF")
# Trapezoid nodes for E[f(a)], a ~ N(m, v): exact to ~1e-12 for log-sigmoid at any v seen here.
_Z = np.linspace(-12.0, 12.0, 2401)
_W = np.exp(-0.5 * _Z**2) / np.sum(np.exp(-0.5 * _Z**2))


def make_data(n: int, d: int, s: float, c: float, rng: np.random.Generator):
    rotation = np.linalg.qr(rng.normal(size=(d, d)))[0]
    chol = np.linalg.cholesky(rotation.T @ np.diag(np.arange(1, d + 1, dtype=float) ** -c) @ rotation)
    direction = rng.normal(size=d)
    mean1 = 0.5 * s * direction / np.linalg.norm(direction)
    halves = []
    for mean in (mean1, -mean1):
        noise = rng.normal(size=(n // 2, d)) @ chol.T
        halves.append(mean + noise / np.linalg.norm(noise.std(0)))
    X = np.vstack(halves)
    y = np.r_[np.ones(n // 2), np.zeros(n - n // 2)]
    order = rng.permutation(n)
    return X[order], y[order]


def laplace(X, y, mean0, sigma0):
    """Batch MAP by damped Newton and the inverse Hessian there."""
    theta, signs = mean0.copy(), 2 * y - 1

    def loss(th):
        return np.sum(np.logaddexp(0, -signs * (X @ th))) + 0.5 * np.sum((th - mean0) ** 2) / sigma0**2

    for _ in range(200):
        p = 1 / (1 + np.exp(-(X @ theta)))
        grad = X.T @ (p - y) + (theta - mean0) / sigma0**2
        hess = (X.T * (p * (1 - p))) @ X + np.eye(len(theta)) / sigma0**2
        step = np.linalg.solve(hess, grad)
        rate = 1.0
        while loss(theta - rate * step) > loss(theta) and rate > 1e-10:
            rate /= 2
        theta = theta - rate * step
        if np.abs(grad).max() < 1e-10:
            break
    p = 1 / (1 + np.exp(-(X @ theta)))
    return theta, np.linalg.inv((X.T * (p * (1 - p))) @ X + np.eye(len(theta)) / sigma0**2)


@jax.jit
def unnormalised_kl(mean, cov, X, y, mean0, sigma0):
    """``KL(N(mean, cov) || p(theta | Y_N)) - log Z_p`` (R-VGA Eq. 93), rows by 1-D quadrature."""
    d = mean.shape[0]
    a_mean, a_var = X @ mean, jnp.einsum("ij,jk,ik->i", X, cov, X)
    a = a_mean[:, None] + jnp.sqrt(jnp.maximum(a_var, 0))[:, None] * _Z
    expected_loglik = jnp.sum(jax.nn.log_sigmoid((2 * y - 1)[:, None] * a) @ _W)
    expected_logprior = (-0.5 * (jnp.trace(cov) + jnp.sum((mean - mean0) ** 2)) / sigma0**2
                         - 0.5 * d * jnp.log(2 * jnp.pi * sigma0**2))
    entropy = 0.5 * jnp.linalg.slogdet(cov)[1] + 0.5 * d * (1 + jnp.log(2 * jnp.pi))
    return -expected_loglik - expected_logprior - entropy


def gaussian_kl(mean, cov, mean_ref, cov_ref):
    """``KL(N(mean, cov) || N(mean_ref, cov_ref))``."""
    prec = np.linalg.inv(cov_ref)
    diff = mean_ref - mean
    return 0.5 * (np.trace(prec @ cov) + diff @ prec @ diff - len(mean) + np.linalg.slogdet(cov_ref)[1]
                  - np.linalg.slogdet(cov)[1])


def log_evidence_2d(X, y, mean0, sigma0, map_, cov_map):
    """``log Z_p`` on an 800^2 grid around the MAP, widened until the edge is negligible."""
    signs = 2 * y - 1
    half = 12 * np.sqrt(np.diag(cov_map))
    for _ in range(8):
        axes = [np.linspace(map_[i] - half[i], map_[i] + half[i], 800) for i in range(2)]
        T = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 2)
        logp = (-np.logaddexp(0, -(T @ X.T) * signs).sum(1) - 0.5 * np.sum((T - mean0) ** 2, 1) / sigma0**2
                - np.log(2 * np.pi * sigma0**2))
        grid = logp.reshape(800, 800)
        edge = max(grid[0].max(), grid[-1].max(), grid[:, 0].max(), grid[:, -1].max())
        if edge < grid.max() - 30:
            cell = (axes[0][1] - axes[0][0]) * (axes[1][1] - axes[1][0])
            return grid.max() + np.log(np.exp(grid - grid.max()).sum() * cell)
        half = 2 * half
    raise RuntimeError("the 2-D posterior grid did not contain the posterior mass")


def _logit_pair(theta, x):
    a = x @ theta
    return jnp.stack([jnp.zeros_like(a), a], axis=-1)


EKF = make_config(_logit_pair, "categorical", "fc", 1, "bong", "lin_hess")
HYPER = Hyperparameters(1.0, 1.0, 0.0, 1.0)


def trajectories(X, y, state0):
    """Beliefs of each method at the N_CHECKPOINTS equally spaced t."""
    n = X.shape[0]
    stops = np.linspace(0, n, N_CHECKPOINTS + 1).astype(int)
    out = {}
    for name in METHODS:
        state, beliefs = state0, []
        for start, stop in zip(stops[:-1], stops[1:]):
            if name == "EKF":
                state = run_filter(EKF, state, X[start:stop], np.eye(2)[y[start:stop].astype(int)], HYPER, n_seen=start)
            else:
                scheme = ImplicitRVGA() if name.startswith("implicit") else ExplicitRVGA()
                state = run_rvga(scheme, Logistic(), state, X[start:stop], y[start:stop])
            beliefs.append((np.asarray(state.mean), np.asarray(state.cov)))
        out[name] = beliefs
    return stops[1:], out


def run_config(figure, d, n, s, c, sigma0, mu0_norm, seed):
    rng = np.random.default_rng(seed)
    X, y = make_data(n, d, s, c, rng)
    mean0 = np.full(d, mu0_norm / np.sqrt(d))
    state0 = FullCovState(jnp.asarray(mean0), jnp.asarray(sigma0**2 * np.eye(d)))
    map_, cov_map = laplace(X, y, mean0, sigma0)
    ts, beliefs = trajectories(X, y, state0)
    log_z = log_evidence_2d(X, y, mean0, sigma0, map_, cov_map) if d == 2 else 0.0
    Xj, yj = jnp.asarray(X), jnp.asarray(y)

    def kl(mean, cov):
        if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(cov))) or np.linalg.eigvalsh(cov).min() <= 0:
            return np.nan, np.nan
        value = float(unnormalised_kl(jnp.asarray(mean), jnp.asarray(cov), Xj, yj, jnp.asarray(mean0), sigma0))
        return value + log_z, gaussian_kl(mean, cov, map_, cov_map)

    result = {name: np.array([kl(*b) for b in beliefs[name]]) for name in METHODS}
    result["Laplace"] = np.array([kl(map_, cov_map)] * len(ts))
    return ts, result


def mean_se(values):
    values = np.asarray(values, float)
    ok = values[np.isfinite(values)]
    if len(ok) == 0:
        return "diverged"
    se = ok.std(ddof=1) / np.sqrt(len(ok)) if len(ok) > 1 else 0.0
    note = "" if len(ok) == len(values) else f" ({len(values) - len(ok)} nan)"
    return f"{ok.mean():.3g} ± {se:.2g}{note}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=8)
    args = parser.parse_args()
    started = time.perf_counter()
    results = {}
    for name, config in CONFIGS.items():
        runs = [run_config(*config, seed) for seed in range(args.seeds)]
        ts = runs[0][0]
        results[name] = (ts, {m: np.stack([r[1][m] for r in runs]) for m in (*METHODS, "Laplace")})
        finals = {m: results[name][1][m][:, -1, 0] for m in (*METHODS, "Laplace")}
        print(f"{name:35s} " + "  ".join(f"{m}: {mean_se(v)}" for m, v in finals.items()), flush=True)
    elapsed = time.perf_counter() - started

    header = ["config", "paper", "d", "N", "s", "c", "sigma0", "norm of mu0", "metric at t = N", *METHODS, "batch Laplace",
              "implicit < explicit", "implicit < EKF"]
    rows = []
    for name, (figure, d, n, s, c, sigma0, mu0) in CONFIGS.items():
        _, res = results[name]
        kinds = [(0, "KL to posterior" if d == 2 else "KL to posterior - log Z"), (1, "KL to Laplace")]
        for index, label in kinds:
            finals = {m: res[m][:, -1, index] for m in (*METHODS, "Laplace")}
            wins = [f"{np.sum(finals['implicit R-VGA'] < finals[m])}/{args.seeds}" for m in METHODS[1:]]
            rows.append([name, figure, d, n, s, c, sigma0, mu0, label, *(mean_se(finals[m]) for m in METHODS),
                         mean_se(finals["Laplace"]) if index == 0 else "0", *wins])
    table = markdown_table(header, rows)
    print(table)
    print(f"total {elapsed:.0f} s")
    plot(results, RESULTS / "rvga_logistic.png")
    body = "\n\n".join([__doc__.split("\n\n    python")[0], f"{args.seeds} seeds; total run time {elapsed:.0f} s.",
                        table, FINDINGS])
    print(f"wrote {write('rvga_logistic', 'R-VGA on the paper’s synthetic logistic regression', body)}")


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    cols = 4
    n_rows = int(np.ceil(len(names) / cols))
    fig, axes = plt.subplots(n_rows, cols, figsize=(4.2 * cols, 3.3 * n_rows))
    colours = {"implicit R-VGA": "C0", "explicit R-VGA": "C1", "EKF": "C2", "Laplace": "C3"}
    for ax, name in zip(axes.flat, names):
        ts, res = results[name]
        for method, colour in colours.items():
            values = res[method][:, :, 0]
            mean = np.nanmean(values, 0)
            se = np.nanstd(values, 0, ddof=1) / np.sqrt(np.sum(np.isfinite(values), 0))
            style = "--" if method == "Laplace" else "-"
            ax.plot(ts, mean, style, color=colour, label=method)
            ax.fill_between(ts, mean - se, mean + se, color=colour, alpha=0.2)
        ax.set_yscale("log")
        ax.set(title=f"{name} ({CONFIGS[name][0]})", xlabel="t")
        ax.title.set_fontsize(9)
    for ax in axes.flat[len(names):]:
        ax.axis("off")
    axes.flat[0].set_ylabel("KL(q_t || p(theta | Y_N))")
    axes.flat[cols].set_ylabel("KL - log Z_p (unnormalised)")
    axes.flat[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


FINDINGS = """## What the paper claims, and what skbong finds

The paper's figures are plots without tabulated values, and its KL is unnormalised
(``log Z_p = 0``, Monte-Carlo expectations), so only its qualitative claims can be compared;
the 2-D rows here give the true (normalised) KL. The paper's N and s for Figs. 3-5 and 7-8
and its c for Fig. 10 are not stated; the values above are this benchmark's choices.

1. *R-VGA outperforms the EKF* (Secs. 6.2-6.3, Figs. 3-10, and the conclusion). Reproduced:
   the implicit R-VGA ends with a lower KL than the EKF on every seed of every
   high-dimensional configuration and of the 2-D sigma0 = 1 one, by a wide margin once
   sigma0 is large (column "implicit < EKF").
2. *The EKF "performs quite well on some experiments, and might even beat R-VGA sometimes,
   see Figure 4", but "may even prove unreliable as shown in Figure 5"* (Sec. 6.2).
   Reproduced: in the Fig. 4 setting (2-D, sigma0 = 10) the EKF's KL is below both R-VGA
   schemes over most of the stream and ends below the implicit scheme's on 4 of 8 seeds; in
   the Fig. 5 setting (sigma0 = 100, norm of mu_0 = 10) it ends orders of magnitude above the
   others on most seeds (mean 4.5e4 nats), though below the implicit scheme on 2 of 8.
3. *The explicit scheme "runs a close second in most experiments", "close to the implicit
   scheme's but tend[s] to degrade for large sigma0"* (Secs. 6.2-6.3). Reproduced: the implicit
   scheme's final KL to the posterior is lower than the explicit scheme's on every seed of
   every configuration; with sigma0 = 1 the gap is 2-3% (d = 30-100), with sigma0 = 30
   (Fig. 8 setting) it is 40-65%, and in the 2-D sigma0 = 100 setting the explicit KL is 3.7
   times the implicit one; the explicit scheme stays far below the EKF whenever sigma0 >= 10
   in d = 100.
4. *Discrepancies are moderate for a weighty prior (sigma0 = 1, Fig. 7) and stark for a flat
   one (sigma0 = 30, Fig. 8)*. Reproduced at d = 30, 70 and 100, with the same ordering
   (implicit < explicit < EKF) at every d.
5. *R-VGA "is even susceptible to beat the batch Laplace approximation" when the posterior is
   sharp* (Figs. 6, 9, 10). Reproduced in the sharp high-dimensional cases (sigma0 = 10 or 30):
   the Laplace Gaussian puts mass where the posterior has almost none, and its unnormalised
   KL (the same constant ``-log Z_p`` for all methods) is 10-220 times the implicit R-VGA's.
   With sigma0 = 1, and in 2-D, batch Laplace stays best, as in the paper's Figs. 3-4.

Also seen: with sigma0 = 30 the R-VGA's KL to the final posterior is lowest near t = 100 and
then rises slowly (the one-pass approximation errors accumulate); the KL-to-Laplace rows rank
the methods like the KL to the posterior when Laplace is accurate (sigma0 = 1) and are no
measure of quality when it is not (there the explicit scheme is nearer to Laplace than the
implicit one is).
"""

if __name__ == "__main__":
    main()
