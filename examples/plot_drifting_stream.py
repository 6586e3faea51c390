"""
Tracking a drifting stream
==========================

With the defaults ``dynamics_decay=1`` and ``process_noise=0`` the weights are
assumed fixed, so the posterior only ever sharpens: the longer the stream, the
less a new observation moves it. When the data-generating process changes,
such a model adapts ever more slowly, and it keeps claiming the confidence it
had before the change.

The stream is a piecewise-stationary 1-D regression in the spirit of the LO-FI
paper's concept-drift experiment (Chang et al., 2023, App. D.2): inputs are
uniform on ``[-2, 2]`` and every 1000 steps, unannounced, the target switches to
``x + sin(w_k x + phi_k)`` with a new random frequency and phase. The noise
level changes too: its standard deviation alternates between 0.05 and 0.4.
With ``prequential=True`` the estimator records, inside the compiled filter,
the one-step-ahead prediction of each target before learning from it, the
natural error measure for a stream.

Four options keep the filter able to follow (see the user guide, "Streams that
change"):

* ``process_noise=q`` adds ``q I`` to the covariance before every observation,
  a random-walk model of the weights;
* ``obs_noise="adaptive"`` estimates the noise level from the recent residuals
  instead of fixing it once, so the predictive spread follows it;
* ``inflation`` discounts old observations by ``1 / (1 + inflation_alpha)`` per
  step, an exponential forgetting;
* where you know when the stream changes, ``process_noise`` as a function of
  the step ``t`` injects noise there only.
"""

import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from skbong import BONGRegressor

rng = np.random.default_rng(0)
n_tasks, task_length = 10, 1000
w, phi = rng.uniform(1, 3, size=n_tasks), rng.uniform(0, 2 * np.pi, size=n_tasks)
noise_std = np.where(np.arange(n_tasks) % 2 == 0, 0.05, 0.4)
task = np.repeat(np.arange(n_tasks), task_length)
X = rng.uniform(-2, 2, size=(n_tasks * task_length, 1))
y = X[:, 0] + np.sin(w[task] * X[:, 0] + phi[task]) + noise_std[task] * rng.normal(size=len(X))


def noise_at_task_changes(t):
    """Process noise q_t: a burst where a new task starts, a trickle elsewhere."""
    return jnp.where((t > 0) & (t % task_length == 0), 0.05, 1e-5)


shared = dict(activation="tanh", prequential=True, random_state=0)
models = {
    "static": BONGRegressor(obs_noise=0.1**2, **shared),
    "process_noise=1e-4": BONGRegressor(obs_noise=0.1**2, process_noise=1e-4, **shared),
    "+ adaptive noise": BONGRegressor(obs_noise="adaptive", process_noise=1e-4, **shared),
    "hybrid inflation + adaptive noise": BONGRegressor(
        obs_noise="adaptive", inflation="hybrid", inflation_alpha=3e-3, **shared
    ),
    "known change points + adaptive noise": BONGRegressor(
        obs_noise="adaptive", process_noise=noise_at_task_changes, **shared
    ),
}

# %%
# ``partial_fit`` absorbs the rows in order (``fit`` would shuffle them).
errors, log_liks = {}, {}
for name, model in models.items():
    model.partial_fit(X, y)
    errors[name] = (model.prequential_prediction_ - y) ** 2
    log_liks[name] = model.prequential_log_prob_
    after_change = errors[name].reshape(n_tasks, task_length)[1:, :100].mean()
    print(f"{name:38s} one-step MSE {errors[name].mean():.3f}, in the 100 steps after a change "
          f"{after_change:.3f}, mean log-likelihood {log_liks[name].mean():+.2f}")

# The static filter falls behind; process noise lets it follow; estimating the noise level
# makes its predictive distribution honest about the noise (log-likelihood); knowing where
# the stream changes is worth most.
assert errors["static"].mean() > errors["process_noise=1e-4"].mean()
assert log_liks["+ adaptive noise"].mean() > log_liks["process_noise=1e-4"].mean() + 0.5
assert log_liks["known change points + adaptive noise"].mean() > log_liks["+ adaptive noise"].mean()

# %%
window = 200
steps = np.arange(window, len(y) + 1)
fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True, layout="constrained")
for name in models:
    top.plot(steps, np.convolve(errors[name], np.ones(window) / window, mode="valid"), label=name, lw=1)
    bottom.plot(steps, np.convolve(log_liks[name], np.ones(window) / window, mode="valid"), lw=1)
for ax in (top, bottom):
    for change in range(task_length, len(y), task_length):
        ax.axvline(change, color="0.7", ls="--", lw=0.8)
top.set_yscale("log")
top.set_ylabel(f"squared error\n(mean of the last {window})")
bottom.set_ylabel(f"log-likelihood\n(mean of the last {window})")
bottom.set_ylim(-3, 2)
bottom.set_xlabel("step t (noise std alternates 0.05 / 0.4 between tasks)")
top.legend(fontsize=8)
plt.show()
