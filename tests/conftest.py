import os

# The suite runs one pytest-xdist worker per core (pyproject addopts). Where JAX sees a GPU
# the workers share it, so each takes GPU memory as it needs it instead of JAX's default of
# most of the device up front. Set before JAX is imported; an explicit setting wins.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture
def x64():
    """Run a test in JAX's scoped float64 mode (the global flag is never flipped)."""
    with jax.enable_x64(True):
        yield


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_code():
    """Drop JAX's compiled executables after each test module.

    Every executable XLA:CPU loads holds memory mappings; the whole suite compiles
    thousands of them and would pass Linux's default ``vm.max_map_count`` (65530), after
    which the next compilation segfaults. Modules never share compiled code anyway."""
    yield
    jax.clear_caches()
