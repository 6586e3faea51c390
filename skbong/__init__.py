"""skbong: online Bayesian neural networks as scikit-learn estimators, on JAX.

``BONGClassifier`` and ``BONGRegressor`` keep a Gaussian posterior over the weights of
a network and update it one observation at a time with the Bayesian online
natural-gradient (BONG) family of updates. The pure-JAX core is in :mod:`skbong.core`.

The estimators are imported on first use (PEP 562): ``import skbong`` alone does not
load scikit-learn, JAX and flax (about 2.5 s on a quiet machine, most of it theirs), so a
module that only names skbong, or a process that only reads ``__version__``, does not
pay for them.
"""

from __future__ import annotations

import importlib

__all__ = ["AUTO_SIGMA0", "BONGClassifier", "BONGRegressor"]
__version__ = "0.1.0"


def __getattr__(name: str):
    if name in __all__:
        return getattr(importlib.import_module("._estimators", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
