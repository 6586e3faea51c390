"""Stream scikit-learn's digits through BONGClassifier and SGDClassifier, side by side.

Run with ``python -m skbong.demo``. Both models see the training rows once, in the same
order, through ``partial_fit``; after 100, 500 and all rows the script prints held-out
accuracy and log-loss.
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import SGDClassifier
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import train_test_split

from skbong import BONGClassifier


def main(checkpoints=(100, 500, None), random_state: int = 0) -> list[dict]:
    """Run the comparison and print a table; return its rows.

    Parameters
    ----------
    checkpoints : tuple of int or None
        Numbers of training rows after which to evaluate; None means all of them.
    random_state : int
        Seed of the split and of both models.

    Returns
    -------
    rows : list of dict
    """
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X / 16.0, y, test_size=0.3, random_state=random_state, stratify=y
    )
    classes = np.unique(y)
    models = {
        "BONGClassifier (LO-FI, DLR-10)": BONGClassifier(random_state=random_state),
        "SGDClassifier (log_loss)": SGDClassifier(loss="log_loss", random_state=random_state),
    }
    stops = [len(X_train) if c is None else c for c in checkpoints]
    print(f"digits: {len(X_train)} training rows streamed once, {len(X_test)} held out\n")
    print(f"{'model':32s} {'rows seen':>9s} {'accuracy':>9s} {'log-loss':>9s} {'seconds':>8s}")
    rows = []
    for name, model in models.items():
        seen, elapsed = 0, 0.0
        for stop in stops:
            start = time.perf_counter()
            model.partial_fit(X_train[seen:stop], y_train[seen:stop], classes=classes)
            elapsed += time.perf_counter() - start
            seen = stop
            proba = model.predict_proba(X_test)
            row = {
                "model": name,
                "rows": seen,
                "accuracy": accuracy_score(y_test, classes[proba.argmax(1)]),
                "log_loss": log_loss(y_test, proba, labels=classes),
                "seconds": elapsed,
            }
            rows.append(row)
            print(f"{name:32s} {seen:9d} {row['accuracy']:9.3f} {row['log_loss']:9.3f} {elapsed:8.2f}")
    print("\nBONG seconds include JAX compilation on the first call.")
    return rows


if __name__ == "__main__":
    main()
