"""
Quickstart
==========

Fit :class:`~skbong.BONGClassifier` on scikit-learn's digits and
:class:`~skbong.BONGRegressor` on a noisy 1-D function, then read off a score,
class probabilities and a predictive standard deviation.

Both estimators see each training row once (``max_iter=1``): ``fit`` runs the
online Bayesian filter over the rows from the prior. Inputs are scaled, as for
any neural network.
"""

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from skbong import BONGClassifier, BONGRegressor

# %%
# Classification: digits, pixel values scaled to [0, 1].
X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X / 16, y, random_state=0)
clf = BONGClassifier(random_state=0).fit(X_train, y_train)
print(f"digits test accuracy: {clf.score(X_test, y_test):.3f}")
print("class probabilities of the first test image:", clf.predict_proba(X_test[:1]).round(2))

# %%
# Regression: ``y = sin(3x) + noise``. ``predict(X, return_std=True)`` adds the
# predictive standard deviation (weight uncertainty plus observation noise).
# ``obs_noise`` is the noise variance when it is known (by default it starts at
# ``0.1 * Var(y)`` and its scale is fitted to the one-step-ahead errors); ``tanh``
# suits a smooth 1-D target (the network starts with zero biases, so every ReLU kink
# would start at ``x = 0``).
rng = np.random.default_rng(0)
x = rng.uniform(-2, 2, size=(500, 1))
t = np.sin(3 * x[:, 0]) + 0.1 * rng.normal(size=500)
reg = BONGRegressor(obs_noise=0.1**2, activation="tanh", random_state=0).fit(x[:400], t[:400])
print(f"sin(3x) test R^2: {reg.score(x[400:], t[400:]):.3f}")
mean, std = reg.predict(np.array([[0.0], [1.0]]), return_std=True)
for x0, m, s in zip((0.0, 1.0), mean, std):
    print(f"x = {x0:.1f}: prediction {m:+.3f} +- {s:.3f} (truth {np.sin(3 * x0):+.3f})")
