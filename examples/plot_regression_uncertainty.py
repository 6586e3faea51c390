"""
Predictive uncertainty in 1-D regression
========================================

Fit :class:`~skbong.BONGRegressor` to noisy samples of ``sin(x)`` that leave a
gap around ``x = 0``, and draw the predictive mean with a band of two
predictive standard deviations from ``predict(X, return_std=True)``.

The standard deviation is ``sqrt(diag(J Sigma J^T) + R)``: the posterior
covariance ``Sigma`` of the weights pushed through the network linearised at
the posterior mean (Jacobian ``J``), plus the observation noise ``R``. Near the
data the weight uncertainty is small and the standard deviation is about
``sqrt(R)``; in the gap nothing constrains the function and the band widens.
It is the band of a linearised Gaussian approximation after one pass: it
widens where data are missing, but it does not guarantee that the truth lies
inside it (with ``sin(2x)`` the network's guess in the gap strays beyond it),
and beyond the data, where the ``tanh`` units saturate, it grows only slowly.

``obs_noise`` is set to the true noise variance here (``0.1**2``; by default
the regressor fits it to the one-step-ahead errors) and ``sigma0``, the
prior scale of the weights, to 0.5: the band in the gap is then 3.3-4.5 times
its width near the data (``random_state`` 0 to 2). At the defaults it is only
1.2-1.3 times: the prior scale is 0.3, and the fitted noise scale (0.29-0.52
on these data) multiplies the prior covariance as well as the noise. ``tanh`` suits a 1-D input: the network
starts with zero biases, so all ReLU kinks would sit at ``x = 0``.
"""

import matplotlib.pyplot as plt
import numpy as np

from skbong import BONGRegressor

rng = np.random.default_rng(0)
x = rng.uniform(-3, 3, size=600)
x = x[np.abs(x) > 1][:, None]  # no training inputs in (-1, 1)
y = np.sin(x[:, 0]) + 0.1 * rng.normal(size=len(x))

reg = BONGRegressor(activation="tanh", obs_noise=0.1**2, sigma0=0.5, random_state=0).fit(x, y)

grid = np.linspace(-4, 4, 401)[:, None]
mean, std = reg.predict(grid, return_std=True)

# %%
regions = {"data (1 < |x| < 3)": (np.abs(grid[:, 0]) > 1) & (np.abs(grid[:, 0]) < 3),
           "gap (|x| < 0.5)": np.abs(grid[:, 0]) < 0.5,
           "beyond (|x| > 3.5)": np.abs(grid[:, 0]) > 3.5}
print(f"{len(x)} training points, R^2 on them {reg.score(x, y):.3f}")
for name, where in regions.items():
    print(f"mean predictive std, {name:20s}: {std[where].mean():.3f}")
assert std[regions["gap (|x| < 0.5)"]].mean() > 2 * std[regions["data (1 < |x| < 3)"]].mean()

# %%
fig, ax = plt.subplots(figsize=(7, 3.5), layout="constrained")
ax.plot(x[:, 0], y, ".", ms=3, color="0.5", label="training data")
ax.plot(grid[:, 0], np.sin(grid[:, 0]), "k--", lw=1, label="sin(x)")
ax.plot(grid[:, 0], mean, color="C0", label="predictive mean")
ax.fill_between(grid[:, 0], mean - 2 * std, mean + 2 * std, color="C0", alpha=0.25, label="mean +- 2 std")
ax.set_xlabel("x")
ax.set_ylabel("y")
ax.set_ylim(-2, 2)
ax.legend(loc="lower left", fontsize="small")
plt.show()
