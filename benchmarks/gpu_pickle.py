"""A model fitted on one device, loaded and used on another (issue 20: fitted on a GPU,
loaded on a CPU-only machine).

    python gpu_pickle.py save PATH   # fit on JAX's default device, pickle model and outputs
    python gpu_pickle.py load PATH   # load here, predict again, compare

``save`` fits ``BONGClassifier`` (DLR-10, the default MLP) and ``BONGRegressor`` on
digits and pickles each with its ``predict_proba`` / ``predict(return_std=True)`` on 200
rows and the device it ran on. ``load`` unpickles on this machine and predicts the same
rows: a fitted estimator keeps NumPy arrays only, so it loads where no GPU is, and its
predictions must match up to the two devices' float32 round-off.
"""

import pickle
import sys

import jax
import numpy as np
from sklearn.datasets import load_digits

from skbong import BONGClassifier, BONGRegressor


def rows():
    X, y = load_digits(return_X_y=True)
    return X / 16, y


def outputs(classifier, regressor, X):
    mean, std = regressor.predict(X, return_std=True)
    return {"proba": classifier.predict_proba(X), "mean": mean, "std": std}


def main():
    mode, path = sys.argv[1], sys.argv[2]
    X, y = rows()
    device = str(jax.devices()[0].device_kind)
    if mode == "save":
        classifier = BONGClassifier(family="dlr", random_state=0).fit(X[:1500], y[:1500])
        regressor = BONGRegressor(family="dlr", random_state=0).fit(X[:1500], y[:1500].astype(float))
        with open(path, "wb") as file:
            pickle.dump({"device": device, "models": (classifier, regressor),
                         "outputs": outputs(classifier, regressor, X[1500:1700])}, file)
        print(f"fitted on {device}, saved to {path}")
        return
    with open(path, "rb") as file:
        saved = pickle.load(file)
    again = outputs(*saved["models"], X[1500:1700])
    print(f"fitted on {saved['device']}, loaded and predicting on {device}")
    worst = 0.0
    for name, value in again.items():
        gap = float(np.max(np.abs(value - saved["outputs"][name]) / (np.abs(saved["outputs"][name]) + 1e-3)))
        worst = max(worst, gap)
        print(f"{name}: largest relative difference {gap:.2e}")
    assert worst < 1e-3, "predictions moved between devices"
    print("ok")


if __name__ == "__main__":
    main()
