"""Backbones by their display names, never their keys: the registrations'
names (a plugin backbone declares its own), recorded in config.json, in
every table header and figure title; the paper's spelling of ConvNeXt kept."""
import numpy as np
import pytest

from bench.cli.main import main
from bench.core import store
from bench.report import build
from bench.report.plotting import figures as figs
from bench.report.options import ReportOptions
from bench.train.backbones import BACKBONES


@pytest.fixture
def plugin_backbone():
    from bench.plugins import register_backbone
    from bench.train.backbones import smallcnn

    register_backbone("zznet", "a plugin's backbone", "ZZ-Net")(smallcnn)
    yield "zznet"
    BACKBONES._entries.pop("zznet")
    BACKBONES._display.pop("zznet")


def test_registered_display_names(plugin_backbone):
    assert {b: BACKBONES.display_name(b) for b in
            ("resnet50", "convnext_tiny", "swin_tiny", "smallcnn", "resnet18")} == {
        "resnet50": "ResNet50", "convnext_tiny": "ConvNeXt", "swin_tiny": "Swin-T",
        "smallcnn": "SmallCNN", "resnet18": "ResNet18"}
    assert BACKBONES.display_name(plugin_backbone) == "ZZ-Net"
    assert BACKBONES.display_name("timm/resnet34") == ""  # none declared: its key is shown


def write(root, backbone, method, recorded=None):
    rng = np.random.default_rng(len(backbone) + len(method))
    z = rng.normal(size=(60, 1, 3)).astype(np.float32)
    y = np.arange(60) % 3
    config = {"dataset": "toy", "backbone": backbone, "method": method, "seed": 0, "heads": 1,
              **({"backbone_name": recorded} if recorded else {})}
    test = {"acc": 0.5, "ece": 0.1, "nll": 1.0}
    store.write_record(store.record_dir(root, "toy", backbone, method, "abc", 0), config,
                       {"test": test, "val": test},
                       {"val_logits": z, "val_labels": y, "test_logits": z, "test_labels": y})


def test_tables_and_figures_print_display_names(tmp_path):
    """smallcnn from an older record (nothing recorded): the built-in
    spelling; zznet: the name its record carries (no plugin loaded here)."""
    root = tmp_path / "r"
    for bb, recorded in (("smallcnn", None), ("zznet", "ZZ-Net"), ("convnext_tiny", None)):
        for m in ("sl1h", "ls"):
            write(root, bb, m, recorded)
    out = tmp_path / "out"
    assert main(["report", "--results", str(root), "--out", str(out), "--no-plots",
                 "--no-progress", "--no-ts"]) == 0
    md = (out / "tables" / "toy_main.md").read_text()
    head = md.splitlines()[0]
    assert "ConvNeXt ACC↑" in head and "SmallCNN ACC↑" in head and "ZZ-Net ACC↑" in head
    assert "smallcnn" not in md and "zznet" not in md
    assert r"\textbf{SmallCNN}" in (out / "tables" / "toy_main.tex").read_text()
    rep = build(root, ReportOptions(no_progress=True, no_ts=True))
    for bb, name in (("smallcnn", "SmallCNN"), ("zznet", "ZZ-Net")):
        binned, smooth = figs.reliability_figures(rep.run_list, "toy", bb, names=rep.labels)
        for fig in (binned, smooth):
            assert f"toy / {name} (pooled over seeds)" in fig._suptitle.get_text()
        assert figs.block_title("toy", bb, rep.labels) == f"toy / {name}"
    # --label still wins
    rep = build(root, ReportOptions(no_progress=True, no_ts=True, label=("zznet=Mine",)))
    assert figs.block_title("toy", "zznet", rep.labels) == "toy / Mine"
