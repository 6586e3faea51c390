"""One-row calls late in a long stream: does a call's cost grow with the rows seen before it?

A service that updates on every event calls ``partial_fit`` with one row, millions of times.
Whatever the estimator keeps per row (the prequential record, ``history_``) must then be
appended to, never copied whole at each call, or the stream turns quadratic. This script
feeds a ``BONGClassifier`` (10 classes, 8 features, MLP 8-16-10, ``family="diag"`` so that a
million rows take seconds; what is kept per row does not depend on the family) a synthetic
stream in large calls up to each checkpoint, then times ``--calls`` one-row calls there
(median ms a call), with the prequential record on and off, for this tree and a baseline
commit (checked out with ``git worktree``), each in a fresh subprocess, ``--rounds`` times
in turns; each figure is the lowest of its rounds' medians (a slow spell of a 2-core host
moves a median by up to 50%).

    python benchmarks/long_stream.py [--baseline e43230a] [--calls 200] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from _report import baseline_tree, markdown_table, write

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINTS = (1_000, 100_000, 300_000, 1_000_000)

STREAM = r"""
import json, sys, time, warnings
import numpy as np
warnings.simplefilter("ignore")
from skbong import BONGClassifier
prequential, calls, checkpoints = json.loads(sys.argv[1])
rng = np.random.default_rng(0)
n = max(checkpoints) + calls * len(checkpoints)
X = rng.standard_normal((n, 8)).astype(np.float32)
y = (X @ rng.standard_normal((8, 10))).argmax(1)
est = BONGClassifier(family="diag", hidden_layer_sizes=(16,), prequential=prequential, shuffle=False, random_state=0)
est.partial_fit(X[:2], y[:2], classes=np.arange(10))
seen, out = 2, {}
for checkpoint in checkpoints:
    while seen < checkpoint:  # large calls up to the checkpoint
        stop = min(checkpoint, seen + 200_000)
        est.partial_fit(X[seen:stop], y[seen:stop])
        seen = stop
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        est.partial_fit(X[seen : seen + 1], y[seen : seen + 1])
        times.append(time.perf_counter() - start)
        seen += 1
    out[checkpoint] = 1e3 * float(np.median(times))
print(json.dumps(out))
"""


def run(tree: Path, prequential: bool, calls: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu")}
    result = subprocess.run(
        [sys.executable, "-c", STREAM, json.dumps([prequential, calls, list(CHECKPOINTS)])],
        env=env, capture_output=True, text=True, cwd=tree,
    )
    if result.returncode:
        raise RuntimeError(result.stderr[-3000:])
    return {int(k): v for k, v in json.loads(result.stdout.strip().splitlines()[-1]).items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="e43230a", help="commit to compare with")
    parser.add_argument("--calls", type=int, default=200, help="one-row calls timed at each checkpoint")
    parser.add_argument("--rounds", type=int, default=2, help="processes per tree and setting, taken in turns")
    args = parser.parse_args()
    results = {}
    with baseline_tree(args.baseline) as base_tree:
        for _ in range(args.rounds):  # the trees in turns, so a slow spell weighs on both
            for prequential in (True, False):
                for name, tree in (("baseline", base_tree), ("this tree", ROOT)):
                    times = run(tree, prequential, args.calls)
                    print(name, "prequential" if prequential else "unrecorded", times, flush=True)
                    best = results.setdefault((name, prequential), times)
                    results[name, prequential] = {c: min(best[c], times[c]) for c in times}
    rows = []
    for prequential in (True, False):
        for name in ("baseline", "this tree"):
            times = results[name, prequential]
            rows.append([name, "on" if prequential else "off", *(f"{times[c]:.2f}" for c in CHECKPOINTS),
                         f"{times[CHECKPOINTS[-1]] / times[CHECKPOINTS[0]]:.2f}"])
    header = ["tree", "prequential record", *(f"{c:,} rows seen" for c in CHECKPOINTS), "last / first"]
    command = f"python benchmarks/long_stream.py --baseline {args.baseline} --calls {args.calls} --rounds {args.rounds}"
    body = f"""Command: `{command}`
(baseline: commit `{args.baseline}`, checked out beside this tree; {args.rounds} fresh processes per row, in turns).

Milliseconds of one one-row `partial_fit` call: the median over {args.calls} calls after the
stream has reached each number of rows (fed in calls of up to 200,000 rows), the lowest over
the rounds.
`BONGClassifier(family="diag", hidden_layer_sizes=(16,), shuffle=False)`, 10 classes, 8
standard normal features, labels from a random linear map. The last column is the cost of a
call at the last checkpoint over that at the first: 1 for a stream that stays flat.

{markdown_table(header, rows)}
"""
    path = write("long_stream", "One-row calls late in a long stream", body)
    print(body)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
