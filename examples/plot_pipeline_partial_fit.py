"""
Streaming with partial_fit inside a Pipeline
============================================

A :class:`~sklearn.pipeline.Pipeline` has no ``partial_fit``, but its steps do
what a stream needs: fit the whole pipeline (scaler and classifier) on a
warm-up chunk, then send each later chunk through the fitted preprocessing,
``pipe[:-1].transform``, into the classifier's ``partial_fit``. The scaler stays
frozen at its warm-up statistics, while the Bayesian posterior keeps absorbing
rows, one at a time, from where the last chunk left it.

All chunks have the same length, so every ``partial_fit`` call reuses the code
JAX compiled for the first one; predictions run in blocks of a fixed number of
rows, so ``score`` compiles only once too.
"""

from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skbong import BONGClassifier

X, y = load_digits(return_X_y=True)
X_stream, X_test, y_stream, y_test = train_test_split(X, y, train_size=1300, random_state=0, stratify=y)

pipe = make_pipeline(StandardScaler(), BONGClassifier(random_state=0))

# %%
# Warm-up: ``fit`` estimates the scaler's mean and scale and starts the
# posterior from the prior. The warm-up chunk must hold every class, and be
# large enough for stable scales: a pixel that is almost always blank in the
# warm-up gets a tiny scale, and huge standardised values later on.
warm_up = 300
pipe.fit(X_stream[:warm_up], y_stream[:warm_up])
print(f"after {warm_up:4d} rows (warm-up): test accuracy {pipe.score(X_test, y_test):.3f}")

# %%
# Stream the remaining rows in chunks of 100. ``pipe[-1]`` is the classifier,
# ``pipe[:-1]`` the fitted preprocessing (here only the scaler).
accuracies = []
for start in range(warm_up, len(X_stream), 100):
    X_chunk, y_chunk = X_stream[start : start + 100], y_stream[start : start + 100]
    pipe[-1].partial_fit(pipe[:-1].transform(X_chunk), y_chunk)
    accuracies.append(pipe.score(X_test, y_test))
    print(f"after {pipe[-1].t_:4d} rows: test accuracy {accuracies[-1]:.3f}")

# The whole pipeline predicts as usual: raw pixels in, labels out.
print("predicted labels of the first five test images:", pipe.predict(X_test[:5]), "truth:", y_test[:5])
assert accuracies[-1] > 0.9
