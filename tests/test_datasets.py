"""Tests of the external-data loaders; they read the real files and skip when absent."""

import numpy as np
import pytest

from skbong import datasets

__all__ = []

_MISSING = (
    "benchmark data not found under {} (set SKBONG_DATA to the directory holding mnist/ and uci/)"
)


def _skip_unless(*relative):
    root = datasets.data_dir()
    for rel in relative:
        if not (root / rel).is_file():
            pytest.skip(_MISSING.format(root / rel))


@pytest.fixture
def mnist():
    _skip_unless("mnist/t10k-images-idx3-ubyte.gz", "mnist/t10k-labels-idx1-ubyte.gz")
    return datasets.load_mnist()


def test_load_mnist_shapes_dtypes_labels(mnist):
    X, y = mnist
    assert X.shape == (10000, 28, 28) and X.dtype == np.uint8
    assert y.shape == (10000,) and y.dtype == np.int64
    assert set(np.unique(y)) == set(range(10))
    assert X.max() == 255 and X.min() == 0


def test_mnist_stream_is_deterministic_and_disjoint(mnist):
    X, y = mnist
    X_tr, y_tr, X_te, y_te = datasets.mnist_stream(seed=0)
    assert X_tr.shape == (8000, 784) and X_te.shape == (2000, 784)
    assert X_tr.dtype == np.float32 and y_tr.dtype == np.int64
    assert 0.0 <= X_tr.min() and X_tr.max() <= 1.0

    again = datasets.mnist_stream(seed=0)
    for a, b in zip((X_tr, y_tr, X_te, y_te), again):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(datasets.mnist_stream(seed=1)[1], y_tr)

    # Recover which original images went where: train and test are a partition.
    order = np.random.default_rng(0).permutation(10000)
    assert set(order[:8000]).isdisjoint(order[8000:])
    np.testing.assert_array_equal(X_tr[:5], X[order[:5]].reshape(5, -1) / np.float32(255))
    np.testing.assert_array_equal(y_te, y[order[8000:]])


@pytest.mark.parametrize("name", datasets.UCI_NAMES)
def test_load_uci(name):
    _skip_unless(f"uci/{name}.npz")
    data = datasets.load_uci(name)
    n, _ = data.X.shape
    assert data.y.shape == (n,)
    assert data.train_idx.shape[0] == data.test_idx.shape[0] == 20
    assert data.train_idx.shape[1] + data.test_idx.shape[1] == n
    for tr, te in zip(data.train_idx, data.test_idx):
        assert np.intersect1d(tr, te).size == 0
        assert tr.min() >= 0 and max(tr.max(), te.max()) < n


@pytest.mark.parametrize("name", datasets.UCI_NAMES)
def test_uci_split_standardises_with_training_stats(name):
    _skip_unless(f"uci/{name}.npz")
    s = datasets.uci_split(name, split=3)
    np.testing.assert_allclose(s.X_train.mean(axis=0), 0.0, atol=1e-10)
    np.testing.assert_allclose(s.y_train.mean(), 0.0, atol=1e-10)
    np.testing.assert_allclose(s.y_train.std(), 1.0, rtol=1e-10)
    stds = s.X_train.std(axis=0)
    assert np.all(np.isclose(stds, 1.0) | np.isclose(stds, 0.0))

    # Targets map back to original units with the training statistics.
    data = datasets.load_uci(name)
    np.testing.assert_allclose(s.y_test * s.y_std + s.y_mean, data.y[data.test_idx[3]])
    np.testing.assert_allclose(s.y_mean, data.y[data.train_idx[3]].mean())


def test_uci_rejects_unknown_name_and_split():
    with pytest.raises(ValueError, match="unknown UCI data set"):
        datasets.load_uci("iris")
    _skip_unless("uci/yacht.npz")
    for bad in (20, 1.5):  # 1.5 raised an IndexError
        with pytest.raises(ValueError, match="split must be"):
            datasets.uci_split("yacht", split=bad)


def test_missing_directory_raises_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SKBONG_DATA", str(tmp_path / "nowhere"))
    assert datasets.data_dir() == tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError, match="SKBONG_DATA") as err:
        datasets.load_mnist()
    assert "t10k-images-idx3-ubyte.gz" in str(err.value)
    with pytest.raises(FileNotFoundError, match="SKBONG_DATA") as err:
        datasets.uci_split("boston", 0)
    assert "uci/boston.npz" in str(err.value)
