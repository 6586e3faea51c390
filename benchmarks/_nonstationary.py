"""Shared pieces of the non-stationary benchmarks (issue 21 item 3).

permuted_mnist.py, split_mnist.py, rotated_mnist.py, piecewise_regression.py and
mnist_bandit.py all compare skbong with scikit-learn's ``partial_fit`` learners on a stream
whose distribution changes. They share:

* the data: the MNIST test set (the only MNIST data available here; the LO-FI paper used
  Fashion-MNIST) pooled 2x2 to 14 x 14 and scaled to [0, 1], cut once into two disjoint
  halves of 5,000 rows: the *report* half feeds every reported run, the *tune* half every
  tuning run, so no reported row (training or test) is ever seen while choosing
  hyperparameters;
* the method registry: a :class:`Method` is a factory ``make(seed, **hp)`` and the grid of
  hyperparameters tuned on the validation stream. A benchmark's methods are a dict
  ``{label: Method}``; adding a drift option of the estimators to a comparison is one entry;
* :func:`tune` (grid search on the validation stream, a diverged candidate scores +inf),
  mean +- SE, the line that names the skbong source, and curves with SE bands;
* for the two task-incremental classification streams (permuted and split MNIST) the whole
  protocol: :class:`TaskStream`, :func:`run_tasks` and :func:`task_benchmark`, which tunes,
  runs the seeds and writes the report.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import subprocess
import time
import warnings
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

import skbong
from skbong.datasets import load_mnist

__all__ = [
    "CLASSES",
    "FirstChunkScaled",
    "Method",
    "TaskBenchmark",
    "TaskStream",
    "candidates",
    "fmt",
    "hp_text",
    "mean_se",
    "mnist_halves",
    "paired",
    "plot_curves",
    "quiet",
    "run_stream",
    "run_tasks",
    "skbong_source",
    "task_benchmark",
    "tune",
    "verdict_lines",
]

CLASSES = np.arange(10)
HALF_SEED = 20240321  # the one fixed shuffle that cuts MNIST into the report and tune halves


class Method(NamedTuple):
    """A learner of a benchmark: ``make(seed, **hp)`` returns a fresh estimator (or agent);
    ``grid`` maps hyperparameter names to the values tried on the validation stream (their
    product; empty: nothing tuned)."""

    make: Callable[..., object]
    grid: dict


def quiet() -> None:
    """Silence the warnings a stream of small chunks raises by design: skbong's health
    checks (a model that starts from scratch on each new task is "barely learning" for a
    while) and scikit-learn's convergence notices; divergence still raises."""
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    from sklearn.exceptions import ConvergenceWarning

    warnings.filterwarnings("ignore", category=ConvergenceWarning)


def skbong_source() -> str:
    """Which skbong ran: its directory and, in a git checkout, the commit and whether the
    package's files differed from it."""
    root = Path(skbong.__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "."], capture_output=True,
                               text=True, check=True).stdout.strip()
        state = f"commit {commit}" + (" with uncommitted changes in skbong/" if dirty else ", skbong/ clean")
    except (OSError, subprocess.CalledProcessError):
        name = root.parent.name  # e.g. a `git archive` copy kept in a directory named by its commit
        state = ("not a git checkout: an exported copy of commit " + name[:7] + " (by its directory's name)"
                 if re.fullmatch("[0-9a-f]{40}", name) else "not a git checkout")
    return f"- skbong {skbong.__version__} from `{root}`: {state}"


def mnist_halves(pool: int | None = 2) -> dict:
    """The MNIST test set as ``{"report": (X, y), "tune": (X, y)}``, 5,000 rows each.

    With ``pool``, images are averaged over ``pool x pool`` blocks (28 x 28 -> 14 x 14 for
    2), scaled to [0, 1] and flattened: ``X`` is float32 of shape (5000, (28 // pool) ** 2).
    With ``pool=None``, ``X`` holds the raw 28 x 28 uint8 images (e.g. to rotate them)."""
    X, y = load_mnist()
    if pool is not None:
        side = 28 // pool
        X = X.reshape(len(y), side, pool, side, pool).mean(axis=(2, 4)).reshape(len(y), -1)
        X = X.astype(np.float32) / 255.0
    order = np.random.default_rng(HALF_SEED).permutation(len(y))
    report, tune_rows = np.array_split(order, 2)
    return {"report": (X[report], y[report]), "tune": (X[tune_rows], y[tune_rows])}


def candidates(grid: dict) -> list[dict]:
    """Every combination of the grid's values, as keyword dicts (one empty dict for no grid)."""
    names = list(grid)
    return [dict(zip(names, values)) for values in itertools.product(*(grid[n] for n in names))]


def hp_text(hp: dict) -> str:
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in hp.items()) or "-"


def one_candidate(methods: dict, grid: dict) -> dict:
    """Each method with a single candidate (``--quick``): ``grid``'s value of each hyperparameter."""
    return {k: Method(m.make, {p: (grid[p],) for p in m.grid}) for k, m in methods.items()}


def tune_each(methods: dict, score, log, prefix: str = "") -> tuple[dict, dict]:
    """:func:`tune` every method; the chosen values and the tuning records, by label."""
    chosen, tuning = {}, {}
    for label, method in methods.items():
        chosen[label], tuning[label] = tune(prefix + label, method, score, log)
        log(f"{prefix}{label}: chose {hp_text(chosen[label])}")
    return chosen, tuning


def tune(label: str, method: Method, score: Callable[[Method, dict], tuple], log=print) -> tuple[dict, list]:
    """Grid search: ``score(method, hp)`` runs the validation stream and returns a tuple
    compared lexicographically, lower is better (e.g. ``(-accuracy, log_loss)``); a
    candidate whose run raises ``FloatingPointError`` (skbong refused a diverged update)
    scores +inf. Returns the best ``hp`` and ``[(hp, score tuple or None), ...]``."""
    rows = []
    for hp in candidates(method.grid):
        tic = time.perf_counter()
        try:
            value = tuple(score(method, hp))
        except FloatingPointError:
            value = None
        rows.append((hp, value))
        shown = "diverged" if value is None else ", ".join(f"{v:.4g}" for v in value)
        log(f"  tune {label} [{hp_text(hp)}]: {shown} ({time.perf_counter() - tic:.1f} s)")
    finite = [(v, i) for i, (_, v) in enumerate(rows) if v is not None and all(map(math.isfinite, v))]
    if not finite:
        raise RuntimeError(f"every candidate of {label} diverged on the validation stream")
    best = rows[min(finite)[1]][0]
    return best, rows


def mean_se(values) -> tuple[float, float]:
    values = np.asarray(values, dtype=float)
    if values.size < 2:
        return float(values.mean()), math.nan
    return float(values.mean()), float(values.std(ddof=1) / math.sqrt(values.size))


def paired(a, b) -> tuple[float, float]:
    """Mean and SE over seeds of ``a - b`` (the same seeds: paired differences)."""
    return mean_se(np.asarray(a, dtype=float) - np.asarray(b, dtype=float))


def verdict_lines(metrics: dict, per_method: dict, higher_is_better: dict, ceilings: tuple = ()) -> list[str]:
    """One line per metric: the best method, and the best skbong method against the best
    scikit-learn method (paired difference over seeds, and whether it exceeds 2 SE).

    ``per_method[label][metric]`` is the list over seeds; skbong's labels start with "BONG",
    references with "(" (they may be best, but are no scikit-learn method); ``ceilings`` are
    references that are not stream learners at all, left out of everything."""
    per_method = {label: v for label, v in per_method.items() if label not in ceilings}
    lines = []
    for metric, unit in metrics.items():
        sign = 1 if higher_is_better[metric] else -1
        best = max(per_method, key=lambda m: sign * np.mean(per_method[m][metric]))
        bong = [m for m in per_method if m.startswith("BONG")]
        other = [m for m in per_method if not m.startswith("BONG") and not m.startswith("(")]
        digits = 0 if abs(np.mean(per_method[best][metric])) >= 100 else 3
        line = f"- {metric}: best is {best} ({fmt(per_method[best][metric], digits)}{unit})"
        if bong and other:
            b = max(bong, key=lambda m: sign * np.mean(per_method[m][metric]))
            o = max(other, key=lambda m: sign * np.mean(per_method[m][metric]))
            d, se = paired(per_method[b][metric], per_method[o][metric])
            better = sign * d > 0
            clear = abs(d) > 2 * se if math.isfinite(se) else False
            line += (f"; best skbong ({b}) minus best scikit-learn ({o}): {d:+.{digits}f} ± {se:.{digits}f}{unit} "
                     + ("-> skbong better" if better else "-> skbong worse")
                     + (" (more than 2 SE)" if clear else " (within 2 SE)"))
        lines.append(line)
    return lines


def fmt(values, digits: int = 3) -> str:
    m, s = mean_se(values)
    return f"{m:.{digits}f} ± {s:.{digits}f}"


class FirstChunkScaled:
    """A scikit-learn regressor fed targets standardised with the mean and standard
    deviation of the first ``partial_fit`` call, as :class:`skbong.BONGRegressor` does
    internally, so that every method of a regression stream starts from the same
    information about the scale of ``y``."""

    def __init__(self, estimator):
        self.estimator = estimator

    def partial_fit(self, X, y):
        y = np.asarray(y, dtype=float)
        if not hasattr(self, "loc_"):
            self.loc_, scale = float(y.mean()), float(y.std())
            self.scale_ = scale if scale > 0 else 1.0
        self.estimator.partial_fit(X, (y - self.loc_) / self.scale_)
        return self

    def predict(self, X):
        return self.estimator.predict(X) * self.scale_ + self.loc_


def plot_curves(ax, x, runs, label, color=None, ls="-"):
    """Mean over runs (rows of ``runs``) with a band of +- one standard error."""
    runs = np.asarray(runs, dtype=float)
    mean = np.nanmean(runs, axis=0)
    se = np.nanstd(runs, axis=0, ddof=1) / np.sqrt(runs.shape[0]) if runs.shape[0] > 1 else np.zeros_like(mean)
    (line,) = ax.plot(x, mean, label=label, color=color, ls=ls, lw=1.3)
    ax.fill_between(x, mean - se, mean + se, color=line.get_color(), alpha=0.2, lw=0)
    return line


# ------------------------------------------------------ task-incremental classification streams
class TaskStream(NamedTuple):
    """Training rows task after task (``task_rows`` each) and each task's held-out test rows
    (the same number per task), transformed as the task transforms its training rows."""

    X: np.ndarray
    y: np.ndarray
    task_rows: int
    tests: list  # [(X_test, y_test)] per task


def run_stream(est, X, y, chunk: int, every: int, evaluate: Callable, strict: bool = False, **fit_kw) -> dict:
    """One pass of ``est.partial_fit`` over ``(X, y)`` in chunks of ``chunk`` rows; after the
    chunks that end at a multiple of ``every`` (and at the end), ``evaluate(est, n_rows_seen)``.

    Returns ``n`` (the checkpoints), ``records`` (what ``evaluate`` returned at each),
    ``train_s`` / ``train_cpu_s`` (wall and CPU time of the ``partial_fit`` calls only) and
    ``skipped``: chunks skbong refused as diverged (it raises ``FloatingPointError`` and keeps
    its state; the stream goes on). With ``strict``, or on the first chunk, the refusal
    propagates."""
    out = {"n": [], "records": [], "train_s": 0.0, "train_cpu_s": 0.0, "skipped": 0}
    for start in range(0, len(y), chunk):
        stop = min(start + chunk, len(y))
        tic, cpu = time.perf_counter(), time.process_time()
        try:
            est.partial_fit(X[start:stop], y[start:stop], **fit_kw)
        except FloatingPointError:
            if strict or start == 0:
                raise
            out["skipped"] += 1
        out["train_s"] += time.perf_counter() - tic
        out["train_cpu_s"] += time.process_time() - cpu
        if stop % every == 0 or stop == len(y):
            out["n"].append(stop)
            out["records"].append(evaluate(est, stop))
    out["n"] = np.asarray(out["n"])
    return out


def run_tasks(est, stream: TaskStream, chunk: int, every: int, strict: bool = False) -> dict:
    """:func:`run_stream` on a task stream: every ``every`` rows, accuracy and log-loss on the
    test rows of each task seen so far (one ``predict_proba`` call over all of them).

    Adds ``acc`` and ``nll`` of shape (checkpoints, tasks), NaN for tasks not yet seen."""
    n_tasks = len(stream.tests)

    def evaluate(est, stop):
        seen = (stop - 1) // stream.task_rows + 1
        Xt = np.concatenate([t[0] for t in stream.tests[:seen]])
        yt = np.concatenate([t[1] for t in stream.tests[:seen]])
        proba = est.predict_proba(Xt)
        hit = est.classes_[proba.argmax(1)] == yt
        nll = -np.log(np.clip(proba[np.arange(len(yt)), np.searchsorted(est.classes_, yt)], 1e-15, None))
        acc, loss = np.full(n_tasks, np.nan), np.full(n_tasks, np.nan)
        acc[:seen] = hit.reshape(seen, -1).mean(1)
        loss[:seen] = nll.reshape(seen, -1).mean(1)
        return acc, loss

    out = run_stream(est, stream.X, stream.y, chunk, every, evaluate, strict, classes=CLASSES)
    out["acc"] = np.array([r[0] for r in out["records"]])
    out["nll"] = np.array([r[1] for r in out["records"]])
    return out


def _current(out: dict, key: str, task_rows: int) -> np.ndarray:
    """The current task's metric at each checkpoint."""
    task = (out["n"] - 1) // task_rows
    return out[key][np.arange(len(task)), task]


def _all_seen(out: dict, key: str) -> np.ndarray:
    """Mean over the tasks seen so far (equal test sets: the accuracy on their union)."""
    return np.nanmean(out[key], axis=1)


TASK_COLUMNS = ["all-seen acc, end", "all-seen acc, mean over time", "current acc, mean over time",
                "current acc, end of each task", "task 1 acc, end", "all-seen NLL, end",
                "current NLL, mean over time", "training s", "training CPU s"]


def _task_summary(out: dict, task_rows: int) -> dict:
    """Scalars of one run (accuracy: higher is better; NLL: lower)."""
    end_of_task = out["n"] % task_rows == 0
    return {
        "all-seen acc, end": _all_seen(out, "acc")[-1],
        "all-seen acc, mean over time": _all_seen(out, "acc").mean(),
        "current acc, mean over time": _current(out, "acc", task_rows).mean(),
        "current acc, end of each task": _current(out, "acc", task_rows)[end_of_task].mean(),
        "task 1 acc, end": out["acc"][-1, 0],
        "all-seen NLL, end": _all_seen(out, "nll")[-1],
        "current NLL, mean over time": _current(out, "nll", task_rows).mean(),
        "training s": out["train_s"],
        "training CPU s": out["train_cpu_s"],
        "chunks refused": out["skipped"],
    }


class TaskBenchmark(NamedTuple):
    """What distinguishes permuted from split MNIST; the rest is :func:`task_benchmark`."""

    name: str
    title: str
    make_stream: Callable  # (half, seed, n_tasks) -> TaskStream
    n_tasks: int
    task_names: list  # one per task, for the tables
    methods: dict  # label -> Method
    quick_grid: dict  # hyperparameter -> the one value tried with --quick
    protocol: str  # markdown: how the stream is built
    paper: str  # markdown: what the paper found
    notes: str  # markdown: reading of the committed run
    chunk: int = 50
    every: int = 50
    tune_every: int = 100
    tune_seed: int = 1000


def task_benchmark(bench: TaskBenchmark, doc: str) -> None:
    """Command line, tuning on the validation stream, reported seeds, markdown + PNG + JSON."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="reported seeds (default 5)")
    parser.add_argument("--quick", action="store_true", help="3 tasks, 2 seeds, one candidate each")
    args = parser.parse_args()
    quiet()
    started, cpu_started = time.perf_counter(), time.process_time()
    n_tasks = 3 if args.quick else bench.n_tasks
    seeds = list(range(2 if args.quick else args.seeds))
    name = bench.name + ("_quick" if args.quick else "")
    methods = bench.methods
    if args.quick:
        methods = one_candidate(methods, bench.quick_grid)

    def log(text):
        print(f"[{(time.perf_counter() - started) / 60:5.1f} min] {text}", flush=True)

    halves = mnist_halves(pool=2)
    validation = bench.make_stream(halves["tune"], bench.tune_seed, n_tasks)
    task_rows = validation.task_rows

    def score(method, hp):
        out = run_tasks(method.make(0, **hp), validation, bench.chunk, bench.tune_every, strict=True)
        return (-_all_seen(out, "acc").mean(), _all_seen(out, "nll").mean(),
                -_current(out, "acc", task_rows).mean())

    chosen, tuning = tune_each(methods, score, log)

    runs = {label: [] for label in methods}
    for seed in seeds:
        stream = bench.make_stream(halves["report"], seed, n_tasks)
        for label, method in methods.items():
            out = run_tasks(method.make(seed, **chosen[label]), stream, bench.chunk, bench.every)
            runs[label].append(out)
            s = _task_summary(out, task_rows)
            log(f"seed {seed} {label}: all-seen acc {s['all-seen acc, end']:.3f} at the end, current "
                f"{s['current acc, mean over time']:.3f} over time, {s['training s']:.1f} s, "
                f"{s['chunks refused']} chunks refused")

    runtime, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    from _report import RESULTS, write

    _task_plot(bench, runs, n_tasks, task_rows, RESULTS / f"{name}.png")
    (RESULTS / f"{name}.json").write_text(json.dumps({
        "chosen": chosen,
        "tuning": {k: rows for k, rows in tuning.items()},
        "runs": {k: [{"n": o["n"].tolist(), "acc": o["acc"].tolist(), "nll": o["nll"].tolist(),
                      "train_s": o["train_s"], "train_cpu_s": o["train_cpu_s"], "skipped": o["skipped"]}
                     for o in v] for k, v in runs.items()},
    }, default=float))
    body = _task_report(bench, chosen, tuning, runs, n_tasks, task_rows, seeds, runtime, cpu, name)
    print(write(name, bench.title, body))


def _task_report(bench, chosen, tuning, runs, n_tasks, task_rows, seeds, runtime, cpu, name) -> str:
    from _report import markdown_table

    sums = {label: [_task_summary(o, task_rows) for o in runs[label]] for label in runs}
    rows = [[label, hp_text(chosen[label])]
            + [fmt([s[c] for s in sums[label]], 2 if c.endswith(" s") else 3) for c in TASK_COLUMNS]
            + [sum(s["chunks refused"] for s in sums[label])] for label in runs]
    tune_rows = []
    for label, cands in tuning.items():
        for hp, value in cands:
            shown = ["diverged"] * 3 if value is None else [f"{-value[0]:.3f}", f"{value[1]:.3f}", f"{-value[2]:.3f}"]
            tune_rows.append([label, hp_text(hp), *shown, "**chosen**" if hp == chosen[label] else ""])
    retention = [[label] + [fmt(np.array([o["acc"][-1, k] for o in runs[label]]), 2) for k in range(n_tasks)]
                 for label in runs]
    per_method = {label: {c: [s[c] for s in sums[label]] for c in TASK_COLUMNS} for label in runs}
    verdict = verdict_lines(
        {"all-seen acc, end": "", "all-seen acc, mean over time": "", "current acc, mean over time": "",
         "all-seen NLL, end": " nats", "current NLL, mean over time": " nats"},
        per_method, {c: "acc" in c for c in TASK_COLUMNS})
    return "\n".join([
        skbong_source(),
        "",
        bench.protocol.format(n_tasks=n_tasks, task_rows=task_rows),
        "",
        f"Every method sees the stream in chunks of {bench.chunk} rows through `partial_fit` and takes one update "
        "per row (BONG: `batch_size=1`, one filter step per row inside the compiled scan; MLPClassifier: "
        "`batch_size=1`, one Adam step per row; SGDClassifier: one SGD step per row). Every "
        f"{bench.every} rows: accuracy and log-loss on the held-out test rows of every task seen so far. "
        f"Mean ± SE over the seeds {seeds}.",
        "",
        "Tuning: each method's grid (below) was run once on a validation stream built in the same way from "
        f"the disjoint tune half of MNIST (seed {bench.tune_seed}, evaluated every {bench.tune_every} rows); "
        "the candidate with the best all-seen accuracy averaged over that stream's checkpoints (log-loss "
        "breaks ties) was kept for every reported seed. No reported row, training or test, was seen while "
        "tuning. BONG: MLP 196-50-10 (ReLU), plug-in predictive (the default), prior N(mu_0, sigma0^2 I) "
        "around the LeCun-normal initialisation mu_0; `process_noise` q and `dynamics_decay` gamma act "
        "before every row (Sigma <- gamma^2 Sigma + q I, mu <- gamma mu; LO-FI's random-walk dynamics). "
        "SGDClassifier (log-loss, constant step eta0) and MLPClassifier (50 ReLU units) keep alpha = 1e-4.",
        "",
        bench.paper,
        "",
        "## Results",
        "",
        "'all-seen' = mean over the tasks seen so far of their test accuracy (what is still known); "
        "'current' = the current task's (adaptation); 'end of each task' = the current task's accuracy after its "
        f"{task_rows} rows, averaged over tasks; 'chunks refused' = `partial_fit` calls that skbong refused as "
        "diverged (the chunk is then skipped and the estimator keeps its state).",
        "",
        markdown_table(["method", "chosen", *TASK_COLUMNS, "chunks refused"], rows),
        "",
        f"![curves]({name}.png)",
        "",
        "Accuracy on each task's test rows at the end of the stream:",
        "",
        markdown_table(["method", *bench.task_names[:n_tasks]], retention),
        "",
        "## Verdict",
        "",
        "Computed from the table (paired over seeds):",
        "",
        *verdict,
        "",
        bench.notes,
        "",
        "## Tuning on the validation stream",
        "",
        markdown_table(["method", "candidate", "all-seen acc (mean over time)", "all-seen NLL (mean over time)",
                        "current acc (mean over time)", ""], tune_rows),
        "",
        f"Total runtime {runtime / 60:.1f} min wall, {cpu / 60:.1f} min CPU (they differ when other processes "
        "share the core; training times are wall time, with CPU time beside them).",
    ])


def _task_plot(bench, runs, n_tasks, task_rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.3))
    for label, outs in runs.items():
        n = outs[0]["n"]
        plot_curves(axes[0], n, [_all_seen(o, "acc") for o in outs], label)
        plot_curves(axes[1], n, [_current(o, "acc", task_rows) for o in outs], label)
        final = np.array([o["acc"][-1] for o in outs])
        se = final.std(0, ddof=1) / np.sqrt(len(outs)) if len(outs) > 1 else 0 * final[0]
        axes[2].errorbar(np.arange(n_tasks), final.mean(0), yerr=se, marker="o", ms=3, capsize=2, label=label)
    for ax in axes[:2]:
        for b in range(task_rows, task_rows * n_tasks, task_rows):
            ax.axvline(b, color="0.8", lw=0.7, ls=":")
        ax.set_xlabel("rows seen")
    axes[0].set_ylabel("test accuracy, mean over tasks seen")
    axes[0].set_title("all tasks seen so far")
    axes[1].set_ylabel("test accuracy, current task")
    axes[1].set_title("current task")
    axes[2].set_xticks(np.arange(n_tasks), bench.task_names[:n_tasks], fontsize=7)
    axes[2].set_ylabel("test accuracy after the whole stream")
    axes[2].set_title("what is remembered at the end")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"{bench.title}: mean ± SE over seeds", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
