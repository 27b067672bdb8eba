"""`bench report` names the `--method recent` losses' sources under each table
that shows them and `--cost` gives their rows (issue 49, point 5); a report
of methods without a declared source has no such note."""
from __future__ import annotations

import csv

import pytest

from bench.cli.main import main
from bench.core.config import TrainConfig
from bench.core.paper import METHOD_SOURCES
from bench.methods import RECENT, create_method


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    from bench.train.experiment import make_experiment, run_seed
    from tests.conftest import digits_subset

    tiny = digits_subset(24, 20, 20)
    root = tmp_path_factory.mktemp("results")
    cfg = TrainConfig(cycles=1, epochs_per_cycle=1, batch_size=8)
    for name in ("sl1h",) + RECENT:
        exp = make_experiment(tiny, "smallcnn", create_method(name), cfg)
        run_seed(exp, tiny, create_method(name), 0, root, device="cpu", progress=False)
    return root


def report(root, out, *extra) -> None:
    assert main(["report", "--results", str(root), "--out", str(out), "--no-plots", "--no-ts",
                 "--no-progress", *extra]) == 0


def test_sources_note_and_cost_rows(results, tmp_path, capsys):
    out = tmp_path / "r"
    report(results, out, "--cost")
    table = capsys.readouterr().out
    assert set(RECENT) <= set(METHOD_SOURCES)
    md = " ".join((out / "report.md").read_text().split())
    notes = [ln for ln in table.splitlines() if ln.startswith("Sources: ")]
    assert len(notes) == 1  # the main table's (std shows no rows' sources in the terminal)
    for label, key in (("DFL", "dualfocal"), ("ACLS", "acls"), ("RankMixup", "rankmixup"),
                       ("MIMO", "mimo"), ("AdaFocal", "adafocal"), ("CALS", "cals")):
        assert f"{label}: {METHOD_SOURCES[key]}" in notes[0]
        assert f"{label}: {METHOD_SOURCES[key]}" in md
    assert "Tao, Dong and Xu, Dual Focal Loss for Calibration, ICML 2023" in notes[0]
    with open(out / "groups.csv") as f:
        rows = {r["row"]: r for r in csv.DictReader(f)}
    lines = {ln.split("  ")[0].strip(): ln for ln in table.splitlines()}
    for label, row in (("DFL", "dualfocal"), ("ACLS", "acls"), ("MIMO", "mimo"),
                       ("AdaFocal", "adafocal"), ("CALS", "cals")):
        assert float(rows[row]["n_params"]) > 0
        assert f"{float(rows[row]['n_params']) / 1e6:.2f}" in lines[label]


def test_no_note_without_a_sourced_method(results, tmp_path, capsys):
    report(results, tmp_path / "r", "--method", "sl1h")
    assert "Sources:" not in capsys.readouterr().out
