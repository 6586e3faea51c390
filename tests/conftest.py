import os
import shutil
import tempfile

# The suite runs one pytest-xdist worker per core (pyproject addopts). Where JAX sees a GPU
# the workers share it, so each takes GPU memory as it needs it instead of JAX's default of
# most of the device up front. Set before JAX is imported; an explicit setting wins.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

# One persistent compilation cache for the whole run, shared by the xdist workers (they
# inherit the controller's environment) and kept across the modules, whose in-memory
# caches are dropped below. Most tests compile a few small programs and spend most of their
# time doing so; many programs recur across modules and configurations (the same filter
# for another predictive, the same network in another test), and the cache serves those.
# A directory the developer set (JAX_COMPILATION_CACHE_DIR) wins and is kept; this one is
# made for each run and removed at its end.
_OWN_CACHE = "JAX_COMPILATION_CACHE_DIR" not in os.environ
if _OWN_CACHE:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="skbong-tests-xla-")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")

import jax  # noqa: E402
import pytest  # noqa: E402


def pytest_unconfigure(config):
    """The process that made the run's cache (the controller, or the only process under
    ``-n 0``) removes it at the end."""
    if _OWN_CACHE and not hasattr(config, "workerinput"):
        shutil.rmtree(os.environ.pop("JAX_COMPILATION_CACHE_DIR"), ignore_errors=True)


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
