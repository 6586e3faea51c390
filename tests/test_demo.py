"""The README's main job: the digits stream against SGDClassifier."""

from skbong.demo import main


def test_demo_reports_bong_ahead_of_sgd_at_every_checkpoint(capsys):
    rows = main()
    out = capsys.readouterr().out
    assert "BONGClassifier" in out and "SGDClassifier" in out
    bong = [r for r in rows if r["model"].startswith("BONG")]
    sgd = [r for r in rows if r["model"].startswith("SGD")]
    assert [r["rows"] for r in bong] == [100, 500, 1257] == [r["rows"] for r in sgd]
    for b, s in zip(bong, sgd):
        assert b["log_loss"] < s["log_loss"]
        assert b["accuracy"] > s["accuracy"]
