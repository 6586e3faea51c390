"""Where one filter step's time goes, per XLA operation, on this host.

``speed.py`` measures each step against this machine's floor, max(FLOPs / matmul rate,
bytes / bandwidth). This script says what the time is made of. It times ``run_filter``
calls of 64 rows, as ``speed.py`` does, under JAX's profiler, and reads the events XLA's CPU
runtime records for each operation of the compiled scan. An operation's self time (less
any operation nested in it, as in a conditional) is summed over the profiled calls and
divided by the number of steps. The optimized HLO of the scan (dumped by XLA) gives each
operation's opcode and shapes. From the shapes come the bytes it reads and writes, once
each, and so the rate at which it moved them.

Three more figures per step:

* **covered**: the share of the step's wall time in which at least one operation ran. The
  rest is the runtime between operations: dispatch, the loop's bookkeeping and waits.
* **overlap**: the share in which two operations ran at once. XLA's thunk runtime may run
  independent operations concurrently. An operation that splits its own work over the
  threads (a matrix product in Eigen's pool) is still one event: the trace cannot show
  that, so one-core rates are given for comparison.
* **threads**: the summed self time of the operations over the step's wall time.

Writes ``results/step_profile.md``.

    python benchmarks/step_profile.py [--widths 126] [--cells dlr:lin_hess,diag:lin_hess,diag:mc_ef]
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile

# XLA reads its flags once, when the backend starts: the dump must be asked for before.
DUMP = tempfile.mkdtemp(prefix="skbong-step-profile-")
USER_XLA_FLAGS = os.environ.get("XLA_FLAGS", "")
os.environ["XLA_FLAGS"] = f"{USER_XLA_FLAGS} --xla_dump_to={DUMP} --xla_dump_hlo_as_text".strip()

import argparse  # noqa: E402
import collections  # noqa: E402
import glob  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

from _report import markdown_table, write  # noqa: E402
from skbong.datasets import mnist_stream  # noqa: E402
from speed import MachineRates, mlp_model, prepare_cell, time_call  # noqa: E402

N_ROWS = 64
N_WARM, N_PROFILED = 3, 5
#: Operations listed per cell; the rest are summed in one row.
N_SHOWN = 12
DTYPE_BYTES = {"f32": 4, "f64": 8, "s32": 4, "u32": 4, "pred": 1, "s64": 8, "u64": 8, "u8": 1, "s8": 1}
INSTRUCTION = re.compile(
    r"^\s*(?:ROOT )?%?([\w.\-]+) = (\(.*?\)|\w+\[[\d,]*\](?:\{[\d,]*\})?) ([\w\-]+)\((.*?)\)(.*)$"
)
#: ``speed.MachineRates`` in a child process pinned to one CPU (``one_core_rates``), set
#: before JAX starts its threads.
ONE_CORE_PROBE = """
import json, os, sys
os.sched_setaffinity(0, {int(sys.argv[1])})
from speed import MachineRates
rates = MachineRates()
for _ in range(2):
    rates.probe()
print(json.dumps({"matmul": rates.flop_rate, "bandwidth": rates.bandwidth}))
"""


def shape_bytes(text: str) -> int:
    """Bytes of an HLO shape such as ``f32[785,126]{1,0}`` or a tuple of them."""
    total = 0
    for dtype, dims in re.findall(r"(\w+)\[([\d,]*)\]", text):
        size = int(np.prod([int(d) for d in dims.split(",") if d])) if dims else 1
        total += size * DTYPE_BYTES.get(dtype, 4)
    return total


def scan_instructions() -> dict:
    """``name -> (opcode, shape, operand names, attributes)`` of the optimized HLO of the
    filter's scan modules dumped since the dump was last cleared."""
    found = {}
    for path in glob.glob(os.path.join(DUMP, "*jit__scan*after_optimizations.txt")):
        with open(path) as handle:
            for line in handle:
                match = INSTRUCTION.match(line)
                if match:
                    name, shape, opcode, operands, attributes = match.groups()
                    found[name] = (opcode, shape, re.findall(r"%([\w.\-]+)", operands), attributes)
    return found


def clear_dump() -> None:
    for path in glob.glob(os.path.join(DUMP, "*")):
        if os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.remove(path)


def one_core_rates() -> dict:
    """``speed.MachineRates``' matmul (FLOP/s) and streaming (bytes/s) rates on one core: a
    child process pinned to the first CPU this one may use."""
    cpu = min(os.sched_getaffinity(0))
    env = {**os.environ, "XLA_FLAGS": USER_XLA_FLAGS}  # no HLO dump in the child
    # Run from this directory, which ``python -c`` puts on the path, so that ``speed`` imports.
    out = subprocess.run([sys.executable, "-c", ONE_CORE_PROBE, str(cpu)], capture_output=True, text=True,
                         check=True, cwd=os.path.dirname(os.path.abspath(__file__)), env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def op_events(trace_dir: str) -> list[tuple[int, int, str, str]]:
    """``(start ns, duration ns, thread, name)`` of XLA's operation events in a trace."""
    path = glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True)[0]
    events = []
    for plane in jax.profiler.ProfileData.from_file(path).planes:
        for line in plane.lines:
            if "XLA" not in line.name:  # XLA's own threads: the client and the intra-op pool
                continue
            for event in line.events:
                if event.name.startswith(("ThunkExecutor", "$")):
                    continue
                events.append((event.start_ns, event.duration_ns, line.name, event.name))
    return events


def by_thread(events) -> list[list]:
    """The events of each thread, in order of their start (the longer first at a tie)."""
    grouped = collections.defaultdict(list)
    for event in events:
        grouped[event[2]].append(event)
    return [sorted(group, key=lambda e: (e[0], -e[1])) for group in grouped.values()]


def self_times(events) -> collections.Counter:
    """Each operation's duration less that of the operations nested in it on its thread."""
    own = collections.Counter()
    for thread_events in by_thread(events):
        stack = []  # (end, name)
        for start, duration, _, name in thread_events:
            while stack and stack[-1][0] <= start:
                stack.pop()
            if stack:
                own[stack[-1][1]] -= duration
            own[name] += duration
            stack.append((start + duration, name))
    return own


def coverage(events, wall_ns: float) -> tuple[float, float]:
    """Shares of ``wall_ns`` with at least one, and with at least two, operations running
    (outermost events per thread only)."""
    edges = []
    for thread_events in by_thread(events):
        end = -1
        for start, duration, _, _ in thread_events:
            if start >= end:  # outermost
                edges += [(start, 1), (start + duration, -1)]
                end = start + duration
    edges.sort()
    busy = both = 0
    level, last = 0, None
    for time_ns, step in edges:
        if last is not None:
            busy += (time_ns - last) * (level >= 1)
            both += (time_ns - last) * (level >= 2)
        level += step
        last = time_ns
    return busy / wall_ns, both / wall_ns


def profile_cell(width: int, family: str, hessian: str, X, Y) -> dict:
    clear_dump()  # the scan modules read afterwards are this cell's
    cell = prepare_cell(mlp_model(width), family, hessian, X, Y, N_ROWS)
    cell["draw"] = None  # time_call's separate timing of the Monte-Carlo draws: not profiled
    for _ in range(N_WARM):
        time_call(cell, X, Y)
    trace_dir = tempfile.mkdtemp(prefix="skbong-trace-")
    n_before = len(cell["steady"])
    jax.profiler.start_trace(trace_dir)
    for _ in range(N_PROFILED):
        time_call(cell, X, Y)
    jax.profiler.stop_trace()
    wall_ns = 1e9 * sum(cell["steady"][n_before:])
    events = op_events(trace_dir)
    shutil.rmtree(trace_dir, ignore_errors=True)
    n_steps = N_PROFILED * N_ROWS
    own = self_times(events)
    covered, overlapped = coverage(events, wall_ns)
    return {
        "P": cell["P"], "family": family, "hessian": hessian, "step_ms": wall_ns / n_steps / 1e6,
        "own_ms": {name: ns / n_steps / 1e6 for name, ns in own.items()},
        "covered": covered, "overlap": overlapped, "threads": sum(own.values()) / wall_ns,
    }


def describe(name: str, hlo: dict) -> tuple[str, float, float]:
    """An operation's opcode and output shape, the bytes it reads and writes once, and for
    a matrix product its FLOPs (2 x output size x contracted size)."""
    if name not in hlo:
        return "", float("nan"), float("nan")
    opcode, shape, operands, attributes = hlo[name]
    moved = shape_bytes(shape) + sum(shape_bytes(hlo[o][1]) for o in operands if o in hlo)
    flops = float("nan")
    contracted = re.search(r"lhs_contracting_dims=\{([\d,]*)\}", attributes)
    if opcode == "dot" and contracted and operands and operands[0] in hlo:
        lhs_dims = [int(d) for d in re.search(r"\[([\d,]*)\]", hlo[operands[0]][1]).group(1).split(",") if d]
        inner = int(np.prod([lhs_dims[int(i)] for i in contracted.group(1).split(",") if i]))
        flops = 2.0 * shape_bytes(shape) / DTYPE_BYTES.get(shape[:3], 4) * inner
    plain_shape = re.sub(r"\{[\d,]*\}", "", shape)  # without the layouts
    return f"{opcode} {plain_shape}", moved, flops


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", default="126", help="hidden widths of the MLP 784-h-10, comma-separated")
    parser.add_argument("--cells", default="dlr:lin_hess,diag:lin_hess,diag:mc_ef", help="family:hessian, ...")
    args = parser.parse_args()
    X, y, _, _ = mnist_stream(seed=0)
    n_rows = (1 + N_WARM + N_PROFILED + 1) * N_ROWS
    X = X[:n_rows].astype(np.float32)
    Y = np.eye(10, dtype=np.float32)[y[:n_rows]]
    rates = MachineRates()
    one_core = one_core_rates()
    cells = [item.split(":") for item in args.cells.split(",")]
    sections, summary = [], []
    for width in (int(w) for w in args.widths.split(",")):
        for family, hessian in cells:
            found = profile_cell(width, family, hessian, X, Y)
            hlo = scan_instructions()
            ranked = sorted(found["own_ms"].items(), key=lambda item: -item[1])
            rows = []
            for name, ms in ranked[:N_SHOWN]:
                what, moved, flops = describe(name, hlo)
                rate = f"{moved / (1e-3 * ms) / 1e9:.1f}" if ms > 0 and np.isfinite(moved) else ""
                flop_rate = f"{flops / (1e-3 * ms) / 1e9:.1f}" if ms > 0 and np.isfinite(flops) else ""
                rows.append([name, what, f"{ms:.4f}", f"{100 * ms / found['step_ms']:.0f}%", rate, flop_rate])
            rest = sum(ms for _, ms in ranked[N_SHOWN:])
            rows.append([f"{len(ranked) - N_SHOWN} others", "", f"{rest:.4f}", f"{100 * rest / found['step_ms']:.0f}%",
                         "", ""])
            title = f"P = {found['P']:,}, {family.upper()} {hessian.upper().replace('_', '-')}"
            print(title, f"{found['step_ms']:.3f} ms/step", flush=True)
            summary.append([f"{found['P']:,}", family, hessian, f"{found['step_ms']:.3f}",
                            f"{100 * found['covered']:.0f}%", f"{100 * found['overlap']:.0f}%",
                            f"{found['threads']:.2f}"])
            sections.append(f"**{title}**: {found['step_ms']:.3f} ms a step.\n\n" + markdown_table(
                ["operation", "opcode and output shape", "ms/step (self)", "of the step", "GB/s (bytes once)",
                 "GFLOP/s (products)"], rows))
            rates.probe()
    body = "\n\n".join([
        __doc__.split("\n\n", 1)[1].rsplit("\n\n", 1)[0],
        f"This host's rates (``speed.MachineRates``, fastest of {rates.n_probes} probes, two threads): matmul "
        f"{rates.flop_rate / 1e9:.1f} GFLOP/s, bandwidth {rates.bandwidth / 1e9:.1f} GB/s, the Gram matrix of a "
        f"tall 2^19 x 20 matrix {rates.tall_rate / 1e9:.1f} GFLOP/s. The same matmul and streaming probes on one "
        f"core (a child process pinned to one CPU): {one_core['matmul'] / 1e9:.1f} GFLOP/s and "
        f"{one_core['bandwidth'] / 1e9:.1f} GB/s. Steps of {N_ROWS}-row calls, "
        f"{N_PROFILED} calls profiled after {N_WARM} unprofiled.",
        markdown_table(["P", "family", "hessian", "ms/step", "covered", "overlap", "threads"], summary),
        *sections,
    ])
    print(write("step_profile", "Where one filter step's time goes, per XLA operation", body))
    shutil.rmtree(DUMP, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
