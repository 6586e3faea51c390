"""The continual-learning options through the estimators: spherical LO-FI, covariance
inflation, schedules for the dynamics and the online noise estimate (issue 21 item 1).

The algorithms themselves are checked against dense float64 oracles in
``tests/core/test_dynamics.py``; here: that the estimators reach them, keep their
guarantees (clear refusals that lose nothing, no recompilation when tuning, pickling) and
that each option does what it is for on a stream that needs it.
"""

import copy
import dataclasses
import pickle
import re
import warnings

import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import log_loss
from sklearn.model_selection import GridSearchCV
from sklearn.utils._param_validation import InvalidParameterError

from skbong import BONGClassifier, BONGRegressor
from skbong.core import trace_count


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X / 16, y


def task_switch_noise(t):
    """Process noise at the start of every 400-row block: where the task changes."""
    return jnp.where(t % 400 == 0, 0.05, 0.0)


def test_spherical_family_fits_and_stays_spherical(digits):
    X, y = digits
    clf = BONGClassifier(family="slr", rank=10, hidden_layer_sizes=(16,), random_state=0).fit(X[:1200], y[:1200])
    assert clf.score(X[1200:], y[1200:]) > 0.85
    diag = np.asarray(clf.posterior_.diag_precision)
    np.testing.assert_array_equal(diag, diag[0])  # eta I: the data enter W only
    assert diag[0] == pytest.approx(1 / 0.3**2, rel=1e-6)
    with pytest.raises(ValueError, match="spherical"):
        BONGClassifier(family="slr", algorithm="bog").fit(X[:20], y[:20])


@pytest.mark.parametrize("inflation", ["bayesian", "simple", "hybrid"])
def test_inflation_at_zero_alpha_changes_nothing(digits, inflation):
    """``alpha = 0`` is the identity in all three forms (Eqs. 79-91), and a positive alpha
    changes the posterior."""
    X, y = digits
    params = dict(hidden_layer_sizes=(8,), rank=4, random_state=0, shuffle=False)
    plain = BONGClassifier(**params).partial_fit(X[:300], y[:300], classes=np.arange(10))
    zero = BONGClassifier(inflation=inflation, inflation_alpha=0.0, **params)
    zero.partial_fit(X[:300], y[:300], classes=np.arange(10))
    np.testing.assert_allclose(zero.posterior_.mean, plain.posterior_.mean, rtol=1e-5, atol=1e-6)
    moved = BONGClassifier(inflation=inflation, inflation_alpha=0.01, **params)
    moved.partial_fit(X[:300], y[:300], classes=np.arange(10))
    assert np.max(np.abs(np.asarray(moved.posterior_.mean) - np.asarray(plain.posterior_.mean))) > 1e-3


def test_tuning_alpha_never_recompiles(digits):
    X, y = digits
    search = GridSearchCV(
        BONGClassifier(inflation="bayesian", hidden_layer_sizes=(8,), rank=3, random_state=0),
        {"inflation_alpha": [1e-4, 1e-3]},
        cv=2,
    )
    search.fit(X[:200], y[:200])
    before = trace_count()
    search.set_params(param_grid={"inflation_alpha": [3e-4, 3e-3]}).fit(X[:200], y[:200])
    assert trace_count() == before


def test_refusals_lose_nothing(digits):
    X, y = digits
    clf = BONGClassifier(hidden_layer_sizes=(8,), rank=3, random_state=0).fit(X[:100], y[:100])
    mean = np.asarray(clf.posterior_.mean).copy()
    clf.set_params(inflation="bayesian", process_noise=task_switch_noise)
    with pytest.raises(ValueError, match="constant dynamics"):
        clf.partial_fit(X[100:150], y[100:150])
    np.testing.assert_array_equal(clf.posterior_.mean, mean)
    assert clf.t_ == 100
    with pytest.raises(ValueError, match="inflation"):
        BONGClassifier(inflation="bayes").fit(X[:20], y[:20])


def test_schedule_equals_constant_and_pickles(digits):
    """A schedule that returns the constant gives the constant's posterior; an estimator
    with a module-level schedule function pickles and goes on."""
    X, y = digits
    params = dict(hidden_layer_sizes=(8,), rank=3, random_state=0, shuffle=False)
    # In float64: the two compiled programs round differently, and with the line search a
    # float32 run drifts by a few ulps (3e-7) over 200 steps.
    constant = BONGClassifier(process_noise=1e-4, dtype="float64", **params).fit(X[:200], y[:200])
    scheduled = BONGClassifier(process_noise=lambda t: 1e-4, dtype="float64", **params).fit(X[:200], y[:200])
    np.testing.assert_allclose(scheduled.posterior_.mean, constant.posterior_.mean, rtol=1e-10, atol=1e-12)

    clf = BONGClassifier(process_noise=task_switch_noise, **params).fit(X[:200], y[:200])
    restored = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(restored.predict_proba(X[200:260]), clf.predict_proba(X[200:260]))
    restored.partial_fit(X[200:260], y[200:260])
    assert clone(clf).process_noise is task_switch_noise


def test_schedule_recovers_after_a_task_switch(digits):
    """Permuted digits: a second task with other pixel positions. Noise injected where the
    task changes lets the filter learn the new task; a static filter, whose posterior has
    tightened on the first task, learns it more slowly."""
    X, y = digits
    rng = np.random.default_rng(0)
    first, second = X[:800], X[800:1600][:, rng.permutation(64)]
    stream_X, stream_y = np.concatenate([first, second]), np.concatenate([y[:800], y[800:1600]])
    accuracy = {}
    for name, noise in (("static", 0.0), ("schedule", lambda t: jnp.where(t == 800, 0.05, 0.0))):
        clf = BONGClassifier(hidden_layer_sizes=(32,), process_noise=noise, prequential=True, random_state=0,
                             shuffle=False)
        clf.fit(stream_X, stream_y)
        prob = np.exp(clf.prequential_log_prob_[1000:])  # after the switch has been seen a little
        accuracy[name] = float(np.mean(prob))
    assert accuracy["schedule"] > accuracy["static"] + 0.02, accuracy


def test_adaptive_noise_follows_a_noise_change():
    """The noise level jumps from 0.1^2 to 1 half-way: the adaptive estimate follows it.
    The fixed "auto" noise, 0.1 Var(y) of the quiet half, is 100 times too large there; the
    adaptive one-step-ahead log-likelihood beats it on the quiet half (0.49 nats per row
    when written) and is as
    good on the noisy half."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1600, 3))
    scale = np.where(np.arange(1600) < 800, 0.1, 1.0)
    y = 3 * (X[:, 0] + np.sin(X[:, 1])) + scale * rng.normal(size=1600)
    results, regressors = {}, {}
    for obs_noise in ("adaptive", "auto"):
        reg = BONGRegressor(obs_noise=obs_noise, hidden_layer_sizes=(16,), prequential=True, random_state=0)
        reg.partial_fit(X[:800], y[:800])
        quiet = float(reg.obs_noise_[0])
        reg.partial_fit(X[800:], y[800:])
        log_prob = reg.prequential_log_prob_
        results[obs_noise] = (quiet, float(reg.obs_noise_[0]), log_prob[200:800].mean(), log_prob[1000:].mean())
        regressors[obs_noise] = reg
    quiet, noisy, quiet_loglik, noisy_loglik = results["adaptive"]
    assert quiet < 0.2 and 0.7 < noisy < 1.6, results
    assert quiet_loglik > results["auto"][2] + 0.3, results
    assert noisy_loglik > results["auto"][3] - 0.05, results
    # The predictions use the latest estimate: the predictive spread covers the new noise.
    _, std = regressors["adaptive"].predict(X[:50], return_std=True)
    assert np.all(std >= np.sqrt(noisy) * 0.999)


def test_adaptive_noise_with_auto_sigma0_keeps_an_estimate_per_scale():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 3))
    y = X[:, 0] + 0.3 * rng.normal(size=400)
    reg = BONGRegressor(obs_noise="adaptive", sigma0="auto", hidden_layer_sizes=(8,), random_state=0)
    reg.partial_fit(X[:200], y[:200])
    assert reg._member_obs_noise.shape == (reg.sigma0_grid_.size, 1)
    chosen = int(np.argmax(reg.sigma0_weights_))
    assert reg.obs_noise_[0] == pytest.approx(reg._member_obs_noise[chosen, 0] * reg._y_scale[0] ** 2)
    reg.partial_fit(X[200:], y[200:])
    assert 0.03 < reg.obs_noise_[0] < 0.3


def test_dynamics_that_break_a_fit_are_named_in_its_error_or_warning(digits):
    """A decay below 1 without process noise shrinks the covariance by gamma^2 a step until
    the belief collapses (at 0.9 its precision passes float32's range within 600 steps);
    a large process noise forgets each row at once. The errors and the warning name the
    dynamics and what to change, not only sigma0."""
    X, y = digits
    params = dict(hidden_layer_sizes=(8,), rank=3, random_state=0)
    clf = BONGClassifier(**params).fit(X[:50], y[:50])
    mean = np.asarray(clf.posterior_.mean).copy()
    # Static weights first: a probe's stationary friedman1 at decay 0.99 with the q offered
    # reached R^2 0.69, at decay 1 0.89.
    with pytest.raises(FloatingPointError, match=r"dynamics_decay=0.9 and no process_noise.*gamma\^2 = 0.81.*"
                       r"set dynamics_decay=1 \(static weights.*"
                       r"add process_noise \(q = \(1 - gamma\^2\) sigma0\^2 = 0.0171"):
        clf.set_params(dynamics_decay=0.9).partial_fit(X[50:650], y[50:650])
    np.testing.assert_array_equal(clf.posterior_.mean, mean)
    # Confident guesses near chance (13% right), worse than the class frequencies: garbage.
    with pytest.raises(FloatingPointError, match=r"The dynamics may be the cause: process_noise \(now 1.0\).*; try "
                       r"a smaller process_noise, or static weights"):
        BONGClassifier(process_noise=1.0, **params).fit(X[:600], y[:600])
    with pytest.raises(InvalidParameterError, match="dynamics_decay"):
        BONGClassifier(dynamics_decay=1.5, **params).fit(X[:50], y[:50])
    # A fit that starts with such dynamics is told at once: the collapse may be too slow
    # for the health checks to see in the rows at hand, and the model is degenerate.
    with pytest.warns(UserWarning, match=r"dynamics_decay=0.99 and no process_noise.*belief collapses"):
        BONGClassifier(dynamics_decay=0.99, **params).fit(X[:50], y[:50])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        BONGClassifier(dynamics_decay=0.99, process_noise=1e-4, **params).fit(X[:50], y[:50])


@dataclasses.dataclass
class _UnhashableSchedule:  # a plain dataclass with eq is not hashable
    value: float = 1e-4

    def __call__(self, t):
        return jnp.where(t < 100, self.value, 0.0)


@pytest.mark.parametrize(
    "schedule, message",
    [
        (lambda t: jnp.full((1,), 1e-4), r"must return one real number \(a scalar\) per row; it returned shape \(1,\)"),
        (lambda t: 1e-4 if t < 100 else 0.0, "could not be traced.*jax.numpy.*TracerBoolConversionError"),
        (_UnhashableSchedule(), r"must be hashable.*_UnhashableSchedule is not.*@dataclass\(frozen=True\)"),
    ],
    ids=["array", "python-if", "unhashable"],
)
def test_a_schedule_that_is_not_a_traceable_scalar_is_refused_up_front(digits, schedule, message):
    X, y = digits
    clf = BONGClassifier(hidden_layer_sizes=(8,), rank=3, random_state=0).fit(X[:50], y[:50])
    mean = np.asarray(clf.posterior_.mean).copy()
    for name in ("process_noise", "dynamics_decay"):
        with pytest.raises(TypeError, match=f"The {name} schedule {message}"):
            clf.set_params(**{name: schedule}).partial_fit(X[50:60], y[50:60])
        clf.set_params(**{name: 1.0 if name == "dynamics_decay" else 0.0})
    np.testing.assert_array_equal(clf.posterior_.mean, mean)
    assert clf.t_ == 50


@pytest.mark.parametrize(
    "name, schedule, bad",
    [
        ("dynamics_decay", lambda t: jnp.where(t < 70, 0.999, -0.5), "-0.5"),
        ("dynamics_decay", lambda t: jnp.where(t < 70, 1.0, 1.05), "1.05"),
        ("process_noise", lambda t: jnp.where(t < 70, 1e-4, -1e-3), "-0.001"),
        ("process_noise", lambda t: jnp.where(t < 70, 1e-4, jnp.nan), "nan"),
    ],
    ids=["negative-decay", "decay-above-one", "negative-noise", "nan-noise"],
)
def test_a_schedule_out_of_its_range_is_refused_at_its_first_bad_step(digits, name, schedule, bad):
    """A schedule must stay where its constant may be (0 < gamma <= 1, q >= 0, finite). A
    call whose rows reach the first bad step (t = 70) is refused before it runs, names
    that step and the value, and keeps the posterior; rows before it are absorbed; a fit
    whose passes reach it is refused too."""
    X, y = digits
    other = {"dynamics_decay": {"process_noise": 1e-4}, "process_noise": {}}[name]
    clf = BONGClassifier(hidden_layer_sizes=(8,), rank=3, random_state=0, **{name: schedule}, **other)
    clf.partial_fit(X[:50], y[:50], classes=np.arange(10))
    mean = np.asarray(clf.posterior_.mean).copy()
    with pytest.raises(ValueError, match=rf"The {name} schedule gave {bad} at t = 70 \(the index"):
        clf.partial_fit(X[50:100], y[50:100])
    np.testing.assert_array_equal(clf.posterior_.mean, mean)
    assert clf.t_ == 50
    clf.partial_fit(X[50:70], y[50:70])  # t = 50..69: in range
    assert clf.t_ == 70
    clone(clf).fit(X[:30], y[:30])  # one pass: t < 30
    with pytest.raises(ValueError, match=rf"gave {bad} at t = 70 "):
        clone(clf).set_params(max_iter=3).fit(X[:30], y[:30])  # three passes: t = 0..89


def test_runaway_simple_inflation_raises_and_names_alpha(digits):
    """Simple inflation widens unconstrained directions by ``(1 + alpha)`` per step without
    bound; a filter that diverges that way is refused, not returned."""
    X, y = digits
    clf = BONGClassifier(hidden_layer_sizes=(16,), random_state=0).fit(X[:100], y[:100])
    mean = np.asarray(clf.posterior_.mean).copy()
    clf.set_params(inflation="simple", inflation_alpha=0.05)
    with pytest.raises(FloatingPointError, match="inflation_alpha"):
        clf.partial_fit(X[100:1100], y[100:1100])
    np.testing.assert_array_equal(clf.posterior_.mean, mean)


def _warned_after_a_silent_start(reg, X, y):
    """Feed rows 0-999 in calls of 100, which must draw no ConvergenceWarning, then rows
    1000-1099, which must: their warnings."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        for start in range(0, 1000, 100):
            reg.partial_fit(X[start : start + 100], y[start : start + 100])
    with pytest.warns(ConvergenceWarning) as record:
        reg.partial_fit(X[1000:1100], y[1000:1100])
    return record


def test_a_stream_warned_after_a_drift_is_told_to_forget_and_then_follows():
    """A regressor that predicted well, fed chunks after an abrupt change of the target
    (y -> 30 - y at row 1000): its static-weight posterior is confident in the old rows
    and predicts the new ones worse than their mean. The chunk is absorbed, not refused
    (the means are those of the old target, not garbage: a refused chunk kept the state,
    and a probe's stream whose target or noise changed stayed refused for good), and the
    warning names the drift and process_noise, not a sigma0 that partial_fit would
    ignore; with process_noise set, the model follows the new rows."""
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(1500, noise=1.0, random_state=0)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    y[1000:] = 30 - y[1000:]
    reg = BONGRegressor(hidden_layer_sizes=(16,), obs_noise="adaptive", random_state=0)
    record = _warned_after_a_silent_start(reg, X, y)
    assert reg.t_ == 1100 and reg.score(X[1100:1300], y[1100:1300]) < 0
    message = " ".join(str(warning.message) for warning in record)
    assert "if its data have changed (drift)" in message
    assert "Lower sigma0" not in message and "only fit sets the prior" in message
    # The advice followed as written: a decay with the process noise that keeps the prior's
    # variance (process_noise=1e-3 alone, advised before, made a probe's classifier diverge).
    advised = re.search(
        r"Set dynamics_decay=([0-9.]+) and process_noise=\(1 - \1\*\*2\) \* sigma0\*\*2 = ([0-9.e-]+) ", message
    )
    decay, noise = float(advised.group(1)), float(advised.group(2))
    assert noise == pytest.approx((1 - decay**2) * reg.sigma0_**2, rel=1e-2)
    static = copy.deepcopy(reg)
    reg.set_params(dynamics_decay=decay, process_noise=noise)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for start in (1100, 1200, 1300):
            reg.partial_fit(X[start : start + 100], y[start : start + 100])
            static.partial_fit(X[start : start + 100], y[start : start + 100])
    # The rows after them, of the new target: followed with the advice, not without it.
    assert reg.score(X[1400:], y[1400:]) > 0.5 and static.score(X[1400:], y[1400:]) < 0


def test_predictions_between_updates_are_the_kalman_forecast_of_the_next_row():
    """Under drift the weights of the next row are the posterior's after one more predict
    step, ``mu -> gamma mu``, ``Sigma -> gamma^2 Sigma + q I``; ``predict`` made before an
    update is that forecast (the Kalman filter's one-step-ahead predictive), not the
    filtered posterior's, whose spread misses ``q`` (a probe's drifting stream: 90% intervals
    covered 0.887 instead of 0.927). A linear-Gaussian model on ``fc`` is exact, so the
    closed form from ``posterior_`` must hold; targets standardised by hand make the
    estimator's own standardisation the identity."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    y = X @ np.array([1.0, -0.5, 0.3]) + 0.3 * rng.normal(size=120)
    y = (y - y.mean()) / y.std()
    decay, q, noise = 0.98, 0.01, 0.09
    reg = BONGRegressor(
        hidden_layer_sizes=(), family="fc", dtype="float64", obs_noise=noise, dynamics_decay=decay, process_noise=q
    ).fit(X, y)
    x_new = rng.normal(size=(4, 3))
    rows = np.c_[np.ones(4), x_new]  # the flat weights are the bias, then the kernel
    posterior_mean = np.asarray(reg.posterior_.mean)
    np.testing.assert_allclose(reg.predict_with_params(x_new, posterior_mean)[0], rows @ posterior_mean, rtol=1e-12)
    cov = decay**2 * np.asarray(reg.posterior_.cov) + q * np.eye(4)
    mean, std = reg.predict(x_new, return_std=True)
    np.testing.assert_allclose(mean, decay * rows @ posterior_mean, rtol=1e-9)
    np.testing.assert_allclose(reg.predict(x_new), mean, rtol=1e-12)
    # Posterior draws for the next row (Thompson sampling) come from the same forecast.
    draws = reg.sample_params(40_000, random_state=0)
    standard_error = np.sqrt(cov.diagonal().max() / 40_000)
    np.testing.assert_allclose(draws.mean(axis=0), decay * posterior_mean, atol=4 * standard_error)
    np.testing.assert_allclose(np.cov(draws.T), cov, atol=0.03 * cov.diagonal().max())
    np.testing.assert_allclose(std**2, np.einsum("bp,pq,bq->b", rows, cov, rows) + noise, rtol=1e-9)


@pytest.mark.parametrize(
    "make, options",
    [
        (BONGRegressor, dict(family="dlr", process_noise=1e-3, dynamics_decay=0.99)),
        (BONGRegressor, dict(family="diag", process_noise=1e-3, obs_noise="calibrated")),
        (BONGClassifier, dict(family="dlr", inflation="hybrid", inflation_alpha=0.05, predictive="probit")),
        (BONGClassifier, dict(family="diag", process_noise=task_switch_noise, predictive="probit")),
    ],
    ids=["dlr-decay", "diag-calibrated", "dlr-hybrid", "diag-schedule"],
)
def test_predictions_before_each_update_are_the_filters_own_one_step_ahead_records(digits, make, options):
    # The filter scores each row by its predictive under the belief after the predict step,
    # and prequential_* keep those scores; predict before the row's partial_fit must agree.
    X, y = digits
    X, y = X[:420], (y[:420] if make is BONGClassifier else X[:420] @ np.linspace(-1, 1, 64))
    est = make(hidden_layer_sizes=(8,), prequential=True, random_state=0, dtype="float64", **options)
    first = dict(classes=np.unique(y)) if make is BONGClassifier else {}
    est.partial_fit(X[:400], y[:400], **first)
    forecasts, log_probs = [], []
    for t in range(400, 420):
        row = slice(t, t + 1)
        if make is BONGClassifier:
            forecasts.append(est.predict_proba(X[row]))
            log_probs.append(np.log(forecasts[-1][0, y[t]]))
        else:
            mean, std = est.predict(X[row], return_std=True)
            forecasts.append(mean)
            log_probs.append(-0.5 * np.log(2 * np.pi * std[0] ** 2) - 0.5 * ((y[t] - mean[0]) / std[0]) ** 2)
        est.partial_fit(X[row], y[row])
    np.testing.assert_allclose(np.concatenate(forecasts), est.prequential_prediction_[400:], rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(log_probs, est.prequential_log_prob_[400:], rtol=1e-7, atol=1e-10)


def test_inflation_is_named_among_the_dynamics_and_no_drift_is_blamed_on_static_weights():
    # inflation='simple' on a stationary, separable stream: the posterior diverges at row
    # 1316, before any change. The error called the weights static and blamed drift (a
    # probe): inflation forgets too, and the remedy it needs ('hybrid') went unnamed.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2100, 2))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    clf = BONGClassifier(hidden_layer_sizes=(8,), inflation="simple", inflation_alpha=0.01, random_state=0)
    with pytest.raises(FloatingPointError) as raised:
        for start in range(0, 2100, 7):
            clf.partial_fit(X[start : start + 7], y[start : start + 7], classes=[0, 1])
    message = str(raised.value)
    assert "inflation='simple' (inflation_alpha now 0.01) widens the covariance" in message
    assert "inflation='hybrid' or 'bayesian' keep the prior's variance" in message
    assert "over static weights stays confident" not in message and "drift" not in message
    # A decay this close to 1 is said as such, not as a shrinkage by gamma^2 = 1.
    with pytest.warns(UserWarning, match=r"gamma\^2 = 1 - 2e-09 until the belief collapses"):
        BONGClassifier(hidden_layer_sizes=(8,), dynamics_decay=1 - 1e-9, random_state=0).fit(X[:50], y[:50])


def test_a_stream_that_stops_learning_after_a_change_is_told_of_drift_not_only_of_sigma0():
    # A linear stream whose target flips sign at row 1000 (a probe's weight flip): the first
    # call after it is warned, and the advice must name drift and process_noise,
    # since that call's sigma0 cannot change (only fit sets the prior). (With the default
    # calibrated noise the filter-consistency warning, which names drift too, comes first.)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 5))
    y = X @ rng.normal(size=5) + 0.1 * rng.normal(size=2000)
    y[1000:] = -y[1000:]
    reg = BONGRegressor(hidden_layer_sizes=(), rank=6, obs_noise="adaptive", random_state=0)
    record = _warned_after_a_silent_start(reg, X, y)
    message = str(record[0].message)
    assert "if its data have changed (drift)" in message and "Set dynamics_decay=0.999 and process_noise" in message
    assert "then call partial_fit again" not in message  # the call was absorbed
    # No advice to change sigma0, which partial_fit cannot (the drift advice names the
    # fitted one in its formula for the process noise).
    advice = re.sub(r"Set dynamics_decay=.*?without bound\)", "", message)
    assert "sigma0" not in advice or "only fit sets the prior" in advice


def _burst_at_each_thousandth_row(t):
    return jnp.where(t % 1000 == 0, 1.0, 1e-5)


def test_a_schedule_meets_its_change_point_at_any_batch_size():
    # The documented pattern t % 1000 == 0 at a rotation of a linear target at row 1000.
    # With the schedule read at each step's first row, steps of 3 rows (999, 1002) never
    # met row 1000: the burst was skipped, and the errors after the change were 28 times
    # those of batch_size=1, silently (a probe). Every row's predict step now counts.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 2))
    angle = np.where(np.arange(1500) < 1000, 0.0, np.pi / 2)
    y = (X * np.c_[np.cos(angle), np.sin(angle)]).sum(axis=1) + 0.1 * rng.normal(size=1500)
    errors = {}
    for batch_size in (1, 3):
        reg = BONGRegressor(
            hidden_layer_sizes=(), process_noise=_burst_at_each_thousandth_row, batch_size=batch_size,
            prequential=True, random_state=0,
        ).partial_fit(X, y)
        errors[batch_size] = np.mean((reg.prequential_prediction_[1000:1300] - y[1000:1300]) ** 2)
    assert errors[1] < 0.05 and errors[3] < 3 * errors[1], errors


def _noise_until_row_20(t):
    return jnp.where(t < 20, 1e-3, jnp.nan)


def test_a_schedule_out_of_range_at_the_forecast_row_is_refused_by_the_predictions():
    # Valid at every row absorbed (t < 20), NaN at row 20, which the forecasts reach:
    # predict(return_std=True) and probit probabilities raised a FloatingPointError that
    # blamed the inputs and sigma0, and sample_params returned NaN draws (a probe).
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(20, 2)), rng.integers(0, 2, 20)
    match = r"The process_noise schedule gave nan at t = 20"
    reg = BONGRegressor(hidden_layer_sizes=(), process_noise=_noise_until_row_20, random_state=0).fit(X, X.sum(axis=1))
    clf = BONGClassifier(hidden_layer_sizes=(), process_noise=_noise_until_row_20, predictive="probit", random_state=0)
    clf.fit(X, y)
    for call in (lambda: reg.predict(X, return_std=True), lambda: reg.predict(X), lambda: reg.sample_params(3),
                 lambda: clf.predict_proba(X)):
        with pytest.raises(ValueError, match=match):
            call()


def test_forecasts_use_the_dynamics_of_the_last_call_not_a_value_set_since():
    # Predictions forecast the next row with the predict step the filter ran with; a value
    # set afterwards acts from the next call on, as it does for the filter.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = X @ np.array([1.0, -0.5, 0.3]) + 0.1 * rng.normal(size=200)
    reg = BONGRegressor(hidden_layer_sizes=(), family="fc", dtype="float64", random_state=0).fit(X[:150], y[:150])
    static_std = reg.predict(X[150:], return_std=True)[1]
    reg.set_params(process_noise=0.05)
    np.testing.assert_array_equal(reg.predict(X[150:], return_std=True)[1], static_std)
    reg.partial_fit(X[150:151], y[150:151])
    wider = reg.predict(X[151:], return_std=True)[1]
    reg.set_params(process_noise=0.0)
    np.testing.assert_array_equal(reg.predict(X[151:], return_std=True)[1], wider)
    # In the standardised units of the filter, with the calibrated scale c = noise_scale_: the
    # covariance c (Sigma + q I) and the noise c R_0 = obs_noise_ / Var(y).
    rows, scale = np.c_[np.ones(49), X[151:]], reg._y_scale
    cov = np.asarray(reg.posterior_.cov) + reg.noise_scale_ * 0.05 * np.eye(4)
    expected = np.einsum("bp,pq,bq->b", rows, cov, rows) + reg.obs_noise_ / scale**2
    np.testing.assert_allclose((wider / scale) ** 2, expected, rtol=1e-8)


def test_process_noise_that_makes_a_classifier_overconfident_is_told_so_and_the_advice_recovers_it():
    # With dynamics_decay=1 the variance of the weights no row pins down grows by q a row:
    # a probe's digits stream at q = 1e-3 classified 80% right at 2.59 nats against the
    # constant's 2.30 and was told it was "not learning", with advice for a model that does
    # not depend on X; then it diverged. Here (q = 3e-3, row 800: 75% right, 2.93 nats) it is
    # told it is overconfident (its Brier score is half the constant's), and the advised decay,
    # with the process noise that keeps the prior's variance, takes it back.
    X, y = load_digits(return_X_y=True)
    X = (X - X.mean(axis=0)) / np.where(X.std(axis=0) > 0, X.std(axis=0), 1.0)
    clf = BONGClassifier(hidden_layer_sizes=(16,), process_noise=3e-3, random_state=0)
    rng = np.random.default_rng(0)
    messages = []
    for _ in range(12):  # until the first warning
        rows = rng.choice(len(y), 100, replace=False)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            clf.partial_fit(X[rows], y[rows], classes=np.arange(10))
        messages = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
        if messages:
            break
    # 2.93 nats on one host, 3.31 (at the "far worse" threshold of 1 nat) on another (Zen 5).
    assert len(messages) == 1 and "is overconfident" in messages[0]
    assert re.search("(no better than|far worse than) a constant", messages[0])
    # What it still got right: its Brier score, or (far worse in log-loss) its share right.
    assert "not learning" not in messages[0]
    assert re.search(r"Brier score is 0\.|classified \d+% of them right", messages[0])
    # Far worse than after the advice on rows it has mostly seen: above chance's log 10 = 2.30
    # on an AMD EPYC host, 1.79 on an Intel Xeon (the stream's round-off decides how far out).
    assert log_loss(y, clf.predict_proba(X)) > 1.0
    advised = re.search(
        r"dynamics_decay=([0-9.]+) and process_noise=\(1 - \1\*\*2\) \* sigma0\*\*2 = ([0-9.e-]+)", messages[0]
    )
    clf.set_params(dynamics_decay=float(advised.group(1)), process_noise=float(advised.group(2)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        for _ in range(20):
            rows = rng.choice(len(y), 100, replace=False)
            clf.partial_fit(X[rows], y[rows])
    assert clf.score(X, y) > 0.9 and log_loss(y, clf.predict_proba(X)) < 0.5


def test_the_calibrated_noise_forgets_the_errors_of_a_drift():
    """A linear stream whose weights change after 2,000 rows, given the drift advice (decay
    0.999 with its process noise) 400 rows later, recovers its means within a few hundred
    rows. The calibrated scale was the mean over all the rows, which held the drift's errors
    (a probe: ``return_std`` 3.5-4.5 times the errors for the next 2,500 rows, and after
    1,100 rows a warning that blamed the process noise). It is now the smaller of that and
    the latest 200 rows' mean: within 1.5 times the errors 1,000 rows after the change, and
    no warning says the predictive variance does not match them."""
    rng = np.random.RandomState(0)
    X = rng.randn(3200, 10)
    w1, w2 = rng.randn(10), rng.randn(10)
    y = np.where(np.arange(3200) < 2000, X @ w1, X @ w2) + 0.5 * rng.randn(3200)
    reg = BONGRegressor(hidden_layer_sizes=(), random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reg.fit(X[:2000], y[:2000])
        for start in range(2000, 3000, 100):
            if start == 2400:
                reg.set_params(dynamics_decay=0.999, process_noise=(1 - 0.999**2) * 0.3**2)
            reg.partial_fit(X[start : start + 100], y[start : start + 100])
    assert not [w for w in caught if "does not match its errors" in str(w.message)]
    mean, std = reg.predict(X[3000:], return_std=True)
    rmse = np.sqrt(np.mean((mean - y[3000:]) ** 2))
    assert rmse < 0.7 and 0.7 < np.mean(std) / rmse < 1.5


def test_the_noise_warning_under_process_noise_names_the_part_of_the_variance_that_is_too_wide():
    """Under process noise the too-wide warning named process_noise whatever the noise.
    A probe's linear stream whose weights changed after 2,000 rows took the drift advice
    (decay 0.999 with its process noise) and recovered; 1,100 rows later it was told that
    process_noise made its variance 17.8 times its errors, but 9.7 of it was the calibrated
    noise, which still held the drift's errors, and a smaller process_noise did not mend it.
    (The calibrated scale now follows the latest rows, and forgets those errors: next
    test.) Now a noise too wide is named, here a fixed one 100 times the data's, with no
    word of the process noise; a process noise far too large is
    still named, with no decay below 1 offered (at 0.99 a probe's friedman1 lost R^2 0.27).
    With the calibrated noise the fitted scale ``c`` multiplies the process noise too, and
    follows a process noise far too large down (``c`` of 9e-5 at ``q = 10``): the
    predictive stays within a few times the errors, under the warning's threshold (before
    the scale's prior pulled ``log c`` and not ``c``, ``c`` could not go below about ``1 /
    N`` and the standard deviations were 6.4 times the errors); so that case is shown here
    at a fixed noise, the data's own."""
    rng = np.random.RandomState(0)
    X = rng.randn(5000, 10)
    w1, w2 = rng.randn(10), rng.randn(10)
    y = np.where(np.arange(5000) < 2000, X @ w1, X @ w2) + 0.5 * rng.randn(5000)
    drift_advice = dict(dynamics_decay=0.999, process_noise=(1 - 0.999**2) * 0.3**2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        BONGRegressor(hidden_layer_sizes=(), obs_noise=25.0, random_state=0, **drift_advice).fit(
            X[2000:3000], y[2000:3000]
        )
    (message,) = [str(w.message) for w in caught if "does not match its errors" in str(w.message)]
    assert "Use obs_noise='calibrated'" in message and "process_noise" not in message

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        BONGRegressor(hidden_layer_sizes=(), process_noise=10.0, obs_noise=0.25, random_state=0).fit(
            X[2000:3000], y[2000:3000]
        )
    (message,) = [str(w.message) for w in caught if "does not match its errors" in str(w.message)]
    assert "Use a smaller process_noise." in message and "dynamics_decay" not in message
    calibrated = BONGRegressor(hidden_layer_sizes=(), process_noise=10.0, random_state=0).fit(X[2000:3000], y[2000:3000])
    mean, std = calibrated.predict(X[3000:3200], return_std=True)
    assert np.mean(std) < 2.5 * np.sqrt(np.mean((mean - y[3000:3200]) ** 2))
