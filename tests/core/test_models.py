"""Model helpers: PatchConv against flax's own convolution, flatten_module's two cuts,
the MLP module's pickling and copies, build_module against the eager construction."""

import copy
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from networks import assert_same_initial_weights  # tests/networks.py

from skbong.core import MLP, PatchConv, build_module, flatten_module, module_params


@pytest.mark.parametrize(
    "kernel_size, padding, use_bias, n_in",
    [((5, 5), "SAME", True, 1), ((4, 4), "SAME", True, 3), ((3, 3), "VALID", False, 2), ((3, 5), "SAME", True, 2)],
)
@pytest.mark.parametrize("n_rows", [3, PatchConv.max_patch_rows + 1])  # patches; XLA's convolution
def test_patch_conv_equals_nnx_conv(kernel_size, padding, use_bias, n_in, n_rows, x64):
    # Same initialisation (a subclass) and, as patches @ kernel, the same outputs as XLA's
    # convolution, including the asymmetric SAME padding of an even kernel.
    def build(cls):
        return cls(n_in, 6, kernel_size=kernel_size, padding=padding, use_bias=use_bias,
                   param_dtype=jnp.float64, rngs=nnx.Rngs(0))

    reference, patched = build(nnx.Conv), build(PatchConv)
    np.testing.assert_array_equal(reference.kernel[...], patched.kernel[...])
    x = jax.random.normal(jax.random.key(1), (n_rows, 9, 11, n_in), jnp.float64)
    np.testing.assert_allclose(patched(x), reference(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("options", [{"strides": 2}, {"kernel_dilation": 2}, {"padding": "CIRCULAR"}])
@pytest.mark.parametrize("n_rows", [1, PatchConv.max_patch_rows + 1])
def test_patch_conv_rejects_what_it_does_not_compute(options, n_rows):
    # Whatever the batch size, so a layer does not work on large batches only.
    layer = PatchConv(1, 2, kernel_size=(3, 3), rngs=nnx.Rngs(0), **options)
    with pytest.raises(NotImplementedError, match="stride 1"):
        layer(jnp.ones((n_rows, 6, 6, 1)))


class _SmallCNN(nnx.Module):
    def __init__(self, rngs):
        self.conv = PatchConv(1, 3, kernel_size=(3, 3), rngs=rngs)
        self.out = nnx.Linear(3 * 4 * 4, 2, rngs=rngs)

    def __call__(self, x):
        x = jax.nn.relu(self.conv(x.reshape(x.shape[0], 4, 4, 1)))
        return self.out(x.reshape(x.shape[0], -1))


def test_flatten_module_split_changes_nothing_but_the_cut(x64):
    # Both cuts give the same function of params_flat, and so the same Jacobians.
    module = _SmallCNN(nnx.Rngs(0))
    by_slices, theta = flatten_module(module)
    by_split, theta_split = flatten_module(module, split=True)
    np.testing.assert_array_equal(theta, theta_split)
    theta = theta.astype(jnp.float64)
    x = jax.random.normal(jax.random.key(2), (5, 16), jnp.float64)
    np.testing.assert_allclose(by_split(theta, x), by_slices(theta, x), rtol=1e-13)
    np.testing.assert_allclose(
        jax.jacrev(by_split)(theta, x), jax.jacfwd(by_slices)(theta, x), rtol=1e-11, atol=1e-13
    )
    # And the function is the module's own.
    # In true float32: JAX's default precision runs float32 products on TF32 units on a GPU.
    with jax.default_matmul_precision("highest"):
        np.testing.assert_allclose(by_split(theta, x), module(x.astype(jnp.float32)), rtol=1e-5)


def test_mlp_pickles_and_its_structure_survives_copies():
    """The MLP module keeps its activation by name: it pickles with its weights, and a
    deep copy (what scikit-learn's clone does to a parameter) has an equal graph
    definition, so code compiled for one serves the other."""
    module = MLP((3, 4, 2), "tanh", nnx.Rngs(0))
    x = jnp.ones((2, 3))
    loaded = pickle.loads(pickle.dumps(module))
    np.testing.assert_array_equal(loaded(x), module(x))
    graphdef = nnx.split(module)[0]
    assert nnx.split(copy.deepcopy(module))[0] == graphdef
    assert nnx.split(loaded)[0] == graphdef
    assert nnx.split(MLP((3, 4, 2), "relu", nnx.Rngs(0)))[0] != graphdef
    with pytest.raises(ValueError, match="activation must be one of"):
        MLP((3, 2), "swish", nnx.Rngs(0))


@pytest.mark.parametrize("sizes, activation", [((64, 50, 10), "relu"), ((784, 50, 10), "tanh"), ((5, 3, 4, 2), "logistic")])
def test_build_module_gives_the_eager_mlp_bit_for_bit(sizes, activation):
    # The estimators build their MLP with one compiled initialiser; a fit must start
    # from the very weights of the eager construction (the filter on unscaled data is
    # chaotic enough that an ulp changes the outcome of some check_estimator fits).
    for seed in (0, 7, 2**31 - 2):
        built = build_module(MLP, (sizes, activation), seed)
        eager = MLP(sizes, activation, nnx.Rngs(seed))
        assert isinstance(built, MLP) and built.activation == activation
        assert_same_initial_weights(module_params(built), module_params(eager))
    x = np.linspace(-1, 1, 3 * sizes[0], dtype=np.float32).reshape(3, sizes[0])
    if jax.default_backend() == "cpu":
        np.testing.assert_array_equal(np.asarray(built(x)), np.asarray(eager(x)))
    else:
        with jax.default_matmul_precision("highest"):
            np.testing.assert_allclose(np.asarray(built(x)), np.asarray(eager(x)), rtol=1e-5, atol=1e-6)


def test_build_module_falls_back_to_eager_construction():
    # An unhashable factory cannot key the cache: built eagerly, with the same result.
    class Unhashable:
        __hash__ = None

        def __call__(self, n_in, n_out, rngs):
            return nnx.Linear(n_in, n_out, rngs=rngs)

    built = build_module(Unhashable(), (4, 3), 5)
    np.testing.assert_array_equal(module_params(built), module_params(nnx.Linear(4, 3, rngs=nnx.Rngs(5))))


def _dense_chains():
    rngs = nnx.Rngs(3)
    return {
        "mlp": MLP((4, 5, 6, 3), "tanh", rngs=rngs),
        "linear": nnx.Linear(4, 3, rngs=rngs),
        "sequential": nnx.Sequential(
            nnx.Linear(4, 5, rngs=rngs), nnx.relu, nnx.Linear(5, 6, rngs=rngs), nnx.relu, nnx.Linear(6, 3, rngs=rngs)
        ),
        "sequential_sigmoid": nnx.Sequential(nnx.Linear(4, 7, rngs=rngs), nnx.sigmoid, nnx.Linear(7, 3, rngs=rngs)),
    }


@pytest.mark.parametrize("name", list(_dense_chains()))
def test_dense_chains_carry_their_layout_and_their_factored_root_is_the_root(name, x64):
    """A chain of dense layers gets its layout (``apply.dense_network``): the layout's
    forward pass is the module's at weights unlike the initial ones (biases nonzero), and
    the root of LIN-HESS rebuilt densely from the per-layer factors, column by column, is
    the root that the module's own Jacobian gives."""
    from skbong.core import LinearizedHessian, make_config

    module = _dense_chains()[name]
    apply, params = flatten_module(module)
    network = apply.dense_network
    rng = np.random.default_rng(0)
    theta = jnp.asarray(rng.normal(size=params.shape))
    x = jnp.asarray(rng.normal(size=(2, 4)))
    assert network.covers(theta.shape[0], x)
    assert all(layer.kernel == layer.bias + layer.n_out for layer in network.layers)
    outputs, inputs = network.forward(theta, x, [0.0] * len(network.layers))
    np.testing.assert_allclose(outputs, apply(theta, x), rtol=1e-12, atol=1e-12)
    assert len(inputs) == len(network.layers)

    config = make_config(apply, "categorical", "diag")
    state = config.family.init(theta, jnp.asarray(0.5))
    y = jnp.asarray(np.eye(3)[[0, 2]])
    curv = LinearizedHessian()(apply, config.likelihood, config.family, state, x, y, jnp.ones(2),
                               jnp.asarray(1.0), jax.random.PRNGKey(0))
    factors = curv.factors
    rebuilt = np.zeros_like(np.asarray(curv.root))
    for layer, layer_inputs, sens in zip(network.layers, factors.inputs, factors.sens):
        for b in range(x.shape[0]):
            for k in range(sens.shape[1]):
                column = b * sens.shape[1] + k
                outer = np.outer(layer_inputs[b], sens[b, k]).ravel()
                rebuilt[layer.kernel : layer.kernel + outer.size, column] = outer
                rebuilt[layer.bias : layer.bias + layer.n_out, column] = sens[b, k]
    np.testing.assert_allclose(rebuilt, curv.root, rtol=1e-10, atol=1e-12)
    assert np.linalg.norm(curv.root) > 1e-3


def test_other_networks_carry_no_layout():
    """What the layout's forward pass would not recompute is left to the general path: an
    activation outside ``ACTIVATIONS``, two different activations, a Linear layer without a
    bias or with a dtype of its own, an activation last, a subclass, and rows that are not
    a matrix ``(B, n_in)``."""
    rngs = nnx.Rngs(0)

    class Chain(nnx.Sequential):
        pass

    others = [
        nnx.Sequential(nnx.Linear(4, 5, rngs=rngs), nnx.gelu, nnx.Linear(5, 3, rngs=rngs)),
        nnx.Sequential(nnx.Linear(4, 5, rngs=rngs), nnx.relu, nnx.Linear(5, 5, rngs=rngs), nnx.tanh,
                       nnx.Linear(5, 3, rngs=rngs)),
        nnx.Sequential(nnx.Linear(4, 5, use_bias=False, rngs=rngs), nnx.relu, nnx.Linear(5, 3, rngs=rngs)),
        nnx.Linear(4, 3, dtype=jnp.bfloat16, rngs=rngs),
        nnx.Sequential(nnx.Linear(4, 3, rngs=rngs), nnx.relu),
        Chain(nnx.Linear(4, 5, rngs=rngs), nnx.relu, nnx.Linear(5, 3, rngs=rngs)),
    ]
    for module in others:
        assert not hasattr(flatten_module(module)[0], "dense_network"), module
    network = flatten_module(nnx.Linear(4, 3, rngs=rngs))[0].dense_network
    assert network.covers(15, jnp.ones((2, 4)))
    assert not network.covers(15, jnp.ones((2, 5, 4)))
    assert not network.covers(14, jnp.ones((2, 4)))


class _MixedNetwork(nnx.Module):
    """A convolution, a normalisation, a transposed convolution, a LinearGeneral and a list
    of dense layers, one of them used twice."""

    def __init__(self, rngs):
        self.conv = nnx.Conv(3, 4, (3, 2), rngs=rngs)
        self.norm = nnx.LayerNorm(4, rngs=rngs)
        self.up = nnx.ConvTranspose(4, 2, (2, 2), rngs=rngs)
        self.general = nnx.LinearGeneral((2, 5), 3, axis=(-2, -1), rngs=rngs)
        shared = nnx.Linear(3, 3, rngs=rngs)
        self.layers = nnx.List([shared, nnx.Linear(3, 6, rngs=rngs), shared])

    def __call__(self, x):
        return x


def test_parameter_fan_in_names_each_weight_s_layer_inputs():
    """Each weight gets its layer's number of inputs, in module_params' order: placed by
    hand from the layers' shapes, and equal to the fan-in of flax's own initialiser, whose
    LeCun-normal kernels have variance 1 / fan_in (checked on the kernels' draws)."""
    from skbong.core import parameter_fan_in

    module = _MixedNetwork(nnx.Rngs(0))
    fan_in = parameter_fan_in(module)
    assert fan_in.shape == module_params(module).shape and fan_in.dtype == np.int64
    # tree_leaves order: modules by name, then bias before kernel (or bias before scale)
    expected_by_layer = [("conv", 3 * 2 * 3, 4 + 3 * 2 * 3 * 4), ("general", 10, 3 + 10 * 3),
                         ("layers.0", 3, 3 + 9), ("layers.1", 3, 6 + 18), ("norm", 1, 8), ("up", 2 * 2 * 4, 2 + 16 * 2)]
    expected = np.concatenate([np.full(size, n, np.int64) for _, n, size in expected_by_layer])
    np.testing.assert_array_equal(fan_in, expected)

    # The initialiser's variance: kernels large enough that the draws pin it down.
    for layer in (nnx.Linear(400, 300, rngs=nnx.Rngs(1)), nnx.Conv(16, 64, (5, 5), rngs=nnx.Rngs(2))):
        kernel = np.asarray(layer.kernel[...])
        kernel_fan_in = parameter_fan_in(layer)[layer.bias[...].size :]  # bias first, then the kernel
        assert np.all(kernel_fan_in == kernel_fan_in[0])
        np.testing.assert_allclose(kernel.var() * kernel_fan_in[0], 1.0, atol=0.02)


def test_parameter_fan_in_of_the_mlp_is_its_dense_layers_inputs():
    """The built-in MLP: each layer's block (bias and kernel) of the DenseNetwork layout has
    that layer's n_in."""
    from skbong.core import MLPSpec, parameter_fan_in

    module = MLPSpec(7, (5, 4), 3, "relu").build(nnx.Rngs(0))
    fan_in = parameter_fan_in(module)
    network = flatten_module(module)[0].dense_network
    for layer in network.layers:
        block = fan_in[layer.bias : layer.kernel + layer.n_in * layer.n_out]
        np.testing.assert_array_equal(block, layer.n_in)
    assert sum((layer.n_in + 1) * layer.n_out for layer in network.layers) == fan_in.size
