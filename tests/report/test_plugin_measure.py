"""A plugin's measure and calibrator reach the report through their
registration alone (issue 31): the plugin module registers them with
bench.plugins, nothing else in the harness is edited, and `bench report
--metrics` / `--variants` show them in the tables, CSVs and bench list."""
import csv

import numpy as np
import pytest
from pluginutil import clean_plugins  # noqa: F401 - fixture
from report_records import write_known

from bench.cli.main import main

PLUGIN = '''
import numpy as np
from bench.plugins import register_calibrator, register_measure


@register_measure("mce", head="MCE", help="maximum calibration error over 15 bins")
def mce(probs, labels):
    conf = probs.max(1)
    right = probs.argmax(1) == labels
    bins = np.minimum((conf * 15).astype(int), 14)
    gaps = [abs(right[bins == b].mean() - conf[bins == b].mean())
            for b in range(15) if (bins == b).any()]
    return max(gaps)


def fit(logits, labels):
    return float(np.std(logits))  # a scale, so the test can recompute it


def apply(logits, scale):
    z = logits / scale
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


register_calibrator("stdscale", fit, apply, "logits divided by their validation std")
'''


def test_a_plugin_measure_and_calibrator_reach_the_tables(tmp_path, monkeypatch, clean_plugins,
                                                          capsys):
    (tmp_path / "myplug.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("BENCH_PLUGINS", "myplug")
    records = write_known(tmp_path / "results")
    out = tmp_path / "out"
    assert main(["report", "--results", str(records), "--out", str(out), "--no-plots",
                 "--no-progress", "--metrics", "ece,mce", "--variants", "ts,stdscale"]) == 0
    head = (out / "tables" / "toy_main.md").read_text().splitlines()[0]
    assert "MCE↓" in head
    posthoc = (out / "tables" / "toy_posthoc.md").read_text()
    assert "SL1H+STDSCALE" in posthoc.upper() or "Stdscale" in posthoc
    with open(out / "runs.csv") as f:
        row = next(r for r in csv.DictReader(f) if r["method"] == "2hml" and r["seed"] == "0")
    import myplug

    from bench.core.record import Record

    p = Record(row["path"]).predictions
    probs = np.exp(p["test_logits"].astype(np.float64))
    probs = (probs / probs.sum(-1, keepdims=True)).mean(1)
    assert float(row["mce"]) == pytest.approx(myplug.mce(probs, p["test_labels"]), abs=1e-6)
    with open(out / "groups.csv") as f:
        rows = {(r["backbone"], r["row"]): r for r in csv.DictReader(f)}
    assert rows[("resnet50", "2hml+stdscale")]["variant"] == "stdscale"
    assert main(["list"]) == 0
    listed = capsys.readouterr().out
    assert "mce" in listed and "stdscale" in listed and "plugin module myplug" in listed
