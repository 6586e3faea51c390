"""Is the posterior learning? A prequential test against a constant predictor.

A filter that has diverged can keep a finite, valid-looking belief while it predicts
garbage (BONG and LO-FI give no guarantee outside the linear-Gaussian case). The test used
here is the one prequential (one-step-ahead) evaluation gives for free (Dawid 1984; LO-FI
Algorithm 1): every observation is scored by the belief *before* it is absorbed, and the
running log-loss of the model is compared with that of a constant predictor that learns
online too,

* categorical: the class frequencies seen so far (Krichevsky-Trofimov, ``(n_c + 1/2) / (n + C/2)``);
  a row of a class not seen before teaches both but is not scored (no learner predicts it);
* Gaussian: a Gaussian with the running mean and variance of each output, started from
  ``N(0, 1)`` with one pseudo-observation (the estimator standardises its targets). For
  the verdict "diverged" its variance is kept at or above the observation noise ``R``
  that the filter runs at: the filter fits ``y`` only to within that noise, so a model
  whose residuals stay within it has not diverged. Without the floor a constant target (a
  stuck sensor, a fold or an output of one value) gives the constant predictor a
  vanishing variance and an unbounded score, and every model, however small its
  residuals, counted as diverged. "Not learning" keeps the plain constant predictor: it
  must still see a noise ``R`` set far above the spread of ``y`` (a first call of one row
  in raw units), under which nothing is learned.

For a Gaussian likelihood the model is scored by its one-step-ahead *means* under a
Gaussian whose variance is the running mean square of its own past residuals over about
the last ``HORIZON`` rows (exponentially weighted, after one pseudo-residual, the variance
of y over the burn-in), not by its own predictive variance:
the observation noise ``R`` the filter runs at is a modelling choice (``0.1 Var(y)`` by
default, calibrated only after the call) that is often far too small for noisy data, and
the test must tell a misspecified noise level from a diverged mean. The excess is then
``0.5 log(MSE_model / MSE_constant)`` per output: a prequential ``R^2`` in nats. A noise
level that rises mid-stream is then a noise level, scored as such within a window's rows,
and not a diverged mean.

The difference of the two running log-losses, per observation, is the log Bayes factor
per observation of the model against the constant (prequential marginal likelihoods). Both
are exponentially weighted over the last ``HORIZON`` observations, so a filter that
learned and then diverged is caught as well as one that never learned. The same test
covers the failure modes seen in practice: weights that grow orders of magnitude beyond
the prior scale predict with overconfidence and lose many nats per observation; a
collapsed constant classifier below chance loses to the class frequencies; innovations far
outside their predicted covariance are exactly observations scored with a much too small
predictive variance. Plain non-finite checks catch none of these.

A second, cheaper check looks at the weights (prior-data conflict, Box 1980): by the law of
total variance, ``Var(theta) = E[Var(theta | D)] + Var(E[theta | D])``, so under a prior
``N(mu_0, sigma0^2 I)`` that fits the data the posterior mean strays from ``mu_0`` by at most
about one prior standard deviation per weight in root mean square. ``prior_conflict``
returns that ratio squared; far above 1, the prior scale and the data disagree (a prior too
narrow that the data pull against, or a filter whose steps oscillate out of range), even
when the predictions still beat the constant predictor. Such a conflict degrades the fit
only where the prior still weighs on the posterior: ``prior_pull`` weighs each weight's
conflict by the prior's share of its posterior precision, a lower bound of how far, in
posterior standard deviations, the prior pulls the mean from the data's estimate. A model
whose weights the data pin down (a linear model on many rows) may sit far out in its
prior and fit as well as with any other ``sigma0``; it is not warned.

Two prior predictive checks (Box 1980; Gabry et al. 2019) run once, when a fit starts,
for failures that the prequential test cannot tell from a hard problem because the
network still learns, only badly:

* inputs far from unit scale (``INPUT_MEAN_SQUARE``): the built-in MLP's LeCun-normal
  initialisation gives its first layer pre-activations of variance ``mean(x^2)``; far above
  1 they saturate and the prior scale that suits the network shrinks with the inputs (raw
  0-16 digits: one pass reaches 0.64-0.90 where the same data divided by 16 reach 0.92-0.96);
* a prior too wide for a diagonal posterior (``PRIOR_OUTPUT_STD``): the standard deviation
  of the network's outputs under the prior, linearised at the prior mean,
  ``sqrt(sigma0^2 mean_c ||J_c||^2)``. A diagonal family keeps no correlations, so each
  step nearly refits the newest observation when that spread is large, and one pass learns
  little. Digits (X / 16, MLP 64-16-10, one pass over 1,200 rows, 597 held out, three
  seeds; spreads over the first 16 rows): ``diag`` reaches 0.82-0.86 at ``sigma0 = 0.3``
  (spread 0.8), 0.65-0.77 at 1 (2.7) and 0.20-0.25 at 2 (5.4). The MNIST MLP at
  ``sigma0 = 1``, spread 7.3: validation NLL 0.61 against 0.41 at 0.3, spread 2.2; the
  paper's MNIST CNN at ``sigma0 = 1``, spread 2.9: validation NLL 2.31, the constant
  predictor's, against 0.25 at 0.3, spread 0.9 (``mnist_stream_*.md``). The threshold 2.5
  lies between the largest spread seen to learn well (2.2) and the smallest seen to
  degrade (2.7). The full and low-rank families keep those correlations and learn well at
  wider spreads, up to about ``PRIOR_OUTPUT_STD_CORRELATED`` = 6: on the same digits
  protocol ``dlr`` reaches 0.87-0.91 at spread 0.8, 0.85-0.89 at 2.7, 0.75-0.84 at 4.0,
  0.49-0.83 at 5.4 (one seed of three already poor) and 0.20-0.50 at 8.1; with 50 hidden
  units 0.96 and 0.93 at 4.6 and 6.9, 0.85 at 9.2, 0.68 at 14; the MNIST MLP at 7.3
  reaches a validation NLL of 0.51 against 0.39 at 2.2. Without
  the line search of the mean step such fits diverge and the prequential test catches
  them; with it (the estimators' default) they stay finite and only learn slowly, which
  the prequential test cannot tell from a hard problem.

  The diagonal limit is one of hidden layers. A model linear in its weights
  (``hidden_layer_sizes=()``, multinomial logistic regression) has no shared features for
  a step to rewrite, and its ``diag`` family learns at wide priors as the correlated
  families do, so it takes their limit (``benchmarks/results/linear_prior_width.md``:
  standardised digits, breast_cancer and wine, one pass, 3 seeds). ``diag`` at ``sigma0``
  0.3 / 1 / 3 / 10: 0.950 / 0.948 / 0.924 / 0.893 (spreads 2.6 / 8.7 / 26 / 87), 0.953 /
  0.956 / 0.956 / 0.949 (1.7 / 5.5 / 17 / 55) and 0.978 / 0.985 / 0.978 / 0.970 (1.1 / 3.8
  / 11 / 38): at 2.5 the check warned at the best ``sigma0`` of all three; at 6 it still
  warns at breast_cancer's (17), and at 8.7 on digits (0.948 against 0.950). On unit-norm
  TF-IDF rows (``benchmarks/sparse_inputs.py``'s data) it reached 0.78 at spread 4.2, 0.71
  at 14 and 0.55 at 42. ``dlr`` and ``fc`` on digits: 0.951 and 0.956 at spread 2.6, 0.951
  and 0.868 at 8.7, 0.870 and 0.888 at 87.

  Those thresholds were set on inputs below unit scale (digits / 16, mean square 0.24;
  MNIST / 255). On standardised inputs a classifier's MLP with hidden layers tolerates
  wider spreads, the more so the fewer the classes, and the family matters little
  (a helper's grid: standardised digits, breast_cancer, wine, iris, make_classification
  with 20 or 100 features and 2, 5 or 10 classes, digits of 5 and of 2 classes, and
  digits and breast_cancer times 2; hidden widths 16, 50 and 100; ``sigma0`` from 0.05 to
  2; one pass, 3 folds, 5 seeds; a cell degraded if its log-loss is over 0.05 nats and
  10% above the best ``sigma0``'s). The largest spread still within that margin and the
  smallest degraded one on the wide side were, ``diag``: 20 and 10 at 2 classes, 18 and
  16 at 3, 15 and 7.8 at 5, 7.2 and 6.4 at 10; ``dlr``: 17 and 7.7, 13 and 12, 8.6 and
  7.8, 7.5 and 5.4. The spreads at the best ``sigma0`` were 1.6-10, and wider networks
  tolerated no wider spreads. The limits above warned at 126 of ``diag``'s 194 cells
  within the margin (27 of them at the best ``sigma0``, breast_cancer's default among
  them, where the advised ``sigma0`` was worse) and 39 of ``dlr``'s 178. The estimators
  therefore take the larger of the family's limit and
  ``PRIOR_OUTPUT_STD_CLASSES sqrt(10 / C)`` for ``C`` classes (5 at 10, 11.2 at 2), times
  the inputs' root mean square below 1 (``prior_output_std_for_classes``), which leaves
  the limits above wherever they were set: on standardised inputs it warns at 22 of
  ``diag``'s cells within the margin (none at the best ``sigma0``) and 15 of ``dlr``'s,
  and misses 2 degraded cells of each, at 0.06-0.11 nats above the best.

  Those spreads are of logits. With a Gaussian likelihood (the regressor, standardised
  targets) the linearised step is a Kalman update, which moves the prediction at the row
  towards its target and no further, and the natural-parameter diagonal and low-rank
  families learn about as well at wide priors as at the default. On eight data sets
  (friedman1-3, the five UCI sets of the LO-FI paper; 70/30 split, one pass, the default
  MLP), ``diag`` and ``dlr`` at ``sigma0`` 1, 2, 4 and 10 (spreads 4.8-62) stayed within
  0.02 of the test R^2 at ``sigma0 = 0.3`` (0.03 for ``dlr`` on boston and yacht) and
  mostly within 0.05 nats of its NLPD (at most +0.34, ``diag`` on friedman2 at 10), and
  learnt better on yacht and energy; the check is not made for them, nor for ``fc`` on a
  model linear in its weights (``hidden_layer_sizes=()``), exact Bayesian linear regression:
  on diabetes and the five UCI sets (70/30 split, ``random_state=0``) its test R^2 rose
  by 0.000-0.004 from ``sigma0 = 0.3`` to 10, at spreads of 27-37 that warned from 3.
  ``fc`` (CM-EKF) and ``diag_mom`` keep their thresholds: from ``sigma0 = 2`` (spreads 9.5-12) ``fc`` lost
  0.07-0.13 of R^2 on friedman1, boston, concrete, wine and yacht and up to 3.7 nats of
  NLPD (friedman1 at 10), and on friedman3 at spread 6.2 its NLPD rose from -0.51 to
  -0.26; ``diag_mom`` from spread 4.8 lost 0.14-0.87 nats of NLPD on friedman1-3,
  concrete and energy. On the ninth set, diabetes (309 training rows), every family lost
  R^2 at wide priors (``diag`` 0.27 to 0.00-0.25, ``fc`` 0.07 to -0.47): a small, noisy
  set that the prior must regularise, which ``sigma0='auto'`` handles (0.33-0.37).

One more check looks past the window: a call that takes its rows in the user's order
compares the fitted posterior with a constant on the call's own rows (``in_sample_excess``):
one step ahead, rows sorted by label are each predicted well from their neighbours, while
the posterior that ends the call has lost all but the last label.

This module is numpy only; the filter records the log-probabilities inside its scan.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = [
    "StreamHealth",
    "HORIZON",
    "BURN_IN",
    "MIN_OBSERVATIONS",
    "DIVERGED_EXCESS",
    "PRIOR_CONFLICT",
    "PRIOR_DIVERGED",
    "PRIOR_PULL",
    "BARELY_LEARNING",
    "MIN_STEPS",
    "MIN_EFFECTIVE_ROWS",
    "MIN_MINORITY_ROWS",
    "LATE_DIVERGED_EXCESS",
    "OUTLIER_WRECK_RATIO",
    "WRECK_GROWTH",
    "SQUARED_ERROR_RATIO",
    "MEANS_LEARNING",
    "NOISE_MISMATCH",
    "NOISE_MATCHED",
    "INPUT_MEAN_SQUARE",
    "PRIOR_OUTPUT_STD",
    "PRIOR_OUTPUT_STD_CORRELATED",
    "PRIOR_OUTPUT_STD_CLASSES",
    "prior_output_std_for_classes",
    "PRIOR_CHECK_ROWS",
    "FORGOTTEN_EXCESS",
    "FEW_STEPS_EXCESS",
    "FORGETTING_ROWS",
    "WIDE_POSTERIOR_EXCESS",
    "WIDE_CHECK_ROWS",
    "LIGHT_WEIGHTS",
    "new_health",
    "update_health",
    "prior_conflict",
    "prior_pull",
    "in_sample_excess",
    "predictive_excess",
    "narrow_variance_excess",
    "median_error_ratio",
    "far_rows",
]

#: Observations over which the running log-losses are weighted (weight ``1 - 1/HORIZON``).
HORIZON = 200
#: Observations that only teach the constant predictor, unscored. Both predictors start
#: from a guess (the constant from ``N(0, 1)``, the network from its random weights, whose
#: prior predictive on unscaled inputs can miss by ten standard deviations and be right a
#: few rows later), so the comparison is conditioned on a short training sample: a partial
#: Bayes factor (O'Hagan 1995), not one that a single first guess dominates for hundreds of rows.
BURN_IN = 10
#: Observations scored (after ``BURN_IN``) before any verdict: an untrained network and the constant predictor
#: are both near uniform, and a verdict on a handful of rows would be noise.
MIN_OBSERVATIONS = 50
#: Kish's effective rows (``StreamHealth.effective_rows``) below which the window's
#: log-losses give no verdict (of divergence, or of not learning): a window whose weight sits
#: on a few rows is a handful of observations. ``class_weight="balanced"`` at a 1% minority
#: (each minority row weighing 100 majority ones) leaves 11-23 of them in a window of 200:
#: one such fit (test AUC 0.9996) was told that it learned nothing, and another (test AUC
#: 0.76 once fitted) was refused as diverged, on two confident misses of minority rows.
#: Unweighted windows hold about ``n_scored`` of them early and ``2 HORIZON`` once full.
MIN_EFFECTIVE_ROWS = 25
#: Weight of the rows outside the most frequent class, summed in the window as its
#: log-losses are (``StreamHealth.class_rows``), below which a classifier gets no verdict of
#: learning or not: the comparison with the class frequencies rests on those rows. A
#: stationary stream of 1% positives holds about 2 in a window of ``HORIZON`` rows; a probe's
#: such streams, learning (held-out log-loss 14-45% below the constant's, AUC 0.80-0.97),
#: were told 1-4 times in a stream that they were not learning, with drift advice that,
#: followed, took the average precision from 0.79 to 0.31. At 5% (about 10 rows) none was.
#: Weighted rows count by weight, as the verdict scores them: ``class_weight="balanced"`` on
#: 3% positives keeps its verdicts and their advice to cap the heaviest rows, which gained
#: 0.1-0.4 nats of held-out balanced log-loss (``tests/test_sample_weight.py``).
MIN_MINORITY_ROWS = 10
#: Filter steps (of ``batch_size`` rows) before a verdict of not learning: the rows of one
#: step are all predicted by the belief before it, so with ``batch_size`` at or above the
#: number of rows every one is predicted by the prior (wine in one step of 1,000: held-out
#: accuracy 0.87-1.0 over two splits, and the warning said it learned nothing).
MIN_STEPS = 10
#: Excess log-loss (nats per observation) of the model over the constant predictor above
#: which the posterior counts as diverged: the constant predictor's data are then more
#: probable by a factor ``e`` per observation, about ``e^50`` over ``MIN_OBSERVATIONS`` rows.
DIVERGED_EXCESS = 1.0
#: Nats by which one row may count as worse than the constant predictor in a regressor's
#: running log-losses. A Gaussian's log-loss grows with the squared residual without bound:
#: one outlier of 3 standard deviations of ``y`` against a model whose residuals are 0.05 of
#: them costs about 2,000 nats, over 10 nats a row across the window of ``HORIZON`` rows,
#: and the fit was refused as diverged. Capped, one row moves the window's mean by at most
#: 0.05 nats, and a verdict of ``DIVERGED_EXCESS`` needs a tenth of the window at the cap
#: or all of it a nat worse: a posterior that fails, not one reading that does. (A
#: categorical log-loss is bounded by the probabilities' resolution, and one mislabelled
#: row costs at most about 20 nats.)
ROW_EXCESS_CAP = 10.0
#: ``prior_conflict`` above which the prior scale is reported as at odds with the data: the
#: posterior mean is then ``sqrt(3) = 1.7`` prior standard deviations per weight (root mean
#: square) from the prior mean, where a prior that fits the data gives at most about 1.
PRIOR_CONFLICT = 3.0
#: ``prior_pull`` above which such a conflict is reported: the prior then moves the mean by
#: at least one posterior standard deviation per weight (root mean square) from where the
#: data alone would put it, twice what a prior that fits the data gives at most (1/2).
#: Below it the data override the prior: a linear regressor on 500 rows of 5 standard
#: normal features (y = x_1 + noise) at ``sigma0 = 0.2`` has a conflict of 5.5-19 and a pull
#: of 0.005-0.05 (fc, diag, dlr; ``random_state`` 0 and 3, the initial weights being the prior
#: mean), and the training R^2 of ``sigma0 = 2`` (0.990-0.991).
#: The raw-digits MLPs that this check warns of (``robustness.md``) have pulls of 3.2-18,
#: 0.9 times their conflicts.
PRIOR_PULL = 1.0
#: ``prior_conflict`` beyond which weights count as grown orders of magnitude past the prior
#: scale (100 prior standard deviations per weight): with predictions far worse than the
#: constant predictor's, a diverged filter even when it still classifies some rows right.
PRIOR_DIVERGED = 1e4
#: A classifier whose one-step-ahead log-loss is below the constant predictor's by less
#: than this fraction of it (McFadden's pseudo-R^2, where 0.2-0.4 is an excellent fit) is
#: barely learning: on digits, BOG/BBB on the moment families at a tiny learning rate sat
#: near chance (accuracy 0.10-0.16) with 2.21-2.25 nats against the constant's 2.30.
BARELY_LEARNING = 0.05
#: Ratio of a classifier's Brier score to the constant predictor's below which one no better
#: in log-loss is told that it is overconfident rather than not learning: a clear margin, as
#: a stream of weakly learnable labels near ``BARELY_LEARNING`` (59% right at best) lay at
#: 0.91-1.0 of the constant's Brier score, a digits stream at 79% right and 2.44 nats
#: against the constant's 2.30 at 0.41.
CLEAR_BRIER = 0.75
#: A regressor's margin below the constant predictor's log-loss, nats per observation, from
#: which it clearly learns (``StreamHealth.clearly_learning``): about R^2 = 0.1.
CLEARLY_LEARNING_NATS = 0.05
#: Nats per observation that a regressor's own one-step-ahead predictive (its means with the
#: variance ``J Sigma J^T + R`` of ``return_std``) may lose against the same means scored at
#: their residual variance before the predictive variance counts as not matching the errors:
#: 1 nat is lost, in expectation, when the errors' variance is about 4.5 times the predicted
#: one (the predictive standard deviation 2.1 times too small) or the predicted variance
#: about 19 times theirs (``0.5 (k - log k - 1)`` for the ratio ``k``). The
#: filter-consistency test of Kalman filtering, on the innovations against the covariance
#: they were predicted with.
NOISE_MISMATCH = 1.0
#: The excess below which a noise warning given stops standing (hysteresis: a stream whose
#: excess sits at ``NOISE_MISMATCH`` was warned again at each crossing): 0.5 nats is lost when the
#: errors' variance is about 3.1 times the predicted one or the predicted variance 6.3 times theirs.
NOISE_MATCHED = 0.5
#: Mean square of the inputs above which the built-in MLP warns that they are not scaled:
#: its first-layer pre-activations then start with a standard deviation above 3 instead of 1.
INPUT_MEAN_SQUARE = 10.0
#: Prior standard deviation of the outputs (linearised; logits, or standardised targets)
#: above which a diagonal family warns that its prior is too wide (see the module docstring).
PRIOR_OUTPUT_STD = 2.5
#: The same for the full-covariance and low-rank families (see the module docstring).
PRIOR_OUTPUT_STD_CORRELATED = 6.0
#: A classifier's built-in MLP with hidden layers, on inputs near unit scale: the spread at
#: ten classes above which any family degrades, ``prior_output_std_for_classes``.
PRIOR_OUTPUT_STD_CLASSES = 5.0
#: Rows (the first ones of a fit) over which that standard deviation is averaged.
PRIOR_CHECK_ROWS = 16
#: Nats per row by which the fitted posterior may predict the rows of the call that fitted
#: it (``in_sample_excess``) worse than a constant fitted to them, in a call that absorbed
#: its rows in the user's order, before it counts as having forgotten them. The prequential
#: test cannot see this: on rows sorted by label each one is predicted well by a posterior
#: that has just seen its neighbours. Measured (one call, ``shuffle=False``, the default
#: MLP, ``dlr``/``diag``/``fc``): on shuffled rows of digits, wine, iris, breast_cancer,
#: moons, diabetes and friedman1 the excess is -0.38 to -2.2 (it learned); rows sorted by
#: label or target gave +4.7 and +7.1 (digits: one class predicted for all, accuracy 0.10),
#: +1.8 (moons, ``diag``) and +0.43 to +0.74 (diabetes, friedman1: R^2 -1.4 to -3.4), and
#: -0.13 to -0.95 elsewhere (sorted wine, iris, breast_cancer still fit); shuffled labels
#: (nothing to learn, which "not learning" reports first) -0.19 to +0.12; one call of 100
#: rows of one class -0.04 to +0.06.
FORGOTTEN_EXCESS = 0.2
#: The same excess for a fit of fewer than ``MIN_STEPS`` steps, checked on its rows because
#: the running verdicts have none: any fitted posterior worse than the constant on the rows
#: that fitted it failed. Its rows were not forgotten (a step takes them all at once), so
#: the margin that keeps sorted rows of classes still fitted from warning is not needed: a
#: regressor in one step of 2,000 friedman1 rows had R^2 -0.38 on them (excess 0.16, under
#: ``FORGOTTEN_EXCESS``), silently (a probe).
FEW_STEPS_EXCESS = 0.0
#: Nats per row by which a shuffled fit's posterior, with the estimator's own predictive, may
#: predict the rows it was fitted on worse than their constant (and no better in Brier score)
#: before the fit is refused as broken down late in its pass. Far above ``DIVERGED_EXCESS``:
#: the verdict comes after the pass, on rows the posterior has seen. Measured (a probe's
#: ~1,000 shuffled fits of iris, wine, breast_cancer, digits, moons and regressions): the
#: breakdowns scored 25-408 nats a row on held-out rows; a fit of iris at ``sigma0=3`` in
#: steps of 8, at 1.006 on its rows, held out 60% right against the constant's 32%, 0.65
#: nats worse than it, and was refused at the running verdict's 1 nat.
LATE_DIVERGED_EXCESS = 5.0
#: Rows of a call, evenly spaced in its order, on which ``in_sample_excess`` is measured.
FORGETTING_ROWS = 1000
#: Nats per row by which a plain-gradient fit's predictive that reads the covariance (the
#: probit one of a classifier, LO-FI Eqs. 63-64; a regressor's linearised variance added to its
#: errors') may predict the rows it was fitted on worse than the plug-in prediction at its mean
#: (``predictive_excess``) before the fit is told that its covariance is far wider than its
#: data allow. BOG and BBB step the covariance at the mean's rate (BONG Eqs. 176, 308-309,
#: 318-319), so on a wide prior it can stay near the prior, or grow, while the mean learns.
#: Measured on digits at every counted cell's chosen protocol and prior
#: (``benchmarks/results/digits_grid_union_predictive.md``, 256 training rows): the 38
#: natural-gradient cells, whose covariance step is the Bayesian update, lose 0.00-0.11; the
#: plain-gradient cells whose probit test log-loss is 2.2-8 times the plug-in's lose
#: 0.53-1.95, those at 1.43-1.61 times 0.12-0.25, and the rest -0.02-0.06. Regressors
#: (``benchmarks/results/wide_posterior.md``: three passes over friedman1, diabetes and a
#: linear set of 10 features, all rows): 63 BONG and BLR fits on dlr, diag and fc at sigma0
#: 0.1-3 lose -0.01-0.03; 76 BOG and BBB fits at learning rates 1e-3 and 1e-4 lose 0.07-0.47,
#: with linearised variances 0.9-5 times the squared errors, and 14 of them, all on the
#: linear set, more than 0.3 (0.35-0.47; the largest below, 0.27).
WIDE_POSTERIOR_EXCESS = 0.3
#: Rows of a call, evenly spaced in its order, on which ``predictive_excess`` is measured:
#: each costs a Jacobian of the network.
WIDE_CHECK_ROWS = 256
#: Mean row weight below which a fit says that its rows weigh as much as few observations
#: (weights normalised to sum to 1 over 442 diabetes rows: test R^2 0.14 against 0.53, silently).
LIGHT_WEIGHTS = 0.01
#: Mean squared distance of the posterior mean from the prior mean, in prior standard
#: deviations (``prior_conflict``), below which a diverged BLR, BOG or BBB fit is told that
#: its steps hardly moved the weights (raise the learning rate) rather than that they overshot
#: (a fuzzer's BOG at learning_rate 0.001 on a logistic model: 0.0054, a log-loss of 2.07
#: nats against the constant's 0.71, all of it the prior mean's; steps that overshoot leave
#: the weights orders of magnitude further out).
BARELY_MOVED = 0.01
#: Distance of a later call's target from the fitted mean of y, in standard deviations of y
#: as fitted, beyond which the regressor's health messages say that y left its scale (a
#: probe's y = 1e30 in a stream of unit scale was refused with advice on sigma0 alone).
FAR_TARGET = 1e3
#: The filter-consistency test of a calibrated regressor's later calls: the call's mean
#: normalised squared innovation over the noise scale fitted before it (``INCONSISTENT_RATIO``,
#: on at least ``INCONSISTENT_ROWS`` terms), or its sum beyond its expectation
#: (``INCONSISTENT_EXCESS``, about one row 32 predictive standard deviations out), once the
#: scale rests on ``INCONSISTENT_AFTER`` rows.
INCONSISTENT_RATIO = 10.0
INCONSISTENT_ROWS = 50
INCONSISTENT_EXCESS = 1e3
INCONSISTENT_AFTER = 50
#: ... and where rows are weighted, an excess beyond ``INCONSISTENT_Z`` standard deviations of
#: the call's weighted sum under the model, ``sqrt(2 sum w^2)`` per output: a sum of ``w``
#: times chi-square terms, one per row, whose spread the heavy rows make (see
#: ``_inconsistent_innovations``).
INCONSISTENT_Z = 5.0
#: The gross-error test of an adaptive noise (``obs_noise="adaptive"``) in a later call:
#: where the estimate grew more than ``GROSS_NOISE_GROWTH``-fold in the call, and rows whose
#: one-step-ahead errors lie more than ``sqrt(INCONSISTENT_EXCESS)`` (about 32) standard
#: deviations of the noise before the call out, at most ``GROSS_ROWS`` of the call's rows (and
#: at least one), carry most of its squared errors, a few gross errors made the estimate, not
#: a new noise level (a probe's one y of 1e4 in 100 rows of friedman1: return_std 350 times
#: wider, silently, and still 47 times after 400 clean rows).
GROSS_NOISE_GROWTH = 4.0
GROSS_ROWS = 0.05


#: A regressor whose one-step-ahead squared errors over the window are at least this many
#: times those of the running mean of ``y`` predicts no better than a constant, whatever its
#: Gaussian log-loss says (``StreamHealth.heavy_tailed_not_learning``): on heavy-tailed
#: targets (a probe's ``y = exp(make_regression / 10)``: ratios 1.03-1.22, held-out MSE up to
#: 34 times the constant's) the running mean's variance holds every extreme row while the
#: model is scored at its recent residuals, and the log-loss claimed 5-127 nats a row of
#: learning, silently. Ordinary and learnable heavy-tailed streams (friedman1, diabetes,
#: lognormal, Poisson, price-like and t_2 targets) lay at 0.02-0.83.
SQUARED_ERROR_RATIO = 1.0
#: A regressor whose squared one-step-ahead errors lie below this fraction of the running
#: mean's is not told that it learns nothing, whatever its Gaussian log-loss: a probe's i.i.d.
#: negative-binomial counts (held-out R^2 0.22, the true mean's 0.26) were told so at ratios
#: of 0.86 and 0.92, with drift advice that took R^2 to -0.05 and -0.60 when followed. A model
#: that learns nothing predicts about the running mean, row by row: a ratio near 1.
MEANS_LEARNING = 0.95
#: A regressor's later call that the filter-consistency or gross-error test flags is refused
#: where the posterior after it predicts the call's own rows with a median absolute error
#: more than this many times that of their median (:func:`median_error_ratio`): gross rows
#: absorbed wrecked it (a probe's one y of 1e4 among 100 rows of friedman1, y's spread 5:
#: held-out R^2 0.6 -> -2.4e5 on ``fc``, -519 on ``diag``, kept with a warning, after which
#: ``fc`` refused every clean call as diverged). Medians, because the gross rows themselves
#: dominate any squared error; a learning model's ratio lies far below 1, a constant's near 1.
OUTLIER_WRECK_RATIO = 3.0
#: ... and where that ratio is more than this many times the posterior's before the call:
#: gross rows drag the posterior from the call's other rows (the probe's fc: 0.25 before the
#: call, 120 after), where a jump of level of y leaves a confident linear posterior nearer
#: the call's rows after absorbing them (ratios 0.89 times those before at +3, +5 and +10
#: standard deviations). Two rows of 1e4 in the call after such a jump took a linear
#: model's ratio from 3.9 to 6.5 (held-out R^2 -7 to -44), which a growth of 2 let through
#: silently (a probe).
WRECK_GROWTH = 1.25


def _deviations(Y: np.ndarray) -> np.ndarray:
    """``|Y - median(Y)|`` per output, in float64: the median absolute deviation's terms."""
    Y = np.asarray(Y, np.float64)
    return np.abs(Y - np.median(Y, axis=0))


def median_error_ratio(Y: np.ndarray, means: np.ndarray) -> float:
    """The largest, over the outputs, of the median absolute error of the predictions
    ``means`` of the rows ``Y`` ``(n, C)`` over the median absolute deviation of ``Y`` from its
    median: about 1 for a constant, far below for a model that learned, above where the
    predictions lie further from the targets than their median does (0, no verdict, for an
    output most of whose rows share one value)."""
    Y, means = np.asarray(Y, np.float64), np.asarray(means, np.float64).reshape(np.shape(Y))
    error = np.median(np.abs(Y - means), axis=0)
    spread = np.median(_deviations(Y), axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        # Most of the rows at one value leave no spread to judge by: no verdict.
        ratio = np.where(spread > 0, error / spread, 0.0)
    return float(np.max(ratio))


def far_rows(Y: np.ndarray) -> np.ndarray:
    """Indices of the rows whose targets ``Y`` ``(n, C)`` lie more than
    ``sqrt(INCONSISTENT_EXCESS)`` (about 32) times the median absolute deviation from their
    median, in some output: the gross targets that a flagged call names. (Not by the call's
    one-step-ahead errors: once a gross row is absorbed, every later row of the call may lie
    far out.)"""
    residuals = _deviations(Y)
    typical = np.median(residuals, axis=0)
    bound = np.where(typical > 0, np.sqrt(INCONSISTENT_EXCESS) * typical, np.inf)
    with np.errstate(invalid="ignore"):
        return np.flatnonzero(np.any(residuals > bound, axis=1))


def gross_errors(residuals, weights, noise_before, noise_after):
    """The gross-error test of an adaptive noise over one call: ``(rows, farthest,
    growth)`` where a few rows' errors made the noise estimate grow, else None.

    ``residuals`` are the call's one-step-ahead errors ``(n, C)`` (the residuals that LO-FI
    Eq. 66 averages), ``weights`` the rows' weights (or None), ``noise_before`` and
    ``noise_after`` the estimate per output before and after the call. ``rows`` are the
    indices of the rows far out, ``farthest`` the largest distance in standard deviations of
    the noise before, ``growth`` the largest ratio of the estimate after to before.
    """
    squared = residuals**2 / np.asarray(noise_before, np.float64)
    per_row = squared.max(axis=1)
    weighted = per_row if weights is None else per_row * weights
    far = (per_row > INCONSISTENT_EXCESS) & (weighted > 0)
    growth = float(np.max(np.asarray(noise_after, np.float64) / noise_before))
    n_far = int(far.sum())
    if growth <= GROSS_NOISE_GROWTH or n_far == 0 or n_far > max(1.0, GROSS_ROWS * len(per_row)):
        return None
    # Most of the call's squared error in those rows: a few rows, not a level that moved.
    if weighted[far].sum() <= 0.5 * weighted.sum():
        return None
    return np.flatnonzero(far), float(np.sqrt(per_row[far].max())), growth


class StreamHealth(NamedTuple):
    """Running state of the test; a fitted estimator keeps one and carries it across calls.

    Attributes
    ----------
    n_seen : int
        Observations seen so far, the ``BURN_IN`` first included.
    n_scored : int
        Observations scored so far (those after the first ``BURN_IN``).
    model_loss, baseline_loss : float
        Exponentially weighted sums of the log-losses (nats) of the model and of the
        constant predictor.
    weight : float
        The matching sum of weights (``model_loss / weight`` is the weighted mean).
    model_hits, baseline_hits : float
        Categorical: the same weighted sums of correct classifications (most probable
        class; the constant predictor's is the most frequent class so far). Zero otherwise.
    baseline_stats : ndarray
        Categorical: class counts ``(C,)``. Gaussian: ``(4, C)`` pseudo-count, sum and sum of
        squares of each output, and sum of squares of the model's residuals (scored rows, and
        one pseudo-residual: 1, then from the burn-in's end the variance of y over it).
    model_brier, baseline_brier : float
        Categorical: the same weighted sums of the Brier scores ``||p - e_y||^2`` of the
        two predictors' class probabilities. Zero otherwise (and in a state pickled before
        they were kept, which then tells garbage from overconfidence by the hits alone).
    noise_loss, residual_square : float, ndarray of shape (C,)
        Gaussian: the same weighted sums of the log-loss of the model's own one-step-ahead
        predictive (the filter's record: for a fixed noise, the linearised predictive, the
        noise plus the weights' uncertainty), and of its squared residuals, per output (a
        state pickled before they were kept per output holds their sum over the outputs, a
        float). Zero otherwise.
    floored_baseline_loss : float or None
        Gaussian: the weighted sum of the constant predictor's log-loss with its variance
        at least the filter's noise ``R`` (module docstring), which ``far_worse`` compares
        with; None where no floor was given (categorical; a state pickled before it was
        kept), and ``baseline_loss`` stands in.
    weight_square : float or None
        The sum of the squares of the weights that ``weight`` sums (each row's decay times
        its ``sample_weight``), for ``effective_rows``; None in a state pickled before it was
        kept.
    residual_window : ndarray of shape (C,) or None
        Gaussian: the model's squared residuals per output, summed with the pseudo-residual
        and each decayed by ``1 - 1/HORIZON`` per scored row (:func:`_decayed_count` rows'
        worth), whose mean is the variance that the model's means are scored at. None
        before the first scored row and in a state pickled before it was kept (which goes
        on from the mean of ``baseline_stats[3]``, the sum over every scored row).
    class_rows : ndarray of shape (C,) or None
        Categorical: the weight of each class's scored rows, decayed as the log-losses are,
        for ``MIN_MINORITY_ROWS``. None otherwise (and in a state pickled before it was kept).
    model_squares, baseline_squares : float or None
        Gaussian: the same weighted sums of the squared one-step-ahead errors (summed over the
        outputs) of the model's means and of the constant's (the running mean of ``y``), for
        ``squared_error_ratio``. None otherwise (and in a state pickled before they were kept).
    """

    n_seen: int
    n_scored: int
    model_loss: float
    baseline_loss: float
    weight: float
    model_hits: float
    baseline_hits: float
    baseline_stats: np.ndarray
    model_brier: float = 0.0
    baseline_brier: float = 0.0
    noise_loss: float = 0.0
    residual_square: np.ndarray | float = 0.0
    floored_baseline_loss: float | None = None
    weight_square: float | None = None
    residual_window: np.ndarray | None = None
    class_rows: np.ndarray | None = None
    model_squares: float | None = None
    baseline_squares: float | None = None

    def _per_observation(self, total: float) -> float:
        return total / self.weight if self.weight > 0 else np.nan

    @property
    def divergence_baseline_mean_loss(self) -> float:
        """Weighted mean log-loss of the constant predictor that ``far_worse`` compares with:
        at a variance of at least the filter's noise, where one was given."""
        floored = self.baseline_loss if self.floored_baseline_loss is None else self.floored_baseline_loss
        return self._per_observation(floored)

    @property
    def excess_loss(self) -> float:
        """Weighted mean log-loss of the model minus that of the constant predictor."""
        return self._per_observation(self.model_loss - self.baseline_loss) if self.weight > 0 else 0.0

    @property
    def model_mean_loss(self) -> float:
        return self._per_observation(self.model_loss)

    @property
    def baseline_mean_loss(self) -> float:
        return self._per_observation(self.baseline_loss)

    @property
    def model_accuracy(self) -> float:
        return self._per_observation(self.model_hits)

    @property
    def baseline_accuracy(self) -> float:
        return self._per_observation(self.baseline_hits)

    @property
    def far_worse(self) -> bool:
        """Scored enough, and far worse than the constant predictor in log-loss (or non-finite);
        for a Gaussian, than the constant predictor at a variance of at least the filter's noise."""
        if not np.isfinite(self.model_loss):
            return True
        excess = self.model_mean_loss - self.divergence_baseline_mean_loss if self.weight > 0 else 0.0
        return self.scored_enough and excess > DIVERGED_EXCESS

    @property
    def diverged(self) -> bool:
        """Far worse in log-loss and, for a classifier, worse than the constant predictor in
        the Brier score too: garbage. The Brier score is a proper score bounded by 2 per
        observation, so a few confident mistakes cannot dominate it as they dominate the
        log-loss: a classifier far worse in log-loss but better in Brier score is
        overconfident (``far_worse`` alone), with probabilities that still carry
        information; its posterior may be sound and a Bayesian predictive repair it. One
        whose probabilities are worse than the class frequencies even in Brier score (a
        collapse onto one class, or confident guesses at chance: with one-hot predictions on
        ten balanced classes, below about 55% right) is not. The hits decide where no Brier
        sums were kept."""
        if self.model_brier == self.baseline_brier == 0.0:
            return self.far_worse and not self.model_hits > self.baseline_hits
        return self.far_worse and not self.model_brier < self.baseline_brier

    def diverged_given(self, conflict: float) -> bool:
        """``diverged``, or far worse with weights beyond ``PRIOR_DIVERGED`` (``conflict`` is
        :func:`prior_conflict` of the belief): grown orders of magnitude past the prior
        scale, a diverged filter even while it still classifies some rows right."""
        return self.diverged or (self.far_worse and conflict > PRIOR_DIVERGED)

    @property
    def noise_excess(self) -> float:
        """Gaussian, scored enough: nats per observation that the model's own predictive
        loses against the same means scored at their residual variance (``model_loss``);
        above ``NOISE_MISMATCH``, the variance it predicts does not match its errors.
        Zero otherwise."""
        if self.baseline_stats.ndim == 1 or self.n_scored < MIN_OBSERVATIONS or self.noise_loss == 0.0:
            return 0.0
        return (self.noise_loss - self.model_loss) / self.weight

    def mean_square_error(self) -> float:
        """Gaussian: the weighted mean squared one-step-ahead residual per output."""
        if self.weight <= 0:
            return np.nan
        return float(np.sum(self.residual_square)) / self.weight / self.baseline_stats.shape[1]

    def mean_square_errors(self) -> np.ndarray:
        """Gaussian: the weighted mean squared one-step-ahead residual of each output (each
        the mean over the outputs in a state pickled before they were kept per output)."""
        n_outputs = self.baseline_stats.shape[1]
        if np.ndim(self.residual_square) == 0:
            return np.full(n_outputs, self.mean_square_error())
        if self.weight <= 0:
            return np.full(n_outputs, np.nan)
        return np.asarray(self.residual_square, np.float64) / self.weight

    @property
    def effective_rows(self) -> float:
        """Kish's effective number of rows in the running sums, ``weight^2 / weight_square``:
        about ``2 HORIZON`` for unweighted rows once the window is full, far fewer where a few
        rows carry most of the weight."""
        if not self.weight_square:
            return float(self.n_scored)
        return self.weight**2 / self.weight_square

    @property
    def scored_enough(self) -> bool:
        """Enough rows scored, and weighed, for a verdict on the window's log-losses
        (``MIN_EFFECTIVE_ROWS``)."""
        return self.n_scored >= MIN_OBSERVATIONS and self.effective_rows >= MIN_EFFECTIVE_ROWS

    @property
    def judged_enough(self) -> bool:
        """Scored enough for a verdict of learning or not: for a classifier, also
        ``MIN_MINORITY_ROWS`` rows in the window outside its most frequent class (a verdict of
        divergence needs only ``scored_enough``: confident misses of any class show it)."""
        if self.class_rows is None:
            return self.scored_enough
        return self.scored_enough and float(self.class_rows.sum() - self.class_rows.max()) >= MIN_MINORITY_ROWS

    @property
    def overconfident_not_ignorant(self) -> bool:
        """A classifier, scored enough, no better than the constant predictor in log-loss (or
        barely) but whose Brier score is at most ``CLEAR_BRIER`` times the constant's: its
        predictions carry what it learned, its probabilities are too confident to show it (a
        probe: told it was not learning while it classified 80% of digits right, at 2.59 nats
        against the constant's 2.30). The bounded Brier score is not dominated by a few
        confident mistakes, as the log-loss is."""
        categorical = self.baseline_stats.ndim == 1
        return (
            categorical
            and self.scored_enough
            and self.baseline_brier > 0.0
            and self.model_brier < CLEAR_BRIER * self.baseline_brier
        )

    @property
    def not_learning(self) -> bool:
        """Judged enough (``judged_enough``), and no better than the constant predictor."""
        return self.judged_enough and self.excess_loss >= 0.0

    @property
    def clearly_learning(self) -> bool:
        """Scored enough, and better than the constant predictor by a margin: twice
        ``BARELY_LEARNING`` of its log-loss for a classifier, ``CLEARLY_LEARNING_NATS`` per
        observation for a regressor. A not-learning warning stands until then (a stream
        near the threshold warned again each time it crossed it), and only such a stream
        is said to have predicted well before a call that fails."""
        categorical = self.baseline_stats.ndim == 1
        margin = 2 * BARELY_LEARNING * self.baseline_mean_loss if categorical else CLEARLY_LEARNING_NATS
        return self.judged_enough and -self.excess_loss > margin

    @property
    def squared_error_ratio(self) -> float | None:
        """Gaussian: the window's squared one-step-ahead errors of the model over those of the
        running mean of ``y``; None where not kept or nothing scored. A model whose Gaussian
        log-loss beats the constant's while its means do no better than the running mean
        (``SQUARED_ERROR_RATIO``) is scored by a variance that the targets' tails mislead."""
        if self.model_squares is None or not self.baseline_squares:
            return None
        return self.model_squares / self.baseline_squares

    @property
    def means_learning(self) -> bool:
        """Gaussian, judged enough, with squared one-step-ahead errors below ``MEANS_LEARNING``
        times those of the running mean of ``y``: the means learned, whatever the Gaussian
        log-loss says, as heavy-tailed targets mislead the variance it is scored at both ways
        (``heavy_tailed_not_learning``)."""
        ratio = self.squared_error_ratio
        return ratio is not None and self.judged_enough and ratio < MEANS_LEARNING

    @property
    def heavy_tailed_not_learning(self) -> bool:
        """Gaussian, judged enough, better than the constant in log-loss (not ``not_learning``)
        but no better than the running mean of ``y`` in squared error (``SQUARED_ERROR_RATIO``)."""
        ratio = self.squared_error_ratio
        return ratio is not None and self.judged_enough and not self.not_learning and ratio >= SQUARED_ERROR_RATIO

    @property
    def barely_learning(self) -> bool:
        """A classifier, scored enough, whose log-loss is below the constant predictor's by
        less than ``BARELY_LEARNING`` of it (McFadden's pseudo-R^2 ``1 - L_model / L_constant``)."""
        categorical = self.baseline_stats.ndim == 1
        return (
            categorical
            and self.judged_enough
            and -self.excess_loss < BARELY_LEARNING * self.baseline_mean_loss
        )


def new_health(likelihood: str, n_outputs: int) -> StreamHealth:
    """The state before any observation."""
    if likelihood == "categorical":
        stats = np.zeros(n_outputs)
    else:
        stats = np.stack([np.ones(n_outputs), np.zeros(n_outputs), np.ones(n_outputs), np.ones(n_outputs)])
    return StreamHealth(0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, stats)


def _gaussian_log_probs(
    Y: np.ndarray, mean: np.ndarray, count: np.ndarray, squares: np.ndarray, floor=1e-12
) -> np.ndarray:
    var = np.maximum(squares / count, floor) * (1 + 1 / count)
    return -0.5 * np.sum(np.log(2 * np.pi * var) + (Y - mean) ** 2 / var, axis=1)


def _added_statistics(likelihood: str, Y: np.ndarray, residual_squares: np.ndarray, w: np.ndarray) -> np.ndarray:
    """What the rows ``Y`` of weights ``w`` add to ``baseline_stats``; ``residual_squares`` is
    the sum of the model's squared residuals over them (Gaussian; zero for unscored rows)."""
    if likelihood == "categorical":
        return w @ Y
    return np.stack([np.full(Y.shape[1], w.sum()), w @ Y, w @ Y**2, residual_squares])


def _decayed_count(n_scored) -> np.ndarray:
    """Rows' worth in ``StreamHealth.residual_window`` after ``n_scored`` scored rows: the
    pseudo-residual and each row decayed by ``1 - 1/HORIZON`` per later row."""
    decay = 1.0 - 1.0 / HORIZON
    powers = decay ** np.asarray(n_scored, np.float64)
    return powers + (1.0 - powers) / (1.0 - decay)


def _decayed_sums(values: np.ndarray, start: np.ndarray, block: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """The running sums ``s_i = d s_{i-1} + values_{i-1}`` (``d = 1 - 1/HORIZON``, ``s_0 =
    start``) before each row of ``values`` ``(N, C)``, and the sum after the last, in blocks
    short enough that ``d^-block`` stays finite."""
    decay = 1.0 - 1.0 / HORIZON
    before = np.empty_like(values)
    total = np.asarray(start, np.float64)
    for first in range(0, values.shape[0], block):
        chunk = values[first : first + block]
        steps = np.arange(chunk.shape[0])[:, None]
        # s_i = d^i (s_0 + sum_{j<i} d^-(j+1) x_j) within the block
        grown = chunk * decay ** -(steps + 1.0)
        before[first : first + block] = decay**steps * (total + np.cumsum(grown, axis=0) - grown)
        total = decay * before[first + chunk.shape[0] - 1] + chunk[-1]
    return before, total


def _counts_before(counts: np.ndarray, Y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The weighted class counts before each row of the one-hot ``Y`` ``(N, C)``, from
    ``counts`` before the first."""
    weighted = w[:, None] * Y
    return counts + np.cumsum(weighted, axis=0) - weighted


def _log_probs(
    likelihood: str, Y: np.ndarray, w: np.ndarray, model_log_probs, model_means, stats: np.ndarray, n_scored: int,
    noise_floor=None, residual_window=None,
):
    """One-step-ahead log-probabilities of the model and of the constant predictor for the
    rows of ``Y`` in order, whether each classified the row correctly, their Brier scores
    (categorical; zeros otherwise), the statistics after them, (Gaussian; else None)
    ``StreamHealth.residual_window`` after them, from ``residual_window`` before them, and
    (Gaussian; else None) the squared errors of the model's and the constant's means per row,
    summed over the outputs; ``n_scored`` rows were scored before. The constant predictor learns from the rows by
    their weights ``w``, as the model does (class frequencies, or the mean and spread of
    ``y``). ``noise_floor`` (Gaussian; per output, or None) is the least variance at which
    the constant predictor is scored a second time, for the divergence verdict; the
    returned pair of log-probabilities then has that score third (else None)."""
    if likelihood == "categorical":
        n_classes = Y.shape[1]
        before = _counts_before(stats, Y, w)
        proba = (before + 0.5) / (before.sum(axis=1, keepdims=True) + 0.5 * n_classes)
        scores = (np.asarray(model_log_probs, np.float64), np.log(np.sum(Y * proba, axis=1)))
        label = Y.argmax(axis=1)
        hits = (np.argmax(model_means, axis=1) == label, np.argmax(before, axis=1) == label)
        with np.errstate(over="ignore", invalid="ignore"):
            briers = (np.sum((np.asarray(model_means, np.float64) - Y) ** 2, axis=1), np.sum((proba - Y) ** 2, axis=1))
        return scores + (None,), hits, briers, stats + _added_statistics(likelihood, Y, None, w), None, None
    # In float64: a float32 y of 1e28 (a corrupt row in the filter's units) squares past
    # float32's range, and the constant's spread came out inf - inf = nan.
    Y, model_means = np.asarray(Y, np.float64), np.asarray(model_means, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        residuals = (Y - model_means) ** 2
        rows_before = np.arange(Y.shape[0])[:, None]
        weight = w[:, None]
        count = stats[0] + np.cumsum(weight, axis=0) - weight
        total = stats[1] + np.cumsum(weight * Y, axis=0) - weight * Y
        squares = stats[2] + np.cumsum(weight * Y**2, axis=0) - weight * Y**2
        mean = total / count
        spread = np.maximum(squares - count * mean**2, 0.0)
        baseline = _gaussian_log_probs(Y, mean, count, spread)
        floored = None
        if noise_floor is not None:
            floored = _gaussian_log_probs(Y, mean, count, spread, np.maximum(np.asarray(noise_floor, np.float64), 1e-12))
        # The model's residual variance is a running mean over about the last HORIZON rows,
        # as the verdicts' log-losses are: one over every row since the first would score a
        # stream whose noise rose tenfold at its old, small variance for thousands of rows,
        # and refused its calls as diverged while its means stayed right (a probe).
        window_before, window = _decayed_sums(residuals, residual_window)
        model = _gaussian_log_probs(Y, model_means, _decayed_count(n_scored + rows_before), window_before)
        added = _added_statistics(likelihood, Y, residuals.sum(axis=0), w)
        squared = (residuals.sum(axis=1), ((Y - mean) ** 2).sum(axis=1))  # for squared_error_ratio
    no_hits = np.zeros(Y.shape[0])
    return (model, baseline, floored), (no_hits, no_hits), (no_hits, no_hits), stats + added, window, squared


def update_health(health: StreamHealth, likelihood: str, Y: np.ndarray, model_log_probs: np.ndarray,
                  model_means: np.ndarray, noise_floor=None, row_weights=None) -> StreamHealth:
    """Score a run of observations ``Y`` (in the filter's units) given the model's
    one-step-ahead log-probabilities of them ``(N,)`` (for a Gaussian, at the noise the
    filter runs at; None leaves the noise check without data) and its means ``(N, C)``
    (class probabilities, or the predicted targets). ``noise_floor`` (Gaussian: the
    observation noise ``R`` the filter runs at, per output, in its units) is the least
    variance of the constant predictor that the divergence verdict compares with (module
    docstring); None for none.

    ``row_weights`` ``(N,)`` (the fit's ``sample_weight``; None for ones): a row of weight 0
    changes nothing in the posterior, so it is not scored and not counted; the others
    count by their weight in the running sums and in what the constant predictor learns.
    The burn-in and the minimum counts of the verdicts count rows."""
    if row_weights is not None:
        row_weights = np.asarray(row_weights, np.float64)
        kept = row_weights > 0
        if not kept.all():
            Y, model_means = Y[kept], np.asarray(model_means)[kept]
            model_log_probs = None if model_log_probs is None else np.asarray(model_log_probs)[kept]
            row_weights = row_weights[kept]
        if Y.shape[0] == 0:
            return health
    w = np.ones(Y.shape[0]) if row_weights is None else row_weights
    n_unscored = min(Y.shape[0], max(0, BURN_IN - health.n_seen))
    # The burn-in rows only teach the constant predictor.
    stats = health.baseline_stats + _added_statistics(likelihood, Y[:n_unscored], np.zeros(Y.shape[1]), w[:n_unscored])
    if likelihood != "categorical" and health.n_seen < BURN_IN <= health.n_seen + n_unscored:
        # The model's residual variance starts from one pseudo-residual the size of the
        # spread of y over the burn-in (the constant predictor's variance then), not from 1:
        # a y left in raw units (a first call of one row) would otherwise make the first
        # misses of a learning model cost thousands of nats each.
        count, total, squares = stats[0], stats[1], stats[2]
        stats = stats.copy()
        stats[3] = np.maximum(squares / count - (total / count) ** 2, 1e-12)
    Y, w = Y[n_unscored:], w[n_unscored:]
    if model_log_probs is not None:
        model_log_probs = np.asarray(model_log_probs)[n_unscored:]
    window = health.residual_window
    if likelihood != "categorical" and (window is None or health.n_scored == 0):
        # From the pseudo-residual, or, in a state pickled before the window was kept, from
        # the mean square of every residual so far.
        window = stats[3] / (1 + health.n_scored) * _decayed_count(health.n_scored)
    scored = np.ones(Y.shape[0], bool)
    if likelihood == "categorical":
        # A row of a class not seen before cannot be predicted from the rows before it, by the
        # model or by the class frequencies (only by a uniform guess): it teaches both but is
        # not scored. Scored, such rows judged few-shot streams of many classes: 100 classes
        # of one row each refused a linear model that learned (held-out accuracy 0.14, chance
        # 0.01) as diverged, the frequencies' guess at a new class worse than uniform (a probe).
        scored = np.sum(Y * _counts_before(stats, Y, w), axis=1) > 0
    scores, hits, briers, stats, window, squared = _log_probs(
        likelihood, Y, w, model_log_probs, np.asarray(model_means)[n_unscored:], stats, health.n_scored, noise_floor,
        window,
    )
    (model, baseline, floored), (model_hits, baseline_hits), (model_brier, baseline_brier) = scores, hits, briers
    if not scored.all():  # (their weight is 0 below; so is what they add, an infinite loss included)
        model, baseline, model_hits, baseline_hits, model_brier, baseline_brier = (
            np.where(scored, a, 0.0) for a in (model, baseline, model_hits, baseline_hits, model_brier, baseline_brier)
        )
    if likelihood != "categorical":  # one outlier is not a diverged posterior (ROW_EXCESS_CAP)
        reference = floored if floored is not None else baseline
        model = _capped(model, reference)
        if model_log_probs is not None:
            model_log_probs = _capped(np.asarray(model_log_probs, np.float64), reference)
    decay = 1.0 - 1.0 / HORIZON
    n = Y.shape[0]
    weights = decay ** np.arange(n - 1, -1, -1) * np.where(scored, w, 0.0)
    shrink = decay**n
    floored_loss = None
    if floored is not None:  # a state kept before the floor goes on from its plain sum
        previous = health.baseline_loss if health.floored_baseline_loss is None else health.floored_baseline_loss
        floored_loss = float(shrink * previous - weights @ floored)
    noise_loss, residual_square = 0.0, 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        model_loss = shrink * health.model_loss - weights @ model
        if likelihood != "categorical" and model_log_probs is not None:
            noise_loss = _finite_or_inf(shrink * health.noise_loss - weights @ np.asarray(model_log_probs, np.float64))
            squares = (Y - np.asarray(model_means, np.float64)[n_unscored:]) ** 2
            residual_square = shrink * health.residual_square + weights @ squares
            residual_square = np.where(np.isfinite(residual_square), residual_square, np.inf)
    return StreamHealth(
        health.n_seen + n_unscored + n,
        health.n_scored + int(scored.sum()),
        float(model_loss) if np.isfinite(model_loss) else np.inf,
        float(shrink * health.baseline_loss - weights @ baseline),
        float(shrink * health.weight + weights.sum()),
        float(shrink * health.model_hits + weights @ model_hits),
        float(shrink * health.baseline_hits + weights @ baseline_hits),
        stats,
        _finite_or_inf(shrink * health.model_brier + weights @ model_brier),
        float(shrink * health.baseline_brier + weights @ baseline_brier),
        noise_loss,
        residual_square,
        floored_loss,
        float(shrink**2 * (health.weight_square or 0.0) + weights @ weights),
        health.residual_window if window is None or n == 0 else np.where(np.isfinite(window), window, np.inf),
        (
            shrink * (0.0 if health.class_rows is None else health.class_rows) + weights @ Y
            if likelihood == "categorical"
            else None
        ),
        *(
            (None, None)
            if squared is None
            else (
                _finite_or_inf(shrink * (health.model_squares or 0.0) + weights @ squared[0]),
                _finite_or_inf(shrink * (health.baseline_squares or 0.0) + weights @ squared[1]),
            )
        ),
    )


def _capped(log_probs: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """A Gaussian model's per-row log-probabilities, each at most ``ROW_EXCESS_CAP`` nats
    below the constant predictor's ``reference`` (non-finite ones kept: a NaN or infinite
    prediction is garbage whatever the rows)."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(log_probs), np.maximum(log_probs, reference - ROW_EXCESS_CAP), log_probs)


def _finite_or_inf(total) -> float:
    """A running sum, with NaN (non-finite probabilities) as the worst score."""
    return float(total) if np.isfinite(total) else np.inf


def prior_output_std_for_classes(n_classes: int, mean_square: float) -> float:
    """The prior output spread above which a classifier's built-in MLP with hidden layers
    degrades on inputs of mean square ``mean_square``: ``PRIOR_OUTPUT_STD_CLASSES`` at ten
    classes, times ``sqrt(10 / n_classes)``, and times the inputs' root mean square below 1
    (module docstring). The estimators take the larger of it and the family's limit."""
    scale = min(1.0, float(np.sqrt(max(mean_square, 0.0))))
    return PRIOR_OUTPUT_STD_CLASSES * float(np.sqrt(10.0 / max(n_classes, 1))) * scale


def prior_conflict(mean: np.ndarray, mean0: np.ndarray, sigma0: float) -> float:
    """``mean((mu - mu_0)^2) / sigma0^2``: at most about 1 when the prior fits the data."""
    diff = np.asarray(mean, np.float64) - np.asarray(mean0, np.float64)
    return float(np.mean(diff**2) / float(sigma0) ** 2)


def prior_pull(mean: np.ndarray, mean0: np.ndarray, sigma0: float, variance: np.ndarray) -> float:
    """``mean(s z^2)`` with ``z = (mu - mu_0) / sigma0`` and the prior's share of each weight's
    posterior precision ``s = min(Sigma_ii / sigma0^2, 1)``: how far, squared and in posterior
    standard deviations, the prior pulls the mean from where the data alone would put it.

    For one weight of a linear-Gaussian model the posterior mean is ``(1 - s) w + s mu_0``
    with ``w`` the data's estimate, so the pull ``mu - w = s (mu_0 - w)`` is
    ``sqrt(s) z / (1 - s) >= sqrt(s) z`` posterior standard deviations: this is a lower
    bound of its mean square. Under a prior that fits the data ``E[z^2] = 1 - s`` and
    ``E[s z^2] = s (1 - s) <= 1/4``. A conflict with a prior the data override (``s``
    near 0) pulls nothing.
    """
    diff = np.asarray(mean, np.float64) - np.asarray(mean0, np.float64)
    share = np.minimum(np.asarray(variance, np.float64) / float(sigma0) ** 2, 1.0)
    return float(np.mean(share * diff**2) / float(sigma0) ** 2)


def predictive_excess(likelihood: str, Y: np.ndarray, w: np.ndarray, plugin, spread) -> tuple[float, float, float]:
    """How much worse a predictive that reads the covariance predicts rows than the plug-in
    prediction at the mean: ``(excess, plugin_loss, spread_loss)``, weighted mean log-losses
    (nats per row) of the targets ``Y`` and their difference.

    Categorical: ``plugin`` and ``spread`` are the two predictives' log class probabilities
    ``(B, C)`` and ``Y`` one-hot. Gaussian: ``plugin`` the predicted means and ``spread`` the
    linearised variance of the outputs ``diag(J Sigma J^T)`` (LO-FI Eq. 60 without ``R``),
    both ``(B, C)``; the plug-in predictive is the Gaussian at those means with the rows'
    weighted mean squared error per output as its variance, the other adds ``spread`` to it,
    so that neither depends on a fitted noise."""
    w = np.asarray(w, np.float64)
    if likelihood == "categorical":
        log_probs = [np.sum(np.where(Y > 0, Y * np.asarray(lp, np.float64), 0.0), axis=1) for lp in (plugin, spread)]
        losses = [-float(w @ log_p) / w.sum() for log_p in log_probs]
    else:
        squared, mse = _squared_errors(Y, plugin, w)
        losses = [_gaussian_loss(squared, w, var) for var in (mse, mse + np.asarray(spread, np.float64))]
    return losses[1] - losses[0], losses[0], losses[1]


def _squared_errors(Y: np.ndarray, means, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The squared errors ``(B, C)`` of ``means`` and their weighted mean per output (at least
    the least positive float64)."""
    squared = (np.asarray(Y, np.float64) - np.asarray(means, np.float64)) ** 2
    return squared, np.maximum(w @ squared / w.sum(), np.finfo(np.float64).tiny)


def _gaussian_loss(squared: np.ndarray, w: np.ndarray, var) -> float:
    """Weighted mean Gaussian log-loss (nats per row, summed over the outputs) of errors whose
    squares are ``squared`` under the variances ``var`` (per row and output, or per output)."""
    return float(w @ (0.5 * np.sum(np.log(2 * np.pi * var) + squared / var, axis=1))) / w.sum()


def narrow_variance_excess(Y: np.ndarray, w: np.ndarray, means, variances) -> tuple[float, float]:
    """How much a Gaussian predictive too narrow for its own errors loses on rows ``Y``:
    ``(excess, ratio)``, the weighted mean log-loss (nats per row) of the predictive
    ``N(means, variances)`` less that of the same means at the rows' mean squared error per
    output (the best constant variance for them), and that error over the mean predicted
    variance, averaged over the outputs. ``excess`` is 0 where the predicted variance is not
    below the error (``ratio <= 1``): a predictive too wide is another fault."""
    w = np.asarray(w, np.float64)
    squared, mse = _squared_errors(Y, means, w)
    variances = np.maximum(np.asarray(variances, np.float64), np.finfo(np.float64).tiny)
    ratio = float(np.mean(mse / (w @ variances / w.sum())))
    if not ratio > 1:
        return 0.0, ratio
    return (_gaussian_loss(squared, w, variances) - _gaussian_loss(squared, w, mse)) / Y.shape[1], ratio


def in_sample_excess(likelihood: str, Y: np.ndarray, w: np.ndarray, model_means: np.ndarray, noise_floor=None):
    """How much worse the fitted posterior predicts rows it was fitted on than a constant
    fitted to the same rows: ``(excess, model, constant)``, nats per row (weights ``w``).

    Categorical (``model_means`` the class probabilities): mean log-losses against the
    rows' class frequencies (Krichevsky-Trofimov, as the prequential test's). Gaussian
    (the predicted targets): ``0.5 log(MSE / Var)`` per output, averaged over the outputs,
    with the rows' variance at least ``noise_floor`` (per output; rows of one value are
    predicted by a model up to its noise), and ``model, constant`` the mean squared error
    and that variance averaged over the outputs."""
    w = np.asarray(w, np.float64)
    total = w.sum()
    if likelihood == "categorical":
        with np.errstate(divide="ignore"):
            model = -np.sum(w * np.log(np.sum(Y * np.asarray(model_means, np.float64), axis=1))) / total
        frequency = (w @ Y + 0.5) / (total + 0.5 * Y.shape[1])
        constant = -np.sum(w * np.log(Y @ frequency)) / total
        return model - constant, model, constant
    mean = w @ Y / total
    variance = w @ (Y - mean) ** 2 / total
    if noise_floor is not None:
        variance = np.maximum(variance, np.asarray(noise_floor, np.float64))
    variance = np.maximum(variance, 1e-12)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # rows predicted exactly: -inf
        error = w @ (Y - np.asarray(model_means, np.float64)) ** 2 / total
        excess = float(np.mean(0.5 * np.log(error / variance)))
    return excess, float(np.mean(error)), float(np.mean(variance))
