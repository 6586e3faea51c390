"""
Sparse text features beside SGDClassifier
=========================================

Stream TF-IDF rows, a SciPy CSR matrix as a text pipeline makes it, through
:class:`~skbong.BONGClassifier` and :class:`~sklearn.linear_model.SGDClassifier`
with ``partial_fit``. The documents come from scikit-learn's bag-of-words generator
(:func:`~sklearn.datasets.make_multilabel_classification`: 10 topics over a 10,000-word
vocabulary, about 60 words a document; the documents of a single topic are kept).

The filter takes the sparse rows as they are and densifies one compiled chunk of rows at
a time, never the whole matrix. A model linear in its weights (``hidden_layer_sizes=()``,
multinomial logistic regression) suits such features. TF-IDF rows have unit norm, so the
prior scale they want is larger than on standardised features; instead of tuning it, the
classifier runs four prior scales side by side and averages them by their one-step-ahead
evidence (``sigma0`` as a list).
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_multilabel_classification
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.linear_model import SGDClassifier
from sklearn.metrics import accuracy_score

from skbong import BONGClassifier

counts, topics = make_multilabel_classification(
    n_samples=6000, n_features=10000, n_classes=10, n_labels=1, length=60, allow_unlabeled=False,
    sparse=True, random_state=0,
)
single = np.asarray(topics.sum(axis=1)).ravel() == 1
counts, y = counts[single].tocsr(), np.asarray(topics[single].argmax(axis=1)).ravel()
n_train = 2500
tfidf = TfidfTransformer().fit(counts[:n_train])
X_train, y_train = tfidf.transform(counts[:n_train]), y[:n_train]
X_test, y_test = tfidf.transform(counts[n_train:]), y[n_train:]
classes = np.arange(10)
print(f"training rows: {X_train.shape}, {X_train.nnz / X_train.shape[0]:.0f} stored entries a row")

models = {
    "BONGClassifier, linear, sigma0 in {0.3, 1, 3, 10}": BONGClassifier(
        hidden_layer_sizes=(), family="diag", sigma0=[0.3, 1.0, 3.0, 10.0], random_state=0
    ),
    "SGDClassifier(log_loss, alpha=1e-5)": SGDClassifier(loss="log_loss", alpha=1e-5, random_state=0),
}

# %%
# Chunks of 250 rows. Every row is predicted before it is learned, and the estimator
# checks those predictions. Over the first documents of a 10,000-word vocabulary no model
# predicts the topic much better than the topics' frequencies, so the first call warns
# (``ConvergenceWarning: ... barely learning``). The warning is given when its condition
# appears, and the later calls, which learn, are quiet.
chunk = 250
seen = np.arange(chunk, n_train + 1, chunk)
accuracy = {name: [] for name in models}
for stop in seen:
    rows = slice(stop - chunk, stop)
    for name, model in models.items():
        model.partial_fit(X_train[rows], y_train[rows], classes=classes)
        accuracy[name].append(accuracy_score(y_test, model.predict(X_test)))

bong = models["BONGClassifier, linear, sigma0 in {0.3, 1, 3, 10}"]
print("prior scales and their weights:", dict(zip(bong.sigma0_grid_.tolist(), bong.sigma0_weights_.round(3).tolist())))
for name in models:
    print(f"{name}: test accuracy {accuracy[name][-1]:.3f}")
# On these unit-norm rows the evidence leaves the narrow prior scales behind.
assert bong.sigma0_weights_[bong.sigma0_grid_ >= 1.0].sum() > 0.99
assert accuracy["BONGClassifier, linear, sigma0 in {0.3, 1, 3, 10}"][-1] > 0.6

# %%
fig, ax = plt.subplots(figsize=(6, 3.5), layout="constrained")
for name in models:
    ax.plot(seen, accuracy[name], marker=".", label=name)
ax.set_xlabel("training documents seen")
ax.set_ylabel("test accuracy")
ax.legend(fontsize=8)
ax.set_title("TF-IDF rows (CSR), one pass through partial_fit")
plt.show()
