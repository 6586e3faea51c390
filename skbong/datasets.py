"""Loaders for the external benchmark data (MNIST test set, five UCI regression sets).

The data are not shipped with the package. They live in the directory named by the
environment variable ``SKBONG_DATA`` or, when it is unset, in ``shared/data`` beside the
repository checkout (``../shared/data`` relative to the project root). Only numpy is used.
"""

from __future__ import annotations

import gzip
import os
from numbers import Integral
from pathlib import Path
from typing import NamedTuple

import numpy as np

__all__ = [
    "UCI_NAMES",
    "UCIData",
    "UCISplit",
    "data_dir",
    "load_mnist",
    "load_uci",
    "mnist_stream",
    "uci_split",
]

UCI_NAMES = ("boston", "concrete", "energy", "wine", "yacht")

_MNIST_FILES = ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
_N_STREAM_TRAIN = 8000  # the data README: first 8,000 shuffled images train, last 2,000 test
# IDX type codes (third byte of the magic number) to numpy dtypes; IDX data are big-endian.
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


class UCIData(NamedTuple):
    """A UCI regression data set with its 20 standard train/test splits.

    Attributes
    ----------
    X : ndarray of shape (n, d), float64
    y : ndarray of shape (n,), float64
    train_idx : ndarray of shape (20, n_train), int
    test_idx : ndarray of shape (20, n_test), int
    """

    X: np.ndarray
    y: np.ndarray
    train_idx: np.ndarray
    test_idx: np.ndarray


class UCISplit(NamedTuple):
    """One standardised train/test split of a UCI data set.

    Inputs and targets are standardised with training-split statistics; predictions
    ``f`` map back to original units as ``f * y_std + y_mean``.

    Attributes
    ----------
    X_train : ndarray of shape (n_train, d)
    y_train : ndarray of shape (n_train,)
    X_test : ndarray of shape (n_test, d)
    y_test : ndarray of shape (n_test,)
    y_mean : float
        Mean of the training targets.
    y_std : float
        Standard deviation of the training targets.
    """

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    y_mean: float
    y_std: float


def data_dir(data_home: str | os.PathLike | None = None) -> Path:
    """Return the data directory.

    Parameters
    ----------
    data_home : str or path-like, optional
        Explicit directory. When None, ``$SKBONG_DATA`` is used, else ``shared/data``
        beside the repository checkout.

    Returns
    -------
    Path
    """
    if data_home is not None:
        return Path(data_home)
    default = Path(__file__).resolve().parents[1].parent / "shared" / "data"
    return Path(os.environ.get("SKBONG_DATA", default))


def _require(path: Path, expected: str) -> Path:
    # One message for every missing file, saying where we looked and how to fix it.
    if not path.is_file():
        raise FileNotFoundError(
            f"skbong data file not found: {path}\n"
            f"Expected {expected} under the data directory {path.parent.parent}.\n"
            "Set the SKBONG_DATA environment variable to the directory that holds "
            "mnist/ and uci/ (by default ../shared/data beside the repository)."
        )
    return path


def _read_idx(path: Path) -> np.ndarray:
    with gzip.open(path, "rb") as f:
        raw = f.read()
    zero, type_code, ndim = raw[0] | raw[1], raw[2], raw[3]
    if zero != 0 or type_code not in _IDX_DTYPES:
        raise ValueError(f"{path} is not an IDX file (bad magic number)")
    dims = np.frombuffer(raw, dtype=">u4", count=ndim, offset=4).astype(np.int64)
    data = np.frombuffer(raw, dtype=_IDX_DTYPES[type_code], offset=4 + 4 * ndim)
    return data.reshape(tuple(dims)).astype(data.dtype.newbyteorder("="))


def load_mnist(data_home: str | os.PathLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Load the official MNIST test set (10,000 images).

    Parameters
    ----------
    data_home : str or path-like, optional
        Data directory; see :func:`data_dir`.

    Returns
    -------
    X : ndarray of shape (10000, 28, 28), uint8
    y : ndarray of shape (10000,), int64
        Digit labels in 0..9.

    Raises
    ------
    FileNotFoundError
        If ``mnist/t10k-images-idx3-ubyte.gz`` or ``mnist/t10k-labels-idx1-ubyte.gz``
        is missing.
    """
    root = data_dir(data_home) / "mnist"
    expected = "mnist/" + " and mnist/".join(_MNIST_FILES)
    images, labels = (_require(root / name, expected) for name in _MNIST_FILES)
    X = _read_idx(images).astype(np.uint8)
    y = _read_idx(labels).astype(np.int64)
    if X.shape[0] != y.shape[0]:
        raise ValueError(f"MNIST images ({X.shape[0]}) and labels ({y.shape[0]}) disagree")
    return X, y


def mnist_stream(
    seed: int = 0, data_home: str | os.PathLike | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Split the MNIST test set into a training stream and a held-out set.

    The images are shuffled with ``np.random.default_rng(seed).permutation``; the first
    8,000 form the training stream and the last 2,000 the test set.

    Parameters
    ----------
    seed : int, default=0
        Seed of the fixed shuffle.
    data_home : str or path-like, optional
        Data directory; see :func:`data_dir`.

    Returns
    -------
    X_train : ndarray of shape (8000, 784), float32 in [0, 1]
    y_train : ndarray of shape (8000,), int64
    X_test : ndarray of shape (2000, 784), float32 in [0, 1]
    y_test : ndarray of shape (2000,), int64
    """
    X, y = load_mnist(data_home)
    order = np.random.default_rng(seed).permutation(len(y))
    X = X[order].reshape(len(y), -1).astype(np.float32) / 255.0
    y = y[order]
    n = _N_STREAM_TRAIN
    return X[:n], y[:n], X[n:], y[n:]


def load_uci(name: str, data_home: str | os.PathLike | None = None) -> UCIData:
    """Load a UCI regression data set with its 20 standard splits.

    Parameters
    ----------
    name : {"boston", "concrete", "energy", "wine", "yacht"}
    data_home : str or path-like, optional
        Data directory; see :func:`data_dir`.

    Returns
    -------
    UCIData
        ``X`` (n, d), ``y`` (n,), ``train_idx`` (20, n_train), ``test_idx`` (20, n_test).

    Raises
    ------
    ValueError
        If ``name`` is not one of :data:`UCI_NAMES`.
    FileNotFoundError
        If ``uci/NAME.npz`` is missing.
    """
    if name not in UCI_NAMES:
        raise ValueError(f"unknown UCI data set {name!r}; expected one of {UCI_NAMES}")
    path = _require(data_dir(data_home) / "uci" / f"{name}.npz", f"uci/{name}.npz")
    with np.load(path) as f:
        return UCIData(
            X=f["X"].astype(np.float64),
            y=f["y"].astype(np.float64),
            train_idx=f["train_idx"].astype(np.intp),
            test_idx=f["test_idx"].astype(np.intp),
        )


def uci_split(name: str, split: int, data_home: str | os.PathLike | None = None) -> UCISplit:
    """Return one standardised train/test split of a UCI data set.

    Inputs and targets are standardised with the training split's mean and standard
    deviation (a constant input column is centred only), as in the LO-FI paper.

    Parameters
    ----------
    name : {"boston", "concrete", "energy", "wine", "yacht"}
    split : int
        Split index in ``0..19``.
    data_home : str or path-like, optional
        Data directory; see :func:`data_dir`.

    Returns
    -------
    UCISplit
    """
    data = load_uci(name, data_home)
    n_splits = data.train_idx.shape[0]
    if isinstance(split, bool) or not isinstance(split, Integral) or not 0 <= split < n_splits:
        raise ValueError(f"split must be in 0..{n_splits - 1}, got {split}")
    tr, te = data.train_idx[split], data.test_idx[split]
    X_mean, X_std = data.X[tr].mean(axis=0), data.X[tr].std(axis=0)
    X_std = np.where(X_std > 0, X_std, 1.0)  # a column constant on this split carries no signal
    y_mean, y_std = float(data.y[tr].mean()), float(data.y[tr].std())
    return UCISplit(
        X_train=(data.X[tr] - X_mean) / X_std,
        y_train=(data.y[tr] - y_mean) / y_std,
        X_test=(data.X[te] - X_mean) / X_std,
        y_test=(data.y[te] - y_mean) / y_std,
        y_mean=y_mean,
        y_std=y_std,
    )
