"""Fixed costs of small calls on a full covariance (``family="fc"``): one-row ``partial_fit``
and ``predict(return_std=True)`` of 10 and 1,000 rows, for this tree and a baseline commit
(checked out with ``git worktree``), each in fresh subprocesses taken in turns.

A regressor with the default MLP (one hidden layer of 50 units) on ``d`` standardised
features (``P = 50 d + 101``): ``d = 20`` (P = 1,101) and ``d = 100`` (P = 5,101), fitted on
256 rows, then ``--calls`` calls of each kind; the figure is the median seconds per call,
and the table gives the median over ``--repeats`` processes per tree. From ``P = 2048`` the
filter holds the covariance's downdates in a factor of 256 columns and settles them at the
end of each call (``FullCovariance.settle``). Prediction blocks are ``PREDICT_CHUNK`` rows
(256) at the default baseline (60c34da) and, since, ``DENSE_PREDICT_ROWS`` (64) from
``DENSE_PREDICT_FROM`` (2048) weights.

    python benchmarks/fc_calls.py [--baseline 60c34da] [--repeats 3] [--calls 7] [--name fc_calls]

``--name`` names the results file, so that a comparison with another baseline keeps this one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from _report import baseline_tree, markdown_table, write

ROOT = Path(__file__).resolve().parents[1]

CALLS = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
import numpy as np
from skbong import BONGRegressor
d, n_calls = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
X = rng.standard_normal((2000, d))
y = X @ (rng.standard_normal(d) / np.sqrt(d)) + 0.1 * rng.standard_normal(2000)
reg = BONGRegressor(family="fc", random_state=0).fit(X[:256], y[:256])
def median(fn):
    fn()  # compiled first
    seconds = []
    for _ in range(n_calls):
        start = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - start)
    return float(np.median(seconds))
print(json.dumps({
    "P": int(reg.posterior_[0].shape[0]),
    "partial_fit, 1 row": median(lambda: reg.partial_fit(X[300:301], y[300:301])),
    "predict std, 10 rows": median(lambda: reg.predict(X[:10], return_std=True)),
    "predict std, 1000 rows": median(lambda: reg.predict(X[:1000], return_std=True)),
}))
"""

KINDS = ("partial_fit, 1 row", "predict std, 10 rows", "predict std, 1000 rows")


def run(tree: Path, d: int, n_calls: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", CALLS, str(d), str(n_calls)], env=env, cwd=tree,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="60c34da", help="commit to compare with")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--calls", type=int, default=7)
    parser.add_argument("--name", default="fc_calls", help="results file name (without extension)")
    args = parser.parse_args()
    rows = []
    with baseline_tree(args.baseline) as base_tree:
        trees = {"baseline": base_tree, "this tree": ROOT}
        for d in (20, 100):
            runs = {name: [] for name in trees}
            for _ in range(args.repeats):  # in turns, so that a slow spell weighs on both
                for name, tree in trees.items():
                    runs[name].append(run(tree, d, args.calls))
            for kind in KINDS:
                base = np.median([r[kind] for r in runs["baseline"]]) * 1e3
                now = np.median([r[kind] for r in runs["this tree"]]) * 1e3
                rows.append([f"{runs['this tree'][0]['P']:,}", kind, f"{base:.1f}", f"{now:.1f}", f"{now / base:.2f}"])
                print(rows[-1], flush=True)
    command = (f"python benchmarks/fc_calls.py --baseline {args.baseline} --repeats {args.repeats} "
               f"--calls {args.calls} --name {args.name}")
    body = f"""Command: `{command}`
(baseline: commit `{args.baseline}`, checked out beside this tree and measured in the same run).

{__doc__.split(chr(10) + chr(10))[1]}

Milliseconds per call, median over {args.repeats} processes per tree of the median of {args.calls} calls:

{markdown_table(["P", "call", "baseline ms", "this tree ms", "this tree / baseline"], rows)}
"""
    path = write(args.name, "Small calls on a full covariance", body)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
