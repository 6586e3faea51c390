"""Rotated MNIST as regression of the angle, the angle drifting slowly (LO-FI paper Sec. 4.2).

The LO-FI paper's "slowly changing distribution" regression (Sec. 4.2, Fig. 2b, App. D.8):
images are rotated by an angle that drifts along an Ornstein-Uhlenbeck path,
``d alpha = -theta (alpha - mu) dt + sigma dW`` with ``mu = 90``, ``sigma = 30``,
``theta = 10``, ``dt = 1 / N`` over ``N = 2000`` rows, and the target is the angle (in
degrees). Its stationary standard deviation is ``sigma / sqrt(2 theta) = 6.7`` degrees, so
the angle hardly moves; a second setting, "wide", takes ``sigma = 90`` (20 degrees). The
test set at time ``t`` is rotated "using the same rotation at each step,
perturbed by a Gaussian noise with standard deviation of 5 degrees", evaluated in "a
sliding window of size 200 around the current time point". Here, on the MNIST digit 2
(the paper used the Fashion-MNIST images of class 2), 28 x 28 rotated with
``scipy.ndimage.rotate`` (bilinear, same size) and then pooled 2x2 to 14 x 14:

* the 2s of each half are cut by the seed into a training pool (80%, about 410 images) and
  a test pool (20%, about 100 images);
* training stream: 2,000 draws from the report half's training pool (an image comes back
  at other angles), row ``t`` rotated by ``alpha_t`` and labelled ``alpha_t``;
* test at checkpoint ``t`` (every ``EVERY`` rows): 200 draws from the test pool, each
  rotated by ``alpha_s + N(0, 5^2)`` for an ``s`` drawn uniformly from the window
  ``[t - 100, t + 100)`` of the path; metric RMSE in degrees;
* methods: ``BONGRegressor`` (MLP 196-50-1) on DLR-10 (LO-FI) and diagonal (VD-EKF)
  families with the random-walk dynamics, DLR-10 static; ``MLPRegressor(50)`` Adam and
  ``SGDRegressor`` on targets standardised by the first chunk (as ``BONGRegressor`` does
  internally); and two references: one that knows no image at all, the mean of the last
  100 training angles (a tracker of the drift alone), and an MLP fitted offline on the
  whole stream (how much of the angle the images tell this network at all);
* tuning: each grid once on a validation stream from the disjoint *tune* half with another
  OU path (seed ``TUNE_SEED``), scored by RMSE averaged over its checkpoints.

Writes ``results/rotated_mnist.{md,png,json}``.

    python benchmarks/rotated_mnist.py [--seeds 5] [--settings paper,wide] [--quick]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import deque
from typing import NamedTuple

import numpy as np
from scipy import ndimage
from sklearn.linear_model import SGDRegressor
from sklearn.neural_network import MLPRegressor

from _nonstationary import (FirstChunkScaled, Method, fmt, hp_text, mnist_halves, one_candidate, plot_curves, quiet,
                            run_stream, skbong_source, tune_each, verdict_lines)
from _report import RESULTS, markdown_table, write
from skbong import BONGRegressor

N_ROWS, MU, THETA, TEST_JITTER = 2000, 90.0, 10.0, 5.0
#: sigma of the angle's OU path per setting: the paper's, and a wider drift (stationary standard
#: deviation sigma / sqrt(2 theta): 6.7 and 20 degrees) under which the angle cannot be tracked
#: without reading the image.
SETTINGS = {"paper": 30.0, "wide": 90.0}
WINDOW, TEST_ROWS, TEST_FRACTION = 200, 200, 0.2
DIGIT = 2  # the paper rotates the images of one class, class 2 (of Fashion-MNIST)
CHUNK, EVERY = 50, 50
TUNE_SEED = 1000
HIDDEN = (50,)


def bong(family):
    def make(seed, **hp):
        return BONGRegressor(hidden_layer_sizes=HIDDEN, family=family, rank=10, random_state=seed, **hp)
    return make


def mlp(seed, **hp):
    return FirstChunkScaled(MLPRegressor(hidden_layer_sizes=HIDDEN, solver="adam", batch_size=1, shuffle=False,
                                         random_state=seed, **hp))


def sgd(seed, **hp):
    return FirstChunkScaled(SGDRegressor(learning_rate="constant", shuffle=False, random_state=seed, **hp))


class RecentMean:
    """Predicts the mean of the last ``window`` training targets, whatever the image."""

    def __init__(self, window: int = 100):
        self.window = window

    def partial_fit(self, X, y):
        if not hasattr(self, "recent_"):
            self.recent_ = deque(maxlen=self.window)
        self.recent_.extend(np.asarray(y, dtype=float))
        return self

    def predict(self, X):
        return np.full(len(X), np.mean(self.recent_))


DYNAMICS = {"sigma0": (0.03, 0.1, 0.3, 1.0), "process_noise": (1e-7, 1e-6, 1e-5, 1e-4),
            "obs_noise": (10.0, 100.0, 1000.0)}

#: label -> Method (factory, grid tuned on the validation stream). A new drift option of the
#: estimators is one more entry.
METHODS = {
    "BONG DLR-10 + dynamics (LO-FI)": Method(bong("dlr"), DYNAMICS),
    "BONG diag + dynamics (VD-EKF)": Method(bong("diag"), DYNAMICS),
    "BONG DLR-10 static": Method(bong("dlr"), {"sigma0": (0.03, 0.1, 0.3, 1.0), "obs_noise": (10.0, 100.0, 1000.0)}),
    "MLPRegressor(50) Adam": Method(mlp, {"learning_rate_init": (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)}),
    "SGDRegressor (linear)": Method(sgd, {"eta0": (1e-4, 1e-3, 1e-2)}),
    "(mean of the last 100 angles)": Method(lambda seed: RecentMean(100), {}),
}
QUICK = {"sigma0": 0.1, "process_noise": 1e-4, "obs_noise": 10.0, "learning_rate_init": 1e-3, "eta0": 1e-3}


def rotate_pool(images: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """Rotate 28 x 28 uint8 images by ``angles`` degrees, pool 2x2, scale to [0, 1]: (n, 196) float32."""
    out = np.stack([ndimage.rotate(im.astype(np.float32), a, reshape=False, order=1) for im, a in zip(images, angles)])
    return (out.reshape(len(out), 14, 2, 14, 2).mean(axis=(2, 4)).reshape(len(out), -1) / 255.0).astype(np.float32)


class Stream(NamedTuple):
    X: np.ndarray  # (N_ROWS, 196)
    y: np.ndarray  # angles in degrees
    tests: dict  # checkpoint -> (X_test, y_test)


def make_stream(half, seed: int, sigma: float, n_rows: int = N_ROWS) -> Stream:
    images, labels = half
    rng = np.random.default_rng(seed)
    order = rng.permutation(np.flatnonzero(labels == DIGIT))
    n_test = int(TEST_FRACTION * len(order))
    train_pool, test_pool = order[n_test:], order[:n_test]
    # Ornstein-Uhlenbeck path by Euler-Maruyama, started from its stationary law.
    dt = 1.0 / N_ROWS
    alpha = np.empty(n_rows)
    alpha[0] = MU + sigma / np.sqrt(2 * THETA) * rng.normal()
    for t in range(1, n_rows):
        alpha[t] = alpha[t - 1] - THETA * (alpha[t - 1] - MU) * dt + sigma * np.sqrt(dt) * rng.normal()
    train = rng.choice(train_pool, size=n_rows)  # each image comes back at other angles
    tests = {}
    for stop in range(EVERY, n_rows + 1, EVERY):
        s = rng.integers(max(0, stop - WINDOW // 2), min(n_rows, stop + WINDOW // 2), size=TEST_ROWS)
        angles = alpha[s] + TEST_JITTER * rng.normal(size=TEST_ROWS)
        rows = rng.choice(test_pool, size=TEST_ROWS)
        tests[stop] = (rotate_pool(images[rows], angles), angles)
    return Stream(rotate_pool(images[train], alpha), alpha, tests)


def run(est, stream: Stream, every: int, strict: bool = False) -> dict:
    def evaluate(est, stop):
        Xt, yt = stream.tests[stop]
        return float(np.sqrt(np.mean((est.predict(Xt) - yt) ** 2)))

    out = run_stream(est, stream.X, stream.y, CHUNK, every, evaluate, strict)
    out["rmse"] = np.array(out.pop("records"))
    return out


def offline_reference(stream: Stream, seed: int) -> dict:
    """Not a stream learner: an MLPRegressor fitted after the stream, ``OFFLINE_EPOCHS`` passes
    over all its rows (standardised targets), scored on every checkpoint's test set. It sees
    every angle of the path at once, the future ones included: how much of the angle this
    network can read from these images at all, given these 2,000 rows."""
    tic, cpu = time.perf_counter(), time.process_time()
    loc, scale = stream.y.mean(), stream.y.std()
    model = MLPRegressor(hidden_layer_sizes=HIDDEN, max_iter=OFFLINE_EPOCHS, random_state=seed)
    model.fit(stream.X, (stream.y - loc) / scale)
    n = np.array(sorted(stream.tests))
    rmse = np.array([np.sqrt(np.mean((model.predict(stream.tests[t][0]) * scale + loc - stream.tests[t][1]) ** 2))
                     for t in n])
    return {"n": n, "rmse": rmse, "train_s": time.perf_counter() - tic, "train_cpu_s": time.process_time() - cpu,
            "skipped": 0}


OFFLINE_EPOCHS = 200
OFFLINE = f"(offline MLP(50), {OFFLINE_EPOCHS} epochs on the whole stream)"

COLUMNS = ["RMSE, mean over time", "RMSE, second half", "RMSE, end", "training s", "training CPU s"]


def summary(out: dict) -> dict:
    rmse = out["rmse"]
    return {COLUMNS[0]: rmse.mean(), COLUMNS[1]: rmse[len(rmse) // 2:].mean(), COLUMNS[2]: rmse[-1],
            COLUMNS[3]: out["train_s"], COLUMNS[4]: out["train_cpu_s"], "chunks refused": out["skipped"]}


PAPER = (
    "**What the paper found** (Sec. 4.2, Fig. 2b, Fig. 21; Fashion-MNIST images of class 2, MLP 784-500-500-1): "
    "'LO-FI outperforms the baseline methods' in RMSE on the drifting rotation, and (App. D.8) 'under the "
    "nonstationary setting, the GD-based methods are extremely noisy, whereas LOFI is much more stable.' The "
    "paper shows no reference that ignores the image."
)

#: Reading of the committed run (written after it; the lines above it in the report are computed).
NOTES = """**Reading** (written after the run; the numbers are the tables').

- *The paper's setting (sigma = 30) does not separate the methods.* The angle spans about 30 degrees over the
  stream, and every learner is within 0.3 degrees of the image-blind tracker (6.41): LO-FI 6.13, Adam 6.34, the
  offline MLP fitted on the whole stream 6.20. At this size and budget (14x14 MNIST 2s, about 410 distinct training
  images, 2,000 rows) the images tell little about a rotation of 10 degrees (we think a digit's own slant varies as
  much), so the benchmark measures tracking. skbong's lead over the scikit-learn learners is small (0.2 degrees) but
  beyond 2 SE.
- *With a wider drift (sigma = 90) reading the image pays, and skbong reproduces the paper:* LO-FI 10.16 against
  Adam 11.52, the linear model 12.00 and the tracker 12.72, within about 1 degree of the offline MLP (9.11) that
  saw all 2,000 rows 200 times. The diagonal family (VD-EKF) is behind LO-FI (11.75). The angle paths of the two
  settings are the same draws scaled (same seed), so the settings differ only by the size of the drift.
- *The dynamics do not help here:* the tuned process noise is negligible (1e-7 or 1e-5) and static LO-FI scores
  the same (10.17 and 6.14). The drift is a covariate shift: the map from image to angle never changes, only which
  angles are shown, so a posterior that keeps all it learnt is right, and process noise would forget the angles
  not seen lately.
- *Where skbong loses:* time (LO-FI with process noise takes about three times Adam's time for the same rows, a little
  over twice when static), and the tuning surface of LO-FI is flat in the paper setting: the chosen sigma0 = 1 and
  obs_noise = 1000 are the largest of the grid but score the same on the validation stream as static LO-FI with
  sigma0 = 0.1, obs_noise = 10 (5.899)."""


def run_setting(setting: str, sigma: float, halves, n_rows: int, seeds: list, methods: dict, log) -> dict:
    """Tune on the validation stream, then run every seed, for one angle path law."""
    validation = make_stream(halves["tune"], TUNE_SEED, sigma, n_rows)

    def score(method, hp):
        out = run(method.make(0, **hp), validation, 2 * EVERY, strict=True)
        if not np.all(np.isfinite(out["rmse"])):
            raise FloatingPointError
        return (out["rmse"].mean(),)

    chosen, tuning = tune_each(methods, score, log, prefix=f"{setting} ")
    runs, paths = {label: [] for label in [*methods, OFFLINE]}, []
    for seed in seeds:
        stream = make_stream(halves["report"], seed, sigma, n_rows)
        paths.append(stream.y)
        for label, method in methods.items():
            out = run(method.make(seed, **chosen[label]), stream, EVERY)
            runs[label].append(out)
            s = summary(out)
            log(f"{setting} seed {seed} {label}: RMSE {s[COLUMNS[0]]:.2f} over time, {s[COLUMNS[2]]:.2f} at the "
                f"end; {s['training s']:.1f} s, {s['chunks refused']} chunks refused")
        runs[OFFLINE].append(offline_reference(stream, seed))
        log(f"{setting} seed {seed} {OFFLINE}: RMSE {runs[OFFLINE][-1]['rmse'].mean():.2f} over time")
    return {"sigma": sigma, "chosen": chosen, "tuning": tuning, "runs": runs, "paths": paths,
            "validation_spread": float(np.std(validation.y[:CHUNK]))}


def section(setting: str, res: dict, n_rows: int, seeds: list, name: str) -> list[str]:
    sigma, chosen, tuning, runs, paths = (res[k] for k in ("sigma", "chosen", "tuning", "runs", "paths"))
    sums = {label: [summary(o) for o in runs[label]] for label in runs}
    rows = [[label, hp_text(chosen.get(label, {}))]
            + [fmt([s[c] for s in sums[label]], 2) for c in COLUMNS]
            + [sum(s["chunks refused"] for s in sums[label])] for label in runs]
    tune_rows = [[label, hp_text(hp), "diverged" if v is None else f"{v[0]:.3f}",
                  "**chosen**" if hp == chosen[label] else ""] for label, c in tuning.items() for hp, v in c]
    per_method = {label: {c: [s[c] for s in sums[label]] for c in COLUMNS[:3]} for label in runs}
    spreads = [float(np.std(p[:CHUNK])) for p in paths]
    return [
        f"## Setting '{setting}': sigma = {sigma:g}" + (" (the paper's)" if setting == "paper" else ""),
        "",
        f"Stationary law of the angle N({MU:g}, {sigma / np.sqrt(2 * THETA):.1f}^2); over the {n_rows} rows the "
        f"angle spans {fmt([p.max() - p.min() for p in paths], 1)} degrees (max - min, mean ± SE over seeds). The "
        f"first chunk of {CHUNK} rows, which sets the scale of y, spreads over {fmt(spreads, 2)} degrees (standard "
        f"deviation; {res['validation_spread']:.2f} on the validation stream). RMSE in degrees, lower is better.",
        "",
        markdown_table(["method", "chosen", *COLUMNS, "chunks refused"], rows),
        "",
        "Computed from the table (paired over seeds; the image-blind tracker can be 'best' but is left out of "
        "the skbong vs scikit-learn difference; the offline MLP is left out of both):",
        "",
        *verdict_lines({c: " degrees" for c in COLUMNS[:3]}, per_method, {c: False for c in COLUMNS[:3]},
                       ceilings=(OFFLINE,)),
        "",
        "Tuning on the validation stream (RMSE averaged over time):",
        "",
        markdown_table(["method", "candidate", "RMSE (mean over time)", ""], tune_rows),
        "",
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="reported seeds (default 5)")
    parser.add_argument("--settings", default=",".join(SETTINGS), help=f"comma-separated of {list(SETTINGS)}")
    parser.add_argument("--quick", action="store_true", help="500 rows, 2 seeds, one candidate each")
    args = parser.parse_args()
    quiet()
    started, cpu_started = time.perf_counter(), time.process_time()
    n_rows = 500 if args.quick else N_ROWS
    seeds = list(range(2 if args.quick else args.seeds))
    name = "rotated_mnist" + ("_quick" if args.quick else "")
    methods = METHODS
    if args.quick:
        methods = one_candidate(methods, QUICK)

    def log(text):
        print(f"[{(time.perf_counter() - started) / 60:5.1f} min] {text}", flush=True)

    halves = mnist_halves(pool=None)
    results = {setting: run_setting(setting, SETTINGS[setting], halves, n_rows, seeds, methods, log)
               for setting in args.settings.split(",")}
    runtime, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    plot(results, RESULTS / f"{name}.png")
    (RESULTS / f"{name}.json").write_text(json.dumps({
        setting: {"sigma": r["sigma"], "chosen": r["chosen"], "tuning": r["tuning"],
                  "paths": [p.tolist() for p in r["paths"]],
                  "runs": {k: [{"n": o["n"].tolist(), "rmse": o["rmse"].tolist(), "train_s": o["train_s"],
                                "skipped": o["skipped"]} for o in v] for k, v in r["runs"].items()}}
        for setting, r in results.items()}, default=float))
    body = [
        skbong_source(),
        "",
        "Data: the MNIST **test set** (10,000 images; the paper used the Fashion-MNIST images of class 2, whose "
        f"training set is not available here), the digit {DIGIT} only (as the paper, one class), from a report half "
        "and a tune half of 5,000 rows of the test set; each half's 2s are cut by the seed into a training pool "
        f"({100 - 100 * TEST_FRACTION:.0f}%, about 410 images) and a test pool ({100 * TEST_FRACTION:.0f}%, "
        "about 100). "
        f"Angle path: Ornstein-Uhlenbeck with mu = {MU:g}, theta = {THETA:g}, dt = 1/{N_ROWS} "
        "(the paper's) and sigma per setting (the paper's 30, and 90), started from its stationary law. "
        "Training row t: a training-pool image drawn with replacement, rotated by alpha_t (28x28, bilinear, then "
        f"pooled to 14x14), target alpha_t in degrees. Test at checkpoint t: {TEST_ROWS} test-pool draws "
        f"rotated by alpha_s + N(0, {TEST_JITTER:g}^2), s uniform in [t - {WINDOW // 2}, t + {WINDOW // 2}) (the "
        f"paper's window of {WINDOW}). Chunks of {CHUNK} rows through `partial_fit`, one update per row (BONG "
        "`batch_size=1`, MLPRegressor `batch_size=1`, SGDRegressor one step per row); RMSE every "
        f"{EVERY} rows. Mean ± SE over seeds {seeds} (seed = images, path, test draws, initial weights). BONG: "
        "MLP 196-50-1 (ReLU), prior N(mu_0, sigma0^2 I) around the LeCun-normal initialisation; "
        "`process_noise` q acts before every row (Sigma <- Sigma + q I).",
        "",
        "Scale of y: BONGRegressor standardises the targets by the mean and standard deviation of its first "
        "`partial_fit` call; on a slowly drifting angle the first chunk spreads over a degree or two, so the "
        "standardised targets later reach tens of units. The scikit-learn regressors are given the same "
        "first-chunk standardisation (`FirstChunkScaled`), so all start from the same information; `obs_noise` "
        "is in degrees^2.",
        "",
        "Tuning: each grid was run once per setting on a validation stream from the disjoint tune half with "
        f"another angle path (seed {TUNE_SEED}, evaluated every {2 * EVERY} rows), scored by RMSE averaged over "
        "time; the winner serves every reported seed. No reported image was seen while tuning.",
        "",
        PAPER,
        "",
        f"![RMSE against time]({name}.png)",
        "",
    ]
    for setting, res in results.items():
        body += section(setting, res, n_rows, seeds, name)
    body += ["## Verdict", "", NOTES, "",
             f"Total runtime {runtime / 60:.1f} min wall, {cpu / 60:.1f} min CPU (they differ when other processes "
             "share the core)."]
    print(write(name, "Rotated MNIST: regression of a slowly drifting angle (LO-FI Sec. 4.2)", "\n".join(body)))


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 2, figsize=(15, 4.2 * len(results)), gridspec_kw={"width_ratios": (2, 1)},
                             squeeze=False)
    for (setting, res), (ax, ax_path) in zip(results.items(), axes):
        for label, outs in res["runs"].items():
            plot_curves(ax, outs[0]["n"], [o["rmse"] for o in outs], label, ls="--" if label.startswith("(") else "-")
        ax.set_yscale("log")
        ax.set_xlabel("rows seen")
        ax.set_ylabel("test RMSE (degrees), window of 200")
        ax.set_title(f"'{setting}' (sigma = {res['sigma']:g}): RMSE of the angle (LO-FI Fig. 2b), mean ± SE",
                     fontsize=10)
        ax.legend(fontsize=7)
        for k, p in enumerate(res["paths"]):
            ax_path.plot(np.arange(len(p)), p, lw=0.8, label=f"seed {k}")
        ax_path.set_xlabel("row t")
        ax_path.set_ylabel("alpha_t (degrees)")
        ax_path.set_title(f"angle paths (OU, mu = {MU:g}, sigma = {res['sigma']:g}, theta = {THETA:g})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
