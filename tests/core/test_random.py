"""The Monte-Carlo draws (skbong/core/_random.py) against published test vectors and the
normal distribution."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import kstest

from skbong.core import MLPSpec, make_config
from skbong.core._random import standard_normal, threefry_2x32


@pytest.mark.parametrize(
    "key, counter, expected",
    [
        # The known-answer vectors of Threefry-2x32 with 20 rounds published with Random123
        # (Salmon et al. 2011): zeros, all ones, and the digits of pi.
        ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
        ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
        ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
    ],
)
def test_threefry_matches_the_published_test_vectors(key, counter, expected):
    words = threefry_2x32(*(jnp.uint32(v) for v in key + counter))
    assert tuple(int(w) for w in words) == expected


def test_float32_draws_are_standard_normal_and_independent():
    z = np.asarray(standard_normal(jax.random.PRNGKey(0), (10, 40_000), jnp.float32), np.float64)
    assert np.all(np.isfinite(z))
    n = z.size
    # Kolmogorov-Smirnov at the 0.1% level, and the first four moments within 5 standard errors.
    assert kstest(z.ravel(), "norm").pvalue > 1e-3
    assert abs(z.mean()) < 5 / np.sqrt(n)
    assert abs(z.var() - 1) < 5 * np.sqrt(2 / n)
    assert abs(np.mean(z**3)) < 5 * np.sqrt(15 / n)
    assert abs(np.mean(z**4) - 3) < 5 * np.sqrt(96 / n)
    # Neighbouring rows and columns (adjacent counters) are uncorrelated.
    for a, b in ((z[:-1], z[1:]), (z[:, :-1], z[:, 1:])):
        assert abs(np.corrcoef(a.ravel(), b.ravel())[0, 1]) < 5 / np.sqrt(a.size)


def test_draws_depend_on_the_key_only():
    key, other = jax.random.split(jax.random.PRNGKey(1))
    draw = lambda k: np.asarray(standard_normal(k, (3, 1000), jnp.float32))  # noqa: E731
    np.testing.assert_array_equal(draw(key), draw(key))
    assert abs(np.corrcoef(draw(key).ravel(), draw(other).ravel())[0, 1]) < 5 / np.sqrt(3000)
    # Under vmap (a sweep's members) each key gives the draws it gives alone.
    batched = jax.vmap(lambda k: standard_normal(k, (3, 1000), jnp.float32))(jnp.stack([key, other]))
    np.testing.assert_array_equal(np.asarray(batched), np.stack([draw(key), draw(other)]))
    # A typed key draws as its raw key data does.
    typed = jax.random.wrap_key_data(key)
    np.testing.assert_array_equal(np.asarray(standard_normal(typed, (3, 1000), jnp.float32)), draw(key))


def test_float64_draws_are_jax_random_normal(x64):
    key = jax.random.PRNGKey(2)
    np.testing.assert_array_equal(
        np.asarray(standard_normal(key, (4, 7), jnp.float64)), np.asarray(jax.random.normal(key, (4, 7), jnp.float64))
    )


@pytest.mark.parametrize("family", ["fc", "diag", "dlr"])
def test_float32_samples_have_the_family_covariance(family):
    """``family.sample`` in float32 (the fused draws) against the family's own covariance."""
    spec = MLPSpec(2, (), 2, "relu")  # P = 6
    config = make_config(spec.apply, "categorical", family, rank=2)
    rng = np.random.default_rng(3)
    state = config.family.init(jnp.asarray(spec.init_params(0), jnp.float32), jnp.float32(0.8))
    if family == "dlr":
        state = state._replace(low_rank=jnp.asarray(rng.normal(size=(6, 2)), jnp.float32))
    elif family == "fc":
        a = rng.normal(size=(6, 6))
        state = state._replace(cov=jnp.asarray(a @ a.T / 6 + 0.1 * np.eye(6), jnp.float32))
    else:
        state = state._replace(var=jnp.asarray(rng.uniform(0.1, 1.0, 6), jnp.float32))
    n = 200_000
    draws = np.asarray(config.family.sample(state, jax.random.PRNGKey(0), n), np.float64)
    cov = np.asarray(config.family.covariance(state), np.float64)
    se = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov**2) / n)
    np.testing.assert_array_less(np.abs(np.cov(draws.T) - cov), 5 * se + 1e-6)
    np.testing.assert_array_less(np.abs(draws.mean(0) - np.asarray(state.mean)), 5 * np.sqrt(np.diag(cov) / n))
