"""skbong on river's streams through ``river.compat.convert_sklearn_to_river``.

river feeds a classifier one row at a time: ``learn_one(x, y)`` becomes
``partial_fit([[x values in the first row's key order]], [y], classes=classes)`` and
``predict_proba_one(x)`` becomes ``predict_proba`` of that one row, mapped to
``{classes[i]: p_i}``. These tests check that the path works end to end (``learn_one``,
``predict_proba_one``, ``evaluate.progressive_val_score``), that it learns, and that it
changes nothing: river's predictions are those of skbong's own ``partial_fit`` row by
row, and of one compiled pass with ``prequential=True``.
"""

import random
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from skbong import BONGClassifier

river = pytest.importorskip("river")
from river import compat, datasets, dummy, evaluate, metrics, preprocessing  # noqa: E402
from river.datasets import synth  # noqa: E402


def _river_classifier(classes, **params):
    """A small BONGClassifier wrapped for river (the network stays small: fast to compile)."""
    return compat.convert_sklearn_to_river(BONGClassifier(hidden_layer_sizes=(8,), random_state=0, **params), classes)


def test_predict_proba_one_before_any_learning_is_uniform():
    # Progressive validation predicts before it learns: the first prediction meets an
    # unfitted estimator. compat answers the uniform distribution when the estimator
    # raises NotFittedError, which skbong does.
    with pytest.raises(NotFittedError):
        BONGClassifier().predict_proba([[0.0, 1.0]])
    model = _river_classifier(classes=["a", "b", "c"])
    assert model.predict_proba_one({"u": 0.0, "v": 1.0}) == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})


def test_learn_one_and_predict_proba_one_learn_the_sea_concept():
    rows = list(synth.SEA(variant=0, seed=0).take(300))
    model = preprocessing.StandardScaler() | _river_classifier(classes=[False, True])
    hits = []
    for x, y in rows:
        proba = model.predict_proba_one(x)
        assert set(proba) == {False, True}
        assert all(0.0 <= p <= 1.0 for p in proba.values())
        assert sum(proba.values()) == pytest.approx(1.0, abs=1e-6)
        hits.append(max(proba, key=proba.get) == y)
        model.learn_one(x, y)
    # SEA's concept (x0 + x1 <= 8, no label noise) is nearly linear; chance is ~0.6.
    assert np.mean(hits[150:]) > 0.9


def test_progressive_val_score_beats_the_class_prior_on_image_segments():
    rows = list(datasets.ImageSegments().take(300))
    classes = sorted({y for _, y in rows})
    assert len(classes) == 7
    scores = {}
    for name, model in {
        "skbong": preprocessing.StandardScaler() | _river_classifier(classes=classes),
        "prior": dummy.PriorClassifier(),
    }.items():
        metric = metrics.Accuracy() + metrics.CrossEntropy()
        evaluate.progressive_val_score(rows, model, metric)
        scores[name] = [m.get() for m in metric]
    (accuracy, log_loss), (prior_accuracy, prior_log_loss) = scores["skbong"], scores["prior"]
    assert accuracy > prior_accuracy + 0.4  # the prior: about 0.15 on seven balanced classes
    assert log_loss < prior_log_loss - 0.5


def test_string_labels_map_to_the_estimators_columns():
    # compat names the i-th probability classes[i]; skbong orders its columns as
    # np.unique(classes). With the classes sorted, the two agree.
    rows = list(datasets.ImageSegments().take(120))
    scale = {k: max(abs(x[k]) for x, _ in rows) or 1.0 for k in rows[0][0]}
    rows = [({k: v / scale[k] for k, v in x.items()}, y) for x, y in rows]
    classes = sorted({y for _, y in rows})
    model = _river_classifier(classes=classes)
    for x, y in rows:
        model.learn_one(x, y)
    x = rows[-1][0]
    proba = model.predict_proba_one(x)
    estimator = model.estimator
    expected = estimator.predict_proba([list(x.values())])[0]
    assert list(estimator.classes_) == classes
    np.testing.assert_allclose([proba[c] for c in classes], expected, rtol=1e-12)


def test_river_predictions_equal_partial_fit_row_by_row_and_one_compiled_pass():
    params = dict(process_noise=1e-4, sigma0=0.5)
    rows = [({k: v / 10 for k, v in x.items()}, y) for x, y in synth.SEA(variant=1, noise=0.1, seed=3).take(150)]
    classes = [False, True]
    shuffle = random.Random(0)

    model = _river_classifier(classes, **params)
    via_river = []
    for i, (x, y) in enumerate(rows):
        if i:  # river aligns later rows on the first row's key order
            keys = list(x)
            shuffle.shuffle(keys)
            x = {k: x[k] for k in keys}
        proba = model.predict_proba_one(x)
        via_river.append([proba[c] for c in classes])
        model.learn_one(x, y)

    X = np.array([list(x.values()) for x, _ in rows])
    y = np.array([y for _, y in rows])
    row_by_row = BONGClassifier(hidden_layer_sizes=(8,), random_state=0, **params)
    by_rows = [[0.5, 0.5]]
    row_by_row.partial_fit(X[:1], y[:1], classes=classes)
    for i in range(1, len(rows)):
        by_rows.append(row_by_row.predict_proba(X[i : i + 1])[0])
        row_by_row.partial_fit(X[i : i + 1], y[i : i + 1])
    np.testing.assert_allclose(via_river, by_rows, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(model.estimator.posterior_[0], row_by_row.posterior_[0])

    # An independent path: one partial_fit call scans all rows inside one compiled loop
    # and records each row's plug-in prediction before absorbing it.
    one_pass = BONGClassifier(hidden_layer_sizes=(8,), random_state=0, prequential=True, **params)
    one_pass.partial_fit(X, y, classes=classes)
    np.testing.assert_allclose(via_river[1:], one_pass.prequential_prediction_[1:], atol=2e-5)
    np.testing.assert_allclose(model.estimator.posterior_[0], one_pass.posterior_[0], atol=2e-5)


def test_a_diverging_update_raises_out_of_learn_one_and_keeps_the_state():
    # skbong refuses an update after which the posterior predicts garbage
    # (FloatingPointError, state unchanged); through river the error reaches the caller
    # of learn_one. ImageSegments' unscaled features (up to ~250) make the plain step diverge
    # (the default line search keeps this stream finite).
    rows = list(datasets.ImageSegments().take(120))
    model = _river_classifier(classes=sorted({y for _, y in rows}), backtrack=False)
    learned = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with pytest.raises(FloatingPointError, match="diverged"):
            for x, y in rows:
                model.learn_one(x, y)
                learned += 1
    assert 0 < learned < len(rows)
    assert model.estimator.t_ == learned
    proba = model.predict_proba_one(rows[learned][0])
    assert sum(proba.values()) == pytest.approx(1.0, abs=1e-6)
