"""Piecewise-stationary 1-D regression with concept drift (LO-FI paper App. D.2, Figs. 8-9).

The data-generating process of the paper: ``x ~ Unif(-2, 2)``, ``y ~ N(f_k(x), sigma^2)``
with ``f_k(x) = x + 0.3 sin(w0_k + w1_k pi x)``; the function switches, unannounced, every
250 rows. The paper leaves ``sigma``, the number of tasks and the law of ``w_k`` unstated;
here ``sigma = NOISE``, ``TASKS`` tasks, phase ``w0 ~ Unif(0, 2 pi)`` and frequency
``w1 ~ Unif(0.5, 1.5)`` (one to three periods over the input range). Every learner is a
one-hidden-layer MLP of 50 tanh units (the paper: "a one-layer MLP (with 50 hidden
units)"; P = 151 weights) fed the stream in chunks of ``CHUNK`` rows through
``partial_fit``, one update per row.

Methods: ``BONGRegressor`` with the full-covariance family (FC-EKF), DLR rank 10 (LO-FI)
and the diagonal family (VD-EKF), each with the random-walk dynamics (``process_noise``
tuned), LO-FI also with static weights; ``MLPRegressor(50, tanh)`` with Adam and
``batch_size=1``, and ``SGDRegressor`` (a line: the reference a network must beat). The
scikit-learn regressors get their targets standardised by the first chunk's mean and
standard deviation, as ``BONGRegressor`` does internally.

Metric (the paper's Fig. 9): RMSE of the prediction against the current task's true
function ``f_k`` on 200 evenly spaced inputs, every ``EVERY`` rows. Tuning: every grid is
run once on a validation stream with other functions (seed ``TUNE_SEED``), scored by the
RMSE averaged over its checkpoints; the winner serves every reported seed.

Writes ``results/piecewise_regression.{md,png,json}``.

    python benchmarks/piecewise_regression.py [--seeds 5] [--quick]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import NamedTuple

import numpy as np
from sklearn.linear_model import SGDRegressor
from sklearn.neural_network import MLPRegressor

from _nonstationary import (FirstChunkScaled, Method, fmt, hp_text, one_candidate, plot_curves, quiet, run_stream,
                            skbong_source, tune_each, verdict_lines)
from _report import RESULTS, markdown_table, write
from skbong import BONGRegressor

TASKS, TASK_ROWS, NOISE = 10, 250, 0.1
CHUNK = EVERY = 10
TUNE_SEED = 1000
GRID_X = np.linspace(-2, 2, 200)[:, None]
AFTER = 50  # rows after a change over which adaptation is measured


def bong(family):
    def make(seed, **hp):
        return BONGRegressor(hidden_layer_sizes=(50,), activation="tanh", family=family, rank=10,
                             random_state=seed, **hp)
    return make


def mlp(seed, **hp):
    return FirstChunkScaled(MLPRegressor(hidden_layer_sizes=(50,), activation="tanh", solver="adam", batch_size=1,
                                         shuffle=False, random_state=seed, **hp))


def sgd(seed, **hp):
    return FirstChunkScaled(SGDRegressor(learning_rate="constant", shuffle=False, random_state=seed, **hp))


DYNAMICS = {"sigma0": (0.3, 1.0, 3.0, 10.0, 30.0, 100.0), "process_noise": (1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3),
            "obs_noise": (0.01, 0.1)}

#: label -> Method (factory, grid tuned on the validation stream). A new drift option of the
#: estimators is one more entry.
METHODS = {
    "BONG FC + dynamics (FC-EKF)": Method(bong("fc"), DYNAMICS),
    "BONG DLR-10 + dynamics (LO-FI)": Method(bong("dlr"), DYNAMICS),
    "BONG diag + dynamics (VD-EKF)": Method(bong("diag"), DYNAMICS),
    "BONG DLR-10 static": Method(bong("dlr"), {"sigma0": (0.1, *DYNAMICS["sigma0"]), "obs_noise": (0.01, 0.1)}),
    "MLPRegressor(50) Adam": Method(mlp, {"learning_rate_init": (1e-3, 3e-3, 1e-2, 3e-2)}),
    "SGDRegressor (linear)": Method(sgd, {"eta0": (1e-3, 1e-2, 0.1)}),
}
QUICK = {"sigma0": 0.3, "process_noise": 1e-3, "obs_noise": 0.01, "learning_rate_init": 1e-2, "eta0": 1e-2}


class Stream(NamedTuple):
    X: np.ndarray  # (TASKS * TASK_ROWS, 1)
    y: np.ndarray
    truth: np.ndarray  # (TASKS, 200): f_k on GRID_X


def make_stream(seed: int, n_tasks: int = TASKS) -> Stream:
    rng = np.random.default_rng(seed)
    phase, freq = rng.uniform(0, 2 * np.pi, n_tasks), rng.uniform(0.5, 1.5, n_tasks)

    def f(k, x):
        return x + 0.3 * np.sin(phase[k] + freq[k] * np.pi * x)

    task = np.repeat(np.arange(n_tasks), TASK_ROWS)
    X = rng.uniform(-2, 2, size=(len(task), 1))
    y = f(task, X[:, 0]) + NOISE * rng.normal(size=len(task))
    return Stream(X, y, np.stack([f(k, GRID_X[:, 0]) for k in range(n_tasks)]))


def run(est, stream: Stream, every: int, strict: bool = False, keep_fits: bool = False) -> dict:
    def evaluate(est, stop):
        pred = est.predict(GRID_X)
        rmse = float(np.sqrt(np.mean((pred - stream.truth[(stop - 1) // TASK_ROWS]) ** 2)))
        return rmse, (pred if keep_fits and stop % TASK_ROWS == 0 else None)

    out = run_stream(est, stream.X, stream.y, CHUNK, every, evaluate, strict)
    out["rmse"] = np.array([r[0] for r in out["records"]])
    out["fits"] = [r[1] for r in out["records"] if r[1] is not None]
    del out["records"]
    return out


COLUMNS = ["RMSE, mean over time", f"RMSE, first {AFTER} rows after a change", "RMSE, end of each task",
           "training s", "training CPU s"]


def summary(out: dict) -> dict:
    n, rmse = out["n"], out["rmse"]
    since_change = (n - 1) % TASK_ROWS
    after = (since_change < AFTER) & (n > TASK_ROWS)
    return {
        COLUMNS[0]: rmse.mean(),
        COLUMNS[1]: rmse[after].mean(),
        COLUMNS[2]: rmse[n % TASK_ROWS == 0].mean(),
        COLUMNS[3]: out["train_s"],
        COLUMNS[4]: out["train_cpu_s"],
        "chunks refused": out["skipped"],
    }


PAPER = (
    "**What the paper found** (App. D.2, Figs. 8-9; one-layer MLP of 50 units, 250 rows per task): the test "
    "RMSE on the current function spikes at every change; 'FCEKF adapts the fastest, followed by LO-FI and then "
    "LRVGA. SGD and the diagonal methods are less sample efficient. However, after a sufficient number of "
    "training examples, most methods converge to a good fit.'"
)

#: Reading of the committed run (written after it; the lines above it in the report are computed).
NOTES = """**Reading** (written after the run; the numbers are the table's).

- *Does skbong reproduce the paper?* Over time and at the end of a task, yes, in the paper's order FC-EKF <
  LO-FI < VD-EKF < the gradient learners: RMSE over time 0.099, 0.106, 0.194 against SGDRegressor's 0.223 (FC-EKF
  minus LO-FI -0.007 +- 0.003 paired over seeds), at the end of a task 0.054, 0.063, 0.161 against 0.221 (FC-EKF
  minus LO-FI -0.009 +- 0.003). Adaptation (the first 50 rows after a change): the full-covariance EKF is fastest
  (0.178), LO-FI next (0.204), but the diagonal VD-EKF (0.233) is slower than SGDRegressor's straight line
  (0.221), which never fits the wiggle and so loses little at a change.
- *Process noise helps:* LO-FI with q = 1e-4 against static LO-FI: 0.106 against 0.138 over time, 0.063 against
  0.090 at the end of a task.
- *The scikit-learn learners do not beat a straight line:* MLPRegressor(50) with Adam (one step per row, tuned
  learning rate 0.003) scores 0.232, SGDRegressor's line 0.223. The sine has amplitude 0.3 (its own RMS is 0.21):
  in 250 rows per function, one gradient step each, the network never picks it up. The paper's 'SGD is less sample
  efficient'; here it is not efficient enough to learn the wiggle at all.
- *Grid edges:* sigma0 runs from 0.3 (0.1 for static LO-FI) to 100 and q from 1e-9 to 1e-3 (earlier grids, up to
  sigma0 = 3 and down to q = 1e-7, had their edges chosen). FC-EKF's choice (sigma0 = 30) is interior: at 100 its
  candidates with obs_noise 0.01 diverge. VD-EKF's (30, q = 1e-8) is interior too, on curves flat in both: its best
  validation RMSE is 0.169-0.170 at sigma0 = 30 and 100, and at sigma0 = 30 it moves from 0.168 to 0.169 over q = 1e-9
  to 1e-7, so its dynamics are effectively static. LO-FI chose the edge (sigma0 = 100), on a plateau rather than short
  of an optimum: its best RMSE at each sigma0 from 1 to 100 stays between 0.105 and 0.108. Static LO-FI chose sigma0 =
  0.3 with obs_noise 0.01 (0.133; 0.136-0.138 at every larger sigma0). The run of 2026-11-25 (another host, and before
  the estimator's line search on the mean step became the default) chose 100 (validation 0.135): the line search
  lowered the validation RMSE at sigma0 = 0.3 from 0.138 to 0.133 and so moved the choice, which scores 0.138 over
  time on the reported streams where sigma0 = 100 scored 0.132 then. A choice on a flat validation curve does not
  carry over to the test streams to better than about 0.005."""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="reported seeds (default 5)")
    parser.add_argument("--quick", action="store_true", help="3 tasks, 2 seeds, one candidate each")
    args = parser.parse_args()
    quiet()
    started, cpu_started = time.perf_counter(), time.process_time()
    n_tasks = 3 if args.quick else TASKS
    seeds = list(range(2 if args.quick else args.seeds))
    name = "piecewise_regression" + ("_quick" if args.quick else "")
    methods = METHODS
    if args.quick:
        methods = one_candidate(methods, QUICK)

    def log(text):
        print(f"[{(time.perf_counter() - started) / 60:5.1f} min] {text}", flush=True)

    validation = make_stream(TUNE_SEED, n_tasks)

    def score(method, hp):
        out = run(method.make(0, **hp), validation, 2 * EVERY, strict=True)
        if not np.all(np.isfinite(out["rmse"])):
            raise FloatingPointError
        return (out["rmse"].mean(),)

    chosen, tuning = tune_each(methods, score, log)

    runs = {label: [] for label in methods}
    for seed in seeds:
        stream = make_stream(seed, n_tasks)
        for label, method in methods.items():
            out = run(method.make(seed, **chosen[label]), stream, EVERY, keep_fits=seed == 0)
            runs[label].append(out)
            s = summary(out)
            log(f"seed {seed} {label}: RMSE {s[COLUMNS[0]]:.3f} over time, {s[COLUMNS[1]]:.3f} after changes, "
                f"{s[COLUMNS[2]]:.3f} at task ends; {s['training s']:.1f} s, {s['chunks refused']} chunks refused")

    runtime, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    plot(runs, make_stream(0, n_tasks), n_tasks, RESULTS / f"{name}.png")
    (RESULTS / f"{name}.json").write_text(json.dumps({
        "chosen": chosen, "tuning": tuning,
        "runs": {k: [{"n": o["n"].tolist(), "rmse": o["rmse"].tolist(), "train_s": o["train_s"],
                      "skipped": o["skipped"]} for o in v] for k, v in runs.items()},
    }, default=float))
    sums = {label: [summary(o) for o in runs[label]] for label in methods}
    rows = [[label, hp_text(chosen[label])]
            + [fmt([s[c] for s in sums[label]], 2 if c.endswith(" s") else 3) for c in COLUMNS]
            + [sum(s["chunks refused"] for s in sums[label])] for label in methods]
    tune_rows = [[label, hp_text(hp), "diverged" if v is None else f"{v[0]:.4f}",
                  "**chosen**" if hp == chosen[label] else ""] for label, c in tuning.items() for hp, v in c]
    per_method = {label: {c: [s[c] for s in sums[label]] for c in COLUMNS[:3]} for label in methods}
    body = "\n".join([
        skbong_source(),
        "",
        f"Synthetic data, as the paper describes it: x ~ Unif(-2, 2), y = x + 0.3 sin(w0_k + w1_k pi x) + "
        f"N(0, {NOISE}^2), a new (w0_k, w1_k) every {TASK_ROWS} rows, {n_tasks} tasks; w0 ~ Unif(0, 2 pi), "
        "w1 ~ Unif(0.5, 1.5) and the noise level are our choices (the paper does not state them). Every learner is "
        "an MLP 1-50-1 with tanh units; chunks of "
        f"{CHUNK} rows through `partial_fit`, one update per row (BONG `batch_size=1`, MLPRegressor "
        "`batch_size=1`, SGDRegressor one step per row). The scikit-learn regressors see targets standardised "
        "with the first chunk's mean and standard deviation, as BONGRegressor does internally; `obs_noise` is "
        f"given in the units of y (true noise variance {NOISE ** 2:g}). Metric: RMSE against the current true "
        f"function on 200 evenly spaced inputs, every {EVERY} rows. Mean ± SE over seeds {seeds} (seed = "
        "functions, inputs, noise and initial weights).",
        "",
        "Tuning: each grid (below) was run once on a validation stream with other functions and draws (seed "
        f"{TUNE_SEED}, evaluated every {2 * EVERY} rows), scored by its RMSE averaged over time; the winner "
        "serves every reported seed.",
        "",
        PAPER,
        "",
        "## Results",
        "",
        markdown_table(["method", "chosen", *COLUMNS, "chunks refused"], rows),
        "",
        f"![RMSE against time and the fits at the end of each task]({name}.png)",
        "",
        "## Verdict",
        "",
        "Computed from the table (paired over seeds):",
        "",
        *verdict_lines({c: "" for c in COLUMNS[:3]}, per_method, {c: False for c in COLUMNS[:3]}),
        "",
        NOTES,
        "",
        "## Tuning on the validation stream",
        "",
        markdown_table(["method", "candidate", "RMSE (mean over time)", ""], tune_rows),
        "",
        f"Total runtime {runtime / 60:.1f} min wall, {cpu / 60:.1f} min CPU (they differ when other processes "
        "share the core).",
    ])
    print(write(name, "Piecewise-stationary 1-D regression (LO-FI App. D.2)", body))


def plot(runs, stream, n_tasks, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(16, 7.5))
    grid = fig.add_gridspec(2, n_tasks, height_ratios=(1.6, 1))
    ax = fig.add_subplot(grid[0, :])
    colors = {label: f"C{i}" for i, label in enumerate(runs)}  # the same in every panel
    for label, outs in runs.items():
        plot_curves(ax, outs[0]["n"], [o["rmse"] for o in outs], label, color=colors[label])
    for b in range(TASK_ROWS, TASK_ROWS * n_tasks, TASK_ROWS):
        ax.axvline(b, color="0.8", lw=0.7, ls=":")
    ax.set_yscale("log")
    ax.set_xlabel("rows seen")
    ax.set_ylabel("RMSE against the current f_k")
    ax.set_title("RMSE on the current function (LO-FI Fig. 9), mean ± SE over seeds", fontsize=10)
    ax.legend(fontsize=7, ncol=3)
    shown = [m for m in ("BONG FC + dynamics (FC-EKF)", "BONG DLR-10 + dynamics (LO-FI)", "MLPRegressor(50) Adam")
             if m in runs]
    for k in range(n_tasks):
        a = fig.add_subplot(grid[1, k])
        a.plot(GRID_X[:, 0], stream.truth[k], color="k", lw=1.5, label="truth")
        for label in shown:
            a.plot(GRID_X[:, 0], runs[label][0]["fits"][k], lw=1, label=label, color=colors[label])
        a.set_title(f"end of task {k + 1}", fontsize=8)
        a.tick_params(labelsize=6)
    a.legend(fontsize=5)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
