"""
Learning curves against SGDClassifier
=====================================

Stream the digits through :class:`~skbong.BONGClassifier` and through
:class:`~sklearn.linear_model.SGDClassifier` (logistic loss), both with
``partial_fit``, in the same chunks and order, and track held-out accuracy and
log-loss against the number of rows seen.

SGD takes one gradient step per row with a step size it has to be told; the
Bayesian filter (LO-FI by default) preconditions every step with its posterior
covariance and needs no step size, so it learns from far fewer rows. Both run at
their defaults, and SGD also with the step size that tuning on validation rows picks
for it in ``python -m skbong.demo`` (adaptive, ``eta0=0.1``), so that the comparison
does not rest on SGD's default schedule.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import SGDClassifier
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import train_test_split

from skbong import BONGClassifier

X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X / 16, y, train_size=1300, random_state=0, stratify=y)
classes = np.unique(y)
models = {
    "BONGClassifier": BONGClassifier(random_state=0),
    "SGDClassifier": SGDClassifier(loss="log_loss", random_state=0),
    "SGDClassifier, eta0=0.1": SGDClassifier(loss="log_loss", learning_rate="adaptive", eta0=0.1, random_state=0),
}

# %%
# Equal chunks of 50 rows: every BONG ``partial_fit`` reuses one compiled scan.
chunk = 50
seen = np.arange(chunk, len(X_train) + 1, chunk)
curves = {name: {"accuracy": [], "log-loss": []} for name in models}
for stop in seen:
    rows = slice(stop - chunk, stop)
    for name, model in models.items():
        model.partial_fit(X_train[rows], y_train[rows], classes=classes)
        proba = model.predict_proba(X_test)
        curves[name]["accuracy"].append(accuracy_score(y_test, classes[proba.argmax(1)]))
        curves[name]["log-loss"].append(log_loss(y_test, proba, labels=classes))

short = {"BONGClassifier": "BONG", "SGDClassifier": "SGD", "SGDClassifier, eta0=0.1": "SGD 0.1"}
print(f"{'rows':>5s}" + "".join(f" {short[name] + ' ' + m:>13s}" for name in models for m in ("accuracy", "log-loss")))
for i, n in enumerate(seen):
    if n in (50, 100, 200, 500, 1000, 1300):
        print(f"{n:5d}" + "".join(f" {curves[name][m][i]:13.3f}" for name in models for m in ("accuracy", "log-loss")))
assert all(curves["BONGClassifier"]["log-loss"][-1] < curves[name]["log-loss"][-1] for name in models if "SGD" in name)

# %%
fig, axes = plt.subplots(1, 2, figsize=(9, 3.5), layout="constrained")
for ax, metric in zip(axes, ("accuracy", "log-loss")):
    for name in models:
        ax.plot(seen, curves[name][metric], marker=".", label=name)
    ax.set_xlabel("training rows seen")
    ax.set_ylabel(f"test {metric}")
axes[1].set_yscale("log")
axes[0].legend()
fig.suptitle("digits, one pass through partial_fit")
plt.show()
