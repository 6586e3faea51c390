"""The generalised probit's forms against the exact linearised predictive integral.

``predictive="probit"`` approximates ``E[softmax(z)]`` for linearised logits ``z ~ N(f, V)``,
``V = J Sigma J^T``. Four forms, each against a 20,000-draw Monte-Carlo estimate of the
integral (a probability's standard error at most 0.0035):

* **old**: LO-FI Eq. 64, ``softmax(f_c / sqrt(1 + pi V_cc / 8))``, each logit scaled by its
  own variance, which includes that of a shift common to all logits (softmax ignores it, no
  row informs it, so it keeps the prior's);
* **centred**: the same with the variances of the centred logits, ``diag(C V C)``,
  ``C = I - 11^T / K``;
* **pairwise**: ``p_c ~ 1 / sum_k exp(-(f_c - f_k) / sqrt(1 + pi v_ck / 8))``, ``v_ck`` the
  variance of ``f_c - f_k``, normalised (Lu, Ie and Sha's mean-field form);
* **against the rest** (skbong's since session 72): LO-FI's form with ``v_c`` the variance of
  ``f_c`` minus the mean of the other logits, ``(K / (K - 1))^2 [C V C]_cc``.

The last two are the binary probit of the log-odds with two classes.

Errors are in probability (max and mean over rows and classes); NLPD of the true labels.

    python benchmarks/probit_forms.py
"""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np
from scipy.special import logsumexp, softmax
from sklearn.datasets import load_breast_cancer, load_digits, load_iris
from sklearn.preprocessing import StandardScaler

from _report import markdown_table, write
from skbong import BONGClassifier
from skbong.core._predictive import output_moments

#: Draws of the Monte-Carlo reference, and how many are pushed through softmax at once.
N_REFERENCE, DRAWS_PER_BLOCK = 20_000, 2_000


def forms(f: np.ndarray, cov: np.ndarray) -> dict:
    """The four forms' class probabilities for logits ``N(f, cov)``, ``f`` (B, K)."""
    var = np.diagonal(cov, axis1=1, axis2=2)
    lofi = softmax(f / np.sqrt(1 + np.pi / 8 * var), axis=1)
    centring = np.eye(f.shape[1]) - 1.0 / f.shape[1]
    centred_var = np.diagonal(centring @ cov @ centring, axis1=1, axis2=2)
    centred = softmax(f / np.sqrt(1 + np.pi / 8 * centred_var), axis=1)
    gap = f[:, :, None] - f[:, None, :]
    gap_var = np.maximum(var[:, :, None] + var[:, None, :] - 2 * cov, 0.0)
    pairwise = softmax(-logsumexp(-gap / np.sqrt(1 + np.pi / 8 * gap_var), axis=2), axis=1)
    k = f.shape[1]
    against_rest = softmax(f / np.sqrt(1 + np.pi / 8 * centred_var * (k / (k - 1)) ** 2), axis=1)
    return {"old": lofi, "centred": centred, "pairwise": pairwise, "against the rest": against_rest}


def reference(f: np.ndarray, cov: np.ndarray, seed: int = 0) -> np.ndarray:
    """``E[softmax(z)]``, ``z ~ N(f, cov)``, by ``N_REFERENCE`` draws."""
    eigval, eigvec = np.linalg.eigh(cov)
    root = eigvec * np.sqrt(np.maximum(eigval, 0.0))[:, None, :]
    draws = np.random.default_rng(seed).normal(size=(N_REFERENCE, f.shape[1]))
    total = np.zeros_like(f)
    for start in range(0, N_REFERENCE, DRAWS_PER_BLOCK):
        logits = f[None] + np.einsum("bcd,sd->sbc", root, draws[start : start + DRAWS_PER_BLOCK])
        total += softmax(logits, axis=2).sum(0)
    return total / N_REFERENCE


def row(name: str, clf: BONGClassifier, X: np.ndarray, y: np.ndarray) -> list:
    """The table's row for a fitted classifier scored on ``X, y``."""
    config, belief = clf._prediction_config(), clf._posterior()
    f, cov = output_moments(config.apply_fn, config.family, belief, jnp.asarray(X, belief.mean.dtype))
    f, cov = np.asarray(f, np.float64), np.asarray(cov, np.float64)
    exact = reference(f, cov)
    labels = np.searchsorted(clf.classes_, y)

    def nlpd(proba):
        return -np.log(proba[np.arange(len(y)), labels]).mean()

    cells = [name, len(clf.classes_), f"{nlpd(exact):.3f}"]
    computed = forms(f, cov)
    for proba in computed.values():
        error = np.abs(proba - exact)
        cells += [f"{error.max():.3f}", f"{error.mean():.4f}", f"{nlpd(proba):.3f}"]
    # skbong's own predictive="probit" is the last form (up to its dtype's round-off)
    skbong = clf.set_params(predictive="probit").predict_proba(X)
    cells.append(f"{np.abs(skbong - computed['against the rest']).max():.1e}")
    print(cells, flush=True)
    return cells


def main():
    warnings.simplefilter("ignore")
    rows = []
    X, y = load_digits(return_X_y=True)
    X = X / 16
    for n in (200, 1257):
        clf = BONGClassifier(random_state=0).fit(X[:n], y[:n])
        rows.append(row(f"digits, default MLP, n={n}", clf, X[1257:], y[1257:]))
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    for sigma0 in (1.0, 10.0):
        clf = BONGClassifier(hidden_layer_sizes=(), family="fc", sigma0=sigma0, random_state=0, dtype="float64")
        rows.append(row(f"iris, linear, sigma0={sigma0:g}", clf.fit(X[::3], y[::3]), X, y))
    # (at sigma0 = 10 this MLP's predictions saturate: probabilities of 0 under every form)
    clf = BONGClassifier(hidden_layer_sizes=(16,), sigma0=1.0, random_state=0).fit(X[::3], y[::3])
    rows.append(row("iris, MLP (16), sigma0=1", clf, X, y))
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    clf = BONGClassifier(hidden_layer_sizes=(), family="fc", sigma0=3.0, random_state=0).fit(X[:50], y[:50])
    rows.append(row("breast_cancer, linear, sigma0=3, n=50", clf, X[50:], y[50:]))
    clf = BONGClassifier(random_state=0).fit(X[:200], y[:200])
    rows.append(row("breast_cancer, default MLP, n=200", clf, X[200:], y[200:]))
    forms_run = ("old", "centred", "pairwise", "against the rest")
    header = ["data / model", "classes", "reference NLPD"] + [
        f"{form} {what}" for form in forms_run for what in ("max error", "mean error", "NLPD")
    ] + ["skbong's probit against the last form"]
    about = __doc__.split("\n\n", 1)[1].rsplit("\n\n", 1)[0]
    body = f"Command: `python benchmarks/probit_forms.py`\n\n{about}\n\n{markdown_table(header, rows)}\n"
    print(write("probit_forms", "The generalised probit's forms against the exact linearised integral", body))


if __name__ == "__main__":
    main()
