import jax
import pytest


@pytest.fixture
def x64():
    """Run a test in JAX's scoped float64 mode (the global flag is never flipped)."""
    with jax.enable_x64(True):
        yield
