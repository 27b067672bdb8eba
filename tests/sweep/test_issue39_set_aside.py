"""Issue 39, smaller points: whatever is set aside is named where the user
looks, with a UTC time stamp as the record store names a damaged record: a
damaged resume state on the terminal (not only in the run's log), a damaged
image or shift cache file, a planted report cache (OUT/cache/measures.json)."""
from __future__ import annotations

import json
import re

import numpy as np

from bench.cli.main import main
from bench.core import store
from sweeputil import TINY, run_args, specs_for

STAMP = r"\.damaged-\d{8}T\d{6}Z"


def test_a_damaged_resume_state_is_named_on_the_terminal(tmp_path, capsys, one_thread):
    results = tmp_path / "runs"
    (spec,) = specs_for(run_args(results, "--seeds", "1"))
    state = store.state_path(spec.record)
    state.parent.mkdir(parents=True)
    state.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{not a}")  # cut by a kill -9
    assert main(["run", "--dataset", "digits", "--backbone", "smallcnn", "--results",
                 str(results), "--no-progress", *TINY, "--seeds", "1",
                 "--executor", "inline"]) == 0
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if "DAMAGED STATE" in ln]
    assert spec.label in line and "training from step 0" in line
    (aside,) = state.parent.glob(f"{state.name}.damaged-*")
    assert re.search(STAMP + "$", aside.name) and aside.name in line
    assert store.is_complete(spec.record)


def test_two_damaged_cache_files_are_both_kept_with_time_stamps(tmp_path, capsys):
    from bench.datasets.cache import set_aside

    kept = []
    for marker in (b"first", b"second"):
        path = tmp_path / "abc.npy"
        path.write_bytes(marker)
        aside = set_aside(path, "truncated")
        assert re.fullmatch(r"abc\.npy" + STAMP + r"(-[0-9a-f]{6})?", aside.name)
        kept.append(aside)
        assert str(path) in capsys.readouterr().err
    assert kept[0] != kept[1] and [p.read_bytes() for p in kept] == [b"first", b"second"]


def test_a_planted_report_cache_is_named_set_aside_and_recomputed(tmp_path, capsys):
    from report_records import write_known

    root = write_known(tmp_path / "runs")
    out = tmp_path / "rep"
    assert main(["report", "--results", str(root), "--out", str(out), "--no-plots",
                 "--no-progress"]) == 0
    cache = out / "cache" / "measures.json"
    good = json.loads(cache.read_text())
    planted = {"version": good["version"], "entries": {"x": "os.system('rm -rf ~')"}}
    cache.write_text(json.dumps(planted))
    capsys.readouterr()
    assert main(["report", "--results", str(root), "--out", str(out), "--no-plots",
                 "--no-progress"]) == 0
    err = capsys.readouterr().err
    (line,) = [ln for ln in err.splitlines() if "report cache" in ln]
    assert str(cache) in line and "damaged" in line
    (aside,) = out.glob("measures.json.damaged-*")
    assert re.search(STAMP + "$", aside.name) and json.loads(aside.read_text()) == planted
    again = json.loads(cache.read_text())  # recomputed: the same entries as the first time
    assert again["entries"].keys() == good["entries"].keys()
    first = good["entries"][next(iter(good["entries"]))]["value"]["values"]
    assert np.allclose([again["entries"][next(iter(good["entries"]))]["value"]["values"][m]
                        for m in first], [first[m] for m in first])
