"""What XLA's CPU loops cost on a flat parameter vector: the parity of its length, the
assembly of per-layer pieces into it, and tall-skinny products.

skbong keeps a belief as flat arrays over the ``P`` parameters (``belief_layout.py``
measures what that costs the DIAG and DLR steps), except inside the filter's scan, which
carries a diagonal belief on a dense network per layer because of section 2. This times
the loops those steps are made of, in isolation, to say what bounds them on the host:

1. **Parity.** The diagonal update ``v / (1 + v d)`` over a flat vector of ``P`` and of
   ``P + 1`` numbers, and over a 2-D array of about the same size. In the LLVM IR that XLA
   writes for the odd length (``XLA_FLAGS=--xla_dump_to=DIR``), the loop is split across
   two threads in halves of ``ceil(P / 2)`` and every vector load and store is masked; for
   the even length they are plain. Masked stores are slow on AMD's cores.
2. **Assembly.** The same update on the layout of the MLP 784-h-10 (a ``(785, h)`` block and
   a ``(h + 1, 10)`` block), the per-layer term ``d`` an outer product as in the diagonal
   Kalman step with one row: on two 2-D blocks (a belief stored per layer); on a flat vector
   with ``d`` given flat (no assembly, the floor of a flat layout); and on a flat vector with
   ``d`` assembled from the per-layer products by a sum of zero-padded pieces (skbong's
   ``_flat_layout``, the step of a flat diagonal belief), a concatenation, ``dynamic_update_slice`` into a buffer, and a select
   over an iota that gathers each element's two factors.
3. **Tall products.** The Gram matrix ``W^T W`` and the product ``W M`` of a tall ``P x k``
   ``W`` (``k = 10, 20``: DLR-10's factor and its ``P x (R + K)`` stack), by XLA and by
   NumPy's BLAS, in GFLOP/s and as a fraction of XLA's square-matmul rate (``speed.py``'s
   floor).

Every XLA variant is a scan of ``--steps`` steps compiled with the filter's CPU options;
variants are timed in ``--rounds`` interleaved rounds and the table gives the fastest call
per step (per product for NumPy).

    python benchmarks/flat_loops.py [--steps 64] [--rounds 9]
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
from _report import markdown_table, write
from speed import MachineRates

from skbong.core._filter import CPU_COMPILER_OPTIONS, MATMUL_PRECISION, jit_with_options

PARITY_SIZES = (31810, 100180, 399895)
WIDTHS = (252, 253, 502, 503)
TALL = ((100_000, 20), (394_855, 10), (394_855, 20))


def scanned(step, n_steps: int):
    """``carry -> step`` applied ``n_steps`` times in one compiled scan; the scanned index
    enters each step so that XLA cannot hoist it out of the loop."""
    run = jit_with_options(
        lambda carry: jax.lax.scan(
            lambda c, t: (step(c, 1.0 + 0.0 * t), None), carry, jnp.arange(n_steps, dtype=jnp.float32)
        )[0],
        CPU_COMPILER_OPTIONS,
    )

    def call(carry):
        with jax.default_matmul_precision(MATMUL_PRECISION):
            return run(carry)

    return call


def fastest(variants: dict, n_steps: int, rounds: int) -> dict:
    """Fastest ms per step of each ``name -> (step, carry)``, timed in interleaved rounds."""
    compiled = {name: (scanned(step, n_steps), carry) for name, (step, carry) in variants.items()}
    for run, carry in compiled.values():
        jax.block_until_ready(run(carry))
    times = {name: [] for name in compiled}
    for _ in range(rounds):
        for name, (run, carry) in compiled.items():
            start = time.perf_counter()
            jax.block_until_ready(run(carry))
            times[name].append((time.perf_counter() - start) / n_steps * 1e3)
    return {name: min(t) for name, t in times.items()}


def update(v, d):
    return v / (1.0 + v * d)


def parity_rows(n_steps: int, rounds: int) -> list:
    rng = np.random.default_rng(0)
    rows = []
    for size in PARITY_SIZES:
        variants = {}
        for n in (size - size % 2, size - size % 2 + 1):
            variants[n] = (lambda v, i: update(v, 0.5 * i), jnp.asarray(rng.uniform(0.1, 1.0, n), jnp.float32))
        rows_2d = int(np.sqrt(size))
        square = jnp.asarray(rng.uniform(0.1, 1.0, (rows_2d, size // rows_2d)), jnp.float32)
        variants["2d"] = (lambda v, i: update(v, 0.5 * i), square)
        t = fastest(variants, n_steps, rounds)
        even, odd = size - size % 2, size - size % 2 + 1
        rows.append([f"{even:,}", f"{t[even]:.4f}", f"{t[odd]:.4f}", f"{t[odd] / t[even]:.1f}",
                     f"{rows_2d} x {size // rows_2d}", f"{t['2d']:.4f}"])
        print(" | ".join(rows[-1]), flush=True)
    return rows


def assembly_variants(width: int) -> tuple[int, dict]:
    """The update on the MLP 784-``width``-10's layout, its per-layer term the outer products
    ``a_l b_l^T`` (``b_l`` scaled by the scanned index), assembled five ways."""
    rng = np.random.default_rng(1)
    shapes = ((785, width), (width + 1, 10))
    sizes = [r * c for r, c in shapes]
    n_params = sum(sizes)
    offsets = (0, sizes[0])

    def f32(*shape):
        return jnp.asarray(rng.uniform(0.1, 1.0, shape), jnp.float32)

    factors = [(f32(r), f32(c)) for r, c in shapes]
    var = f32(n_params)
    blocks = tuple(var[o : o + n].reshape(s) for o, n, s in zip(offsets, sizes, shapes))

    def pieces(i):
        return [jnp.outer(a, b * i) for a, b in factors]

    def padded(i):
        return sum(jnp.pad(p.ravel(), (o, n_params - o - p.size)) for o, p in zip(offsets, pieces(i)))

    def concatenated(i):
        return jnp.concatenate([p.ravel() for p in pieces(i)])

    def written(i):
        out = jax.lax.optimization_barrier(jnp.zeros(n_params, jnp.float32))
        for o, p in zip(offsets, pieces(i)):
            out = jax.lax.dynamic_update_slice(out, p.ravel(), (o,))
        return out

    def selected(i):
        index = jnp.arange(n_params, dtype=jnp.int32)
        out = None
        for o, n, (a, b) in zip(offsets, sizes, factors):
            local = jnp.clip(index - o, 0, n - 1)
            value = a[local // b.shape[0]] * (b * i)[local % b.shape[0]]
            out = value if out is None else jnp.where(index >= o, value, out)
        return out

    flat_d = concatenated(1.0)
    variants = {
        "per-layer 2-D blocks": (lambda bs, i: tuple(update(v, p) for v, p in zip(bs, pieces(i))), blocks),
        "flat, d given flat": (lambda v, i: update(v, flat_d * i), var),
        "flat, padded sum (skbong)": (lambda v, i: update(v, padded(i)), var),
        "flat, concatenation": (lambda v, i: update(v, concatenated(i)), var),
        "flat, dynamic_update_slice": (lambda v, i: update(v, written(i)), var),
        "flat, select over an iota": (lambda v, i: update(v, selected(i)), var),
    }
    # Every assembly gives the same vector.
    for assemble in (padded, written, selected):
        np.testing.assert_allclose(np.asarray(assemble(1.0)), np.asarray(flat_d), rtol=1e-6)
    return n_params, variants


def assembly_rows(n_steps: int, rounds: int) -> tuple[list, list]:
    rows, names = [], None
    for width in WIDTHS:
        n_params, variants = assembly_variants(width)
        t = fastest(variants, n_steps, rounds)
        names = list(t)
        base = t["per-layer 2-D blocks"]
        times = [f"{t[n]:.4f} ({t[n] / base:.1f}x)" for n in names]
        rows.append([f"{n_params:,}", "odd" if n_params % 2 else "even"] + times)
        print(" | ".join(rows[-1]), flush=True)
    return rows, names


def tall_rows(n_steps: int, rounds: int, square_rate: float) -> list:
    rng = np.random.default_rng(2)
    rows = []
    for n, k in TALL:
        w = rng.standard_normal((n, k)).astype(np.float32)
        m = np.eye(k, dtype=np.float32)
        wj = jnp.asarray(w)
        # The carry changes every step (the Gram feeds a scalar back into W) so the product is
        # recomputed; the elementwise pass this adds is in both XLA columns.
        t = fastest({
            "gram": (lambda a, i: a + 1e-12 * i * jnp.sum(a.T @ a), wj),
            "product": (lambda a, i: a @ (m * i), wj),
            "pass": (lambda a, i: a + 1e-12 * i, wj),
        }, n_steps, rounds)
        numpy_gram, numpy_product = [], []
        for _ in range(rounds * 4):
            start = time.perf_counter()
            w.T @ w
            numpy_gram.append((time.perf_counter() - start) * 1e3)
            start = time.perf_counter()
            w @ m
            numpy_product.append((time.perf_counter() - start) * 1e3)
        gram_flops, product_flops = 2 * n * k * k, 2 * n * k * k
        xla_gram = max(t["gram"] - t["pass"], 1e-9)
        xla_product = t["product"]
        rate = lambda flops, ms: flops / ms / 1e6  # noqa: E731  GFLOP/s
        rows.append([
            f"{n:,} x {k}",
            f"{xla_gram:.3f} ({rate(gram_flops, xla_gram):.0f}, {rate(gram_flops, xla_gram) / square_rate:.0%})",
            f"{min(numpy_gram):.3f} ({rate(gram_flops, min(numpy_gram)):.0f})",
            f"{xla_product:.3f} ({rate(product_flops, xla_product):.0f})",
            f"{min(numpy_product):.3f} ({rate(product_flops, min(numpy_product)):.0f})",
            f"{t['pass']:.3f}",
        ])
        print(" | ".join(rows[-1]), flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    rates = MachineRates()
    square_flops, bandwidth = rates.flop_rate, rates.bandwidth
    square_rate = square_flops / 1e9  # GFLOP/s
    parity = parity_rows(args.steps, args.rounds)
    assembly, names = assembly_rows(args.steps, args.rounds)
    tall = tall_rows(args.steps, args.rounds, square_rate)
    body = "\n\n".join([
        f"Measured rates: square matmul {square_rate:.1f} GFLOP/s, bandwidth {bandwidth / 1e9:.1f} GB/s "
        "(as in `speed.py`).",
        __doc__.split("\n\n", 1)[1].rsplit("\n\n", 1)[0],
        "## 1. Parity: ms per update of a flat vector of even and odd length",
        markdown_table(["even length", "even ms", "odd (+1) ms", "odd / even", "2-D shape", "2-D ms"], parity),
        "## 2. Assembly: ms per update on the MLP 784-h-10's layout (h = 252, 253, 502, 503), "
        "and as a multiple of the per-layer update",
        markdown_table(["P", "parity"] + names, assembly),
        "## 3. Tall products: ms per product (GFLOP/s; for XLA's Gram, the fraction of the square-matmul rate)",
        markdown_table(
            ["W", "XLA W^T W", "NumPy W^T W", "XLA W M", "NumPy W M", "XLA elementwise pass over W"], tall
        ),
        "XLA's Gram time is its step less the elementwise pass over `W` that the step needs to make "
        "the next step's `W` differ; its `W M` step writes a new `W` and includes that pass.",
    ])
    path = write("flat_loops", "XLA's CPU loops on a flat parameter vector", body)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
