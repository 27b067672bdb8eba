"""`--set` takes several KEY=VALUE after one flag (`--set cycles=1
epochs_per_cycle=1`), as well as one per flag; before, the second item was an
"unrecognized arguments" error."""
from __future__ import annotations

import json

from bench.cli.main import main


def dry_run(tmp_path, capsys, *sets: str) -> dict:
    assert main(["run", "--dataset", "digits", "--backbone", "smallcnn", "--seeds", "1",
                 "--profile", "quick", "--results", str(tmp_path / "r"), "--dry-run",
                 "--json", *sets]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.strip()]
    assert len(lines) == 1
    return json.loads(lines[0])


def test_several_items_after_one_set(tmp_path, capsys):
    run = dry_run(tmp_path, capsys, "--set", "cycles=2", "epochs_per_cycle=3", "lr=0.05")
    assert (run["cycles"], run["epochs_per_cycle"], run["lr"]) == (2, 3, 0.05)


def test_one_item_per_set_and_mixed(tmp_path, capsys):
    run = dry_run(tmp_path, capsys, "--set", "cycles=2", "--set", "epochs_per_cycle=3",
                  "batch_size=4")
    assert (run["cycles"], run["epochs_per_cycle"], run["batch_size"]) == (2, 3, 4)


def test_bad_item_among_several_is_one_line(tmp_path, capsys):
    assert main(["run", "--dataset", "digits", "--results", str(tmp_path / "r"), "--dry-run",
                 "--set", "cycles=1", "epochs=1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'epochs'" in err and "epochs_per_cycle" in err
    assert not (tmp_path / "r").exists()
