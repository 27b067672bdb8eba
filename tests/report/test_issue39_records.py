"""Issue 39, point 2: a record of an earlier format, without validation
arrays, reads in every report: its plain cells are shown, the calibrated
rows (fitted on the validation split) leave it out, and a footnote under
those tables names it; no traceback."""
from __future__ import annotations

import numpy as np
import pytest

from bench.cli.main import main
from bench.core import store
from bench.calib import measures as M
from bench.calib import variants as V
from report_records import KNOWN, write_known

OLD = ("resnet50", "4hml", 1)  # backbone, method, seed of the record rewritten


def _without_validation(root, backbone, method, seed):
    """The record as an earlier trainer wrote it: test logits and labels only."""
    import json
    import shutil

    path = store.record_dir(root, "toy", backbone, method, "abc123", seed)
    config = json.loads((path / "config.json").read_text())
    metrics = json.loads((path / "metrics.json").read_text())
    preds = dict(np.load(path / "predictions.npz"))
    shutil.rmtree(path)
    for key in ("files", "status"):
        metrics.pop(key, None)
    store.write_record(path, config, metrics, {k: preds[k] for k in ("test_logits",
                                                                     "test_labels")})
    assert store.verify(path) is None  # intact: `bench check` has nothing against it
    return path


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    root = write_known(tmp_path_factory.mktemp("old"))
    return root, _without_validation(root, *OLD)


def _md_row(path, label: str) -> list[str]:
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == label:
            return cells
    raise AssertionError(f"no row {label} in {path}")


@pytest.mark.parametrize("flags", [[], ["--no-ts", "--variants", "vs"]])
def test_point2_a_record_without_validation_arrays_reports_its_plain_cells(mixed, flags,
                                                                           tmp_path, capsys):
    root, old = mixed
    out = tmp_path / "rep"
    assert main(["report", "--results", str(root), "--out", str(out), "--no-plots",
                 "--no-progress", *flags]) == 0
    assert "Traceback" not in capsys.readouterr().err
    kind = "ts" if not flags else "posthoc"
    md, tex = out / "tables" / f"toy_{kind}.md", out / "tables" / f"toy_{kind}.tex"
    label = old.relative_to(root).as_posix()
    assert label in md.read_text() and label.replace("_", "\\_") in tex.read_text()
    # the plain row keeps all three seeds (metrics.json's stored values)
    main_row = _md_row(out / "tables" / "toy_main.md", "4HML")
    assert float(main_row[2]) == pytest.approx(np.mean(KNOWN[("resnet50", "4hml")]["ece"]))
    # the calibrated row: the mean over the two seeds with a validation split
    variant = V.TS if not flags else V.get("vs")
    eces = []
    for seed in (0, 2):
        preds = store.load_predictions(store.record_dir(root, "toy", "resnet50", "4hml",
                                                        "abc123", seed))
        probs, labels, _ = variant.apply(preds)
        eces.append(M.get("ece")(probs, labels))
    row = _md_row(md, "4HML" + ("+TS" if not flags else "+VS"))
    assert float(row[2]) == pytest.approx(100 * np.mean(eces), abs=0.006)


def test_point2_shift_report_of_a_record_without_validation_arrays(tmp_path, capsys):
    import json
    import shutil

    import evalrecords as E
    from bench.core import evalfiles

    root = E.write(tmp_path / "runs", ood=False)
    path = E.record(root, "2hml", 1)
    config = json.loads((path / "config.json").read_text())
    metrics = json.loads((path / "metrics.json").read_text())
    preds, shifted = store.load_predictions(path), evalfiles.load(path, "shift")
    shutil.rmtree(path)
    metrics.pop("files", None)
    metrics.pop("status", None)
    store.write_record(path, config, metrics, {k: preds[k] for k in ("test_logits",
                                                                     "test_labels")})
    evalfiles.write(path, "shift", shifted, {"kind": "shift"})
    out = tmp_path / "rep"
    assert main(["report", "--results", str(root), "--out", str(out), "--no-plots",
                 "--no-progress", "--shift", "--variants", "vs"]) == 0
    text = (out / "report.md").read_text()
    assert f"{path}: no validation arrays" in text and "skipped the shift set" not in text
    import csv
    with open(out / "shift" / "shift_long.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["method"] == "2hml"]
    assert {r["seed"] for r in rows if r["variant"] == "plain"} == {"0", "1"}
    assert {r["seed"] for r in rows if r["variant"] == "vs"} == {"0"}


def test_point3_a_validation_split_too_small_gets_a_footnote_on_its_rows(tmp_path, capsys):
    import json
    import shutil

    root = write_known(tmp_path / "runs")
    path = store.record_dir(root, "toy", "resnet50", "2hml", "abc123", 0)
    small = store.record_dir(root, "toy", "resnet50", "4hml", "abc123", 2)
    preds = store.load_predictions(small)
    config, metrics = (json.loads((small / f).read_text()) for f in ("config.json",
                                                                     "metrics.json"))
    shutil.rmtree(small)
    for key in ("files", "status"):
        metrics.pop(key, None)
    keep = np.arange(6)  # labels 0, 1, 2, 3, 0, 1: every class, 6 samples
    store.write_record(small, config, metrics, {**preds, "val_logits": preds["val_logits"][keep],
                                                "val_labels": preds["val_labels"][keep]})
    out = tmp_path / "rep"
    assert main(["report", "--results", str(root), "--out", str(out), "--no-plots",
                 "--no-progress", "--variants", "vs,dirichlet"]) == 0
    k, label = 4, "toy/resnet50/4hml/abc123/seed2"
    posthoc = (out / "tables" / "toy_posthoc.md").read_text()
    # 6 samples: enough for TS (1) and ... not for VS (2K = 8) nor Dirichlet (K(K+1) = 20)
    assert f"{label}: 6 validation samples, for +VS ({2 * k} parameters), +Dirichlet " \
           f"({k * (k + 1)} parameters)" in posthoc
    assert str(path.relative_to(root)) not in posthoc
    assert label not in (out / "tables" / "toy_ts.md").read_text()
    assert label.replace("_", "\\_") in (out / "tables" / "toy_posthoc.tex").read_text()
