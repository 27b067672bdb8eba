"""Issue 33's "Done when", end to end on the command line: on tiny PathMNIST
and Chaoyang data in their exact on-disk formats (tests/datasets' writers),

    bench run --method sl1h,4hml,dens --eval shift --eval ood:kvasir --keep-weights
    bench report --shift --ood
    bench eval --eval ood:<another source>

give the shift table per dataset (rows SL1H, 4HML, D-Ens; severities 0-5),
the ECE box plots, the OOD table (AUROC / FPR95 of MSP and entropy, MI for
4HML), and a new OOD set on every kept-weight record without its metrics or
predictions changing (bytes and mtime).

The corruption sets are medmnistc's own, whole (11 corruptions x 5
severities at 224 px, about 0.5 s an image): 6 + 5 test images keep the build
near 6 s. The records are trained once for the module (inline executor held to one
torch thread: two threads on two busy cores make each small step many times
slower; 12 px, as tests/sweep/test_fuse_sweep.py), and the report skips the
main tables' figures."""
from __future__ import annotations

import csv
import hashlib
import os

import numpy as np
import pytest
import torch

from bench.cli.main import main
from bench.core import store
from bench.core.record import Record
from bench.datasets import medmnist, shift
from bench.report.document import Report
from tests.datasets.test_datasets import write_chaoyang, write_kvasir, write_npz
from test_eval_runs import image_folder

SEVERITIES = ["Clean (0)"] + [f"Severity {k}" for k in range(1, 6)]
ROWS = {"SL1H": "sl1h", "D-Ens": "dens", "4HML": "4hml"}
DATASETS = ("pathmnist", "chaoyang")
RECORD_FILES = ("metrics.json", "predictions.npz", "config.json", "model.safetensors")


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def records(results) -> list[Record]:
    return [Record(k.path(results), results) for k in store.iter_seed_dirs(results)]


@pytest.fixture(scope="module")
def flow(tmp_path_factory, one_thread):
    """The data root, the trained records and the report, made once."""
    root = tmp_path_factory.mktemp("flow")
    data, results, out = root / "data", root / "runs", root / "reports"
    (data / "medmnist").mkdir(parents=True)
    write_npz(data / "medmnist" / "pathmnist.npz", counts=(27, 9, 6))  # 9 classes; 6 test images
    write_chaoyang(data / "chaoyang", per_class_train=(4, 4, 4, 4), per_class_test=(2, 1, 1, 1))
    write_kvasir(data / "hyper-kvasir" / "labeled-images", per_class=(5, 5, 5, 5))  # 4 test
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BENCH_DATA_ROOT", str(data))  # ood:kvasir reads its default data root
        mp.setenv("BENCH_CACHE_DIR", str(root / "cache"))
        mp.setattr(medmnist, "LEGACY_ROOT", root / "no-legacy")
        # the inline executor sets torch's threads to the pool slot's (every
        # core); one_thread's one is kept: on two busy cores two threads made
        # each small step ~10x slower (bench.sweep.worker's note)
        mp.setattr(torch, "set_num_threads", lambda n: None)
        shift._get.cache_clear()
        assert main(["run", "--method", "sl1h,4hml,dens", "--dataset", ",".join(DATASETS),
                     "--backbone", "smallcnn", "--profile", "quick", "--set", "cycles=1",
                     "--set", "epochs_per_cycle=1", "--set", "image_size=12", "--seeds", "2",
                     "--keep-weights", "--eval", "shift", "--eval", "ood:kvasir",
                     "--results", str(results), "--device", "cpu", "--executor", "inline",
                     "--no-progress"]) == 0
        # the main tables' figures (reliability diagrams with bootstrap bands,
        # curves, CD diagrams: three quarters of the report's time here) are
        # not under test; the shift box plots are written with the shift tables
        mp.setattr(Report, "write_figures", lambda self, out: [])
        assert main(["report", "--results", str(results), "--out", str(out), "--shift",
                     "--ood", "--no-progress"]) == 0
        yield root, data, results, out
    shift._get.cache_clear()


def test_run_stores_the_sets_beside_every_record(flow):
    _, _, results, _ = flow
    recs = records(results)
    assert sorted((r.key.dataset, r.method) for r in recs) == sorted(
        (d, m) for d in DATASETS for m in ("sl1h", "4hml") for _ in range(2))
    n_test = {"pathmnist": 6, "chaoyang": 5}
    classes = {"pathmnist": 9, "chaoyang": 4}
    for r in recs:
        assert r.has_weights and store.verify(r.path) is None
        heads, k = r.heads, classes[r.key.dataset]
        s = r.eval_set("shift")
        assert s["logits"].shape == (1 + 11 * 5, n_test[r.key.dataset], heads, k)
        assert sorted(set(s["severity"].tolist())) == [0, 1, 2, 3, 4, 5]
        assert len(set(s["corruption"].tolist()) - {"clean"}) == 11  # the PathMNIST set
        assert r.eval_set("ood-kvasir")["logits"].shape == (4, heads, k)
        assert r.evals["shift"]["set"] == "pathmnist"  # Chaoyang too (docs/shift.md)


def _md_rows(path) -> dict:
    return _md_text_rows(path.read_text())


def _md_text_rows(text: str) -> dict:
    lines = [l for l in text.splitlines() if l.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = {}
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = dict(zip(head, cells))
    return head, rows


def _md_blocks(path) -> tuple:
    """A shift table's Markdown, one block per severity, read as one table:
    every block's heads in order, each row's cells by head."""
    heads, rows = ["Method"], {}
    for block in path.read_text().split("\n\n"):
        if not block.startswith("| Method"):
            continue  # the notes
        head, some = _md_text_rows(block)
        heads += head[1:]
        for label, cells in some.items():
            rows.setdefault(label, {}).update(cells)
    return heads, rows


@pytest.mark.parametrize("dataset", DATASETS)
def test_shift_table_and_box_plots(flow, dataset):
    _, _, _, out = flow
    stem = f"shift_{dataset}_smallcnn"
    for ext in (".tex", ".md", "_doc.tex"):
        assert (out / "tables" / f"{stem}{ext}").stat().st_size > 0, ext
    head, rows = _md_blocks(out / "tables" / f"{stem}.md")  # a block per severity
    assert [h for h in head if h.split(" ACC")[0] in SEVERITIES] == \
        [f"{s} ACC↑" for s in SEVERITIES]
    assert set(ROWS) <= set(rows)
    for row in ROWS:
        assert float(rows[row]["Clean (0) ACC↑"]) >= 0
    tex = (out / "tables" / f"{stem}.tex").read_text()
    assert all(r in tex for r in ROWS) and "Severity 5" in tex
    with open(out / "shift" / "shift_cells.csv", newline="") as fh:
        cells = [c for c in csv.DictReader(fh) if c["dataset"] == dataset]
    for row in ROWS.values():
        assert sorted({int(c["severity"]) for c in cells if c["row"] == row}) == list(range(6))
        assert all(np.isfinite(float(c["ece_mean"])) for c in cells if c["row"] == row)
    for ext, magic in ((".png", b"\x89PNG"), (".pdf", b"%PDF")):
        fig = out / "figures" / f"shift_ece_{dataset}_smallcnn{ext}"
        assert fig.read_bytes()[:4] == magic


@pytest.mark.parametrize("dataset", DATASETS)
def test_ood_table(flow, dataset):
    _, _, _, out = flow
    stem = out / "tables" / f"ood_{dataset}_smallcnn_kvasir"
    assert stem.with_suffix(".tex").stat().st_size > 0
    head, rows = _md_rows(stem.with_suffix(".md"))
    for score in ("MSP", "Entropy", "MI"):
        assert f"{score} AUROC↑" in head and f"{score} FPR95↓" in head
    assert set(ROWS) <= set(rows)

    def number(text):  # '41.67 ± 16.67' or '5.56'
        return float(text.split("±")[0])

    for row in ROWS:
        for col in ("MSP AUROC↑", "MSP FPR95↓", "Entropy AUROC↑", "Entropy FPR95↓"):
            assert 0 <= number(rows[row][col]) <= 100, (row, col)
    assert 0 <= number(rows["4HML"]["MI AUROC↑"]) <= 100
    assert rows["SL1H"]["MI AUROC↑"] == "–"  # one head: no disagreement


def test_bench_eval_adds_an_ood_set_without_retraining(flow, capsys):
    root, _, results, _ = flow
    noise = image_folder(root / "noise", 5, 7)
    recs = records(results)
    before = {r.path: {n: (sha(r.path / n), (r.path / n).stat().st_mtime_ns)
                       for n in RECORD_FILES} for r in recs}
    capsys.readouterr()
    assert main(["eval", "--results", str(results), "--eval", f"ood:{noise}", "--device", "cpu",
                 "--no-progress"]) == 0
    assert "8 evaluated" in capsys.readouterr().out
    for r in recs:
        fresh = Record(r.path, results)
        assert fresh.eval_set("ood-noise")["logits"].shape == (5, r.heads,
                                                               {"pathmnist": 9, "chaoyang": 4}
                                                               [r.key.dataset])
        assert fresh.evals["ood-noise"]["model"].startswith("weights sha256:")
        assert {"shift", "ood-kvasir"} <= set(fresh.evals)  # the earlier sets kept
        for n, (digest, mtime) in before[r.path].items():
            assert sha(r.path / n) == digest and (r.path / n).stat().st_mtime_ns == mtime, n
    import bench.results

    frame = bench.results.ood(str(results))
    assert set(frame["ood_set"]) == {"kvasir", "noise"}


def test_bench_eval_names_a_missing_source_before_building_anything(flow, capsys, monkeypatch):
    """With records (so a test size): a MedMNIST flag without its file is one
    line, exit 2, and nothing in the records or the cache changes."""
    root, _, results, _ = flow
    monkeypatch.setenv("BENCH_DATA_ROOT", str(root / "data"))
    monkeypatch.setattr(medmnist, "LEGACY_ROOT", root / "no-legacy")

    def tree():
        return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}

    before = tree()
    capsys.readouterr()
    assert main(["eval", "--results", str(results), "--eval", "shift", "--eval",
                 "ood:bloodmnist", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "ood:bloodmnist" in err and "bloodmnist.npz" in err
    assert tree() == before
    assert os.path.isdir(results)


def test_method_dens_trains_its_members_and_needs_two_seeds(tmp_path, capsys):
    """`--method sl1h,4hml,dens` as the issue writes it: D-Ens is a report row
    made of the sl1h seeds, so `dens` plans sl1h runs (once), and one seed is
    one line, exit 2, nothing written."""
    from test_eval_runs import TINY

    results = tmp_path / "runs"
    assert main(["run", *TINY, "--method", "dens", "--results", str(results)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--method dens" in err and "at least 2 seeds" in err
    assert not results.exists()
    assert main(["run", *TINY, "--method", "sl1h,dens,4hml", "--seeds", "2", "--dry-run",
                 "--json", "--results", str(results)]) == 0
    import json

    planned = [json.loads(line) for line in capsys.readouterr().out.splitlines()
               if line.startswith("{")]
    assert sorted(p["method"] for p in planned) == ["4hml", "4hml", "sl1h", "sl1h"]
