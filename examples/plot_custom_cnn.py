"""
Your own network: a CNN on digits
=================================

``model=`` puts any flax NNX module inside :class:`~skbong.BONGClassifier`, here a
small convolutional network on scikit-learn's 8 x 8 digits. ``X`` stays a 2-D array
of 64 pixels per row, as scikit-learn wants; the module reshapes each row into an
image itself.

The class below is a *factory*: its constructor takes ``(n_features, n_outputs,
rngs=...)``, so the estimator builds it at ``fit`` from the data's widths, with
weights drawn from ``random_state``. A module *instance* works too: its weights are
then the prior mean.
"""

import jax
import matplotlib.pyplot as plt
import numpy as np
from flax import nnx
from sklearn.datasets import load_digits
from sklearn.metrics import log_loss
from sklearn.model_selection import GridSearchCV, train_test_split

from skbong import BONGClassifier
from skbong.core import PatchConv


class DigitsCNN(nnx.Module):
    """3 x 3 convolution with 8 channels, ReLU, 2 x 2 average pooling, dense output."""

    def __init__(self, n_features: int, n_outputs: int, *, rngs: nnx.Rngs):
        self.side = int(round(np.sqrt(n_features)))  # 8 for digits
        # PatchConv is nnx.Conv computed as one matrix product of image patches: the
        # same layer, faster for the per-row Jacobians the filter needs on a CPU.
        self.conv = PatchConv(1, 8, kernel_size=(3, 3), padding="SAME", rngs=rngs)
        self.out = nnx.Linear(8 * (self.side // 2) ** 2, n_outputs, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        images = x.reshape(x.shape[0], self.side, self.side, 1)
        hidden = nnx.avg_pool(jax.nn.relu(self.conv(images)), (2, 2), strides=(2, 2))
        return self.out(hidden.reshape(x.shape[0], -1))


X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X / 16, y, test_size=0.3, random_state=0)

# %%
# One pass over the training rows, against the built-in MLP (50 hidden units) with the
# same defaults: the diagonal-plus-rank-10 posterior (LO-FI) and ``sigma0=0.3``.
results = {}
for name, model in [("MLP (50 hidden units)", None), ("CNN (factory)", DigitsCNN)]:
    clf = BONGClassifier(model=model, random_state=0).fit(X_train, y_train)
    proba = clf.predict_proba(X_test)
    n_weights = clf.posterior_[0].shape[0]
    results[name] = clf
    print(
        f"{name:22s} {n_weights:5d} weights  accuracy {clf.score(X_test, y_test):.3f}  "
        f"log-loss {log_loss(y_test, proba, labels=clf.classes_):.3f}"
    )

# %%
# A search over the prior scale. The clones of the estimator share the compiled filter:
# only the first candidate compiles.
search = GridSearchCV(BONGClassifier(model=DigitsCNN, random_state=0), {"sigma0": [0.1, 0.3, 1.0]}, cv=3)
search.fit(X_train, y_train)
cnn = search.best_estimator_
print(
    f"best sigma0: {search.best_params_['sigma0']} (cv accuracy {search.best_score_:.3f}); "
    f"test accuracy {cnn.score(X_test, y_test):.3f}"
)

# %%
# The posterior over the CNN's weights gives a measure of doubt: the test images whose
# predictive (the probit approximation, averaging over the weights) is least sure. Its
# ranking of the images is the point here, not its probabilities: after one pass the
# posterior is wide, and averaging over it makes them less confident than the plug-in's
# (on digits with the default MLP, expected calibration error 0.10 for probit against
# 0.04 for the plug-in, ``benchmarks/results/predictive.md``).
cnn.set_params(predictive="probit")
proba = cnn.predict_proba(X_test)
entropy = -np.sum(proba * np.log(np.clip(proba, 1e-12, None)), axis=1)
doubtful = np.argsort(entropy)[::-1][:6]
fig, axes = plt.subplots(1, 6, figsize=(9, 2))
for ax, i in zip(axes, doubtful):
    ax.imshow(X_test[i].reshape(8, 8), cmap="gray_r")
    top = np.argsort(proba[i])[::-1][:2]
    ax.set_title(f"true {y_test[i]}\n{top[0]}: {proba[i, top[0]]:.2f}, {top[1]}: {proba[i, top[1]]:.2f}", fontsize=8)
    ax.axis("off")
fig.suptitle("The CNN's least certain test digits")
fig.tight_layout()
plt.show()
