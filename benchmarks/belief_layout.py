"""What the flat parameter vector costs the BONG steps of DIAG and DLR: the belief stored as
flat vectors (as skbong stores it) against one stored layer by layer.

Outside the filter's scan every belief in skbong keeps its mean and its diagonal (and DLR
its ``P x R`` factor ``W``) as flat arrays over the ``P`` parameters, in the layout of the
network's parameter vector. On a dense network the steps' updates are per-layer products:
the diagonal Kalman step (``_diag_kalman_dense_step``) moves each layer's
``(n_in + 1, n_out)`` block of the mean by ``var * (h (x) direction)`` and its variances by
``h^2 (x) d``; the DLR step (``_dlr_factored_products``) takes its Gram matrices and
``W~ M`` block by block. This times each step on the flat arrays against the same
arithmetic on a belief stored as one array per layer, and checks that both give the same
belief. For DIAG and DIAG_MOM both are skbong's own step: on a CPU the filter's scan
carries a diagonal belief on a dense network per layer (``LayeredVector``), which this
benchmark motivated, and configurations it does not carry so (MC-EF with several rows a
step, for one) take the flat step; on other devices it carries the flat belief
(``_layered_network``), which this benchmark's run there (``gpu_check.sh``, step
``layout``) is to confirm. For DLR the per-layer step is a prototype here.

Protocol: MLP 784-h-10 (ReLU, ``skbong.core.MLP``), BONG-LIN-HESS, the root of ``G`` in
factored form from the first row of ``mnist_stream(0)`` at the initial weights,
sigma0 = 0.2, float32, DLR of rank 10. Each variant is a scan of ``--steps`` steps with
that curvature held fixed (only the update is timed: no network pass, so DLR's absolute
times are not ``speed.py``'s), compiled as the filter compiles its scans, then timed in
``--rounds`` interleaved rounds; the table gives each variant's fastest call per step.
"traffic" is the time to read and write the belief once at the bandwidth measured as in
``speed.py`` (its floor for the diagonal step). The differences compare the mean, the
diagonal and, for DLR, the row norms of ``W`` (its columns' signs are arbitrary).

    python benchmarks/belief_layout.py [--steps 64] [--rounds 9] [--widths 40,503] [--name belief_layout_gpu]
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
from _report import markdown_table, write
from speed import MachineRates
from flax import nnx

from skbong.core import MLP, ModuleSpec, make_config, module_params
from skbong.core._curvature import LayeredVector, factor_dot, layer_block, with_bias_input
from skbong.core._families import DiagState, _diag_kalman_dense_step, _factor_cross, _factor_gram
from skbong.core._filter import CPU_COMPILER_OPTIONS, MATMUL_PRECISION, jit_with_options
from skbong.datasets import mnist_stream

WIDTHS = (40, 126, 252, 503)
FAMILIES = ("diag", "diag_mom", "dlr")
SIGMA0 = 0.2
RANK = 10


def layered_root_gram(factors, weights):
    """``U^T diag(weight) U`` for the factored root ``U``, as ``_factor_gram`` computes it, from
    the weight's per-layer blocks ``(n_in + 1, n_out)``."""
    n_cols = factors.sens[0].shape[0] * factors.sens[0].shape[1]
    gram = 0.0
    for weight, h, d in zip(weights, factors.inputs, factors.sens):
        h = with_bias_input(h)
        inner = jnp.einsum("bi,ci,io->bco", h, h, weight)
        gram = gram + jnp.einsum("bko,cjo,bco->bkcj", d, d, inner).reshape(n_cols, n_cols)
    return gram


def layered_dlr_step(blocks, factors, coords, rank: int):
    """The BONG step of ``DiagonalLowRank`` (no KL term, ``lr = 1``, factored root) on a belief
    stored per layer: ``blocks`` is a tuple of ``(mean, Upsilon, W)`` of shapes
    ``(n_in + 1, n_out)``, the same, and ``(n_in + 1, n_out, R)``. The same products as
    ``_dlr_factored_products`` and ``natural_step_with_move_quadratic``, none of them
    reassembled into a flat vector."""
    sens = factors.sens
    w_blocks = [w for _, _, w in blocks]
    weighted_blocks = [w / ups[..., None] for _, ups, w in blocks]
    cross = _factor_cross(factors, sens, w_blocks)
    weighted_cross = _factor_cross(factors, sens, weighted_blocks)
    flat_w = [w.reshape(-1, rank) for w in w_blocks]
    w_gram = sum(w.T @ w for w in flat_w)
    w_weighted_gram = sum(w.T @ v.reshape(-1, rank) for w, v in zip(flat_w, weighted_blocks))
    u_weighted_gram = layered_root_gram(factors, [1.0 / ups for _, ups, _ in blocks])
    gram = jnp.block([[w_gram, cross], [cross.T, _factor_gram(factors, sens, None)]])
    weighted = jnp.block([[w_weighted_gram, weighted_cross], [weighted_cross.T, u_weighted_gram]])
    k = gram.shape[0]
    rhs = jnp.zeros(k, gram.dtype).at[rank:].set(coords)
    coef = jnp.linalg.solve(jnp.eye(k, dtype=gram.dtype) + weighted, rhs)
    vecs = jnp.linalg.eigh(gram)[1][:, ::-1]
    # W~ M on each layer, for the kept directions and for the rest with the mean's coefficients.
    kept_m, rest_m = vecs[:, :rank], jnp.concatenate([vecs[:, rank:], coef[:, None]], axis=1)
    kept_u, rest_u = factor_dot(factors, sens, kept_m[rank:]), factor_dot(factors, sens, rest_m[rank:])
    out = []
    for (mean, ups, _), w, ku, ru in zip(blocks, flat_w, kept_u, rest_u):
        kept = (w @ kept_m[:rank] + ku).reshape(mean.shape + (rank,))
        rest = (w @ rest_m[:rank] + ru).reshape(mean.shape + (rest_m.shape[1],))
        out.append((mean + rest[..., -1] / ups, ups + jnp.sum(rest[..., :-1] ** 2, axis=-1), kept))
    return tuple(out)


def scanned(step, n_steps: int):
    """``step`` applied ``n_steps`` times in one scan, compiled as the filter compiles its
    own (``CPU_COMPILER_OPTIONS``, ``MATMUL_PRECISION``)."""
    run = jit_with_options(
        lambda carry: jax.lax.scan(lambda c, _: (step(c), None), carry, None, length=n_steps)[0],
        CPU_COMPILER_OPTIONS,
    )

    def call(carry):
        with jax.default_matmul_precision(MATMUL_PRECISION):
            return run(carry)

    return call


def cell(width: int, family: str, x, y, n_steps: int, rounds: int, bandwidth: float) -> dict:
    module = MLP((784, width, 10), "relu", nnx.Rngs(0))
    # The cut of the flat vector the estimators choose (see flatten_module).
    spec = ModuleSpec.of(module, split=family != "dlr")
    config = make_config(spec.apply, "categorical", family=family, rank=RANK, hessian="lin_hess")
    state = config.family.init(jnp.asarray(module_params(module)), jnp.float32(SIGMA0))
    curv = config.estimator(
        spec.apply, config.likelihood, config.family, state, x, y, jnp.ones(1, jnp.float32), 1.0, None
    )
    factors, coords = curv.factors, curv.coords
    layers = factors.network.layers
    if family == "dlr":
        flat_step = lambda s: config.family.natural_step(s, s, curv, 1.0, False)  # noqa: E731
        layered_step = lambda b: layered_dlr_step(b, factors, coords, RANK)  # noqa: E731
        fields = (state.mean, state.diag_precision, state.low_rank)
        layered_arg = tuple(tuple(layer_block(f, layer) for f in fields) for layer in layers)
    else:
        # skbong's own step, on the flat vectors and on a belief carried per layer.
        moment = family == "diag_mom"
        flat_step = lambda s: _diag_kalman_dense_step(s, factors, coords, 1.0, moment)  # noqa: E731
        layered_step = flat_step
        fields = (state.mean, state.var)
        network = factors.network
        layered_arg = DiagState(LayeredVector.of(state.mean, network), LayeredVector.of(state.var, network))
    flat, layered = scanned(flat_step, n_steps), scanned(layered_step, n_steps)
    # Both layouts give the same belief up to float32 round-off: the mean, the diagonal and,
    # for DLR, the diagonal of W W^T (W itself only up to the signs of its columns).
    flat_out, layered_out = jax.block_until_ready((flat(state), layered(layered_arg)))
    if family != "dlr":
        layered_out = [(layer_block(layered_out.mean, layer), layer_block(layered_out.var, layer)) for layer in layers]
    diff = 0.0
    for layer, layered_fields in zip(layers, layered_out):
        pairs = [(layer_block(a, layer), b) for a, b in zip(flat_out[:2], layered_fields[:2])]
        if family == "dlr":
            pairs.append((jnp.sum(layer_block(flat_out[2], layer) ** 2, -1), jnp.sum(layered_fields[2] ** 2, -1)))
        for a, b in pairs:
            diff = max(diff, float(jnp.max(jnp.abs(a - b)) / jnp.max(jnp.abs(a))))
    times = {"flat": [], "layered": []}
    for _ in range(rounds):
        for name, fn, arg in (("flat", flat, state), ("layered", layered, layered_arg)):
            start = time.perf_counter()
            jax.block_until_ready(fn(arg))
            times[name].append((time.perf_counter() - start) / n_steps * 1e3)
    belief_bytes = sum(f.size * f.dtype.itemsize for f in fields)
    return {
        "P": int(state.mean.shape[0]), "family": family, "flat": min(times["flat"]),
        "layered": min(times["layered"]), "diff": diff, "traffic": 2 * belief_bytes / bandwidth * 1e3,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--widths", default="", help=f"hidden widths (default {','.join(map(str, WIDTHS))})")
    parser.add_argument("--name", default="belief_layout", help="results/NAME.md")
    args = parser.parse_args()
    widths = tuple(int(w) for w in args.widths.split(",")) if args.widths else WIDTHS
    X, Y, _, _ = mnist_stream(seed=0)
    x = jnp.asarray(X[:1], jnp.float32)
    y = jnp.asarray(np.eye(10, dtype=np.float32)[np.asarray(Y[:1])])
    rate = MachineRates().bandwidth
    rows = []
    for width in widths:
        for family in FAMILIES:
            c = cell(width, family, x, y, args.steps, args.rounds, rate)
            flat, layered, traffic = c["flat"], c["layered"], c["traffic"]
            rows.append([
                f"{c['P']:,}", c["family"], f"{flat:.3f}", f"{layered:.3f}", f"{flat / layered:.1f}",
                f"{traffic:.3f}", f"{flat / traffic:.1f}", f"{layered / traffic:.1f}", f"{c['diff']:.0e}",
            ])
            print(" | ".join(rows[-1]), flush=True)
    header = [
        "P", "family", "flat ms/step", "per-layer ms/step", "flat / per-layer", "traffic ms", "flat x traffic",
        "per-layer x traffic", "max relative difference",
    ]
    body = (
        f"Measured bandwidth: {rate / 1e9:.1f} GB/s.\n\n"
        + __doc__.split("\n\n", 1)[1].rsplit("\n\n", 1)[0]
        + "\n\n"
        + markdown_table(header, rows)
    )
    path = write(args.name, "BONG steps of DIAG and DLR: flat belief against one stored per layer", body)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
