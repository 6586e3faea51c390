"""
Thompson sampling in a contextual bandit
========================================

A contextual bandit shows a context ``x``, the agent pulls one of ``K`` arms
and observes the reward of that arm only. Here each arm has its own
:class:`~skbong.BONGRegressor`, a small network that predicts the arm's reward
from the context and is updated with ``partial_fit`` whenever the arm is pulled.

- The *greedy* policy pulls the arm with the highest predicted reward at the
  posterior mean (``predict``). It never tries an arm it currently
  underestimates, so it can lock onto a safe arm for good.
- *Thompson sampling* draws one weight vector per arm from its posterior
  (``sample_params``), scores the arms with those weights
  (``predict_with_params``) and pulls the best: arms the model is unsure about
  get tried in proportion to the chance that they are best (LO-FI paper,
  Chang et al., 2023, Sec. 4.3).

The problem is a scaled-down version of the *wheel bandit* (Riquelme, Tucker and
Snoek, 2018), built to trap greedy policies: contexts are uniform on the unit
disk; arm 0 always pays about 1.2 and arms 1-4 about 1, except outside the
radius 0.5, where the arm that matches the context's quadrant pays 3. An agent
that has learnt "arm 0 is best" near the centre must keep trying the other
arms to find the large rewards at the rim. Regret is the expected reward of the
best arm minus that of the arm pulled.

A single run is noisy: with other seeds greedy sometimes finds the rim rewards
early, but it is the policy that can get stuck, and Thompson sampling the one
that keeps looking.

The arms keep the default prior scale, ``sigma0=0.3``. ``sigma0="auto"`` would
weigh each arm's prior scales by how well their posterior means predict its 60
or so rows, which says nothing about whether the posterior is as wide as
Thompson sampling needs: here it doubled the regret
(``benchmarks/results/default_sigma0.md``).
"""

import matplotlib.pyplot as plt
import numpy as np

from skbong import BONGRegressor

n_arms, n_rounds, radius = 5, 300, 0.5
rng = np.random.default_rng(0)
r, angle = np.sqrt(rng.uniform(size=n_rounds)), rng.uniform(0, 2 * np.pi, size=n_rounds)
contexts = np.c_[r * np.cos(angle), r * np.sin(angle)]
mean_reward = np.ones((n_rounds, n_arms))
mean_reward[:, 0] = 1.2
quadrant = 1 + (contexts[:, 0] < 0) + 2 * (contexts[:, 1] < 0)
mean_reward[r > radius, quadrant[r > radius]] = 3.0
rewards = mean_reward + 0.1 * rng.normal(size=mean_reward.shape)


def play(policy, seed=0):
    """Cumulative regret of ``policy`` ("thompson" or "greedy") over the rounds."""
    draws = np.random.RandomState(seed)
    arms = [BONGRegressor(hidden_layer_sizes=(16,), obs_noise=0.1, random_state=seed + a) for a in range(n_arms)]
    regret = np.zeros(n_rounds)
    for t in range(n_rounds):
        x = contexts[t : t + 1]
        if t < 2 * n_arms:  # pull every arm twice to start its posterior
            arm = t % n_arms
        elif policy == "thompson":
            arm = np.argmax([m.predict_with_params(x, m.sample_params(1, draws))[0, 0] for m in arms])
        else:
            arm = np.argmax([m.predict(x)[0] for m in arms])
        arms[arm].partial_fit(x, [rewards[t, arm]])
        regret[t] = mean_reward[t].max() - mean_reward[t, arm]
    return np.cumsum(regret)


# %%
regret = {policy: play(policy) for policy in ("thompson", "greedy")}
best = mean_reward.max(axis=1).sum()
for policy, cumulative in regret.items():
    print(f"{policy:8s}: cumulative regret {cumulative[-1]:6.1f} after {n_rounds} rounds "
          f"(expected reward {best - cumulative[-1]:.0f} of a possible {best:.0f})")
assert regret["thompson"][-1] < regret["greedy"][-1]

# %%
fig, ax = plt.subplots(figsize=(6, 3.5), layout="constrained")
for policy, cumulative in regret.items():
    ax.plot(np.arange(1, n_rounds + 1), cumulative, label=policy)
ax.set_xlabel("round")
ax.set_ylabel("cumulative regret")
ax.legend()
plt.show()
