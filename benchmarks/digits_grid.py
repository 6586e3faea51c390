"""Every (algorithm, hessian, family) cell of the BONG space on scikit-learn's digits.

One pass over 1,257 training rows (inputs / 16), MLP 64-H-10 (tanh, H=5 by default,
P = 385, so that the 32 O(P^3) full-covariance cells and their searches finish on two
cores), batch size 1, 540 rows held out. The prior scale sigma0 and the learning rate of
each cell are chosen together on a validation split of the training rows with one
vectorised sweep (``skbong.core.run_sweep``): learn the first 500 rows, score the next
250 prequentially by log-loss, averaged over the seeds; BONG takes its unit step, so only
sigma0 varies there. Each cell then makes one pass over all training rows with the chosen
pair from each seed's initial weights (``random_state`` 0, 1, ...) and reports held-out
accuracy and log-loss (their mean over the seeds, and the accuracies' range), whether
the health test warned, and wall times. With five hidden units the initial weights
matter: with ReLU units one seed's accuracy at a fixed sigma0 differs from another's by
up to 0.4 (a dead unit is a fifth of the network), so one seed ranks cells by chance;
hence tanh units and several seeds. Cells the
registry rejects print the reason. Writes ``results/digits_grid.md`` and ``.png``.

    python benchmarks/digits_grid.py [--families dlr,diag] [--hidden 10] [--inner bbb=10] [--sigma0s 0.1,0.3,1,3]
        [--steps bbb=0.001:0.0003] [--mc-samples 100] [--seeds 3] [--activation relu] [--refine]
        [--validation-rows 628,629] [--passes 2]
        [--name NAME]
    python benchmarks/digits_grid.py --union
    python benchmarks/digits_grid.py --union-predictive

``--union`` runs nothing: it reads every committed ``results/digits_grid*.json`` (the
full grid and its variants: more inner steps, more draws, more passes, a refined or wider search) and
gives each cell the run with its lowest validation loss, so that the protocol too is
chosen per cell on the validation split, never on test rows
(``results/digits_grid_union.md``). ``--union-predictive`` refits each cell the union counts
from one seed and scores it with the probit predictive as well as the plug-in, which tells
the cells whose covariance is usable from those whose mean alone predicts well
(``results/digits_grid_union_predictive.md``).

``--passes K`` makes every fit ``K`` passes over its rows (the estimator's ``max_iter``,
the same order each pass): the sweep learns the first 500 rows ``K`` times, then scores
the next 250 prequentially, once, as before; so its validation losses score the same rows
as a one-pass run's, each predicted before it was learned, and the union compares them.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shlex
import time
import warnings

import jax
import numpy as np
from joblib import Parallel, delayed
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import SGDClassifier
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split
from sklearn.utils import check_random_state

from _report import RESULTS, markdown_table, write
from skbong import BONGClassifier
from skbong._health import WIDE_CHECK_ROWS, WIDE_POSTERIOR_EXCESS
from skbong.core import (
    ALGORITHMS,
    FAMILIES,
    HESSIANS,
    Hyperparameters,
    MLPSpec,
    PluginPredictive,
    init_sweep,
    make_config,
    run_sweep,
    undefined_reason,
)

#: Prior scales tried on the validation split (those of ``sigma0="auto"`` above 0.01).
SIGMA0S = (0.03, 0.1, 0.3, 1.0)
#: Step sizes tried on the validation split. BONG has none (unit step, Eq. 5); BLR's
#: natural-gradient step is scale-free. The plain-gradient algorithms' are given as the
#: size ``eta`` of the step on the mean: on moment-like coordinates (fc_mom, diag_mom,
#: dlr; Eqs. 307, 175) the mean moves by ``alpha g``, so ``alpha = eta``; on natural
#: coordinates (fc, diag) by about ``alpha sigma^4 g`` (Eqs. 137-139, 220-222), so
#: ``alpha = eta / sigma0^4`` and one grid of ``eta`` serves every prior scale.
STEPS = {
    "bong": (1.0,),
    "blr": (1.0, 0.5, 0.1),
    "bog": (0.3, 0.1, 0.03, 0.01, 0.001),
    "bbb": (0.3, 0.1, 0.03, 0.01, 0.001),
}
NATURAL = ("fc", "diag")
N_INNER = {"bong": 1, "blr": 2, "bog": 1, "bbb": 2}
#: Validation split of the training rows: learn the first N_LEARN, then score the next
#: N_VAL prequentially (each predicted before it is learned). ``--validation-rows`` sets
#: others; the union compares only runs of the same split (their losses score other rows).
N_LEARN, N_VAL = 500, 250
#: Hidden activation. With five ReLU units a seed's dead units decide a cell more than its
#: method does (BONG-LIN-HESS-DLR at sigma0 = 1: 0.54-0.87 over five seeds); with tanh the
#: same cell spans 0.86-0.90.
ACTIVATION = "tanh"
#: Seeds (``random_state`` of the estimator: its initial weights and Monte-Carlo key).
N_SEEDS = 3
#: Pairs tried, best validation loss first, when a final fit raises. With ``--refine`` the
#: best pairs are neighbours of one another and tend to fail together (3 were not enough).
N_FALLBACK = 12

#: Runs made before a full covariance had to be positive definite to count as valid
#: (025cb21; before it, positive variances sufficed, and BOG, BBB and moment steps passed
#: with indefinite covariances). Their FC and FC_MOM entries are used only for cells that
#: no later run has; the union marks them.
BEFORE_DEFINITE_CHECK = frozenset({
    "digits_grid", "digits_grid_refine_fc", "digits_grid_refine_bog_fc", "digits_grid_refine_bbb_fc",
    "digits_grid_passes2_bong_fc", "digits_grid_passes2_bbb10_fc",
})


def _before_definite_check(name: str, key: str) -> bool:
    """Whether run ``name``'s entry for cell ``key`` was made without the positive-definite check."""
    return name in BEFORE_DEFINITE_CHECK and key.split("-")[2] in ("fc", "fc_mom")


def _data():
    X, y = load_digits(return_X_y=True)
    return train_test_split(X / 16.0, y, test_size=0.3, random_state=0, stratify=y)


def _params(algorithm, hessian, family, hidden, sigma0, learning_rate, protocol, random_state):
    return dict(
        hidden_layer_sizes=(hidden,),
        activation=protocol["activation"],
        algorithm=algorithm,
        hessian=hessian,
        family=family,
        sigma0=sigma0,
        learning_rate=learning_rate,
        n_inner_steps=protocol["n_inner"][algorithm],
        # Set only where they act: elsewhere the estimator warns that they do not.
        n_mc_samples=protocol["n_mc_samples"] if hessian.startswith("mc") else 10,
        # The rows in the order the validation sweep saw them (train_test_split shuffled them).
        shuffle=False,
        random_state=random_state,
        max_iter=protocol["passes"],
    )


def _steps_scale_with_sigma0(algorithm, family):
    """Whether the cell's learning rate is ``step / sigma0^4`` (see :data:`STEPS`)."""
    return algorithm in ("bog", "bbb") and family in NATURAL


def candidate_pairs(algorithm, family, sigma0s=SIGMA0S, steps=STEPS):
    """Every ``(sigma0, learning_rate)`` of the validation search of one cell."""
    pairs = []
    scaled = _steps_scale_with_sigma0(algorithm, family)
    for sigma0, step in itertools.product(sigma0s, steps[algorithm]):
        rate = step / sigma0**4 if scaled else step
        if not (algorithm == "blr" and family == "dlr" and rate > 1):  # BONG Eq. 294 needs alpha <= 1
            pairs.append((sigma0, rate))
    return pairs


def _estimator_seed(random_state):
    """The seed :class:`BONGClassifier` draws from ``random_state`` for its initial weights
    and its PRNG key."""
    return int(check_random_state(random_state).randint(np.iinfo(np.int32).max))


#: Factors of the refinement around the best coarse pair (``--refine``): a quarter of a
#: decade each side in sigma0 and in the step (the coarse grids step by about half a
#: decade), a coarse-to-fine stand-in for the seeds' Bayesian optimisation of the learning
#: rate and sigma0 on validation NLL (BONG Sec. 5).
REFINE = (10**-0.25, 1.0, 10**0.25)


def refined_pairs(algorithm, family, best, tried):
    """The pairs around ``best`` (``(sigma0, learning_rate)``) on the grid of
    :data:`REFINE` in sigma0 and in the step (see :data:`STEPS`), less those in ``tried``.
    BONG keeps its unit step; BLR's step stays at most 1 (its coarse grid's largest)."""
    sigma0, rate = best
    scaled = _steps_scale_with_sigma0(algorithm, family)
    step = rate * sigma0**4 if scaled else rate
    steps = (1.0,) if algorithm == "bong" else tuple(step * f for f in REFINE)
    if algorithm == "blr":
        steps = tuple(sorted({min(s, 1.0) for s in steps}))
    pairs = []
    for s0, st in itertools.product((sigma0 * f for f in REFINE), steps):
        pair = (float(np.float32(s0)), float(np.float32(st / s0**4 if scaled else st)))
        if not any(np.isclose(pair, t).all() for t in tried) and pair not in pairs:
            pairs.append(pair)
    return pairs


def validation_losses(pairs, algorithm, hessian, family, hidden, X_train, y_train, protocol):
    """Mean validation log-loss over the seeds of each pair (see :func:`tune`)."""
    n_seeds = protocol["n_seeds"]
    sigma0 = np.repeat(np.array([s for s, _ in pairs], np.float32), n_seeds)
    rate = np.repeat(np.array([lr for _, lr in pairs], np.float32), n_seeds)
    n_learn, n_scored = protocol["validation_rows"]
    n_rows = n_learn + n_scored
    # K passes over the learned rows, then the scored rows once (module docstring, --passes).
    order = np.concatenate([np.tile(np.arange(n_learn), protocol["passes"]), np.arange(n_learn, n_rows)])
    X = np.asarray(X_train[order], np.float32)
    Y = np.eye(10, dtype=np.float32)[y_train[order]]
    spec = MLPSpec(X.shape[1], (hidden,), 10, protocol["activation"])
    # backtrack="auto" as the estimator's final fit has it: the line search where it is on.
    config = make_config(
        spec.apply, "categorical", family, 10, algorithm, hessian, protocol["n_inner"][algorithm],
        protocol["n_mc_samples"], backtrack="auto",
    )
    seeds = [_estimator_seed(random_state) for random_state in range(n_seeds)]
    mean0 = np.stack([spec.init_params(seed).astype(np.float32) for seed in seeds])
    states = init_sweep(config.family, np.tile(mean0, (len(pairs), 1)), sigma0)
    keys = jax.numpy.tile(jax.numpy.stack([jax.random.PRNGKey(seed) for seed in seeds]), (len(pairs), 1))
    hypers = Hyperparameters(1.0, 1.0, 0.0, rate)
    states, log_prob, _ = run_sweep(config, states, X, Y, hypers, 1, keys, 0, PluginPredictive())
    losses = -np.asarray(log_prob, np.float64)[:, -n_scored:].mean(axis=1)
    valid = np.asarray(jax.vmap(config.family.is_valid)(states))
    return np.where(valid & np.isfinite(losses), losses, np.inf).reshape(len(pairs), n_seeds).mean(axis=1)


def tune(algorithm, hessian, family, hidden, X_train, y_train, protocol):
    """``(pairs, validation losses, seconds)`` of one cell, best pair first.

    Every pair of :func:`candidate_pairs`, from every seed, is one member of a single
    :func:`skbong.core.run_sweep` over the first ``n_learn + n_scored`` training rows
    (``protocol["validation_rows"]``; by default ``N_LEARN`` and ``N_VAL``), from the initial
    weights and Monte-Carlo key the estimator draws with that ``random_state``. A member
    scores the plug-in log-loss of the last ``n_scored`` rows, each predicted before it was
    learned, or infinity if its posterior broke down; a pair scores the mean over its seeds
    (infinity if any seed broke down). With ``protocol["refine"]`` a second sweep
    scores the :func:`refined_pairs` around the best, and both sweeps' pairs are ranked
    together.
    """
    start = time.perf_counter()
    pairs = candidate_pairs(algorithm, family, protocol["sigma0s"], protocol["steps"])
    args = (algorithm, hessian, family, hidden, X_train, y_train, protocol)
    losses = validation_losses(pairs, *args)
    if protocol["refine"] and np.isfinite(losses).any():
        extra = refined_pairs(algorithm, family, pairs[int(np.argmin(losses))], pairs)
        if extra:
            pairs, losses = pairs + extra, np.concatenate([losses, validation_losses(extra, *args)])
    order = np.argsort(losses, kind="stable")
    return [pairs[i] for i in order], losses[order], time.perf_counter() - start


def run_cell(algorithm, hessian, family, data, hidden, protocol):
    reason = undefined_reason(algorithm, hessian, family)
    if reason is not None:
        return {"status": "undefined", "reason": reason}
    X_train, X_test, y_train, y_test = data
    pairs, losses, tune_s = tune(algorithm, hessian, family, hidden, X_train, y_train, protocol)
    n_members = len(pairs) * protocol["n_seeds"]  # with --refine, both sweeps' members
    n_finite = int(np.isfinite(losses).sum())
    if n_finite == 0:
        return {"status": "diverged at every sigma0 and learning rate", "tune_s": tune_s, "n_members": n_members}
    # A pair whose final fit raises for any seed gives way to the next best.
    for rank, (sigma0, lr) in enumerate(pairs[: min(N_FALLBACK, n_finite)]):
        accuracies, log_losses, fit_seconds, n_warned = [], [], [], 0
        try:
            for random_state in range(protocol["n_seeds"]):
                params = _params(algorithm, hessian, family, hidden, sigma0, lr, protocol, random_state)
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", ConvergenceWarning)
                    start = time.perf_counter()
                    est = BONGClassifier(**params).fit(X_train, y_train)
                    fit_seconds.append(time.perf_counter() - start)
                n_warned += any(issubclass(w.category, ConvergenceWarning) for w in caught)
                accuracies.append(est.score(X_test, y_test))
                log_losses.append(log_loss(y_test, est.predict_proba(X_test), labels=est.classes_))
        except FloatingPointError:
            continue
        return {
            "status": "ok",
            "validation_rows": list(protocol["validation_rows"]),
            "sigma0": sigma0,
            "learning_rate": lr,
            "validation_rank": rank + 1,
            "validation_loss": float(losses[rank]),
            "accuracy": float(np.mean(accuracies)),
            "accuracies": accuracies,
            "log_loss": float(np.mean(log_losses)),
            "fit_s": float(np.mean(fit_seconds)),
            "tune_s": tune_s,
            "n_warned": n_warned,
            "n_members": n_members,
        }
    return {"status": f"final fit diverged at the {min(N_FALLBACK, n_finite)} best pairs", "tune_s": tune_s,
            "n_members": n_members}


def _run_and_print(algorithm, hessian, family, data, hidden, protocol):
    cell = run_cell(algorithm, hessian, family, data, hidden, protocol)
    shown = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in cell.items()}
    print(algorithm, hessian, family, shown, flush=True)
    return cell


def plot(cells, algorithms, hessians, families, path, passes=1):
    """Heat map of held-out accuracy; undefined cells hatched, diverged cells blank."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [(a, h) for a in algorithms for h in hessians]
    acc = np.full((len(rows), len(families)), np.nan)
    fig, ax = plt.subplots(figsize=(1.4 * len(families) + 2.5, 0.42 * len(rows) + 1.2))
    for i, (a, h) in enumerate(rows):
        for j, f in enumerate(families):
            cell = cells[(a, h, f)]
            if cell["status"] == "ok":
                acc[i, j] = cell["accuracy"]
                ax.text(j, i, f"{cell['accuracy']:.2f}", ha="center", va="center", fontsize=8)
            else:
                label = "undefined" if cell["status"] == "undefined" else "diverged"
                ax.text(j, i, label, ha="center", va="center", fontsize=7, color="0.4")
    image = ax.imshow(acc, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(families)), families)
    ax.set_yticks(range(len(rows)), [f"{a}-{h}" for a, h in rows])
    ax.set_title("held-out accuracy on digits after " + ("one pass" if passes == 1 else f"{passes} passes"))
    fig.colorbar(image, ax=ax, fraction=0.04)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


#: Results of ``--union``, which are not among the runs it reads.
UNION_NAME = "digits_grid_union"


def _split_text(run: dict) -> str:
    """How a run's sweeps split the training rows, in words."""
    learn, scored = next(cell["validation_rows"] for cell in run.values() if "validation_rows" in cell)
    return f"the first {learn + scored} rows learned, the last {scored} of them scored"


def _warned_text(cell: dict) -> str:
    """How many seeds' final fits of a cell emitted a ConvergenceWarning ("2/3"), or "" for none."""
    n_warned = cell.get("n_warned", 0)
    return f"{n_warned}/{len(cell['accuracies'])}" if n_warned else ""


def _run_command(name: str) -> str:
    """The command line of committed run ``name``, as its results file gives it ("?" if none)."""
    lines = (RESULTS / f"{name}.md").read_text().splitlines()
    return next((line.split("`")[1] for line in lines if line.startswith("- command:")), "?")


def _union_choice():
    """The union's choice: ``(runs, other_split, chosen, defined, threshold, best)``, where
    ``chosen[key]`` names the committed run with the cell's lowest validation loss (or None)."""
    runs = {path.stem: json.loads(path.read_text()) for path in sorted(RESULTS.glob("digits_grid*.json"))
            if path.stem != UNION_NAME}
    # Validation losses of another split score other rows: such runs are listed, not compared.
    default_split = [N_LEARN, N_VAL]
    other_split = {name: run for name, run in runs.items()
                   if any(cell.get("validation_rows", default_split) != default_split for cell in run.values())}
    runs = {name: run for name, run in runs.items() if name not in other_split}
    main_grid = runs["digits_grid"]
    chosen = {}
    for key in main_grid:
        having = [name for name, run in runs.items() if key in run]
        if any(not _before_definite_check(name, key) for name in having):
            having = [name for name in having if not _before_definite_check(name, key)]
        tried = [(runs[name][key]["validation_loss"], name) for name in having if runs[name][key]["status"] == "ok"]
        chosen[key] = min(tried)[1] if tried else None
    defined = [key for key, cell in main_grid.items() if cell["status"] != "undefined"]
    best = max(runs[name][key]["accuracy"] for key, name in chosen.items() if name)
    best = max(best, max(c["accuracy"] for c in main_grid.values() if c["status"] == "ok"))
    return runs, other_split, chosen, defined, 0.9 * best, best


def _counted(runs, chosen, defined, threshold) -> list:
    """The defined cells whose chosen run reaches the threshold: those the union counts."""
    return [key for key in defined if chosen[key] is not None and runs[chosen[key]][key]["accuracy"] >= threshold]


def union() -> None:
    """Give each cell the committed run (protocol) with its lowest validation loss and write
    ``results/digits_grid_union.md``: the count of cells within 90% of the best accuracy
    when the protocol is chosen per cell as its sigma0 and learning rate are."""
    runs, other_split, chosen, defined, threshold, best = _union_choice()
    main_grid = runs["digits_grid"]
    commands = {}
    for name in runs:
        lines = (RESULTS / f"{name}.md").read_text().splitlines()
        date = next((line[len("- date: "):][:10] for line in lines if line.startswith("- date:")), "?")
        commands[name] = f"`{_run_command(name)}` ({date})"
    near_main = sum(main_grid[k]["status"] == "ok" and main_grid[k]["accuracy"] >= threshold for k in defined)
    crossing = _counted(runs, chosen, defined, threshold)
    near = len(crossing)
    near_warned = sum(runs[chosen[k]][k].get("n_warned", 0) > 0 for k in crossing)
    header = ["algorithm", "hessian", "family", "run chosen", "sigma0", "learning rate", "validation log-loss",
              "accuracy", "log-loss", "reaches 90%", "warned", "accuracy in digits_grid.md"]
    rows = []
    for key in main_grid:
        name = chosen[key]
        main_cell = main_grid[key]
        in_main = f"{main_cell['accuracy']:.3f}" if main_cell["status"] == "ok" else main_cell["status"]
        if name is None:
            rows.append([*key.split("-"), main_cell["status"], "", "", "", "", "", "", "", in_main])
            continue
        cell = runs[name][key]
        marked = f"{name} (before the check)" if _before_definite_check(name, key) else name
        rows.append([*key.split("-"), marked, f"{cell['sigma0']:g}", f"{cell['learning_rate']:.3g}",
                     f"{cell['validation_loss']:.3f}", f"{cell['accuracy']:.3f}", f"{cell['log_loss']:.3f}",
                     "yes" if cell["accuracy"] >= threshold else "", _warned_text(cell), in_main])
    supplied = {name: sum(chosen[k] == name for k in defined) for name in runs}
    summary = (f"**{near} of {len(defined)} defined cells reach 90% of the best cell's accuracy ({best:.3f}, "
               f"threshold {threshold:.3f}) with the run chosen per cell on the validation split "
               f"(digits_grid.md alone: {near_main}); {near_warned} of them warned in some seed's final fit.**")
    print(summary)
    body = (
        "No new fits. Every committed run of `digits_grid.py` (below, with its command and date) scored each of "
        "its cells' (sigma0, learning rate) pairs on the same validation split (the first "
        f"{N_LEARN + N_VAL} training rows, seeds 0-2, the last {N_VAL} predicted before they were learned) "
        "and then fitted the best pair on all training rows. Here each cell takes the run whose chosen pair has "
        "the lowest validation log-loss, so "
        "the protocol (inner steps, Monte-Carlo draws, passes, a refined or wider search) is tuned per cell as "
        "its hyperparameters are; the test rows choose nothing. A run of several passes (`--passes`) learns "
        f"the first {N_LEARN} rows that many times before it scores the same {N_VAL}, each still predicted "
        "before it was learned. The runs are of the code of their dates (the "
        "dlr_signs run is the DLR MC-EF and LIN-HESS cells after the eigenvector signs were fixed); a "
        "refined search's validation loss is the minimum over more pairs, so it is slightly optimistic, "
        "as is the union's. Before 025cb21 a full covariance counted as valid with positive variances alone, "
        "so BOG, BBB and moment steps could pass with indefinite covariances: an FC or FC_MOM entry of a run "
        "made before it (`BEFORE_DEFINITE_CHECK`) is used only for a cell that no later run has, and is "
        "marked 'before the check'.\n\n"
        + summary
        + "\n\n"
        + markdown_table(["run", "command (date)", "cells it supplies"],
                         [[name, commands[name], supplied[name]] for name in runs])
        + "".join(f"\n\nNot compared here (validation on another split of the training rows, "
                  f"{_split_text(run)}): `{name}.md`." for name, run in other_split.items())
        + "\n\n"
        + markdown_table(header, rows)
    )
    print(write(UNION_NAME, "The BONG space on digits: the protocol chosen per cell", body))


#: Results of ``--union-predictive``.
UNION_PREDICTIVE_NAME = "digits_grid_union_predictive"

#: A cell's covariance counts as usable when the probit predictive's test log-loss is at
#: most this many times the plug-in's (BONG's and BLR's cells are at 1.01-1.33).
USABLE_RATIO = 1.5


def union_predictive() -> None:
    """Refit every cell the union counts (within 90% of the best accuracy) at its chosen run's
    protocol and pair, from seed 0, and score the test rows with the plug-in prediction at the
    mean and with the probit predictive, which reads the covariance (LO-FI Appendix B). A
    covariance that stayed at a wide prior, or grew, leaves the mean's accuracy as it is and
    makes the probit predictive near-uniform; ``results/digits_grid_union_predictive.md``
    says which cells those are."""
    runs, _, chosen, defined, threshold, _ = _union_choice()
    X_train, X_test, y_train, y_test = _data()
    header = ["algorithm", "hessian", "family", "run chosen", "plug-in accuracy", "plug-in log-loss",
              "probit log-loss", "ratio", "usable", "probit excess, training rows", "told"]
    rows, n_usable, n_counted, n_told, n_told_usable = [], 0, 0, 0, 0
    # The rows the estimators' covariance check reads (WIDE_CHECK_ROWS of the call, evenly spaced).
    train_rows = np.unique(np.linspace(0, len(y_train) - 1, WIDE_CHECK_ROWS).astype(int))
    for key in _counted(runs, chosen, defined, threshold):
        name = chosen[key]
        cell = runs[name][key]
        args = _parser().parse_args(shlex.split(_run_command(name))[2:])
        algorithm, hessian, family = key.split("-")
        params = _params(algorithm, hessian, family, args.hidden, cell["sigma0"], cell["learning_rate"],
                         _protocol(args), 0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            est = BONGClassifier(**params).fit(X_train, y_train)
        told = any("far wider than its data allow" in str(w.message) for w in caught)
        accuracy = est.score(X_test, y_test)
        plugin = log_loss(y_test, est.predict_proba(X_test), labels=est.classes_)
        train_plugin = log_loss(y_train[train_rows], est.predict_proba(X_train[train_rows]), labels=est.classes_)
        est.set_params(predictive="probit")
        probit = log_loss(y_test, est.predict_proba(X_test), labels=est.classes_)
        train_probit = log_loss(y_train[train_rows], est.predict_proba(X_train[train_rows]), labels=est.classes_)
        train_excess = train_probit - train_plugin
        usable = probit <= USABLE_RATIO * plugin
        n_counted += 1
        n_usable += usable
        n_told += told
        n_told_usable += told and usable
        rows.append([algorithm, hessian, family, name, f"{accuracy:.3f}", f"{plugin:.3f}", f"{probit:.3f}",
                     f"{probit / plugin:.2f}", "yes" if usable else "", f"{train_excess:.3f}", "yes" if told else ""])
        print(" | ".join(rows[-1]), flush=True)
    summary = (f"**{n_usable} of the {n_counted} cells the union counts (threshold {threshold:.3f}) have a "
               f"probit test log-loss at most {USABLE_RATIO} times their plug-in one.** The fit's check of a "
               f"plain-gradient covariance told {n_told} of the {n_counted - n_usable} others, and {n_told_usable} "
               "usable ones, that the covariance is far wider than the data allow.")
    print(summary)
    body = (
        "No search. Each cell that `digits_grid_union.md` counts is refitted from seed 0 (`random_state=0`) "
        "at its chosen run's protocol and pair, on all training rows, and its test rows are scored twice: "
        "with the plug-in prediction at the mean (`predictive='plugin'`, the default, which the union's "
        "accuracies use) and with the probit predictive (`predictive='probit'`), which reads the covariance. "
        "A posterior whose covariance says what the data say predicts about as well with it as without it; a "
        "covariance left at a wide prior, or grown in some directions, makes the probit predictive "
        "near-uniform (log-loss 2.303 for ten classes) while the mean's accuracy stays. One seed, so a cell's "
        "numbers differ from the union's three-seed means.\n\n"
        "The last two columns are the estimators' check of a plain-gradient (BOG, BBB) fit's covariance "
        "(`skbong._health.WIDE_POSTERIOR_EXCESS`): the probit log-loss less the plug-in one on "
        f"{WIDE_CHECK_ROWS} training rows, evenly spaced, and whether the fit was told (a `ConvergenceWarning` "
        f"where the fit is plain-gradient and that excess is above {WIDE_POSTERIOR_EXCESS} nats on the fit's own "
        "rows, from 200 rows seen).\n\n" + summary + "\n\n" + markdown_table(header, rows))
    print(write(UNION_PREDICTIVE_NAME, "The BONG space on digits: which counted cells' covariances are usable", body))


def _per_algorithm(text, parse):
    """``{"bbb": parse("10")}`` from ``"bbb=10"``: the per-algorithm options (``--inner``, ``--steps``)."""
    return {algorithm: parse(value) for algorithm, value in (item.split("=") for item in text.split(",") if item)}


def _parser() -> argparse.ArgumentParser:
    """The command line of a run, also read back from committed runs (``--union-predictive``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS))
    parser.add_argument("--hessians", default=",".join(HESSIANS))
    parser.add_argument("--hidden", type=int, default=5)
    parser.add_argument("--n-jobs", type=int, default=1, help="cells run in parallel processes (joblib)")
    parser.add_argument("--inner", default="", help="inner steps per algorithm instead of N_INNER, e.g. bbb=10")
    parser.add_argument("--sigma0s", default="", help="prior scales tried instead of SIGMA0S, e.g. 0.1,0.3,1,3")
    parser.add_argument("--steps", default="", help="steps per algorithm instead of STEPS, e.g. bbb=0.001:0.0003")
    parser.add_argument("--mc-samples", type=int, default=10, help="Monte-Carlo draws per step (the seeds use 100)")
    parser.add_argument("--activation", default=ACTIVATION, help="hidden activation (relu: the grid before 2026-11-27)")
    parser.add_argument("--seeds", type=int, default=N_SEEDS, help="initial weights (random_state 0, 1, ...)")
    parser.add_argument("--refine", action="store_true", help="a second sweep around each cell's best pair")
    parser.add_argument("--validation-rows", default=f"{N_LEARN},{N_VAL}",
                        help="LEARN,SCORED: the sweep learns the first LEARN training rows and scores the next "
                        "SCORED, each before it is learned (e.g. 628,629: the whole training stream, scored on "
                        "its second half)")
    parser.add_argument("--passes", type=int, default=1,
                        help="passes over the rows of every fit (max_iter), the sweep's learned rows included")
    parser.add_argument("--name", default="digits_grid", help="results/NAME.{md,png,json}")
    parser.add_argument("--union", action="store_true", help="no fits: the committed run chosen per cell")
    parser.add_argument("--union-predictive", action="store_true",
                        help="the union's crossing cells refitted (seed 0), scored with the plug-in and probit")
    return parser


def _protocol(args) -> dict:
    """A run's protocol from its parsed command line."""
    n_inner = {**N_INNER, **_per_algorithm(args.inner, int)}
    sigma0s = tuple(float(s) for s in args.sigma0s.split(",")) if args.sigma0s else SIGMA0S
    steps = {**STEPS, **_per_algorithm(args.steps, lambda values: tuple(float(v) for v in values.split(":")))}
    n_learn, n_scored = (int(n) for n in args.validation_rows.split(","))
    return {"n_inner": n_inner, "sigma0s": sigma0s, "steps": steps, "n_mc_samples": args.mc_samples,
            "n_seeds": args.seeds, "activation": args.activation, "refine": args.refine,
            "validation_rows": (n_learn, n_scored), "passes": args.passes}


def main():
    parser = _parser()
    args = parser.parse_args()
    if args.union:
        union()
        return
    if args.union_predictive:
        union_predictive()
        return
    protocol = _protocol(args)
    n_inner, sigma0s, steps = protocol["n_inner"], protocol["sigma0s"], protocol["steps"]
    n_learn, n_scored = protocol["validation_rows"]
    families, algorithms, hessians = (s.split(",") for s in (args.families, args.algorithms, args.hessians))
    data = _data()
    X_train, X_test, y_train, y_test = data
    if min(n_learn, n_scored) < 1 or n_learn + n_scored > len(X_train):
        parser.error(f"--validation-rows must be two positive counts summing to at most {len(X_train)}")
    if args.passes < 1:
        parser.error("--passes must be a positive count")
    passes_text = "One pass" if args.passes == 1 else f"{args.passes} passes (`max_iter={args.passes}`)"

    sgd = SGDClassifier(loss="log_loss", random_state=0).partial_fit(X_train, y_train, classes=np.arange(10))
    baseline = [["SGDClassifier(log_loss), one partial_fit pass", f"{sgd.score(X_test, y_test):.3f}",
                 f"{log_loss(y_test, sgd.predict_proba(X_test)):.3f}"]]

    header = ["algorithm", "hessian", "family", "sigma0", "learning rate", "accuracy", "range over seeds",
              "log-loss", "validation log-loss (rank)", "warned", "tuning s (members)", "fit s"]
    keys = [(a, h, f) for a in algorithms for h in hessians for f in families]
    # The full-covariance cells cost O(P^3) a step: start them first so the workers end together.
    by_cost = sorted(keys, key=lambda key: not key[2].startswith("fc"))
    results = Parallel(n_jobs=args.n_jobs)(delayed(_run_and_print)(*key, data, args.hidden, protocol)
                                           for key in by_cost)
    cells = dict(zip(by_cost, results))
    (RESULTS / f"{args.name}.json").write_text(json.dumps({"-".join(k): v for k, v in cells.items()}, indent=1))
    rows, reasons = [], {}
    for key in keys:
        cell = cells[key]
        if cell["status"] == "ok":
            spread = f"{min(cell['accuracies']):.3f}-{max(cell['accuracies']):.3f}"
            warned = f"{cell['n_warned']}/{args.seeds}" if cell["n_warned"] else ""
            rows.append([*key, f"{cell['sigma0']:g}", f"{cell['learning_rate']:.3g}", f"{cell['accuracy']:.3f}",
                         spread, f"{cell['log_loss']:.3f}",
                         f"{cell['validation_loss']:.3f} ({cell['validation_rank']})", warned,
                         f"{cell['tune_s']:.0f} ({cell['n_members']})", f"{cell['fit_s']:.1f}"])
        else:
            if cell["status"] == "undefined":
                reasons[key] = cell["reason"]
            rows.append([*key, cell["status"], "", "", "", "", "", "", "", ""])
    defined = [c for c in cells.values() if c["status"] != "undefined"]
    best = max((c["accuracy"] for c in defined if c["status"] == "ok"), default=float("nan"))
    full_grid = RESULTS / "digits_grid.json"
    variant = args.name != "digits_grid"
    if variant and full_grid.exists():
        # A partial or variant grid is measured against the best cell of the full grid too.
        reference = [c["accuracy"] for c in json.loads(full_grid.read_text()).values() if c["status"] == "ok"]
        best = max([best, *reference])
    near = sum(c["status"] == "ok" and c["accuracy"] >= 0.9 * best for c in defined)
    summary = (f"**{near} of {len(defined)} defined cells reach 90% of the best cell's accuracy "
               f"({best:.3f}, threshold {0.9 * best:.3f}"
               f"{'; the best of this run and of digits_grid.md' if variant else ''}).**")
    print(summary)
    reason_lines = "\n".join(f"- {'-'.join(key)}: {text}." for key, text in reasons.items())
    body = (
        f"{passes_text} over digits (1,257 train / 540 test, inputs / 16), MLP 64-{args.hidden}-10 {args.activation}, "
        f"batch size 1, inner steps {n_inner}, {args.mc_samples} Monte-Carlo draws, "
        "default options otherwise (diagonal families: the Kalman step). "
        f"Every cell is run from {args.seeds} seeds (`random_state` 0 to {args.seeds - 1}: the initial weights and "
        "the Monte-Carlo key); with five hidden units a seed can move a cell's accuracy by 0.4 at a fixed "
        "sigma0 with ReLU units (dead units), less with tanh, so the cells are compared by their mean. "
        "sigma0 and the learning rate of each cell are the pair with the lowest plug-in log-loss on a "
        f"validation split of the training rows, averaged over the seeds: one `run_sweep` over the first "
        f"{n_learn + n_scored} training rows with every (pair, seed) as a member, scored on the last {n_scored} of "
        "them, each predicted before it was learned (the test rows are never used to choose). "
        + (f"The sweep learns the first {n_learn} rows {args.passes} times over before it scores the next "
           f"{n_scored}, once each. " if args.passes > 1 else "")
        + f"Pairs: sigma0 in {sigma0s} x step in {steps}; for BOG and "
        "BBB on natural coordinates (fc, diag) the learning rate is step / sigma0^4, so that the mean moves by "
        "about step x gradient on every family (Eqs. 137-139, 220-222 against 175, 307). "
        + ("A second sweep then scores the pairs a quarter of a decade around the best (sigma0 and step "
           "times 10^-0.25, 1, 10^0.25; BONG's step stays 1 and BLR's at most 1), and the pairs of both sweeps "
           "are ranked together. " if args.refine else "")
        + "The cell then "
        f"makes {passes_text.lower()} over all training rows from each seed, in the same order (`shuffle=False`), with "
        "`BONGClassifier` at that pair; accuracy and log-loss are the means over the seeds. If a seed's fit "
        f"raises, the next best pair is tried (up to {N_FALLBACK}; the rank is in brackets after the validation "
        "loss). 'diverged' means every pair made the posterior invalid for some seed; 'warned' how many seeds' "
        "final fits emitted a ConvergenceWarning. Tuning s is the sweep's wall time (members in brackets), fit s "
        "the final fits' mean; "
        f"both include compilation, and the cells ran in {args.n_jobs} parallel process(es), so they are "
        "indicative only. The grid before this protocol (one seed, sigma0 fixed at 0.3, learning rate alone "
        "tuned, projected diagonal step) is in `digits_grid_before.md`.\n\n"
        + summary
        + "\n\n"
        + markdown_table(["baseline", "accuracy", "log-loss"], baseline)
        + "\n\n"
        + markdown_table(header, rows)
        + f"\n\n![accuracy heat map]({args.name}.png)\n\nUndefined cells:\n\n"
        + reason_lines
    )
    plot(cells, algorithms, hessians, families, RESULTS / f"{args.name}.png", args.passes)
    print(write(args.name, "The BONG space on digits", body))


if __name__ == "__main__":
    main()
