"""The rate of a DLR-10 step's contractions on this host, by library, against the square matmul.

A DLR-10 step's FLOPs are almost all contractions of tall ``P x 20`` (or ``P x 10``) matrices
over P: the Gram matrix ``A^T A`` of ``[W, J^T]`` and the product ``A V`` with a small
``20 x 10`` matrix (``speed.py``'s notes). ``speed.py``'s floor prices every FLOP at the
square matmul's rate. This script measures what the step's shapes reach, float32, on the
default CPU device, each the fastest of ``REPEATS`` calls:

* **XLA**: ``jnp.dot`` at precision "highest" (the project's ``MATMUL_PRECISION``), jitted;
* **XLA, elementwise**: the Gram as a fused multiply-and-sum over P (no dot), the form a
  compiler could keep in registers;
* **OpenBLAS**: numpy's ``A.T @ A`` and ``A @ V`` (the BLAS that numpy ships with), and
  ``ssyrk`` from SciPy's BLAS for the Gram (symmetric: half the multiply-adds; its rate
  below counts the full Gram's FLOPs, so that it compares with the others as time).

Rates are ``2 P k^2`` (Gram) and ``2 P k m`` (product) FLOPs over the time. Writes
``results/tall_gram.md`` and ``results/tall_gram.png``.

    python benchmarks/tall_gram.py
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from scipy.linalg import blas

from _report import markdown_table, write
from skbong.core._filter import MATMUL_PRECISION
from speed import fastest_call

ROWS = (2**15, 2**17, 2**19)
WIDTH, OUT = 20, 10  # DLR-10's P x (R + C) factor, and its new rank
SQUARE = 2048
REPEATS = 20


def rates() -> tuple[list[list], dict]:
    rng = np.random.default_rng(0)
    dot = jax.jit(lambda a, b: jnp.dot(a, b, precision=MATMUL_PRECISION))
    gram = jax.jit(lambda a: jnp.dot(a.T, a, precision=MATMUL_PRECISION))
    summed = jax.jit(lambda a: jnp.sum(a[:, :, None] * a[:, None, :], axis=0))
    rows, series = [], {}
    for n in ROWS:
        a = rng.standard_normal((n, WIDTH)).astype(np.float32)
        v = rng.standard_normal((WIDTH, OUT)).astype(np.float32)
        aj, vj = jnp.asarray(a), jnp.asarray(v)
        a_fortran = np.asfortranarray(a)
        gram_flops, product_flops = 2 * n * WIDTH**2, 2 * n * WIDTH * OUT
        measured = {
            "Gram, XLA dot": gram_flops / fastest_call(lambda: gram(aj), repeats=REPEATS),
            "Gram, XLA elementwise": gram_flops / fastest_call(lambda: summed(aj), repeats=REPEATS),
            "Gram, OpenBLAS gemm": gram_flops / fastest_call(lambda: a.T @ a, repeats=REPEATS),
            "Gram, OpenBLAS syrk": gram_flops
            / fastest_call(lambda: blas.ssyrk(1.0, a_fortran, trans=1), repeats=REPEATS),
            "A V, XLA dot": product_flops / fastest_call(lambda: dot(aj, vj), repeats=REPEATS),
            "A V, OpenBLAS gemm": product_flops / fastest_call(lambda: a @ v, repeats=REPEATS),
        }
        for name, rate in measured.items():
            series.setdefault(name, []).append(rate)
        rows.append([f"{n:,}", *(f"{rate / 1e9:.1f}" for rate in measured.values())])
        print(rows[-1], flush=True)
    s = rng.standard_normal((SQUARE, SQUARE)).astype(np.float32)
    sj = jnp.asarray(s)
    square = {
        "XLA": 2 * SQUARE**3 / fastest_call(lambda: dot(sj, sj), repeats=8),
        "OpenBLAS": 2 * SQUARE**3 / fastest_call(lambda: s @ s, repeats=8),
    }
    return rows, {"series": series, "square": square}


def plot(found: dict, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, values in found["series"].items():
        ax.plot(ROWS, np.array(values) / 1e9, "o-", label=name)
    for name, rate in found["square"].items():
        ax.axhline(rate / 1e9, ls="--", lw=1, color="k" if name == "XLA" else "grey", label=f"square {SQUARE}^2, {name}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("P (rows of the tall factor)")
    ax.set_ylabel("GFLOP/s")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    rows, found = rates()
    square = found["square"]
    best_tall = max(max(values) for values in found["series"].values())
    best_blas = max(max(values) for name, values in found["series"].items() if "OpenBLAS" in name)
    best_xla = max(max(values) for name, values in found["series"].items() if "XLA" in name)
    from threadpoolctl import threadpool_info

    kernels = ", ".join(sorted({f"{i.get('internal_api')} {i.get('architecture')}" for i in threadpool_info()}))
    header = [
        "P", "Gram, XLA dot", "Gram, XLA elementwise", "Gram, OpenBLAS gemm", "Gram, OpenBLAS syrk (as time)",
        "A V, XLA dot", "A V, OpenBLAS gemm",
    ]
    body = "\n\n".join(
        [
            __doc__.split("\n\n", 1)[1].rsplit("\n\n", 2)[0],
            f"Square {SQUARE}^2 matmul: XLA {square['XLA'] / 1e9:.1f} GFLOP/s, OpenBLAS {square['OpenBLAS'] / 1e9:.1f} "
            f"GFLOP/s (numpy's BLAS here: {kernels} kernels). The fastest tall contraction measured here runs at "
            f"{best_tall / 1e9:.1f} GFLOP/s, {100 * best_tall / square['XLA']:.0f}% of XLA's square rate; each "
            f"library's fastest tall contraction against its own square rate: XLA "
            f"{100 * best_xla / square['XLA']:.0f}%, OpenBLAS {100 * best_blas / square['OpenBLAS']:.0f}%.",
            "**GFLOP/s of the step's shapes** (A is P x 20, V is 20 x 10):",
            markdown_table(header, rows),
            "![rates against P](tall_gram.png)",
        ]
    )
    path = write("tall_gram", "The rate of a DLR-10 step's contractions, by library", body)
    plot(found, path.with_suffix(".png"))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
