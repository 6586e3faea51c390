"""Metrics of predictive distributions: NLPD and calibration, and an NLPD scorer.

``neg_nlpd_scorer`` plugs into ``GridSearchCV(scoring=...)`` and ``cross_val_score``;
it uses the estimator's predictive distribution (``predict_log_proba`` for a classifier,
``predict(X, return_std=True)`` for a regressor), and takes ``sample_weight`` routed to it
under scikit-learn's metadata routing (``neg_nlpd_scorer.set_score_request(sample_weight=True)``).
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
from scipy.stats import norm
from sklearn.base import is_classifier
from sklearn.utils import check_consistent_length, column_or_1d
from sklearn.utils.metadata_routing import UNCHANGED, MetadataRequest

__all__ = [
    "categorical_nlpd",
    "gaussian_nlpd",
    "expected_calibration_error",
    "interval_calibration_error",
    "neg_nlpd_scorer",
]


def categorical_nlpd(y_true, log_proba, classes, sample_weight=None) -> float:
    """Mean negative log predictive density ``-(1/N) sum_n log p(y_n | x_n)`` of labels.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, 1)
    log_proba : array-like of shape (n_samples, n_classes)
        Predictive log-probabilities, columns in the order of ``classes``.
    classes : array-like of shape (n_classes,)
        Sorted labels.
    sample_weight : array-like of shape (n_samples,), default=None
        Row weights: the mean is ``sum_n w_n (-log p_n) / sum_n w_n``.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        For labels not in ``classes``, or shapes that do not match.
    """
    classes = np.asarray(classes)
    y_true, log_proba = _labels_and_columns(y_true, log_proba, classes.shape[0], "log_proba")
    index = np.searchsorted(classes, y_true)
    if np.any(index >= classes.shape[0]) or np.any(classes[np.minimum(index, classes.shape[0] - 1)] != y_true):
        raise ValueError("y_true contains labels that are not in classes.")
    return _weighted_mean(-log_proba[np.arange(y_true.shape[0]), index], sample_weight)


def gaussian_nlpd(y_true, y_mean, y_std, sample_weight=None) -> float:
    """Mean negative log density of ``y_true`` under independent ``N(y_mean, y_std^2)``,
    summed over outputs.

    Parameters
    ----------
    y_true, y_mean, y_std : array-like of shape (n_samples,) or (n_samples, n_outputs)
        One shape for the three (one output may come as ``(n_samples,)`` or
        ``(n_samples, 1)``).
    sample_weight : array-like of shape (n_samples,), default=None
        Row weights, as in :func:`categorical_nlpd`.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        For shapes that do not match, or a ``y_std`` not positive and finite.
    """
    y_true, y_mean, y_std = _regression_arrays(y_true, y_mean, y_std)
    log_density = norm.logpdf(y_true, loc=y_mean, scale=y_std)
    return _weighted_mean(-log_density.sum(axis=1), sample_weight)


def expected_calibration_error(y_true, y_proba, classes=None, n_bins: int = 15) -> float:
    """Top-label expected calibration error (Guo et al., 2017).

    The rows are binned by their highest predicted probability into ``n_bins`` equal
    widths of ``[0, 1]``; the error is ``sum_b (n_b / N) |accuracy_b - confidence_b|``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, 1)
    y_proba : array-like of shape (n_samples, n_classes)
    classes : array-like of shape (n_classes,), default=None
        Labels of the columns of ``y_proba``; ``0..n_classes-1`` when None.
    n_bins : int, default=15

    Returns
    -------
    float
    """
    if isinstance(n_bins, bool) or not isinstance(n_bins, Integral) or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}.")
    given = classes is not None
    y_true, y_proba = _labels_and_columns(y_true, y_proba, len(classes) if given else None, "y_proba")
    classes = np.asarray(classes) if given else np.arange(y_proba.shape[1])
    # Labels outside the columns' classes (e.g. 1 and 2 scored against the default 0, 1) were
    # all counted as misses: an error of 0.767 for one of 0.233.
    unknown = np.setdiff1d(y_true, classes)
    if unknown.size:
        raise ValueError(
            f"y_true contains labels {unknown[:10].tolist()} that are not among the classes of y_proba's columns "
            f"({classes[:10].tolist()}{'' if given else ': 0..n_classes-1, as classes=None gives'}); pass "
            "classes=estimator.classes_."
        )
    confidence = y_proba.max(axis=1)
    correct = classes[np.argmax(y_proba, axis=1)] == y_true
    bins = np.minimum((confidence * n_bins).astype(int), n_bins - 1)
    error = 0.0
    for b in np.unique(bins):
        rows = bins == b
        error += rows.mean() * abs(correct[rows].mean() - confidence[rows].mean())
    return float(error)


def interval_calibration_error(y_true, y_mean, y_std, levels=np.linspace(0.1, 0.9, 9)) -> float:
    """Regression analogue of the ECE: mean over ``levels`` of ``|coverage - level|``,
    where coverage is the fraction of targets inside the central Gaussian interval of
    that probability.

    Parameters
    ----------
    y_true, y_mean, y_std : array-like of shape (n_samples,) or (n_samples, n_outputs)
        One shape for the three, as in :func:`gaussian_nlpd`.
    levels : array-like of floats in (0, 1)

    Returns
    -------
    float
    """
    levels = np.asarray(levels, dtype=np.float64)
    if not np.all((levels > 0) & (levels < 1)):
        raise ValueError(f"levels must lie in (0, 1) (probabilities of central intervals), got {levels.tolist()}.")
    y_true, y_mean, y_std = _regression_arrays(y_true, y_mean, y_std)
    z = np.abs((y_true - y_mean) / y_std)
    return float(np.mean([abs(np.mean(z <= norm.ppf(0.5 + level / 2)) - level) for level in levels]))


def _labels_and_columns(y_true, proba, n_classes: int | None, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``y_true`` as 1-D labels (a column vector flattened, as the estimators take it) and
    ``proba`` as a float ``(n_samples, n_classes)`` array (any number of columns for
    ``n_classes`` None); shapes that do not match are refused. An ``(n, 1)`` ``y_true`` was
    broadcast against the rows: every label scored against every row, an NLPD of 2.04 for
    one of 0.37, without a word."""
    y_true = column_or_1d(y_true)
    proba = np.asarray(proba, dtype=np.float64)
    if proba.ndim != 2 or n_classes not in (None, proba.shape[1]):
        shape = "(n_samples, n_classes)" if n_classes is None else f"(n_samples, {n_classes}) for {n_classes} classes"
        raise ValueError(f"{name} must have shape {shape}, got {proba.shape}.")
    check_consistent_length(y_true, proba)
    return y_true, proba


def _regression_arrays(y_true, y_mean, y_std) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The three as float ``(n_samples, n_outputs)`` arrays of one shape, one output given
    as ``(n,)`` or ``(n, 1)``; other shapes are refused (an ``(n, 1)`` mean against an
    ``(n,)`` target broadcast to ``(n, n)``: an NLPD of -2719 for one of -5.4), and so is a
    ``y_std`` that is not positive and finite (a density of NaN)."""
    arrays = [np.asarray(a, dtype=np.float64) for a in (y_true, y_mean, y_std)]
    columns = [a[:, None] if a.ndim == 1 else a for a in arrays]
    if any(a.ndim not in (1, 2) for a in arrays) or len({a.shape for a in columns}) > 1:
        shapes = ", ".join(f"{name} {a.shape}" for name, a in zip(("y_true", "y_mean", "y_std"), arrays))
        raise ValueError(
            f"y_true, y_mean and y_std must have one shape, (n_samples,) or (n_samples, n_outputs); got {shapes}."
        )
    if not np.all(np.isfinite(columns[2]) & (columns[2] > 0)):
        raise ValueError("y_std must be positive and finite (predictive standard deviations).")
    return tuple(columns)


def _weighted_mean(losses: np.ndarray, sample_weight) -> float:
    """The mean of per-row ``losses``, weighted by ``sample_weight`` (None: equal weights);
    weights that are not one finite, non-negative value per row with a positive sum are
    refused."""
    if sample_weight is None:
        return float(np.mean(losses))
    weights = np.asarray(sample_weight, dtype=np.float64)
    if weights.shape != losses.shape:
        raise ValueError(
            f"sample_weight must have shape ({losses.shape[0]},), one weight per row, got {weights.shape}."
        )
    if not (np.all(np.isfinite(weights)) and np.all(weights >= 0) and weights.sum() > 0):
        raise ValueError("sample_weight must be finite and non-negative, with a positive sum.")
    return float(np.average(losses, weights=weights))


class _NegNLPDScorer:
    """Scorer ``-NLPD`` (greater is better) of a fitted BONG estimator on ``(X, y)``.

    Classifiers are scored with ``predict_log_proba`` (their ``predictive``), or the log of
    ``predict_proba`` where a meta-estimator has only that (``CalibratedClassifierCV``,
    ``VotingClassifier``; a probability of 0 for the true class scores ``-inf``, where
    scikit-learn's ``neg_log_loss`` clips), regressors with the linearised Gaussian
    predictive of ``predict(X, return_std=True)``.

    Called as ``neg_nlpd_scorer(estimator, X, y, sample_weight=None)``. Under scikit-learn's
    metadata routing (``sklearn.set_config(enable_metadata_routing=True)``) a search or
    ``cross_validate`` passes it the rows' ``sample_weight`` once requested, as for
    scikit-learn's own scorers: ``scoring=neg_nlpd_scorer.set_score_request(sample_weight=True)``.
    Unrequested, weights passed to the search raise scikit-learn's ``UnsetMetadataPassedError``
    rather than being left out of the score without a word.

    Parameters
    ----------
    estimator : fitted classifier with ``predict_proba``, or regressor whose ``predict`` takes ``return_std``
        A BONGClassifier, BONGRegressor, a pipeline ending in one, or a meta-estimator over one.
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,) or (n_samples, n_outputs)
    sample_weight : array-like of shape (n_samples,), default=None
        Row weights of the mean NLPD.

    Returns
    -------
    float
    """

    def __init__(self, sample_weight_request=None):
        self._sample_weight_request = sample_weight_request

    def __call__(self, estimator, X, y, sample_weight=None) -> float:
        if is_classifier(estimator):
            if hasattr(estimator, "predict_log_proba"):
                log_proba = estimator.predict_log_proba(X)
            else:  # meta-estimators with predict_proba only (CalibratedClassifierCV, VotingClassifier)
                with np.errstate(divide="ignore"):
                    log_proba = np.log(estimator.predict_proba(X))
            return -categorical_nlpd(y, log_proba, estimator.classes_, sample_weight)
        try:
            predicted = estimator.predict(X, return_std=True)
        except (TypeError, AttributeError) as error:  # TransformedTargetRegressor: 'tuple' ... no 'ndim'
            raise TypeError(
                f"neg_nlpd_scorer scores a regressor by its predictive distribution, predict(X, return_std=True), "
                f"which {type(estimator).__name__} does not support ({type(error).__name__}: {error})."
            ) from error
        if not (isinstance(predicted, tuple) and len(predicted) == 2):
            raise TypeError(
                f"neg_nlpd_scorer scores a regressor by predict(X, return_std=True), which should return (mean, std); "
                f"{type(estimator).__name__} returned {type(predicted).__name__}."
            )
        mean, std = predicted
        return -gaussian_nlpd(y, mean, std, sample_weight)

    def set_score_request(self, *, sample_weight=UNCHANGED) -> "_NegNLPDScorer":
        """A copy of this scorer that requests ``sample_weight`` as given (``True``,
        ``False``, ``None`` or an alias), for metadata routing; this one is unchanged, so
        that a request made in one search does not follow the module's scorer elsewhere.

        Returns
        -------
        scorer : a new scorer
        """
        return _NegNLPDScorer(self._sample_weight_request if sample_weight is UNCHANGED else sample_weight)

    def get_metadata_routing(self) -> MetadataRequest:
        """The metadata this scorer requests: ``sample_weight`` for ``score``, as set by
        :meth:`set_score_request`.

        Returns
        -------
        MetadataRequest
        """
        request = MetadataRequest(owner="neg_nlpd_scorer")
        request.score.add_request(param="sample_weight", alias=self._sample_weight_request)
        return request

    def __repr__(self) -> str:
        request = self._sample_weight_request
        return "neg_nlpd_scorer" + ("" if request is None else f".set_score_request(sample_weight={request!r})")


neg_nlpd_scorer = _NegNLPDScorer()
