"""No ':' in any file `bench report` writes: a backbone named timm:NAME (or
tv:NAME) gives its figures and tables '+' in their file names, as its record
folders (bench.core.pathnames), since rsync and scp read 'host:path' and
Windows refuses a ':'. A timm name may carry a pretrained tag after a dot
(timm:resnet18.a1_in1k); the file keeps it whole ('.png' is appended, the tag
is no suffix to replace)."""
from __future__ import annotations

import csv
import json

import numpy as np

from bench.cli.main import main
from bench.core import store

BACKBONE = "timm:test_resnet.a1_in1k"
STEM = "toy_timm+test_resnet.a1_in1k"  # what every per-cell file name holds
K, N = 3, 30


def _write(root, method: str, seed: int) -> None:
    rng = np.random.default_rng(seed + 10 * len(method))
    labels = np.arange(N) % K
    z = rng.normal(0, 1, (N, 1, K)).astype(np.float32)
    z[np.arange(N), 0, labels] += 2.0
    test = {"acc": 0.8 + 0.01 * seed, "ece": 0.05, "nll": 0.5, "brier": 0.3, "auc": 0.9}
    history = {"epochs": [{"cycle": 1, "epoch": e, "train_loss": 1.0 / e, "lr": 0.01}
                          for e in (1, 2)],
               "cycles": [{"cycle": 1, "val_acc": 0.8, "val_ece": 0.1, "val_nll": 0.6,
                           "val_auc": 0.9}]}
    config = {"dataset": "toy", "backbone": BACKBONE, "method": method, "seed": seed,
              "heads": 1}
    path = store.record_dir(root, "toy", BACKBONE, method, "abc123", seed)
    store.write_record(path, config, {"test": test, "val": dict(test), "history": history}, {
        "val_logits": z, "val_labels": labels, "test_logits": z, "test_labels": labels})


def test_a_timm_backbone_report_writes_no_colon_in_any_path(tmp_path):
    root, out = tmp_path / "results", tmp_path / "report"
    for method in ("sl1h", "ls"):
        _write(root, method, 0)
    assert main(["report", "--results", str(root), "--out", str(out), "--no-progress",
                 "--sets", "--no-ts"]) == 0
    written = [p.relative_to(out).as_posix() for p in out.rglob("*")]
    assert written and [p for p in written if ":" in p] == []
    names = set(written)
    for name in (f"figures/reliability_{STEM}.png", f"figures/reliability_{STEM}.pdf",
                 f"figures/smooth_reliability_{STEM}.png", f"figures/ece_bins_{STEM}.png",
                 f"figures/curves_{STEM}.png", f"figures/sets_{STEM}.pdf",
                 f"tables/sets_{STEM}.tex", f"tables/sets_{STEM}_doc.tex", "tables/toy_main.tex"):
        assert name in names, name
    # the wrappers \input the fragments by the names they were written under
    assert f"\\input{{sets_{STEM}}}" in (out / "tables" / "all_tables.tex").read_text()
    # and the names themselves are still the names, in the data and the report
    with open(out / "runs.csv") as f:
        assert {r["backbone"] for r in csv.DictReader(f)} == {BACKBONE}
    assert f"(figures/curves_{STEM}.png)" in (out / "report.md").read_text()
    assert json.loads((root / "toy" / "timm+test_resnet.a1_in1k" / "ls" / "abc123" / "seed0"
                       / "config.json").read_text())["backbone"] == BACKBONE
