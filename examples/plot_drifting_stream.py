"""
Tracking a drifting stream
==========================

With the defaults ``dynamics_decay=1`` and ``process_noise=0`` the weights are
assumed fixed, so the posterior only ever sharpens: the longer the stream, the
less a new observation moves it. When the data-generating process changes,
such a model adapts ever more slowly. ``process_noise=q`` adds ``q I`` to the
covariance before every observation (``dynamics_decay`` additionally shrinks
the mean), a random-walk model of the weights that keeps the filter able to
move.

The stream is a piecewise-stationary 1-D regression in the spirit of the LO-FI
paper's concept-drift experiment (Chang et al., 2023, App. D.2): inputs are
uniform on ``[-2, 2]`` and every 1000 steps, unannounced, the target switches to
``x + sin(w_k x + phi_k)`` with a new random frequency and phase. With
``prequential=True`` the estimator records, inside the compiled filter, the
one-step-ahead prediction of each target before learning from it, which is the
natural error measure for a stream.
"""

import matplotlib.pyplot as plt
import numpy as np

from skbong import BONGRegressor

rng = np.random.default_rng(0)
n_tasks, task_length = 10, 1000
w, phi = rng.uniform(1, 3, size=n_tasks), rng.uniform(0, 2 * np.pi, size=n_tasks)
task = np.repeat(np.arange(n_tasks), task_length)
X = rng.uniform(-2, 2, size=(n_tasks * task_length, 1))
y = X[:, 0] + np.sin(w[task] * X[:, 0] + phi[task]) + 0.1 * rng.normal(size=len(X))

models = {
    "static (process_noise=0)": BONGRegressor(activation="tanh", obs_noise=0.1**2, prequential=True, random_state=0),
    "drifting (process_noise=1e-4)": BONGRegressor(
        activation="tanh", obs_noise=0.1**2, process_noise=1e-4, prequential=True, random_state=0
    ),
}

# %%
# ``partial_fit`` absorbs the rows in order (``fit`` would shuffle them).
errors = {}
for name, model in models.items():
    model.partial_fit(X, y)
    errors[name] = (model.prequential_prediction_ - y) ** 2
    after_change = errors[name].reshape(n_tasks, task_length)[1:, :100].mean()
    print(f"{name:30s} one-step MSE {errors[name].mean():.3f}, in the 100 steps after a change "
          f"{after_change:.3f}, mean log-likelihood {model.prequential_log_prob_.mean():+.2f}")
static, drifting = errors.values()
assert static.mean() > 2 * drifting.mean()

# %%
window = 100
steps = np.arange(window, len(y) + 1)
fig, ax = plt.subplots(figsize=(9, 3.5), layout="constrained")
for name, error in errors.items():
    ax.plot(steps, np.convolve(error, np.ones(window) / window, mode="valid"), label=name)
for change in range(task_length, len(y), task_length):
    ax.axvline(change, color="0.7", ls="--", lw=0.8)
ax.set_yscale("log")
ax.set_xlabel("step t")
ax.set_ylabel(f"one-step-ahead squared error\n(mean of the last {window})")
ax.legend()
plt.show()
