"""Stream scikit-learn's digits through BONGClassifier and SGDClassifier, side by side.

Run with ``python -m skbong.demo``. Both models are tuned the same way and then see the
training rows once, in the same order and chunks, through ``partial_fit``:

1. **Tuning.** Each model has four settings (BONG: ``sigma0``; SGD: its default and three
   adaptive step sizes ``eta0``). Each setting streams the first 70% of the training rows
   once and is scored by its log-loss on the other 30%; the lowest wins. The test rows
   are not used.
2. **The stream.** A fresh model with the chosen setting streams all training rows, and so
   does a BONG model with ``sigma0="auto"``, which weighs a grid of prior scales by their
   prequential likelihood as it streams and needs no validation rows; after
   100, 500 and all of them the script prints held-out accuracy and log-loss, then the
   time of the stream with JAX's compilation apart (counted from JAX's own compilation
   events, :mod:`jax.monitoring`): a BONG program is compiled once per model
   configuration and bucket of chunk lengths, and reused; ``sigma0`` is not compiled in.
3. **What the posterior adds.** Calibration: both models' test digits by the probability
   that each model gives its predicted class, and how often those predictions are right.
   BONG's probabilities come from its Gaussian posterior over the weights, updated by
   Bayes' rule one row at a time; SGD's from one weight vector.

With ``random_state`` 0 to 3 (other splits and orders), BONG's test log-loss after the
stream is 0.136-0.205 against the tuned SGD's 0.352-0.488, and its calibration error
0.033-0.039 against 0.035-0.196: the tuned SGD is sometimes as well calibrated, never as
sharp.
"""

from __future__ import annotations

import time
import warnings

import jax
import numpy as np
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import SGDClassifier
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import train_test_split

from skbong import BONGClassifier
from skbong.metrics import expected_calibration_error

CHUNK = 100  # rows per partial_fit call
BANDS = (0.0, 0.6, 0.9, 0.99, 1.0)  # of the predicted class's probability

_compile_seconds = [0.0]


def _count_compilation(event: str, duration: float, **kwargs) -> None:
    # JAX reports tracing, lowering and XLA's compilation of each new program.
    if event.startswith("/jax/core/compile/"):
        _compile_seconds[0] += duration


def _stream(model, X, y, classes, stops=()):
    """Feed ``X, y`` to ``model.partial_fit`` in chunks of ``CHUNK`` rows, also breaking
    at each of ``stops`` (numbers of rows); after each call yield the rows seen so far,
    the calls' seconds so far and the part of them that JAX spent compiling."""
    seconds = compiling = 0.0
    seen = 0
    for stop in sorted(set(range(CHUNK, len(X), CHUNK)) | set(stops) | {len(X)}):
        compiled, start = _compile_seconds[0], time.perf_counter()
        model.partial_fit(X[seen:stop], y[seen:stop], classes=classes)
        seconds += time.perf_counter() - start
        compiling += _compile_seconds[0] - compiled
        seen = stop
        yield stop, seconds, compiling


def _tune(candidates, X_fit, y_fit, X_val, y_val, classes):
    """The candidate with the lowest validation log-loss after one streamed pass, the
    losses of all, and which of them warned (e.g. a prior too narrow to learn)."""
    losses, warned = [], []
    for model in candidates:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            for _ in _stream(model, X_fit, y_fit, classes):
                pass
        warned.append(any(issubclass(w.category, ConvergenceWarning) for w in caught))
        losses.append(log_loss(y_val, model.predict_proba(X_val), labels=classes))
    return int(np.nanargmin(losses)), losses, warned


def main(random_state: int = 0, checkpoints=(100, 500, None)) -> dict:
    """Tune, stream and compare; print the tables and return their numbers.

    Parameters
    ----------
    random_state : int
        Seed of the split and of both models.
    checkpoints : tuple of int or None
        Numbers of training rows after which the stream is evaluated on the test rows;
        None means all of them.

    Returns
    -------
    report : dict
        ``rows`` (one dict per model and checkpoint: ``model``, ``setting``, ``rows``,
        ``accuracy``, ``log_loss``; ``model`` is "BONGClassifier (auto)" for the stream at
        ``sigma0="auto"``), ``auto`` (those rows and the final weights of its prior scales);
        per model, ``tuning`` (its settings, their
        validation log-losses, which warned, the chosen one), ``seconds`` of the stream's
        ``partial_fit`` calls and ``compile_seconds``, the part of them spent compiling,
        ``calibration_error``
        (ECE on the test rows) and ``bands`` (per band of ``BANDS``: test digits, mean
        probability of the predicted class, fraction right).
    """
    # Counted while the demo runs, and the listener removed after it: importing this module
    # leaves JAX's global listeners as they were.
    jax.monitoring.register_event_duration_secs_listener(_count_compilation)
    try:
        return _run(random_state, checkpoints)
    finally:
        unregister = getattr(jax.monitoring, "unregister_event_duration_listener", None)
        if unregister is not None:  # a JAX too old to have it keeps the listener
            unregister(_count_compilation)


def _run(random_state, checkpoints) -> dict:
    """:func:`main` without its compilation listener."""
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X / 16.0, y, test_size=0.3, random_state=random_state, stratify=y
    )
    classes = np.unique(y)
    n_fit = int(0.7 * len(X_train))
    X_fit, y_fit, X_val, y_val = X_train[:n_fit], y_train[:n_fit], X_train[n_fit:], y_train[n_fit:]

    bong = BONGClassifier(random_state=random_state)
    sgd = SGDClassifier(loss="log_loss", random_state=random_state)
    settings = {
        "BONGClassifier": [("sigma0", s) for s in (0.03, 0.1, 0.3, 1.0)],
        "SGDClassifier": [("default", None)] + [("eta0", e) for e in (0.01, 0.1, 1.0)],
    }

    def build(name, setting):
        key, value = setting
        if name == "BONGClassifier":
            return clone(bong).set_params(sigma0=value)
        if key == "default":
            return clone(sgd)
        return clone(sgd).set_params(learning_rate="adaptive", eta0=value)

    def label(setting):
        key, value = setting
        if key == "default":
            return "default"
        return f"{key}={value!r}" if isinstance(value, str) else f"{key}={value:g}"

    report = {"rows": [], "tuning": {}, "seconds": {}, "compile_seconds": {}, "calibration_error": {}, "bands": {}}
    compiled_before = _compile_seconds[0]
    run_start = time.perf_counter()
    print(
        f"digits: {len(X_train)} training rows streamed once through partial_fit "
        f"(chunks of {CHUNK}), {len(X_test)} held out.\n"
    )
    print(
        f"1. Tuning, the same for both: each setting streams the first {n_fit} training rows "
        f"once and is scored by log-loss on the last {len(X_train) - n_fit} (no test rows; * chosen)."
    )
    chosen = {}
    for name, options in settings.items():
        best, losses, warned = _tune([build(name, s) for s in options], X_fit, y_fit, X_val, y_val, classes)
        chosen[name] = options[best]
        report["tuning"][name] = {
            "settings": [label(s) for s in options], "log_loss": losses, "warned": warned, "chosen": best
        }
        scores = "  ".join(
            f"{label(s)}: {loss:.3f}{'*' if i == best else ''}{' (warned)' if w else ''}"
            for i, (s, loss, w) in enumerate(zip(options, losses, warned))
        )
        print(f"   {name:15s} {scores}")
    if any(any(t["warned"]) for t in report["tuning"].values()):
        print("   (warned: the fit emitted a ConvergenceWarning, e.g. a prior too narrow to learn.)")

    stops = [len(X_train) if c is None else c for c in checkpoints]
    print("\n2. The stream, each model at its chosen setting, and BONG with sigma0='auto' (no tuning; test rows):\n")
    print(f"   {'model':38s} {'rows seen':>9s} {'accuracy':>9s} {'log-loss':>9s}")
    final_proba = {}
    # BONG can also choose its prior scale while it streams, from the prequential
    # likelihood of a grid of scales, without validation rows: sigma0="auto".
    runs = list(chosen.items()) + [("BONGClassifier", ("sigma0", "auto"))]
    for name, setting in runs:
        model = build(name, setting)
        for seen, seconds, compiling in _stream(model, X_train, y_train, classes, stops):
            if seen in stops:
                proba = model.predict_proba(X_test)
                row = {
                    "model": name if setting[1] != "auto" else f"{name} (auto)",
                    "setting": label(setting),
                    "rows": seen,
                    "accuracy": accuracy_score(y_test, classes[proba.argmax(1)]),
                    "log_loss": log_loss(y_test, proba, labels=classes),
                }
                report["rows"].append(row)
                title = f"{name} ({row['setting']})"
                print(f"   {title:38s} {seen:9d} {row['accuracy']:9.3f} {row['log_loss']:9.3f}")
        if setting[1] == "auto":
            weights = ", ".join(
                f"sigma0={g:g}: {w:.2f}" for g, w in zip(model.sigma0_grid_, model.sigma0_weights_) if w >= 0.005
            )
            report["auto"] = {"rows": report["rows"][-len(stops):], "weights": weights}
            print(f"   {'':38s} (weights of its prior scales after the stream: {weights})")
            continue
        report["seconds"][name], report["compile_seconds"][name] = seconds, compiling
        final_proba[name] = proba  # of the test rows, after the whole stream
    print(f"\n   The stream's {len(X_train)} rows took (partial_fit calls, wall clock):")
    for name in chosen:
        streaming = report["seconds"][name] - report["compile_seconds"][name]
        compiling = f" and {report['compile_seconds'][name]:.2f} s compiling" if name == "BONGClassifier" else ""
        print(
            f"   {name:15s} {report['seconds'][name]:.2f} s: {streaming:.2f} s streaming "
            f"({len(X_train) / streaming:,.0f} rows/s){compiling}"
        )
    total = time.perf_counter() - run_start
    print(
        f"   The whole demo took {total:.1f} s, {_compile_seconds[0] - compiled_before:.1f} s of it compiling JAX "
        "programs (once per configuration and chunk-length bucket; the sigma0 values share them)."
    )

    print("\n3. What the posterior adds: calibration (test rows).\n")
    print(
        "   Each model's test digits by the probability it gives its predicted class, and how often\n"
        "   that class is right. Calibrated probabilities are right as often as they claim.\n"
    )
    print("   " + f"{'probability':14s}" + "".join(f"{name:>34s}" for name in final_proba))
    print("   " + " " * 14 + "".join(f"{'digits':>14s}{'mean':>10s}{'right':>10s}" for _ in final_proba))
    for name, proba in final_proba.items():
        confidence, right = proba.max(1), classes[proba.argmax(1)] == y_test
        report["calibration_error"][name] = expected_calibration_error(y_test, proba, classes)
        band_of = np.digitize(confidence, BANDS[1:-1])  # band i: BANDS[i] <= p < BANDS[i + 1]
        report["bands"][name] = []
        for i, (low, high) in enumerate(zip(BANDS[:-1], BANDS[1:])):
            inside = band_of == i
            n = int(inside.sum())
            report["bands"][name].append({
                "band": (low, high),
                "digits": n,
                "probability": float(confidence[inside].mean()) if n else float("nan"),
                "right": float(right[inside].mean()) if n else float("nan"),
            })
    for i, (low, high) in enumerate(zip(BANDS[:-1], BANDS[1:])):
        cells = ""
        for band in (report["bands"][name][i] for name in final_proba):
            if band["digits"]:
                cells += f"{band['digits']:14d}{band['probability']:10.2f}{band['right']:10.0%}"
            else:
                cells += f"{0:14d}{'-':>10s}{'-':>10s}"
        print(f"   {f'{low:g} to {high:g}':14s}{cells}")
    print(
        "\n   Expected calibration error (15 bins): "
        + ", ".join(f"{name} {ece:.3f}" for name, ece in report["calibration_error"].items())
        + "."
    )
    return report


if __name__ == "__main__":
    main()
