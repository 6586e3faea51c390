"""Time per observation and compile time against the number of parameters P.

Models: MLPs 784-h-10 (ReLU) of growing width h on MNIST inputs (the stream of
``skbong.datasets.mnist_stream``), so P = 795 h + 10 runs from 0.8k to 400k. Methods:
BONG with LIN-HESS and MC-EF (M = 10) on DIAG, DLR-10 and, while its P x P covariance
fits comfortably in memory, FC. One observation per step (batch_size = 1), float32.

For each cell: compile time (first call of ``run_filter`` on 64 rows, 128 for FC above P = 5k, minus
the steady cost of those rows), steady time per step (median of ``N_CALLS`` further calls, with their range; the cells
are compiled first, then timed in rounds of one call each, see ``time_cells``), and
XLA's own count of FLOPs and bytes accessed by one step (``cost_analysis`` of the
compiled predict + update of one observation; its bytes count every operand access,
cached or not, so they are reported but not used for the floor). The floor of a step is
``max(FLOPs / matmul rate, 2 x belief bytes / bandwidth)``: the arithmetic at the
measured matmul rate, or reading and writing the belief once at the measured bandwidth,
both measured here, on the default device, before the timed calls and again after each
round of them, the fastest kept (``MachineRates``). Column
"bound" adds what that floor cannot see: the time MC-EF's normal draws take alone
(timed in each cell, between its own steady calls), and DLR-10's time at the rate of a
tall ``P x 20`` Gram product (probed with the others). The
slope of log(time) against log(P) is fitted over P >= 10k per method.

Targets (issue 5; the paper's reference implementation on this machine type):
DLR-10 LIN-HESS at most 0.3x 0.37 / 1.8 / 14.4 / 68.7 ms at P = 0.8k / 10k / 100k /
400k (linear interpolation in log-log between these for the sizes in between).

Then the same timings for the two models of ``mnist_stream`` (MLP 784-50-10 and the paper's
CNN) with BONG-LIN-HESS, against the issue's figures for them (ms per step, compile time).

The reference figures were measured on this machine type with both of its cores, so the
committed results come from an unpinned run (both cores, XLA's default threads; nothing else
running). The header line says which cores the process had.

Writes ``results/speed.md`` and ``results/speed.png``.

    python benchmarks/speed.py            # all sizes
    python benchmarks/speed.py --quick    # three small sizes, for checking the script
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from _report import RESULTS, markdown_table, write
from flax import nnx

from skbong.core import MLP, Hyperparameters, make_config, module_params, run_filter, update_step
from skbong.core._filter import MATMUL_PRECISION
from skbong.core._random import standard_normal
from skbong.datasets import mnist_stream
from mnist_stream import Model, build_model

WIDTHS = (1, 4, 13, 40, 126, 252, 503)
RANK = 10  # DLR-10
# FC holds a P x P covariance (0.5 GB at P = 11k in float32); MC-EF on FC also samples
# through a P x P Cholesky factor every step, O(P^3).
FC_MAX_PARAMS = {"lin_hess": 11_000, "mc_ef": 1_000}
REFERENCE_DLR = {805: 0.37, 10_000: 1.8, 100_000: 14.4, 400_000: 68.7}  # ms per step
TARGET_RATIO = 0.3
#: mnist_stream's models, BONG-LIN-HESS: (model, family) -> (reference ms per step, ratio
#: target, compile target s) from issue 5.
MNIST_TARGETS = {("mlp", "dlr"): (5.9, 0.3, 2.0), ("mlp", "diag"): (2.3, 0.5, 2.0), ("cnn", "dlr"): (20.8, 0.3, 3.0)}
# Rows per timed call: a step bucket of run_filter, so every call reuses one compiled scan.
# A call has a fixed cost (it allocates the new belief and copies the old one in, which the
# caller keeps): about 15 ms at P = 400k on DLR-10, which 8 rows a call charged at 1.6 ms a step
# (10.2 against 8.6 ms with 64 rows, this 2-core host).
N_ROWS = 64
#: Steady calls timed per cell; the table gives their median and range.
N_CALLS = 7
#: FC above this P: a call copies the P x P covariance in (the caller keeps its belief)
#: and XLA allocates P x P temporaries, about 1 s per call at P = 10k, so few rows per
#: call would time the call more than the step; 128 rows spread it to ~8 ms per step.
FC_MANY_ROWS_FROM, N_ROWS_FC_LARGE = 5_000, 128


def rows_per_call(family: str, n_params: int) -> int:
    """Rows per timed ``run_filter`` call of a cell."""
    if family == "fc":
        return N_ROWS if n_params <= FC_MANY_ROWS_FROM else N_ROWS_FC_LARGE
    return N_ROWS
SIGMA0 = 0.3


def fastest_call(fn, *args, repeats: int = 5) -> float:
    """Seconds of the fastest of ``repeats`` calls ``fn(*args)``, after one call that
    compiles it (JAX or numpy results: each call waits for its own)."""
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return min(times)


class MachineRates:
    """The float32 matmul rate (FLOP/s), the streaming bandwidth (bytes/s) and the rate of
    the Gram matrix of a tall ``2^19 x 20`` matrix, measured in JAX on the default device,
    each the fastest of every probe taken so far (``probe``).

    The matmul runs at the precision the filter's own products use (``MATMUL_PRECISION``,
    true float32: no TF32 tensor cores on an NVIDIA GPU). The probes are sized to fill the
    device: 2048^2 and 128 MB on a CPU, 8192^2 and 1 GB on an accelerator. The tall Gram
    matrix has the shape of DLR-10's ``P x (R + K)`` factor, whose products run far below
    the square matmul's rate. A floor takes the fastest rate seen: this project's hosts
    share their memory with other machines, and one probe's bandwidth moved between 65
    and 116 GB/s from run to run, so the probes are taken again after every round of timed
    calls (``time_cells``).
    """

    def __init__(self):
        on_cpu = jax.default_backend() == "cpu"
        n, n_bytes = (2048, 2**27) if on_cpu else (8192, 2**30)
        self.square = jax.random.normal(jax.random.PRNGKey(0), (n, n), jnp.float32)
        self.matmul = jax.jit(lambda a: jnp.matmul(a, a, precision=MATMUL_PRECISION))
        # Updated in place (donated), so no fresh pages are faulted in per call.
        self.stream = jax.random.normal(jax.random.PRNGKey(1), (n_bytes // 4,), jnp.float32)
        self.add = jax.jit(lambda x: x + 1.0, donate_argnums=0)
        self.stream = self.add(self.stream).block_until_ready()
        self.tall = jax.random.normal(jax.random.PRNGKey(2), (2**19, 20), jnp.float32)
        self.gram = jax.jit(lambda x: jnp.matmul(x.T, x, precision=MATMUL_PRECISION))
        self.description = (
            f"{n}^2 float32 at precision {MATMUL_PRECISION!r}; in-place add over {n_bytes // 2**20} MB"
        )
        self.flop_rate = self.bandwidth = self.tall_rate = 0.0
        self.n_probes = 0
        self.probe()

    def probe(self) -> None:
        """Measure the three rates again (fastest of 5 calls each) and keep the fastest."""
        n = self.square.shape[0]
        self.flop_rate = max(self.flop_rate, 2 * n**3 / fastest_call(self.matmul, self.square))
        times = []
        for _ in range(5):
            start = time.perf_counter()
            self.stream = self.add(self.stream).block_until_ready()
            times.append(time.perf_counter() - start)
        self.bandwidth = max(self.bandwidth, 2 * self.stream.nbytes / min(times))
        self.tall_rate = max(self.tall_rate, 2 * 2**19 * 20 * 20 / fastest_call(self.gram, self.tall))
        self.n_probes += 1


def drawn_per_draw(model: Model, family: str) -> int:
    """Normal numbers one Monte-Carlo draw of a step takes: every weight on FC; on DIAG
    and DLR with one row per step the first layer's pre-activation in place of its
    weights (``MonteCarloEF``'s local draws), ``n_out`` numbers for ``(n_in + 1) n_out``,
    and on DLR ``R`` more for that layer's share of the low-rank part."""
    if family == "fc":
        return model.n_params
    first = model.apply.dense_network.layers[0]
    return model.n_params - first.n_in * first.n_out + (RANK if family == "dlr" else 0)


def draw_probe(n_samples: int, n_numbers: int, n_steps: int):
    """``key -> total`` of the normal draws of ``n_steps`` Monte-Carlo steps, each of shape
    ``(n_samples, n_numbers)``, in one scan as the filter runs its steps,
    so that one call's dispatch is spread over the steps as in a timed call of the filter.
    They are the step's own draws (``skbong.core._random.standard_normal``, written out once
    as in the step), then summed. The draw rate varies with the host's load, so each cell
    times its own count, between its own steady calls."""

    def one_step(total, key):
        return total + jnp.sum(standard_normal(key, (n_samples, n_numbers), jnp.float32)), None

    return jax.jit(lambda key: jax.lax.scan(one_step, jnp.float32(0), jax.random.split(key, n_steps))[0])


def bound_note(cell: dict, cells: list[dict], tall_rate: float, flop_rate: float, bandwidth: float) -> str:
    """What the bound rates say about a cell: the share of MC-EF's step that drawing its
    normal numbers alone takes (and, for DIAG and DLR, the LIN-HESS step at the same ``P``,
    which takes the same update), DLR's time over LIN-HESS's FLOPs at the tall Gram's
    rate (for MC-EF, whose counted FLOPs include the draws' integer hashing, those of the
    LIN-HESS step at the same ``P``), FC LIN-HESS's time over its FLOPs at the matmul rate
    (its deferred downdates read ``Sigma`` about once a step and write it once a block, so
    the floor's read-and-write of the belief overstates its traffic), and the rate at
    which DIAG LIN-HESS reads and writes its belief."""
    if cell["family"] == "fc" and cell["hessian"] == "lin_hess":
        return f"{cell['ms'] / (1e3 * cell['flops'] / flop_rate):.1f}x its FLOPs at the matmul rate"
    if cell["hessian"] == "mc_ef":
        note = f"draws {cell['draws_ms']:.2f} ms ({100 * cell['draws_ms'] / cell['ms']:.0f}% of step)"
        if cell["family"] in ("diag", "dlr"):
            same = [c for c in cells if (c["P"], c["family"], c["hessian"]) == (cell["P"], cell["family"], "lin_hess")]
            note += f"; LIN-HESS step {same[0]['ms']:.3f} ms" if same else ""
            if same and cell["family"] == "dlr":
                # The same update as LIN-HESS's, whose FLOPs count no integer hashing.
                note += f"; {cell['ms'] / (1e3 * same[0]['flops'] / tall_rate):.1f}x LIN-HESS's FLOPs at the tall Gram's rate"
        return note
    if cell["family"] == "dlr":
        return f"{cell['ms'] / (1e3 * cell['flops'] / tall_rate):.1f}x at the tall Gram's rate"
    if cell["family"] == "diag":
        rate = cell["state_bytes"] / (1e-3 * cell["ms"])
        return f"belief traffic {rate / 1e9:.1f} GB/s ({100 * rate / bandwidth:.0f}% of the bandwidth)"
    return ""


def step_cost(config, state, x, y) -> tuple[float, float]:
    """XLA's FLOPs and bytes accessed for one predict + update of one observation."""
    hyper = Hyperparameters(*(jnp.asarray(v, jnp.float32) for v in (1.0, 1.0, 0.0, 1.0)))

    def one_step(state, x, y, key):
        prior = config.family.predict(state, hyper.dynamics_decay, hyper.process_noise)
        return update_step(config, prior, x, y, jnp.ones(1, bool), hyper, key)

    with jax.default_matmul_precision(MATMUL_PRECISION):
        compiled = jax.jit(one_step).lower(state, x, y, jax.random.PRNGKey(0)).compile()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return float(cost.get("flops", np.nan)), float(cost.get("bytes accessed", np.nan))


def mlp_model(width: int) -> Model:
    """The MLP 784-``width``-10 (ReLU) as an ``mnist_stream.Model``."""
    build = lambda seed: MLP((784, width, 10), "relu", nnx.Rngs(seed))  # noqa: E731
    return Model(f"mlp{width}", f"MLP 784-{width}-10", build, int(module_params(build(0)).shape[0]))


def prepare_cell(model: Model, family: str, hessian: str, X: np.ndarray, Y: np.ndarray, n_rows: int) -> dict:
    """A cell compiled and ready for :func:`time_call`: its first call of ``n_rows`` rows
    (whose time, less the steady cost of those rows, is the compile time), its draw probe,
    and XLA's cost of one step."""
    config = make_config(model.apply, "categorical", family=family, rank=RANK, hessian=hessian)
    state = config.family.init(jnp.asarray(model.init_mean(0)), jnp.float32(SIGMA0))
    hyper = Hyperparameters(1.0, 1.0, 0.0, 1.0)
    start = time.perf_counter()
    first = run_filter(config, state, X[:n_rows], Y[:n_rows], hyper)
    jax.block_until_ready(first)
    first_seconds = time.perf_counter() - start
    n_samples = getattr(config.estimator, "n_samples", 0)
    draw = draw_probe(n_samples, drawn_per_draw(model, family), n_rows) if n_samples else None
    if draw is not None:
        jax.block_until_ready(draw(jax.random.PRNGKey(0)))  # compiled before the timed calls
    flops, nbytes = step_cost(config, state, jnp.asarray(X[:1]), jnp.asarray(Y[:1]))
    return {
        "P": model.n_params, "family": family, "hessian": hessian, "n_rows": n_rows,
        "config": config, "hyper": hyper, "current": first, "draw": draw,
        "first_seconds": first_seconds, "flops": flops, "bytes": nbytes, "steady": [], "draws": [],
    }


def time_call(cell: dict, X: np.ndarray, Y: np.ndarray) -> None:
    """One more timed call of a prepared cell, on the next ``n_rows`` rows, then the time of
    its draws alone (Monte-Carlo estimators)."""
    n_rows, rep = cell["n_rows"], len(cell["steady"])
    rows = slice((rep + 1) * n_rows, (rep + 2) * n_rows)
    start = time.perf_counter()
    cell["current"] = run_filter(cell["config"], cell["current"], X[rows], Y[rows], cell["hyper"],
                                 n_seen=(rep + 1) * n_rows)
    jax.block_until_ready(cell["current"])
    cell["steady"].append(time.perf_counter() - start)
    if cell["draw"] is not None:
        start = time.perf_counter()
        jax.block_until_ready(cell["draw"](jax.random.PRNGKey(rep + 1)))
        cell["draws"].append(time.perf_counter() - start)


def finish_cell(cell: dict) -> dict:
    """The cell's results, its compiled program and belief dropped."""
    steady, n_rows = cell["steady"], cell["n_rows"]
    per_step = float(np.median(steady)) / n_rows
    current = cell["current"]
    return {
        "P": cell["P"],
        "family": cell["family"],
        "hessian": cell["hessian"],
        "ms": 1e3 * per_step,
        "ms_range": (1e3 * min(steady) / n_rows, 1e3 * max(steady) / n_rows),
        "compile_s": cell["first_seconds"] - per_step * n_rows,
        "flops": cell["flops"],
        "bytes": cell["bytes"],
        "state_bytes": 2 * sum(leaf.nbytes for leaf in current),  # read and write the belief once
        "finite": bool(all(np.all(np.isfinite(np.asarray(leaf))) for leaf in current)),
        # Time of a step's normal draws alone (drawn_per_draw), median over the cell's calls.
        "draws_ms": 1e3 * float(np.median(cell["draws"])) / n_rows if cell["draws"] else 0.0,
    }


def time_cells(prepared: list[dict], X: np.ndarray, Y: np.ndarray, rates: MachineRates) -> list[dict]:
    """``N_CALLS`` timed calls of every prepared cell, in rounds (one call of each cell per
    round), so that each cell's calls spread over the whole run: this host's slow spells
    last seconds to minutes and would otherwise fall on a few cells whole. The machine's
    rates are probed again after each round."""
    for _ in range(N_CALLS):
        for cell in prepared:
            time_call(cell, X, Y)
        rates.probe()
    return [finish_cell(cell) for cell in prepared]


def reference_ms(n_params: int) -> float:
    """The reference DLR-10 time, interpolated log-log between the given sizes."""
    sizes = np.log(list(REFERENCE_DLR))
    times = np.log(list(REFERENCE_DLR.values()))
    return float(np.exp(np.interp(np.log(n_params), sizes, times)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="three small sizes only")
    parser.add_argument("--name", default=None, help="results file name (default speed[_quick])")
    parser.add_argument("--widths", default=None, help="hidden widths to time, comma-separated "
                        f"(default {','.join(map(str, WIDTHS))}; a short GPU lease takes a few)")
    parser.add_argument("--skip-mnist", action="store_true", help="leave out the mnist_stream models' cells")
    args = parser.parse_args()
    widths = WIDTHS[:3] if args.quick else WIDTHS
    if args.widths:
        widths = tuple(int(w) for w in args.widths.split(","))
    targets = {} if args.skip_mnist else MNIST_TARGETS
    X, y, _, _ = mnist_stream(seed=0)
    n_rows = (N_CALLS + 1) * max(N_ROWS, N_ROWS_FC_LARGE)
    X = X[:n_rows].astype(np.float32)
    Y = np.eye(10, dtype=np.float32)[y[:n_rows]]
    rates = MachineRates()
    print(f"first probe: matmul {rates.flop_rate / 1e9:.1f} GFLOP/s, bandwidth {rates.bandwidth / 1e9:.1f} GB/s, "
          f"tall Gram {rates.tall_rate / 1e9:.1f} GFLOP/s", flush=True)

    prepared = []
    for width in widths:
        for family in ("diag", "dlr", "fc"):
            model = mlp_model(width)
            n_rows = rows_per_call(family, model.n_params)
            for hessian in ("lin_hess", "mc_ef"):
                if family == "fc" and model.n_params > FC_MAX_PARAMS[hessian]:
                    continue
                prepared.append(prepare_cell(model, family, hessian, X, Y, n_rows))
                print(f"P={model.n_params:>7} {family:>4} {hessian:>8}: compiled", flush=True)
    mnist_models = {name: build_model(name) for name, _ in targets}
    for name, family in targets:
        prepared.append(prepare_cell(mnist_models[name], family, "lin_hess", X, Y, N_ROWS))
    timed = time_cells(prepared, X, Y, rates)
    flop_rate, bandwidth, tall_rate = rates.flop_rate, rates.bandwidth, rates.tall_rate
    print(f"fastest of {rates.n_probes} probes: matmul {flop_rate / 1e9:.1f} GFLOP/s, bandwidth "
          f"{bandwidth / 1e9:.1f} GB/s, tall Gram {tall_rate / 1e9:.1f} GFLOP/s", flush=True)
    del prepared
    cells, mnist_cells = timed[: len(timed) - len(targets)], timed[len(timed) - len(targets) :]
    for cell in cells:
        cell["floor_ms"] = 1e3 * max(cell["flops"] / flop_rate, cell["state_bytes"] / bandwidth)
        print(
            f"P={cell['P']:>7} {cell['family']:>4} {cell['hessian']:>8}: {cell['ms']:8.3f} ms/step, "
            f"compile {cell['compile_s']:5.2f} s, floor {cell['floor_ms']:.3f} ms",
            flush=True,
        )

    mnist_rows = []
    for ((name, family), (ref, ratio_target, compile_target)), cell in zip(targets.items(), mnist_cells):
        model = mnist_models[name]
        ratio = cell["ms"] / ref
        mnist_rows.append([
            model.label, cell["P"], family, f"{cell['ms']:.2f}", f"{ref} ms ref; {ratio:.2f}x "
            f"(target {ratio_target}x: {'met' if ratio <= ratio_target else 'missed'})", f"{cell['compile_s']:.2f}",
            f"{compile_target} s: {'met' if cell['compile_s'] <= compile_target else 'missed'}",
        ])
        print(" | ".join(str(c) for c in mnist_rows[-1]), flush=True)

    rows = []
    for cell in cells:
        target = ""
        if cell["family"] == "dlr" and cell["hessian"] == "lin_hess":
            ref = reference_ms(cell["P"])
            ratio = cell["ms"] / ref
            target = f"{ref:.2f} ms ref; {ratio:.2f}x ({'met' if ratio <= TARGET_RATIO else 'missed'})"
        rows.append(
            [
                cell["P"], cell["family"], cell["hessian"], f"{cell['ms']:.3f}",
                "{:.3f}-{:.3f}".format(*cell["ms_range"]), f"{cell['compile_s']:.2f}",
                f"{cell['flops'] / 1e6:.1f}", f"{cell['bytes'] / 1e6:.1f}", f"{cell['floor_ms']:.3f}",
                f"{cell['ms'] / cell['floor_ms']:.1f}", bound_note(cell, cells, tall_rate, flop_rate, bandwidth), target,
                "" if cell["finite"] else "non-finite",
            ]
        )
    slopes = []
    for family in ("diag", "dlr", "fc"):
        for hessian in ("lin_hess", "mc_ef"):
            sel = [c for c in cells if c["family"] == family and c["hessian"] == hessian and c["P"] >= 10_000]
            if len(sel) >= 2:
                slope = np.polyfit(np.log([c["P"] for c in sel]), np.log([c["ms"] for c in sel]), 1)[0]
                slopes.append([family, hessian, f"{slope:.2f}", len(sel)])
    header = ["P", "family", "hessian", "ms/step", f"range of {N_CALLS} calls", "compile s", "MFLOP/step", "MB/step",
              "floor ms", "x floor", "bound", "DLR-10 target (0.3x ref)", "note"]
    table = markdown_table(header, rows)
    print(table)
    body = "\n\n".join(
        [
            f"Measured rates on the default device ({jax.devices()[0].device_kind}): matmul "
            f"{flop_rate / 1e9:.1f} GFLOP/s, bandwidth {bandwidth / 1e9:.1f} GB/s ({rates.description}; each the "
            f"fastest of {rates.n_probes} probes, one before the timed calls and one after each round of them: "
            "on this project's hosts one probe's bandwidth has read from 65 to 116 GB/s). FLOPs and bytes per step are "
            "XLA's `cost_analysis` of one compiled step (its bytes count cached accesses too); the floor is "
            "max(FLOPs / matmul rate, 2 x belief bytes / bandwidth).",
            f"'ms/step' is the median of {N_CALLS} calls of {N_ROWS} rows and 'range' their fastest and "
            "slowest. The cells are compiled first and then timed in rounds, one call of each cell per "
            "round, so that each cell's calls spread over the whole run"
            + (
                ": this project's 2-vCPU hosts have slow spells of seconds to minutes in which the same "
                "compiled step runs about 2x slower (every kernel slower, every hand-off between XLA's "
                "threads longer; DLR-10 at P = 32k went from 0.53 to 1.23 ms a step and back within one "
                "process)."
                if jax.default_backend() == "cpu"
                else ". On an accelerator a step is a sequence of small kernels inside XLA's loop over the "
                "rows, so below some P its time is their launches, flat in P, and 'x floor' is large."
            ),
            "Column 'bound' says what bounds the steps this floor misjudges. For MC-EF it gives the "
            "time of the step's normal draws alone (the step's own Threefry draws, "
            "`skbong.core._random`, written out and summed, one scan over as many steps as a "
            "timed call), timed after each of the cell's calls (median of the cell's calls), so that a "
            "slow spell of the host falls on the step and its draws alike. DIAG and DLR-10 draw the first "
            "layer's pre-activation in place of its weights (`MonteCarloEF`'s local draws, the same law "
            "of the gradients), M x (P - 784 h) numbers a step (DLR: M x 10 more), and their step then "
            "takes the same update as LIN-HESS on the same family, whose time at the same P the column "
            "also gives. For DLR-10 it gives the time over the LIN-HESS step's "
            "FLOPs at the rate of the Gram matrix of a tall 2^19 x 20 matrix (the shape of DLR-10's "
            f"P x (R + K) factor), measured as the matmul: {tall_rate / 1e9:.1f} GFLOP/s, "
            f"{100 * tall_rate / flop_rate:.0f}% of the square matmul's rate (MC-EF takes the same "
            "update, and XLA also counts its draws' integer hashing as FLOPs). For FC LIN-HESS the column "
            "gives the time over its FLOPs alone: from P = 2048 its steps defer their covariance "
            "downdates (`FullCovariance.deferred_columns`), so they read the P x P covariance about once "
            "a step and write it once per block of about 25 steps, less traffic than the floor's "
            "read-and-write per step. For DIAG LIN-HESS it gives the rate at which a step reads and "
            "writes its belief (mean and variance, once each). On a CPU the filter's scan carries a "
            "diagonal belief on a dense network as one block per layer (`LayeredVector`, since "
            "2026-11-27; on other devices the flat vector, since 2026-11-28, see `belief_layout_gpu.md` "
            "where it exists): "
            "written into the flat belief vector every step, the layers' updates took 10-19x their "
            "arithmetic on this project's 2-core host (`flat_loops.md`: XLA's loops that write one flat "
            "vector from pieces check bounds per element) and the step 2-3x its time per layer (this "
            "table before: 0.073, 0.197, 0.337 and 0.516 ms at P = 32k, 100k, 200k and 400k; "
            "`belief_layout.md` times the update alone both ways). What bounds it now is the rest of the "
            "step (the network's passes at the mean and, for MC-EF, the draws) and, at small P, the "
            "step's fixed cost. XLA's loops over a flat vector of odd length, as at P = 399,895 here, "
            "run at 4-6x those of even length from P = 100k (`flat_loops.md`). A DLR-10 step passes over "
            "its P x R factor W several times: for the weighted Gram matrix W^T Upsilon^-1 W, the cross "
            "products with the root and the products W~ V that give the new W and the discarded "
            "directions (W^T W itself is carried by the filter's scan from step to step since "
            "2026-11-28, `DLRGramState`, for MC-EF too since the step fixes the signs of its "
            "eigenvectors, which MC-EF's local draws follow; on a CPU the scan also carries the mean, "
            "Upsilon and W per layer, so that no step copies a layer's block out of W or joins the new W "
            "from the layers': 6-12% less time a step at P = 100k-400k; since 2026-11-28 the products "
            "W~ V there are sums of R scaled slices of W's blocks, which XLA fuses into the updates of "
            "W, Upsilon and the mean instead of writing each product out for them to read back: "
            "7.6 -> 5.8 ms a step at P = 400k, 2.56 -> 2.25 at 200k, unchanged at 100k and below). "
            "The algorithm cannot do with fewer "
            "than two: the "
            "eigendecomposition needs the Gram matrices, a full pass over W, before the new W can be "
            "written. Reading W, Upsilon and the mean twice and writing them once is 35 numbers per "
            "parameter against the floor's 24 (read and write once), so even a single fused kernel "
            "would run at about 1.5x this floor. Since 2026-11-28 the scan of a network of fewer than "
            "16,384 parameters (`SMALL_NETWORK`: here P = 805, 3190 and 10345) is compiled for compile "
            "time on a CPU (XLA's older loop emitter, LLVM level 1): its steps run about 15-20% slower "
            "than with XLA's defaults, and a first fit on digits compiles in half the time.",
            "The issue's reference times were measured on this machine type (2 cores) without naming the "
            "CPU, and hosts of this type differ: this project has seen both an AMD EPYC and an Intel Xeon, "
            "with float32 matmul rates about 3x apart. A ratio to a reference time is therefore fair only "
            "on the reference's CPU; 'x floor' (time over this host's own floor) is the measure that "
            "compares across hosts.",
            table,
            *(
                [
                    "The models of `mnist_stream` (the MLP 784-50-10 and the paper's CNN, built as there), "
                    f"BONG-LIN-HESS, timed as above ({N_ROWS} rows per call) against the issue's figures for them:",
                    markdown_table(["model", "P", "family", "ms/step", "vs reference", "compile s", "compile target"],
                                   mnist_rows),
                ]
                if mnist_rows
                else []
            ),
            "Slope of log(ms/step) against log(P), P >= 10k:",
            markdown_table(["family", "hessian", "slope", "sizes"], slopes),
            "![time per step against P](speed.png)",
        ]
    )
    name = args.name or ("speed_quick" if args.quick else "speed")
    path = write(name, "Time per observation against P (MLP 784-h-10 on MNIST)", body)
    plot(cells, RESULTS / f"{name}.png")
    print(f"wrote {path}")


def plot(cells, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_time, ax_compile) = plt.subplots(1, 2, figsize=(11, 4.2))
    for family in ("diag", "dlr", "fc"):
        for hessian, style in (("lin_hess", "-o"), ("mc_ef", "--s")):
            sel = [c for c in cells if c["family"] == family and c["hessian"] == hessian]
            if sel:
                label = f"{family} {hessian}"
                ax_time.loglog([c["P"] for c in sel], [c["ms"] for c in sel], style, label=label)
                ax_compile.semilogx([c["P"] for c in sel], [c["compile_s"] for c in sel], style, label=label)
    sizes = np.array(sorted(REFERENCE_DLR))
    ax_time.loglog(sizes, [REFERENCE_DLR[s] for s in sizes], "k:", label="reference DLR-10")
    ax_time.loglog(sizes, [TARGET_RATIO * REFERENCE_DLR[s] for s in sizes], "r:", label="target (0.3x)")
    ax_time.set(xlabel="parameters P", ylabel="ms per observation", title="steady state")
    ax_compile.set(xlabel="parameters P", ylabel="seconds", title="compile time")
    ax_time.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
