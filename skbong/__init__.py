"""skbong: online Bayesian neural networks as scikit-learn estimators, on JAX.

``BONGClassifier`` and ``BONGRegressor`` keep a Gaussian posterior over the weights of
a network and update it one observation at a time with the Bayesian online
natural-gradient (BONG) family of updates. The pure-JAX core is in :mod:`skbong.core`.
"""

from ._estimators import AUTO_SIGMA0, BONGClassifier, BONGRegressor

__all__ = ["AUTO_SIGMA0", "BONGClassifier", "BONGRegressor"]
__version__ = "0.1.0"
