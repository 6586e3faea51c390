"""Metrics of predictive distributions: NLPD and calibration, and an NLPD scorer.

``neg_nlpd_scorer`` plugs into ``GridSearchCV(scoring=...)`` and ``cross_val_score``;
it uses the estimator's predictive distribution (``predict_log_proba`` for a classifier,
``predict(X, return_std=True)`` for a regressor).
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
from scipy.stats import norm
from sklearn.base import is_classifier

__all__ = [
    "categorical_nlpd",
    "gaussian_nlpd",
    "expected_calibration_error",
    "interval_calibration_error",
    "neg_nlpd_scorer",
]


def categorical_nlpd(y_true, log_proba, classes) -> float:
    """Mean negative log predictive density ``-(1/N) sum_n log p(y_n | x_n)`` of labels.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
    log_proba : array-like of shape (n_samples, n_classes)
        Predictive log-probabilities, columns in the order of ``classes``.
    classes : array-like of shape (n_classes,)
        Sorted labels.

    Returns
    -------
    float
    """
    y_true = np.asarray(y_true)
    classes = np.asarray(classes)
    index = np.searchsorted(classes, y_true)
    if np.any(index >= classes.shape[0]) or np.any(classes[np.minimum(index, classes.shape[0] - 1)] != y_true):
        raise ValueError("y_true contains labels that are not in classes.")
    return float(-np.mean(np.asarray(log_proba)[np.arange(y_true.shape[0]), index]))


def gaussian_nlpd(y_true, y_mean, y_std) -> float:
    """Mean negative log density of ``y_true`` under independent ``N(y_mean, y_std^2)``,
    summed over outputs.

    Parameters
    ----------
    y_true, y_mean, y_std : array-like of shape (n_samples,) or (n_samples, n_outputs)

    Returns
    -------
    float
    """
    y_true, y_mean, y_std = (np.asarray(a, dtype=np.float64) for a in (y_true, y_mean, y_std))
    _check_std(y_std)
    log_density = norm.logpdf(y_true, loc=y_mean, scale=y_std)
    return float(-np.mean(log_density.reshape(y_true.shape[0], -1).sum(axis=1)))


def expected_calibration_error(y_true, y_proba, classes=None, n_bins: int = 15) -> float:
    """Top-label expected calibration error (Guo et al., 2017).

    The rows are binned by their highest predicted probability into ``n_bins`` equal
    widths of ``[0, 1]``; the error is ``sum_b (n_b / N) |accuracy_b - confidence_b|``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
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
    y_proba = np.asarray(y_proba, dtype=np.float64)
    given = classes is not None
    classes = np.asarray(classes) if given else np.arange(y_proba.shape[1])
    # Labels outside the columns' classes (e.g. 1 and 2 scored against the default 0, 1) were
    # all counted as misses: an error of 0.767 for one of 0.233.
    unknown = np.setdiff1d(np.asarray(y_true), classes)
    if unknown.size:
        raise ValueError(
            f"y_true contains labels {unknown[:10].tolist()} that are not among the classes of y_proba's columns "
            f"({classes[:10].tolist()}{'' if given else ': 0..n_classes-1, as classes=None gives'}); pass "
            "classes=estimator.classes_."
        )
    confidence = y_proba.max(axis=1)
    correct = classes[np.argmax(y_proba, axis=1)] == np.asarray(y_true)
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
    levels : array-like of floats in (0, 1)

    Returns
    -------
    float
    """
    levels = np.asarray(levels, dtype=np.float64)
    if not np.all((levels > 0) & (levels < 1)):
        raise ValueError(f"levels must lie in (0, 1) (probabilities of central intervals), got {levels.tolist()}.")
    y_std = np.asarray(y_std, dtype=np.float64)
    _check_std(y_std)
    z = np.abs((np.asarray(y_true, dtype=np.float64) - y_mean) / y_std)
    return float(np.mean([abs(np.mean(z <= norm.ppf(0.5 + level / 2)) - level) for level in levels]))


def _check_std(y_std: np.ndarray) -> None:
    """Refuse standard deviations that are not positive and finite (a density of NaN)."""
    if not np.all(np.isfinite(y_std) & (y_std > 0)):
        raise ValueError("y_std must be positive and finite (predictive standard deviations).")


def neg_nlpd_scorer(estimator, X, y) -> float:
    """Scorer ``-NLPD`` (greater is better) of a fitted BONG estimator on ``(X, y)``.

    Classifiers are scored with ``predict_log_proba`` (their ``predictive``), regressors
    with the linearised Gaussian predictive of ``predict(X, return_std=True)``.

    Parameters
    ----------
    estimator : fitted BONGClassifier, BONGRegressor, or a pipeline ending in one
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,) or (n_samples, n_outputs)

    Returns
    -------
    float
    """
    if is_classifier(estimator):
        return -categorical_nlpd(y, estimator.predict_log_proba(X), estimator.classes_)
    mean, std = estimator.predict(X, return_std=True)
    return -gaussian_nlpd(y, mean, std)
