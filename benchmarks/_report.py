"""Shared reporting for the benchmark scripts: machine, versions, markdown and plots."""

from __future__ import annotations

import contextlib
import datetime
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = RESULTS.parents[1]


@contextlib.contextmanager
def baseline_tree(commit: str):
    """A checkout of ``commit`` (``git worktree``, detached) in a temporary folder, for a
    benchmark that compares this tree with it in one run; removed afterwards."""
    with tempfile.TemporaryDirectory() as scratch:
        tree = Path(scratch) / "baseline"
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), commit], cwd=ROOT, check=True,
                       capture_output=True)
        try:
            yield tree
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True)


def _affinity() -> str:
    try:
        cores = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return "all cores"
    return f"{len(cores)} core(s) {cores}"


def environment() -> str:
    """A markdown block naming the command, machine and package versions."""
    import flax
    import jax
    import numpy
    import sklearn

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    devices = ", ".join(f"{d} ({d.device_kind})" for d in jax.devices())
    return "\n".join(
        [
            f"- command: `python {' '.join(sys.argv)}`",
            f"- date: {datetime.datetime.now().isoformat(timespec='seconds')}",
            f"- machine: {cpu}, {os.cpu_count()} cores, this process pinned to {_affinity()}, "
            f"{platform.system()} {platform.release()}",
            f"- JAX devices: {devices}",
            f"- versions: python {platform.python_version()}, jax {jax.__version__}, flax {flax.__version__}, "
            f"scikit-learn {sklearn.__version__}, numpy {numpy.__version__}",
        ]
    )


def markdown_table(header: list[str], rows: list[list]) -> str:
    """Render rows as a GitHub markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def format_mean_se(values) -> str:
    """``mean ± standard error`` of runs, or how many of them failed (non-finite)."""
    import numpy

    values = numpy.asarray(values, dtype=float)
    if not numpy.all(numpy.isfinite(values)):
        return f"{numpy.sum(~numpy.isfinite(values))} of {len(values)} failed"
    se = values.std(ddof=1) / numpy.sqrt(len(values)) if len(values) > 1 else 0.0
    return f"{values.mean():.4f} ± {se:.4f}"


def write(name: str, title: str, body: str) -> Path:
    """Write ``results/<name>.md`` with the environment block and return its path."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.md"
    path.write_text(f"# {title}\n\n{environment()}\n\n{body}\n")
    return path
