"""The README's main job: digits streamed through BONGClassifier and SGDClassifier, both
tuned the same way on validation rows."""

import jax
import numpy as np

from skbong import demo
from skbong.demo import BANDS, main


def test_demo_tunes_both_models_and_bong_leads_on_log_loss_and_calibration(capsys):
    report = main()
    out = capsys.readouterr().out
    for name in ("BONGClassifier", "SGDClassifier"):
        tuning = report["tuning"][name]
        # The chosen setting is the lowest validation log-loss, and the stream ran with it.
        assert tuning["chosen"] == int(np.nanargmin(tuning["log_loss"]))
        chosen = tuning["settings"][tuning["chosen"]]
        assert {r["setting"] for r in report["rows"] if r["model"] == name} == {chosen}
        assert f"{name} ({chosen})" in out
        assert 0.0 <= report["compile_seconds"][name] <= report["seconds"][name]
        bands = report["bands"][name]
        assert sum(b["digits"] for b in bands) == 540  # every test digit in one band
        for band, (low, high) in zip(bands, zip(BANDS[:-1], BANDS[1:])):
            if band["digits"]:
                assert low <= band["probability"] <= high and 0.0 <= band["right"] <= 1.0
    bong = [r for r in report["rows"] if r["model"] == "BONGClassifier"]
    sgd = [r for r in report["rows"] if r["model"] == "SGDClassifier"]
    assert [r["rows"] for r in bong] == [100, 500, 1257] == [r["rows"] for r in sgd]
    # Against SGD tuned the same way, BONG's probabilities are better at every checkpoint
    # and better calibrated after the stream.
    for b, s in zip(bong, sgd):
        assert b["log_loss"] < s["log_loss"]
    assert bong[-1]["accuracy"] > sgd[-1]["accuracy"]
    # sigma0="auto", which sees no validation rows, also beats the tuned SGD on log-loss.
    auto = [r for r in report["rows"] if r["model"] == "BONGClassifier (auto)"]
    assert [r["rows"] for r in auto] == [100, 500, 1257] and auto == report["auto"]["rows"]
    assert auto[-1]["log_loss"] < sgd[-1]["log_loss"]
    assert "BONGClassifier (sigma0='auto')" in out
    ece = report["calibration_error"]
    assert ece["BONGClassifier"] < ece["SGDClassifier"]
    assert "compiling" in out and "calibration" in out
    # The demo counts JAX's compilations only while it runs: importing or running it leaves
    # JAX's global listeners as they were, so a program compiled after it is not counted.
    if hasattr(jax.monitoring, "unregister_event_duration_listener"):
        counted = demo._compile_seconds[0]
        jax.jit(lambda x: x * 3.0 + 1.0)(np.arange(7.0)).block_until_ready()
        assert demo._compile_seconds[0] == counted
