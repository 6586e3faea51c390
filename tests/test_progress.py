"""Progress while fitting: ``verbose`` lines and ``history_`` per compiled chunk.

The chunk records are checked against the prequential record, which the estimator
keeps by another path (``prequential_log_prob_``), and against the chunking of the
stream (at most ``STEP_BUCKETS[-1]`` updates a chunk)."""

import re

import numpy as np
import pytest
from sklearn.datasets import load_digits

from skbong import BONGClassifier, BONGRegressor
from skbong.core import STEP_BUCKETS


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X[:1200] / 16, y[:1200]


@pytest.mark.parametrize("sigma0", [0.3, "auto"])
def test_history_follows_the_prequential_record_chunk_by_chunk(digits, sigma0):
    X, y = digits
    clf = BONGClassifier(hidden_layer_sizes=(8,), sigma0=sigma0, prequential=True, random_state=0, max_iter=2)
    clf.fit(X, y)
    n_chunks = -(-len(X) // STEP_BUCKETS[-1])
    assert len(clf.history_) == 2 * n_chunks
    assert [h["pass"] for h in clf.history_] == [1] * n_chunks + [2] * n_chunks
    record = -clf.prequential_log_prob_
    for pass_index in (0, 1):
        for chunk, entry in enumerate(clf.history_[pass_index * n_chunks : (pass_index + 1) * n_chunks]):
            done = min((chunk + 1) * STEP_BUCKETS[-1], len(X))
            assert entry["rows"] == pass_index * len(X) + done
            rows = record[pass_index * len(X) : pass_index * len(X) + done]
            np.testing.assert_allclose(entry["log_loss"], rows.mean(), rtol=1e-9)
            assert entry["seconds"] > 0 and entry["rows_per_second"] == pytest.approx(done / entry["seconds"])
    assert clf.history_[-1]["rows"] == clf.t_


def test_regressor_history_is_in_the_units_of_y(digits):
    X, y = digits
    target = 1e4 * (y + X[:, 10])
    reg = BONGRegressor(hidden_layer_sizes=(8,), prequential=True, random_state=0).fit(X, target)
    np.testing.assert_allclose(reg.history_[-1]["log_loss"], -reg.prequential_log_prob_.mean(), rtol=1e-9)


def test_partial_fit_appends_fit_resets_and_a_failed_call_keeps_the_history(digits):
    X, y = digits
    clf = BONGClassifier(hidden_layer_sizes=(8,), random_state=0)
    clf.partial_fit(X[:100], y[:100], classes=np.arange(10))
    clf.partial_fit(X[100:700], y[100:700])
    assert [h["rows"] for h in clf.history_] == [100, 100 + 512, 700]
    assert [h["pass"] for h in clf.history_] == [1, 1, 1]
    before = [dict(h) for h in clf.history_]
    with pytest.raises(ValueError):
        clf.partial_fit(X[:5, :3], y[:5])
    assert clf.history_ == before
    clf.fit(X[:50], y[:50])
    assert [h["rows"] for h in clf.history_] == [50]


def test_verbose_prints_a_line_per_chunk_while_fitting(digits, capsys):
    X, y = digits
    BONGClassifier(hidden_layer_sizes=(8,), random_state=0, verbose=1).fit(X, y)
    lines = capsys.readouterr().out.strip().splitlines()
    pattern = re.compile(
        r"\[BONGClassifier\] pass 1: (\d+)/1200 rows, \d+ rows/s, [\d.]+ s, prequential log-loss [\d.]+"
    )
    done = [int(pattern.fullmatch(line).group(1)) for line in lines]
    assert done == [512, 1024, 1200]
    BONGClassifier(hidden_layer_sizes=(8,), random_state=0).fit(X, y)
    assert capsys.readouterr().out == ""
