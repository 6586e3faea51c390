"""``sigma0="auto"`` and grids of prior scales: a Bayesian model average over the scale.

The reference is built from independent single-scale fits: one estimator per scale with
the same seed, whose prequential records give each scale's evidence; the average is then
formed row by row in plain Python.
"""

import math
import pickle
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits, load_iris
from sklearn.utils._param_validation import InvalidParameterError

from skbong import AUTO_SIGMA0, BONGClassifier, BONGRegressor
from skbong._estimators import OCCAM_BURN_IN, OCCAM_WINDOW, _average_over_members, _Progress


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X[:300] / 16, y[:300]


def _log_scale_prior(grid):
    """The documented prior over a sweep's scales: the weight halves with every decade
    between a scale and 0.3, normalised over the grid."""
    log_weights = [-math.log(2.0) * abs(math.log10(s / 0.3)) for s in grid]
    norm = math.log(sum(math.exp(w) for w in log_weights))
    return [w - norm for w in log_weights]


def _row_by_row_average(member_log_probs, evidence=None):
    """log sum_k w_k(t) p_k(y_t), with w_k(t) proportional to prod_{s<t} p_k(y_s) (times
    ``exp(evidence_k)`` given)."""
    evidence = [0.0] * len(member_log_probs) if evidence is None else list(evidence)
    out = []
    for t in range(len(member_log_probs[0])):
        top = max(evidence)
        norm = top + math.log(sum(math.exp(e - top) for e in evidence))
        out.append(math.log(sum(math.exp(e - norm + lp[t]) for e, lp in zip(evidence, member_log_probs))))
        evidence = [e + lp[t] for e, lp in zip(evidence, member_log_probs)]
    return np.array(out), np.array(evidence)


@pytest.mark.parametrize("predictive", ["plugin", "probit"])
def test_the_average_over_scales_is_built_from_the_single_scale_filters(digits, predictive):
    # A classifier that predicts with its posterior ("probit") weighs its scales by that
    # predictive's evidence, the sum of the single filters' records under it.
    X, y = digits
    grid = [0.03, 0.3, 1.0]
    common = dict(
        hidden_layer_sizes=(8,), prequential=True, shuffle=False, random_state=0, dtype="float64", predictive=predictive
    )
    singles = [BONGClassifier(sigma0=s, **common).fit(X, y) for s in grid]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the narrowest scale alone learns little
        auto = BONGClassifier(sigma0=grid, **common).fit(X, y)
    expected_log_prob, evidence = _row_by_row_average(
        [m.prequential_log_prob_ for m in singles], _log_scale_prior(grid)
    )
    np.testing.assert_allclose(auto.prequential_log_prob_, expected_log_prob, rtol=1e-8)
    weights = np.exp(evidence - evidence.max()) / np.exp(evidence - evidence.max()).sum()
    np.testing.assert_allclose(auto.sigma0_weights_, weights, rtol=1e-6, atol=1e-300)
    best = int(np.argmax(evidence))
    assert auto.sigma0_ == grid[best] and list(auto.sigma0_grid_) == grid
    for fitted, single in zip(auto.posterior_, singles[best].posterior_):
        np.testing.assert_allclose(fitted, single, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(auto.predict_proba(X), singles[best].predict_proba(X), rtol=1e-9, atol=1e-12)


def test_occams_window_drops_the_scales_far_behind_and_stops_running_them():
    # At OCCAM_BURN_IN rows (a power of two), a scale more than OCCAM_WINDOW nats behind the
    # best, and no nearer to it than at half as many rows, gets weight 0 and keeps its belief.
    X, y = load_digits(return_X_y=True)
    X, y = X[:700] / 16, y[:700]
    grid = [0.03, 0.2, 0.3, 1.0]
    common = dict(hidden_layer_sizes=(8,), prequential=True, shuffle=False, random_state=0, dtype="float64")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the narrowest scale alone learns little
        singles = [BONGClassifier(sigma0=s, **common).fit(X, y) for s in grid]
        auto = BONGClassifier(sigma0=grid, **common).fit(X, y)
    member_log_probs = np.array([m.prequential_log_prob_ for m in singles])
    assert OCCAM_BURN_IN == 512
    head, evidence = _row_by_row_average(member_log_probs[:, :512], _log_scale_prior(grid))
    half = np.array(_log_scale_prior(grid)) + member_log_probs[:, :256].sum(axis=1)
    dropped = (evidence < evidence.max() - OCCAM_WINDOW) & (evidence.max() - evidence >= half.max() - half)
    assert dropped.any() and not dropped.all()
    kept = np.flatnonzero(~dropped)
    tail, tail_evidence = _row_by_row_average(member_log_probs[kept, 512:], evidence[kept])
    np.testing.assert_allclose(auto.prequential_log_prob_, np.concatenate([head, tail]), rtol=1e-8)
    expected = np.zeros(len(grid))
    expected[kept] = np.exp(tail_evidence - tail_evidence.max()) / np.exp(tail_evidence - tail_evidence.max()).sum()
    np.testing.assert_allclose(auto.sigma0_weights_, expected, rtol=1e-6, atol=1e-300)
    best = kept[int(np.argmax(tail_evidence))]
    assert auto.sigma0_ == grid[best]
    for fitted, single in zip(auto.posterior_, singles[best].posterior_):
        np.testing.assert_allclose(fitted, single, rtol=1e-9, atol=1e-12)
    # A dropped scale's filter stopped where it was dropped.
    k = int(np.flatnonzero(dropped)[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        at_drop = BONGClassifier(sigma0=grid[k], **common).fit(X[:512], y[:512])
    for member, single in zip(auto._members, at_drop.posterior_):
        np.testing.assert_allclose(member[k], single, rtol=1e-9, atol=1e-12)


def test_occams_window_keeps_a_scale_that_gains_on_the_best_and_acts_at_the_same_rows_however_cut():
    # A probe's CNN on MNIST: sigma0 = 1 trailed 0.3 by 94 nats after 512 rows, by 9 after
    # 1,024, and led by 413 after 5,000. Dropped at 512 it was gone for good (test log-loss
    # 0.31 against 0.16), unless the stream came in calls of 500, which first applied the
    # window at row 1,000. The window now acts at powers of two of rows seen and keeps a
    # member nearer the best than at half as many rows.
    progress = _Progress("test", 1, 0, 1100, np.zeros(3), 0.0, False, [])
    rows = np.arange(1, 1101)
    # member 0 leads; member 1 trails by 120 at 256 rows and by 94 at 512 (gaining);
    # member 2 trails by 60 at 256 rows and by 94 at 512 (losing ground)
    gap1 = np.interp(rows, [0, 256, 512, 1024, 1100], [0, 120, 94, 9, 0])
    gap2 = np.interp(rows, [0, 256, 512, 1100], [0, 60, 94, 200])
    path = np.stack([np.zeros(1100), -gap1, -gap2])
    for start, stop in ((0, 500), (500, 1100)):  # calls of 500 and 600 rows
        progress.evidence = progress.occam_window(path[:, stop - 1], path[:, start:stop], start)
    assert np.isfinite(progress.evidence[:2]).all() and progress.evidence[2] == -np.inf
    assert progress.checkpoint[0] == 1024 and progress.checkpoint[1][2] == -np.inf
    one_call = _Progress("test", 1, 0, 1100, np.zeros(3), 0.0, False, [])
    evidence = one_call.occam_window(path[:, -1], path, 0)
    np.testing.assert_array_equal(evidence, progress.evidence)
    # A member that stops gaining is dropped at the next power of two.
    path[1, 512:] = path[1, 511] - np.arange(1, 589)
    evidence = _Progress("test", 1, 0, 1100, np.zeros(3), 0.0, False, []).occam_window(path[:, -1], path, 0)
    assert np.isfinite(evidence[0]) and evidence[1] == evidence[2] == -np.inf


def test_a_sweep_cut_into_calls_drops_the_same_scales_as_one_fit(digits):
    # The window acts at the same rows however a stream is cut: calls of 300 and 700 rows
    # give the average of one fit of 1,000 (its first check, at 512 rows, inside a call).
    X, y = load_digits(return_X_y=True)
    X, y = X[:1000] / 16, y[:1000]
    common = dict(hidden_layer_sizes=(8,), sigma0=[0.01, 0.1, 0.3, 1.0], shuffle=False, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the narrowest scale alone learns little
        whole = BONGClassifier(**common).fit(X, y)
        cut = BONGClassifier(**common)
        for rows in (slice(0, 300), slice(300, 1000)):
            cut.partial_fit(X[rows], y[rows], classes=range(10))
    assert (whole.sigma0_weights_ == 0).any() and np.array_equal(whole.sigma0_weights_ == 0, cut.sigma0_weights_ == 0)
    np.testing.assert_allclose(cut.sigma0_weights_, whole.sigma0_weights_, rtol=1e-4, atol=1e-12)
    np.testing.assert_allclose(cut.predict_proba(X), whole.predict_proba(X), rtol=1e-4, atol=1e-6)


def test_a_dropped_scale_meets_rows_of_weight_zero_without_a_numpy_warning():
    # A probe: a grid whose wide scales broke down (log-evidence -inf), on rows of which a
    # fifth weigh 0, printed "invalid value encountered in multiply" (0 * -inf) on each chunk.
    X, y = load_digits(return_X_y=True)
    X, y = X[:700] / 16, y[:700]
    weights = np.random.default_rng(0).lognormal(0.0, 1.0, 700)
    weights[np.random.default_rng(1).random(700) < 0.2] = 0.0
    clf = BONGClassifier(hidden_layer_sizes=(8,), sigma0=[0.3, 1000.0], shuffle=False, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        warnings.simplefilter("ignore", UserWarning)
        clf.fit(X, y, sample_weight=weights)
        clf.partial_fit(X[:100], y[:100], sample_weight=weights[:100])
    assert clf.sigma0_weights_[1] == 0.0 and np.isfinite(clf.predict_proba(X)).all()


def test_a_lone_scale_goes_on_as_its_single_scale_filter_and_the_dropped_stay_put():
    # Once Occam's window has left one scale, partial_fit goes on as that scale's single
    # filter would: the same posterior and records; the dropped scale's belief and evidence
    # do not move, and a call that fails leaves every member as it was.
    X, y = load_digits(return_X_y=True)
    X = X / 16
    grid = [0.03, 1.0]
    common = dict(hidden_layer_sizes=(8,), rank=3, prequential=True, shuffle=False, random_state=0, dtype="float64")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the narrow scale alone learns little
        auto = BONGClassifier(sigma0=grid, **common).fit(X[:700], y[:700])
        single = BONGClassifier(sigma0=1.0, **common).fit(X[:700], y[:700])
    np.testing.assert_array_equal(np.isfinite(auto._log_evidence), [False, True])
    dropped = [np.array(leaf[0]) for leaf in auto._members]
    dropped_evidence = auto._log_evidence[0]
    for rows in (slice(700, 701), slice(701, 750), slice(750, 1000)):
        auto.partial_fit(X[rows], y[rows])
        single.partial_fit(X[rows], y[rows])
    for fitted, reference in zip(auto.posterior_, single.posterior_):
        np.testing.assert_allclose(fitted, reference, rtol=1e-9, atol=1e-12)
    for member, reference in zip(auto._members, single.posterior_):
        np.testing.assert_allclose(member[1], reference, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(auto.prequential_log_prob_[700:], single.prequential_log_prob_[700:], rtol=1e-9)
    for member, before in zip(auto._members, dropped):
        np.testing.assert_array_equal(member[0], before)
    assert auto._log_evidence[0] == dropped_evidence and auto.t_ == 1000
    np.testing.assert_array_equal(auto.sigma0_weights_, [0.0, 1.0])
    assert list(auto.sigma0_grid_) == grid and auto.sigma0_ == 1.0
    # Process noise that forgets each row at once makes garbage (tests/test_continual.py):
    # the call raises and every member, the evidence and the records are as they were.
    members, evidence, records = [np.array(leaf) for leaf in auto._members], auto._log_evidence.copy(), auto.prequential_log_prob_
    with pytest.raises(FloatingPointError):
        auto.set_params(process_noise=1.0).partial_fit(X[1000:1600], y[1000:1600])
    for member, before in zip(auto._members, members):
        np.testing.assert_array_equal(member, before)
    np.testing.assert_array_equal(auto._log_evidence, evidence)
    assert auto.prequential_log_prob_ is records and auto.t_ == 1000


def test_partial_fit_carries_every_scale_and_its_evidence(digits):
    X, y = digits
    common = dict(sigma0="auto", hidden_layer_sizes=(8,), prequential=True, random_state=0)
    whole = BONGClassifier(shuffle=False, **common).fit(X, y)
    parts = BONGClassifier(**common)
    for rows in np.array_split(np.arange(len(y)), 3):
        parts.partial_fit(X[rows], y[rows], classes=np.arange(10))
    parts = pickle.loads(pickle.dumps(parts))  # the members survive a round trip
    np.testing.assert_allclose(parts.prequential_log_prob_, whole.prequential_log_prob_, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(parts.sigma0_weights_, whole.sigma0_weights_, rtol=1e-3, atol=1e-6)
    assert list(whole.sigma0_grid_) == list(AUTO_SIGMA0) and whole.sigma0_weights_.sum() == pytest.approx(1.0)


def test_a_scale_whose_belief_breaks_down_drops_out(digits):
    # fc_mom at sigma0 >= 1 loses positive definiteness on digits (BONG Eq. 168); alone it
    # raises, inside a grid it gets weight 0 and the fit goes on with the other scales.
    X, y = digits
    params = dict(family="fc_mom", hidden_layer_sizes=(4,), random_state=0)
    with pytest.raises(FloatingPointError, match="became invalid"):
        BONGClassifier(sigma0=3.0, **params).fit(X, y)
    clf = BONGClassifier(sigma0=[0.3, 3.0], **params).fit(X, y)
    assert clf.sigma0_ == 0.3
    np.testing.assert_array_equal(clf.sigma0_weights_, [1.0, 0.0])
    assert np.isfinite(clf.predict_proba(X)).all()


def test_a_member_whose_mean_breaks_down_on_a_row_drops_out_of_that_rows_average():
    # Two members of equal evidence; the second's predictions go NaN on row 0 while it still
    # holds half the weight (its belief broke down in the update before). Row 0 is then
    # predicted by the first member alone, as predict would (its mean a probability vector
    # summing to 1, not half of one), and from then on the second weighs nothing.
    nan = float("nan")
    log_prob = np.log([[0.8, 0.7], [nan, 0.9]])
    prediction = np.array([[[0.2, 0.8], [0.3, 0.7]], [[nan, nan], [0.9, 0.1]]])
    averaged_log_prob, averaged, evidence = _average_over_members(np.zeros(2), log_prob, prediction)
    np.testing.assert_allclose(averaged, [[0.2, 0.8], [0.3, 0.7]])
    np.testing.assert_allclose(averaged_log_prob, np.log([0.8, 0.7]))
    assert evidence[1] == -np.inf and evidence[0] == pytest.approx(np.log(0.8 * 0.7))


def test_auto_regressor_keeps_the_units_of_y():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = 1000.0 * (np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=300))
    reg = BONGRegressor(sigma0="auto", hidden_layer_sizes=(16,), random_state=0, prequential=True).fit(X, y)
    assert reg.score(X, y) > 0.8
    assert reg.prequential_prediction_.shape == (300,)
    fixed = BONGRegressor(sigma0=reg.sigma0_, hidden_layer_sizes=(16,), random_state=0).fit(X, y)
    np.testing.assert_allclose(reg.predict(X), fixed.predict(X), rtol=1e-4, atol=1e-3 * y.std())


@pytest.mark.parametrize("bad", [[], [0.1, -1.0], [[0.1, 0.3]], [0.1, np.nan], "wide", True, {0.1, 1.0}])
def test_bad_scale_grids_are_refused(bad, digits):
    X, y = digits
    clf = BONGClassifier(sigma0=bad)
    with pytest.raises((InvalidParameterError, ValueError), match="sigma0"):
        clf.fit(X, y)
    assert not hasattr(clf, "posterior_")


def test_a_fixed_scale_reports_itself(digits):
    X, y = digits
    clf = BONGClassifier(sigma0=0.2, hidden_layer_sizes=(8,), random_state=0).fit(X, y)
    assert clf.sigma0_ == 0.2
    np.testing.assert_array_equal(clf.sigma0_grid_, [0.2])
    np.testing.assert_array_equal(clf.sigma0_weights_, [1.0])
    clf.set_params(sigma0="auto").partial_fit(X[:10], y[:10])  # sigma0 acts at fit only
    assert clf.sigma0_ == 0.2 and not hasattr(clf, "_members")


@pytest.mark.parametrize("obs_noise", ["calibrated", 1.0])
def test_recording_the_stream_never_changes_what_auto_fits(obs_noise):
    """The scales are weighed by their plug-in evidence whether the stream is recorded
    (prequential=True, whose record is the regressor's linearised predictive) or not. On
    diabetes the linearised predictive's evidence chose sigma0 = 1 where the plug-in's chose
    0.1, so recording used to change the fit."""
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    fits = [
        BONGRegressor(sigma0="auto", obs_noise=obs_noise, prequential=recorded, random_state=0).fit(X[:300], y[:300])
        for recorded in (False, True)
    ]
    assert fits[0].sigma0_ == fits[1].sigma0_
    np.testing.assert_allclose(fits[0].sigma0_weights_, fits[1].sigma0_weights_, atol=1e-6)
    np.testing.assert_allclose(fits[0].predict(X[300:]), fits[1].predict(X[300:]), rtol=1e-5)
    assert fits[1].prequential_log_prob_.shape == (300,) and np.all(np.isfinite(fits[1].prequential_log_prob_))


def test_scales_whose_evidence_cannot_differ_are_told_and_others_are_not():
    # A probe: BOG on dlr steps the mean by a plain gradient at the mean, which no prior scale
    # changes, so every scale had one evidence and sigma0_ was the grid's first, reported as
    # the most probable.
    X, y = load_iris(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    with pytest.warns(UserWarning, match=r"cannot choose a prior scale.*algorithm='bog'.*Fix sigma0"):
        tied = BONGClassifier(hidden_layer_sizes=(4,), sigma0="auto", algorithm="bog", learning_rate=0.05,
                              random_state=0).fit(X, y)
    # Weighed by the prior over the scales alone; sigma0_ is its favourite, the default.
    np.testing.assert_allclose(tied.sigma0_weights_, np.exp(_log_scale_prior(AUTO_SIGMA0)), rtol=1e-9)
    assert tied.sigma0_ == 0.3
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        BONGClassifier(hidden_layer_sizes=(4,), sigma0="auto", random_state=0).fit(X, y)
        tied.partial_fit(X, y)  # said once per fit
    assert not [w for w in caught if "cannot choose" in str(w.message)]
    # All the rows in one step: each predicted at the prior mean, whatever the scale. The
    # remedy is a smaller batch_size (the warning said that the steps ignore the covariance).
    with pytest.warns(UserWarning, match=r"fell in one step of batch_size=200 rows.*Use a smaller batch_size"):
        BONGClassifier(hidden_layer_sizes=(4,), sigma0="auto", batch_size=200, random_state=0).fit(X, y)


def test_a_predictive_changed_after_a_sweep_fit_warns_that_the_weights_mix_two_evidences():
    # A probe: predictive set after fit, then partial_fit, summed the plug-in evidence of the
    # first rows with the probit evidence of the later ones in sigma0_weights_, silently.
    X, y = load_iris(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    X, y = (X[order] - X.mean(axis=0)) / X.std(axis=0), y[order]
    clf = BONGClassifier(hidden_layer_sizes=(4,), sigma0=[0.1, 1.0], random_state=0).fit(X[:100], y[:100])
    clf.set_params(predictive="probit")
    with pytest.warns(UserWarning, match=r"predictive='probit'.*before by that of 'plugin'.*Call fit"):
        clf.partial_fit(X[100:120], y[100:120])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        clf.partial_fit(X[120:], y[120:])  # said once per change
        clf.fit(X, y)  # a fit weighs by one predictive
        BONGClassifier(hidden_layer_sizes=(4,), sigma0=[0.1, 1.0], random_state=0).fit(X, y).set_params(
            predictive="mc"
        ).predict_proba(X)  # predicting with another predictive weighs nothing


def test_a_few_rows_that_cannot_tell_the_scales_apart_leave_the_default_scale():
    # One row of each class: the scales' evidence is within a fraction of a nat, narrowest
    # first. Under a uniform prior over the grid sigma0_ was 0.01, whose posterior barely
    # leaves the prior mean; the prior over the scales settles the near-tie on the default.
    X, y = load_iris(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    rows = [0, 50, 100]
    common = dict(prequential=True, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # three rows: too few for the health checks' verdicts
        evidence = [BONGClassifier(sigma0=s, **common).fit(X[rows], y[rows]).prequential_log_prob_.sum()
                    for s in AUTO_SIGMA0]
        auto = BONGClassifier(sigma0="auto", **common).fit(X[rows], y[rows])
        narrowest = BONGClassifier(sigma0=AUTO_SIGMA0[0], random_state=0).fit(X[rows], y[rows])
    assert np.ptp(evidence) < 1.0 and int(np.argmax(evidence)) == 0  # the premise: a near-tie, narrowest first
    assert auto.sigma0_ == 0.3
    rest = np.setdiff1d(np.arange(len(y)), rows)
    assert auto.score(X[rest], y[rest]) > narrowest.score(X[rest], y[rest]) + 0.1
