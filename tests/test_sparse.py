"""Sparse inputs (SciPy CSR, CSC and COO, matrices and arrays): the same fit and the same
predictions as the dense rows, without ever holding ``X`` dense as a whole."""

import tracemalloc
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits, make_regression
from sklearn.exceptions import ConvergenceWarning

from skbong import BONGClassifier, BONGRegressor


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X[:600] / 16, y[:600], X[600:800] / 16


def _fit_recording_warnings(estimator, *args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        estimator.fit(*args, **kwargs)
    return estimator, sorted(str(w.message) for w in caught)


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"family": "diag", "max_iter": 2},  # shuffled passes: the rows are permuted as sparse rows
        {"sigma0": "auto"},  # the sweep over prior scales, cut into pieces of rows
        {"family": "fc", "hidden_layer_sizes": (8,), "batch_size": 4},
    ],
)
def test_classifier_on_sparse_rows_equals_dense(digits, params):
    X, y, X_test = digits
    weights = np.random.default_rng(0).uniform(0.5, 2.0, len(y))
    dense, dense_warnings = _fit_recording_warnings(
        BONGClassifier(random_state=0, **params), X, y, sample_weight=weights
    )
    sparse, sparse_warnings = _fit_recording_warnings(
        BONGClassifier(random_state=0, **params), sp.csr_matrix(X), y, sample_weight=weights
    )
    np.testing.assert_array_equal(np.asarray(sparse.posterior_[0]), np.asarray(dense.posterior_[0]))
    for to_sparse in (sp.csr_matrix, sp.csc_array, sp.coo_matrix):
        np.testing.assert_array_equal(sparse.predict_proba(to_sparse(X_test)), dense.predict_proba(X_test))
    assert sparse_warnings == dense_warnings


def test_sparse_unscaled_inputs_get_the_dense_advice():
    # Raw digits (0-16): the prior check computes the inputs' mean square from the stored
    # entries over all n x d of them, as for the dense rows (60.9 here).
    X, y = load_digits(return_X_y=True)
    _, dense_warnings = _fit_recording_warnings(BONGClassifier(random_state=0), X[:300], y[:300])
    _, sparse_warnings = _fit_recording_warnings(BONGClassifier(random_state=0), sp.csr_array(X[:300]), y[:300])
    assert any("far from unit scale (mean square 60.9)" in message for message in dense_warnings)
    assert sparse_warnings == dense_warnings


def test_regressor_partial_fit_mixing_sparse_and_dense_calls():
    X, y = make_regression(400, 30, noise=1.0, random_state=0)
    X[np.abs(X) < 1.0] = 0.0  # about two thirds of the entries are zero
    dense = BONGRegressor(random_state=0)
    mixed = BONGRegressor(random_state=0)
    for start, to_input in zip(range(0, 400, 100), (sp.csr_matrix, np.asarray, sp.coo_array, sp.csc_matrix)):
        rows = slice(start, start + 100)
        dense.partial_fit(X[rows], y[rows])
        mixed.partial_fit(to_input(X[rows]), y[rows])
    mean, std = mixed.predict(sp.csr_matrix(X), return_std=True)
    expected_mean, expected_std = dense.predict(X, return_std=True)
    np.testing.assert_array_equal(mean, expected_mean)
    np.testing.assert_array_equal(std, expected_std)
    params = mixed.sample_params(3, random_state=0)
    np.testing.assert_array_equal(
        mixed.predict_with_params(sp.csr_matrix(X[:5]), params), dense.predict_with_params(X[:5], params)
    )
    assert mixed.score(sp.csr_matrix(X), y) == dense.score(X, y)


def test_sparse_X_is_never_dense_as_a_whole():
    # 6,000 x 30,000 at density 1e-3: 720 MB dense in float32. The filter densifies a
    # compiled chunk of rows (512 here, 61 MB) at a time and predict a block of 256 rows,
    # so numpy's peak stays near a few chunks (230 MB measured), not the whole matrix.
    rng = np.random.default_rng(0)
    X = sp.random(6000, 30000, density=1e-3, format="csr", random_state=0, dtype=np.float32)
    y = (X @ rng.normal(size=30000) > 0).astype(int)
    estimator = BONGClassifier(hidden_layer_sizes=(), family="diag", random_state=0)
    dense_bytes = X.shape[0] * X.shape[1] * 4
    tracemalloc.start()  # numpy reports its array buffers to tracemalloc
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            estimator.fit(X, y)
        proba = estimator.predict_proba(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < dense_bytes / 2
    assert proba.shape == (6000, 2)
    assert estimator.score(X, y) > 0.9


def test_wide_rows_are_densified_within_the_chunk_budget(monkeypatch):
    # 300 rows of 20,000 columns: 80 KB a row in float32. With a budget of 1 MiB a chunk
    # holds 8 one-row steps (the longest of STEP_BUCKETS that fits) and a prediction block
    # 8 rows, so numpy's peak stays near one such chunk, where a call padded to its bucket
    # of 512 steps densified 41 MB (and 48 MB more for the float64 rows it came from).
    X = sp.random(300, 20000, density=2e-3, format="csr", random_state=0, dtype=np.float32)
    y = (X @ np.random.default_rng(0).normal(size=20000) > 0).astype(int)
    params = {"hidden_layer_sizes": (), "family": "diag", "sigma0": 3.0, "random_state": 0}
    default = BONGClassifier(**params).partial_fit(X, y, classes=[0, 1])
    expected = default.predict_proba(X)
    monkeypatch.setattr("skbong.core._filter.DENSE_CHUNK_BYTES", 1 << 20)
    budgeted = BONGClassifier(**params)
    tracemalloc.start()
    try:
        budgeted.partial_fit(X, y, classes=[0, 1])
        proba = budgeted.predict_proba(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20
    np.testing.assert_allclose(
        np.asarray(budgeted.posterior_[0]), np.asarray(default.posterior_[0]), rtol=1e-5, atol=1e-7
    )
    np.testing.assert_allclose(proba, expected, rtol=1e-5, atol=1e-7)


def _unit_rows(n_rows, n_columns, n_words, rng):
    """Rows of ``n_words`` random words each, normalised to unit norm, as TF-IDF's."""
    columns = np.stack([rng.choice(n_columns, n_words, replace=False) for _ in range(n_rows)])
    rows = sp.csr_matrix(
        (rng.uniform(0.5, 1.5, n_rows * n_words), columns.ravel(), np.arange(0, n_rows * n_words + 1, n_words)),
        shape=(n_rows, n_columns),
    )
    return rows.multiply(1 / np.sqrt(rows.multiply(rows).sum(axis=1))).tocsr()


def test_the_input_scale_is_judged_on_rows_that_have_entries():
    # TF-IDF rows have unit norm whatever their words; a batch of documents mostly out of the
    # vocabulary (empty rows) was told that its inputs were 5.8 times smaller (a probe).
    rng = np.random.default_rng(0)
    X = _unit_rows(400, 1000, 20, rng)
    y = (X[:, :500].sum(axis=1).A1 > X[:, 500:].sum(axis=1).A1).astype(int)
    clf = BONGClassifier(hidden_layer_sizes=(), family="diag", sigma0=3.0, random_state=0)
    clf.partial_fit(X[:300], y[:300], classes=[0, 1])
    mostly_empty = sp.vstack([X[300:303], sp.csr_matrix((97, 1000))]).tocsr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf.partial_fit(mostly_empty, np.r_[y[300:303], rng.integers(0, 2, 97)])
    assert not [w for w in caught if "another scale" in str(w.message)]
    # Counts whose rows grow with the documents' length: the advice is to normalise each row.
    counts = BONGClassifier(hidden_layer_sizes=(), family="diag", random_state=0)
    short = (X[:300] > 0).astype(np.float64)  # 20 words a document, each once
    counts.partial_fit(short, y[:300], classes=[0, 1])
    with pytest.warns(UserWarning, match=r"another scale.*need each row normalised: TfidfVectorizer"):
        counts.partial_fit(short[:100] * 40, y[:100])


def test_a_not_learning_mlp_on_wide_inputs_is_pointed_to_a_linear_model():
    # The default MLP on text hashed to 2**18 columns: 13.1M weights, 1 s a row, accuracy 0.50
    # after 200 rows, told to raise the rank or use family='fc' (a probe); a linear model with
    # family='diag' reached 0.999 on the same rows.
    rng = np.random.default_rng(0)
    X = _unit_rows(300, 10_000, 20, rng)
    y = rng.integers(0, 2, 300)  # nothing to learn: the stream is told so
    with pytest.warns(ConvergenceWarning, match="is (not|barely) learning") as record:
        BONGClassifier(hidden_layer_sizes=(8,), random_state=0).partial_fit(X, y, classes=[0, 1])
    message = next(str(w.message) for w in record if " learning: " in str(w.message))
    assert "10,000 columns" in message and "hidden_layer_sizes=()" in message
    assert "family='fc'" not in message
