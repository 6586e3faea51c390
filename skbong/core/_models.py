"""Networks as pure functions ``apply(params_flat, x)`` of a flat parameter vector."""

from __future__ import annotations

import hashlib
import inspect
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ._activations import ACTIVATIONS
from ._curvature import DenseLayer, DenseNetwork, LayeredVector
from ._filter import CPU_INIT_OPTIONS, jit_with_options

__all__ = [
    "ACTIVATIONS",
    "MLP",
    "MLPSpec",
    "ModuleSpec",
    "PatchConv",
    "build_module",
    "flatten_module",
    "has_convolution",
    "module_params",
    "parameter_fan_in",
]



class MLP(nnx.Module):
    """Multi-layer perceptron; LeCun-normal weights and zero biases (LO-FI Sec. 3.4).

    Parameters
    ----------
    sizes : tuple of int
        Layer widths, input first and output last.
    activation : str
        Hidden-layer activation, one of ``ACTIVATIONS``; the output layer is linear.
    rngs : flax.nnx.Rngs
        Randomness of the initial weights.
    """

    def __init__(self, sizes: tuple[int, ...], activation: str, rngs: nnx.Rngs):
        self.layers = nnx.List(
            [nnx.Linear(n_in, n_out, rngs=rngs) for n_in, n_out in zip(sizes[:-1], sizes[1:])]
        )
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}.")
        # The name, not the function: the module then pickles, and its graph definition
        # is equal across copies (scikit-learn's clone deep-copies parameters).
        self.activation = activation

    def __call__(self, x: jax.Array) -> jax.Array:
        """Outputs ``(B, sizes[-1])`` of a batch ``x`` ``(B, sizes[0])``."""
        activation = ACTIVATIONS[self.activation]
        for layer in self.layers[:-1]:
            x = activation(layer(x))
        return self.layers[-1](x)


class PatchConv(nnx.Conv):
    """``nnx.Conv`` computed as one matrix product of image patches with the kernel.

    The same layer as ``nnx.Conv`` (same parameters, initialisation and outputs) for
    stride 1, no dilation, one feature group and ``"SAME"`` or ``"VALID"`` padding, on
    inputs ``(B, H, W, C_in)``. XLA:CPU runs the small convolutions of per-row
    Jacobians (kernel gradients over a 14 x 14 window, ten output cotangents at a time)
    at 1-3 GFLOP/s; as patches they are matrix products. On the BONG paper's MNIST CNN
    this takes the DIAG step from 33 to 5.6 ms and DLR-10 from 41 to 12 ms on one core
    (``benchmarks/mnist_stream.py``). Other settings raise ``NotImplementedError``.

    Batches of more than ``max_patch_rows`` rows (a class attribute, 16) go through
    ``nnx.Conv``'s own convolution instead: for a large batch the patches are 25 times
    the input and XLA's convolution is faster (MNIST CNN, 2,000 test rows in blocks of
    256: 0.4 s against 1.9 s). A per-row Jacobian sees one row.
    """

    max_patch_rows = 16

    def __call__(self, x: jax.Array) -> jax.Array:
        """Outputs ``(B, H', W', C_out)`` of ``x`` ``(B, H, W, C_in)``."""
        kernel = self.kernel[...]
        unsupported = (
            kernel.ndim != 4
            or x.ndim != 4
            or tuple(np.broadcast_to(self.strides, 2)) != (1, 1)
            or tuple(np.broadcast_to(self.kernel_dilation or 1, 2)) != (1, 1)
            or tuple(np.broadcast_to(self.input_dilation or 1, 2)) != (1, 1)
            or self.feature_group_count != 1
            or self.padding not in ("SAME", "VALID")
        )
        if unsupported:
            raise NotImplementedError(
                "PatchConv supports 2-D inputs (B, H, W, C), stride 1, no dilation, one feature "
                "group and 'SAME' or 'VALID' padding; use nnx.Conv otherwise"
            )
        if x.shape[0] > self.max_patch_rows:
            return super().__call__(x)
        kh, kw, c_in, c_out = kernel.shape
        if self.padding == "SAME":
            # XLA's SAME: the extra row/column of an even kernel goes after.
            x = jnp.pad(x, ((0, 0), ((kh - 1) // 2, kh // 2), ((kw - 1) // 2, kw // 2), (0, 0)))
        h, w = x.shape[1] - kh + 1, x.shape[2] - kw + 1
        # Feature (i, j, c) of a patch multiplies kernel[i, j, c, :]: the kernel's row-major
        # order. Rows then columns: kh + kw slices rather than kh * kw (a smaller program).
        rows = jnp.stack([x[:, i : i + h] for i in range(kh)], axis=3)  # (B, h, W, kh, C)
        patches = jnp.stack([rows[:, :, j : j + w] for j in range(kw)], axis=4)  # (B, h, w, kh, kw, C)
        patches = patches.reshape(*patches.shape[:3], kh * kw * c_in)
        y = patches @ kernel.reshape(kh * kw * c_in, c_out).astype(x.dtype)
        if self.bias is not None:
            y = y + self.bias[...].astype(x.dtype)
        return y


def flatten_module(module: nnx.Module, split: bool = False) -> tuple[Callable[[jax.Array, jax.Array], jax.Array], jax.Array]:
    """Turn a flax NNX module into ``(apply, params_flat)`` with ``apply(params_flat, x)`` pure.

    ``params_flat`` holds the module's ``nnx.Param`` variables, raveled in the order of
    its state. ``apply`` computes in the dtype of ``params_flat`` (float32 or float64),
    whatever the dtype the module was initialised in. Modules of equal structure (see
    :class:`ModuleSpec`) get the same ``apply`` object, so the filter's compiled code,
    which is cached per function, is shared between them.

    Parameters
    ----------
    module : flax.nnx.Module
        Its ``nnx.Param`` variables are the parameters. Any other state (a buffer held in
        an ``nnx.Variable``, the running statistics of a ``BatchNorm`` in evaluation mode)
        enters ``apply`` as a constant; a module whose call changes it (``BatchNorm``
        updating its statistics, ``Dropout`` drawing from its RNG stream: training mode)
        is refused when ``apply`` is traced, since the filter has no way to update it.
    split : bool, default=False
        How ``apply`` cuts ``params_flat`` into the module's arrays: one slice per array
        (default), whose gradients are zero-padded to ``P`` and summed, or one
        ``jnp.split``, whose gradient is one concatenation. The choice changes only the
        speed of the per-row Jacobians. Slices suit a dense network under DLR, where XLA
        fuses each padded outer product into the step's own products (MLP 784-50-10,
        DLR-10, from the ``P x K`` root: 1.50 ms per step, 1.85 ms with ``split``; the
        built-in :class:`MLP` now gives that step its root in factored form, which no cut
        changes); ``split`` suits a step that reads the Jacobians
        several times, as DIAG's Kalman step does (0.88 -> 0.67 ms), and networks whose
        gradients come from products, such as convolutions (the MNIST CNN with
        :class:`PatchConv`: DIAG 5.6 -> 2.9 ms, DLR-10 12 -> 9.5 ms). The estimators
        choose ``split`` for convolutions and for the diagonal families.
    """
    spec = ModuleSpec.of(module, split)
    return spec.apply, module_params(module)


@lru_cache(maxsize=64)
def _compiled_initialiser(factory: Callable, args: tuple, prng_impl: str) -> Callable:
    """``seed -> state`` of ``factory(*args, rngs=nnx.Rngs(seed))``, compiled once per
    ``(factory, args)`` and ``jax_default_prng_impl`` ``prng_impl`` (and backend, by
    ``jax.jit``, whose cache does not tell the PRNG implementations apart: a process that
    switched to "rbg" went on drawing its weights with threefry)."""
    del prng_impl  # the cache's key: the keys are made under the implementation in force

    def initialise(seed):
        # nnx.Rngs(seed) makes jax.random.key(seed) of a Python int; a traced seed needs the key.
        return nnx.state(factory(*args, rngs=nnx.Rngs(jax.random.key(seed))))

    return jit_with_options(initialise, CPU_INIT_OPTIONS)


def build_module(factory: Callable, args: tuple, seed: int) -> nnx.Module:
    """``factory(*args, rngs=nnx.Rngs(seed))`` with all its initialisers run as one
    compiled program.

    Built eagerly, every initialiser op compiles on its own the first time it meets a
    shape: the MLP of a first ``fit`` on digits took 17 compilations, two truncated normals
    among them at 0.3-1 s each. Here the graph comes from an abstract evaluation and the
    weights from one compiled call, cached per ``(factory, args)`` so that refits and
    search candidates reuse it; the seed is traced. The weights are those of the eager
    construction: the same random bits and formulas, and on a CPU for :class:`MLP` the same
    bits (tested; XLA's level-1 backend keeps the eager round-off). On a GPU, XLA fuses the
    initialisers' arithmetic, and weights differ from the eager ones by a few ulps of the
    layer's scale (up to 1.2e-7 on an H200); the compiled weights are the same on every
    call. A factory that cannot be hashed, that does not return a module, or whose module
    keeps an array outside its variables (``_holds_tracer``) runs eagerly.
    """
    try:
        initialiser = _compiled_initialiser(factory, args, jax.config.jax_default_prng_impl)
        abstract = nnx.eval_shape(lambda: factory(*args, rngs=nnx.Rngs(0)))
    except Exception:  # unhashable, or not a module builder: build eagerly, so that the
        # caller sees what the factory itself does and returns
        return factory(*args, rngs=nnx.Rngs(seed))
    if not isinstance(abstract, nnx.Module) or _holds_tracer(abstract):
        return factory(*args, rngs=nnx.Rngs(seed))
    return nnx.merge(nnx.graphdef(abstract), initialiser(np.int32(seed)))


def _holds_tracer(module: nnx.Module) -> bool:
    """Whether an abstractly evaluated module keeps a tracer outside its variables: a plain
    ``jax.Array`` attribute (``self.w = jnp.ones(n)``) is part of the graph definition, not
    of the state, so the abstract build would leak its tracer into every later call (a
    probe's factory failed with ``UnexpectedTracerError`` at its first compiled use)."""
    for _, node in nnx.iter_graph(module):
        if isinstance(node, nnx.Module):
            values = [value for value in vars(node).values() if not isinstance(value, (nnx.Module, nnx.Variable))]
            if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(values)):
                return True
    return False


def module_params(module: nnx.Module) -> np.ndarray:
    """The module's ``nnx.Param`` variables raveled into one vector (``ModuleSpec``'s order:
    that of ``ravel_pytree``), on the host: numpy does it without compiling three small
    XLA programs per new shape."""
    _, params, _ = nnx.split(module, nnx.Param, ...)
    leaves = [np.ravel(np.asarray(leaf)) for leaf in jax.tree_util.tree_leaves(params)]
    return np.concatenate(leaves) if leaves else np.zeros(0, np.float32)


def parameter_fan_in(module: nnx.Module) -> np.ndarray:
    """The fan-in of the layer that holds each weight, in :func:`module_params`' order.

    A layer's fan-in is the number of inputs that each of its outputs sums: for a layer
    with an ``nnx.Param`` ``kernel`` of flax's layout (inputs first, output features last:
    ``nnx.Linear``, ``nnx.Conv``, ``nnx.ConvTranspose``, :class:`PatchConv`), the product of
    the kernel's shape but its last axis (a convolution's window times its input
    channels), the ``fan_in`` of flax's default LeCun-normal initialiser, whose standard
    deviation is ``1 / sqrt(fan_in)``; for ``nnx.LinearGeneral``, the product of its
    ``in_features``. The layer's bias shares it. Weights of modules without a kernel
    (normalisation scales and offsets, embedding tables) get 1.

    A prior of standard deviation ``s / sqrt(fan_in)`` per weight is the standard
    parameterisation of priors on network weights (Neal 1996, Sec. 2.2): it keeps the
    prior's spread of each layer's outputs independent of the layer's width
    (``benchmarks/results/fan_in_prior.md`` measures it against one ``sigma0``).

    Parameters
    ----------
    module : flax.nnx.Module

    Returns
    -------
    fan_in : ndarray of shape (P,), int64
    """
    owners = {tuple(path): node for path, node in nnx.iter_graph(module) if isinstance(node, nnx.Module)}
    _, params, _ = nnx.split(module, nnx.Param, ...)
    pieces = []
    for path, leaf in jax.tree_util.tree_leaves_with_path(params):
        keys = tuple(key.key for key in path if isinstance(key, jax.tree_util.DictKey))
        pieces.append(np.full(int(np.size(leaf)), _layer_fan_in(owners.get(keys[:-1])), np.int64))
    return np.concatenate(pieces) if pieces else np.zeros(0, np.int64)


def _layer_fan_in(layer) -> int:
    """Fan-in of one module's weights (:func:`parameter_fan_in`)."""
    if isinstance(layer, nnx.LinearGeneral):
        return int(np.prod(layer.in_features, dtype=np.int64))
    kernel = getattr(layer, "kernel", None)
    if isinstance(kernel, nnx.Param) and np.ndim(kernel[...]) >= 2:
        return int(np.prod(np.shape(kernel[...])[:-1], dtype=np.int64))
    return 1


def has_convolution(module: nnx.Module) -> bool:
    """Whether ``module`` contains an ``nnx.Conv`` (which favours ``split=True``)."""
    return any(isinstance(node, nnx.Conv) for _, node in nnx.iter_graph(module))


@dataclass(frozen=True)
class ModuleSpec:
    """Structure of an NNX module: what its pure ``apply`` depends on, as a hashable value.

    Two modules with equal graph definitions (layer types and static attributes) and
    equal weight shapes give equal specs, whatever their weights, and equal specs share
    one ``apply`` object and with it the filter's compiled code: a clone, a deep copy,
    a pickled and loaded copy, or the same network initialised from another seed.

    Parameters
    ----------
    graphdef : flax.nnx.GraphDef
        The module without its state (``nnx.split``).
    treedef : jax.tree_util.PyTreeDef
        Structure of its ``nnx.Param`` state.
    shapes : tuple of tuple of int
        Shape of each parameter array, in the order of ``treedef``'s leaves.
    split : bool
        How ``apply`` cuts the flat vector (see :func:`flatten_module`).
    dense : DenseNetwork or None
        For a chain of dense layers (an :class:`MLP`, an ``nnx.Linear``, or an
        ``nnx.Sequential`` of ``nnx.Linear`` layers with one of the activations of
        ``ACTIVATIONS`` between them, each at flax's defaults), its layers' places in the
        flat vector: ``apply`` then carries it as ``apply.dense_network``, and LIN-HESS and
        MC-EF give the diagonal and DLR families the factored root of
        :class:`~skbong.core.DenseFactors` (the MNIST MLP's DIAG step: 0.80 -> 0.12 ms per
        row on 2 cores; its DLR-10 step: 0.83-0.92x of the time with the root,
        ``benchmarks/results/factored_root.md``). Determined by the other fields.
    constants : ModuleConstants or None
        The module's state besides ``nnx.Param`` (None when it has none): constants of
        ``apply``, so part of the spec's identity by value.
    """

    graphdef: nnx.GraphDef
    treedef: jax.tree_util.PyTreeDef
    shapes: tuple[tuple[int, ...], ...]
    split: bool = False
    dense: DenseNetwork | None = None
    constants: "ModuleConstants | None" = None

    @classmethod
    def of(cls, module: nnx.Module, split: bool | None = None) -> "ModuleSpec":
        """The spec of ``module``.

        ``split=None`` chooses the cut by the layers: one split for a network with a
        convolution (:func:`has_convolution`), slices otherwise.
        """
        if split is None:
            split = has_convolution(module)
        graphdef, params, rest = nnx.split(module, nnx.Param, ...)
        constants = ModuleConstants(rest) if jax.tree_util.tree_leaves(rest) else None
        for path, leaf in jax.tree_util.tree_leaves_with_path(params):
            if not jnp.issubdtype(jnp.result_type(leaf), jnp.floating):
                name = ".".join(str(key.key) for key in path if hasattr(key, "key"))
                raise TypeError(
                    f"The module's nnx.Param {name!r} holds {jnp.result_type(leaf)} values: the "
                    "posterior is over floating-point weights. Hold integer or boolean state in an "
                    "nnx.Variable, which the filter keeps constant."
                )
        leaves, treedef = jax.tree_util.tree_flatten(params)
        shapes = tuple(tuple(int(d) for d in np.shape(leaf)) for leaf in leaves)
        return cls(graphdef, treedef, shapes, bool(split), _dense_network(module, params), constants)

    def __hash__(self) -> int:
        # Hashing a graph definition walks the whole graph (0.1 ms for an MLP), and every
        # call of a compiled entry point hashes its config: hash once per object.
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((self.graphdef, self.treedef, self.shapes, self.split, self.constants))
            object.__setattr__(self, "_hash", cached)
        return cached

    def __getstate__(self) -> dict:
        # String hashes differ between processes: a pickle must not carry this one's (nor a
        # function, which does not pickle).
        return {key: value for key, value in self.__dict__.items() if key not in ("_hash", "_apply")}

    @property
    def apply(self) -> Callable[[jax.Array, jax.Array], jax.Array]:
        """The pure ``apply(params_flat, x)``; the same object for equal specs, else (a
        module with a static attribute that is not hashable, e.g. a dict) for this spec: a
        new function at every access would compile the filter again at every call."""
        try:
            return _cached_apply(self)
        except TypeError:
            cached = self.__dict__.get("_apply")
            if cached is None:
                cached = _pure_apply(self)
                object.__setattr__(self, "_apply", cached)
            return cached

    @cached_property
    def n_params(self) -> int:
        """Number of parameters ``P``."""
        return int(sum(np.prod(shape, dtype=np.int64) for shape in self.shapes))


class ModuleStateError(ValueError):
    """A module whose call changes its state besides ``nnx.Param`` (training mode)."""


class ModuleConstants:
    """A module's state besides its ``nnx.Param`` variables, held as constants of ``apply``.

    Equal (and equally hashed) when the state has the same structure and the same bytes,
    so that modules with other constants never share compiled code: the constants are
    baked into it. Keys of RNG streams are held as their raw key data.

    Parameters
    ----------
    state : flax.nnx.State
        The state (``nnx.split(module, nnx.Param, ...)[2]``).
    """

    def __init__(self, state):
        self.state = state
        digest = hashlib.sha256()
        for path, leaf in jax.tree_util.tree_leaves_with_path(state):
            data = np.asarray(jax.random.key_data(leaf) if _is_key(leaf) else leaf)
            digest.update(f"{jax.tree_util.keystr(path)}|{data.dtype}|{data.shape}|".encode())
            digest.update(np.ascontiguousarray(data).tobytes())
        self.digest = digest.hexdigest()

    def __eq__(self, other) -> bool:
        return isinstance(other, ModuleConstants) and self.digest == other.digest

    def __hash__(self) -> int:
        return hash(self.digest)


def _is_key(leaf) -> bool:
    return isinstance(leaf, jax.Array) and jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key)


def _dense_network(module: nnx.Module, params) -> DenseNetwork | None:
    """The :class:`DenseNetwork` of a module that is a chain of dense layers, else None.

    Recognised: the built-in :class:`MLP`; one ``nnx.Linear``; an ``nnx.Sequential`` of
    ``nnx.Linear`` layers with one activation of ``ACTIVATIONS`` (the same function
    object, e.g. ``nnx.relu``) between each two and a Linear layer last. Each class must
    be flax's own or this module's (a subclass may compute something else) and each Linear
    layer at flax's defaults for how it computes (a bias, no dtype, precision, dot_general
    or promotion of its own), since :meth:`DenseNetwork.forward` recomputes it.
    """
    if type(module) is MLP:
        chain = [(("layers", i), layer) for i, layer in enumerate(module.layers)]
        activation = module.activation
    elif type(module) is nnx.Linear:
        chain, activation = [((), module)], "identity"
    elif type(module) is nnx.Sequential:
        members = list(module.layers)
        between = {_activation_name(fn) for fn in members[1::2]} or {"identity"}
        if len(members) % 2 == 0 or len(between) != 1 or None in between:
            return None
        chain = [(("layers", i), members[i]) for i in range(0, len(members), 2)]
        (activation,) = between
    else:
        return None
    if not all(_is_plain_linear(layer) for _, layer in chain):
        return None
    if len({id(layer) for _, layer in chain}) < len(chain):
        # A layer used twice shares its weights (flax keeps them once, under its first
        # place); its gradient sums over both uses, which the per-layer factors do not.
        return None
    offsets, start = {}, 0
    for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
        # ("layers", i, "kernel" | "bias") before the variable's own attribute key
        offsets[tuple(key.key for key in path if hasattr(key, "key"))] = start
        start += int(np.prod(np.shape(leaf)))
    if any(where + (name,) not in offsets for where, _ in chain for name in ("kernel", "bias")):
        # A weight shared between layers (the same nnx.Param in two of them) is kept once,
        # under its first place; as for a layer used twice, the general path handles it.
        return None
    layers = tuple(
        DenseLayer(offsets[where + ("kernel",)], offsets[where + ("bias",)], layer.in_features, layer.out_features)
        for where, layer in chain
    )
    if any(layer.kernel != layer.bias + layer.n_out for layer in layers):
        return None  # not the layout DenseLayer promises (flax flattens "bias" before "kernel")
    return DenseNetwork(layers, activation)


def _activation_name(fn) -> str | None:
    return next((name for name, known in ACTIVATIONS.items() if known is fn), None)


@lru_cache(maxsize=1)
def _linear_defaults() -> dict:
    """``nnx.Linear``'s defaults for how it computes, read from its signature."""
    parameters = inspect.signature(nnx.Linear.__init__).parameters
    names = ("use_bias", "dtype", "precision", "dot_general", "promote_dtype", "preferred_element_type")
    return {name: parameters[name].default for name in names if name in parameters}


def _is_plain_linear(layer) -> bool:
    return type(layer) is nnx.Linear and all(
        getattr(layer, name, default) is default for name, default in _linear_defaults().items()
    )


def _pure_apply(spec: ModuleSpec) -> Callable[[jax.Array, jax.Array], jax.Array]:
    offsets = np.cumsum([0] + [int(np.prod(shape)) for shape in spec.shapes])

    def apply(params_flat: jax.Array, x: jax.Array) -> jax.Array:
        if isinstance(params_flat, LayeredVector):  # a dense network's belief kept per layer
            flat_pieces = [params_flat.piece(start, stop) for start, stop in zip(offsets[:-1], offsets[1:])]
        elif spec.split:
            flat_pieces = jnp.split(params_flat, offsets[1:-1])
        else:
            flat_pieces = [params_flat[start:stop] for start, stop in zip(offsets[:-1], offsets[1:])]
        pieces = [piece.reshape(shape) for piece, shape in zip(flat_pieces, spec.shapes)]
        state = jax.tree_util.tree_unflatten(spec.treedef, pieces)
        if spec.constants is None:
            # The cast: a module may compute in a dtype of its own (e.g. bfloat16).
            return _one_array(nnx.merge(spec.graphdef, state)(x.astype(params_flat.dtype))).astype(params_flat.dtype)
        rest = jax.tree_util.tree_map(lambda leaf: _in_dtype(leaf, params_flat.dtype), spec.constants.state)
        merged = jax.tree_util.tree_leaves(rest)  # the merged module shares rest's variables
        module = nnx.merge(spec.graphdef, state, rest)
        out = _one_array(module(x.astype(params_flat.dtype))).astype(params_flat.dtype)
        after = nnx.split(module, nnx.Param, ...)[2]
        # A variable the call wrote to holds a new array, not the one merged in.
        changed = [
            jax.tree_util.keystr(path)
            for (path, new), old in zip(jax.tree_util.tree_leaves_with_path(after), merged)
            if new is not old
        ]
        if changed:
            raise ModuleStateError(
                f"Calling the module changes its state besides nnx.Param: {', '.join(changed[:5])}"
                f"{' ...' if len(changed) > 5 else ''}. The filter keeps a posterior over the nnx.Param "
                "weights and holds any other state constant, so it cannot run a module in training mode "
                "(BatchNorm updating its statistics, Dropout drawing from its RNG stream). Call "
                "module.eval() before passing it (or build BatchNorm with use_running_average=True and "
                "Dropout with deterministic=True). A module that draws from an nnx.Rngs stream in its "
                "own __call__ must draw from a fixed key instead (e.g. jax.random.key(0), or a key held "
                "in an nnx.Variable), since each draw advances the stream's state."
                + (
                    " An nnx.bridge.ToNNX wrapper of a flax.linen module draws from its rngs at every call, "
                    "whatever its mode: write the network with flax.nnx layers instead."
                    if any("to_nnx__rngs" in path for path in changed)
                    else ""
                )
            )
        return out

    # An older pickle's spec has no field of its own: the class default (None) answers.
    if spec.dense is not None:
        apply.dense_network = spec.dense
    apply.reads_layered_vector = True  # the filter may carry a belief per layer for it
    return apply


def _one_array(out):
    """The module's output, refused unless it is one array (not a tuple or a dict)."""
    if not isinstance(out, jax.Array):
        raise TypeError(
            f"The module returned a {type(out).__name__}; it must return one array of shape (B, n_outputs), "
            "the logits or the predicted means (wrap it to return only those)."
        )
    if not jnp.issubdtype(out.dtype, jnp.floating):
        # A bool or integer output has no gradient (the posterior would never move), and a
        # complex one would lose its imaginary part to the cast.
        raise TypeError(
            f"The module returned {out.dtype} values; it must return real floating-point logits or "
            "predicted means, whose gradient in the weights the filter follows."
        )
    return out


def _in_dtype(leaf, dtype):
    """A floating constant in the dtype the network computes in; any other as it is (a
    Python scalar held in an ``nnx.Variable`` among them)."""
    if not hasattr(leaf, "dtype"):
        return leaf
    return leaf.astype(dtype) if jnp.issubdtype(leaf.dtype, jnp.floating) else leaf


@lru_cache(maxsize=256)
def _cached_apply(spec: ModuleSpec) -> Callable[[jax.Array, jax.Array], jax.Array]:
    return _pure_apply(spec)


@dataclass(frozen=True)
class MLPSpec:
    """Structure of an MLP: the hashable description from which it is rebuilt.

    A shortcut for core users and tests; the estimators build the same :class:`MLP`
    through :class:`ModuleSpec`, so equal MLPs share one ``apply`` either way.

    Parameters
    ----------
    n_inputs, n_outputs : int
        Input and output widths.
    hidden_layer_sizes : tuple of int
        Hidden widths; ``()`` gives a linear (or logistic) model.
    activation : str
        One of ``ACTIVATIONS``.
    """

    n_inputs: int
    hidden_layer_sizes: tuple[int, ...]
    n_outputs: int
    activation: str

    @property
    def apply(self) -> Callable[[jax.Array, jax.Array], jax.Array]:
        """The pure ``apply(params_flat, x)``; the same object for equal specs."""
        return self.module_spec.apply

    def init_params(self, seed: int) -> np.ndarray:
        """Initial mean: LeCun-normal weights, zero biases, drawn from ``seed`` (the
        estimators' built-in MLP)."""
        return module_params(self.build(nnx.Rngs(seed)))

    def build(self, rngs: nnx.Rngs) -> MLP:
        """The :class:`MLP` with weights drawn from ``rngs``."""
        return MLP((self.n_inputs, *self.hidden_layer_sizes, self.n_outputs), self.activation, rngs)

    @property
    def module_spec(self) -> ModuleSpec:
        """The :class:`ModuleSpec` of this MLP."""
        return _mlp_module_spec(self)

    @cached_property
    def n_params(self) -> int:
        """Number of parameters ``P``."""
        return self.module_spec.n_params


@lru_cache(maxsize=None)
def _mlp_module_spec(spec: MLPSpec) -> ModuleSpec:
    return ModuleSpec.of(nnx.eval_shape(lambda: spec.build(nnx.Rngs(0))))
