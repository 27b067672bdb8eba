"""Library backbones trained one tiny epoch through every method group (issue
49, point 1): a ResNet, an EfficientNet and a ViT from timm's offline test
models and torchvision's DenseNet. Every method of every group runs on
timm:test_resnet (the cheapest) through `bench run` as a user types it (20
digits images, 16 px, --executor inline); the other three run each group's
first method of each way a model is built (one head, M heads, MC-Dropout's
head, BatchEnsemble...) through the training loop on 16 images, so a new
method in a group is covered with no edit here. A method that cannot be built
on a backbone is refused in one line, exit 2, before anything is written.
On this 2-core machine under load: ~25 s in all, DenseNet-121 the slowest."""
from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
import torch

import bench.results
from bench.cli.main import main
from bench.core import store
from bench.core.config import PROFILES
from bench.core.errors import BenchError
from bench.core.paper import PAPER_METHODS
from bench.methods import METHOD_GROUPS, create_method
from bench.train.backbone_checks import check_arch
from bench.train.backbones import build_model, model_arch
from bench.train.loop import train
from tests.conftest import digits_subset

GROUPS = {"paper": tuple(PAPER_METHODS), **METHOD_GROUPS}
FULL = "timm:test_resnet"  # every method of every group
# backbone -> px: DenseNet's transitions pool 16 px to nothing (32: digits' own)
SAMPLED = {"timm:test_efficientnet": 16, "timm:test_vit": 16, "tv:densenet121": 32}
TINY = ["--dataset", "digits", "--seeds", "1", "--profile", "quick", "--set", "cycles=1",
        "--set", "epochs_per_cycle=1", "--set", "batch_size=16", "--data-opt",
        "train_per_class=2", "--data-opt", "test_per_class=2", "--executor", "inline",
        "--no-progress"]
CLASSES = 10  # digits


def build_kind(name: str) -> str:
    """How a method's model is built: its arch (mcdropout, batchensemble,
    packed...), else one head or M heads."""
    method = create_method(name)
    arch = model_arch(method)
    return arch[0] if arch else ("heads" if method.heads > 1 else "one head")


def refusal(backbone: str, name: str) -> str | None:
    try:
        check_arch(backbone, model_arch(create_method(name)), False)
    except BenchError as err:
        return str(err)
    return None


def sampled(group: str) -> list[str]:
    """The group's first method of each build kind."""
    firsts: dict[str, str] = {}
    for name in GROUPS[group]:
        firsts.setdefault(build_kind(name), name)
    return list(firsts.values())


def run(backbone: str, methods: str, results, size: int = 16) -> int:
    return main(["run", "--method", methods, "--backbone", backbone, *TINY,
                 "--set", f"image_size={size}", "--results", str(results)])


@pytest.fixture
def one_core(monkeypatch):
    """--executor inline gives torch every core (os.cpu_count); on a shared
    2-core machine two threads per tiny run are slower than one."""
    monkeypatch.setattr(os, "cpu_count", lambda: 1)


def check_records(results, backbone: str, names) -> None:
    """One complete record per method in the backbone's '+' folder, with
    finite test logits of the method's head count."""
    for name in names:
        method = create_method(name)
        method.setup(CLASSES, 0)
        folder = results / "digits" / backbone.replace(":", "+") / name
        (record,) = folder.glob("*/seed0")
        assert store.verify(record) is None, (backbone, name)
        logits = store.load_predictions(record)["test_logits"]
        assert logits.shape == (20, method.heads, CLASSES), (backbone, name)
        assert np.isfinite(logits).all(), (backbone, name)


@pytest.mark.usefixtures("one_core")
def test_a_timm_backbone_trains_the_paper_methods_on_digits(tmp_path, capsys):
    """`bench run --method paper --backbone timm:test_resnet` on digits: the
    issue's done-when. Its records moved to the ':' folder an older version
    wrote are still read (bench.results.load) and found done by a rerun."""
    assert run(FULL, "paper", tmp_path) == 0
    check_records(tmp_path, FULL, PAPER_METHODS)
    assert not (tmp_path / "digits" / FULL).exists()  # no ':' in a folder
    (tmp_path / "digits" / "timm+test_resnet").rename(tmp_path / "digits" / FULL)
    capsys.readouterr()
    assert run(FULL, "paper", tmp_path) == 0
    assert f"0 trained, {len(PAPER_METHODS)} already done" in capsys.readouterr().out
    assert not (tmp_path / "digits" / "timm+test_resnet").exists()
    df = bench.results.load(tmp_path)
    assert sorted(df["method"]) == sorted(PAPER_METHODS) and set(df["backbone"]) == {FULL}
    assert all(f"/{FULL}/" in str(p) for p in df["path"])


@pytest.mark.usefixtures("one_core")
@pytest.mark.parametrize("group", [g for g in GROUPS if g != "paper"])
def test_every_method_of_a_group_on_a_timm_resnet(tmp_path, group):
    names = [n for n in GROUPS[group] if refusal(FULL, n) is None]
    asked = group if len(names) == len(GROUPS[group]) else ",".join(names)
    assert run(FULL, asked, tmp_path) == 0
    check_records(tmp_path, FULL, names)


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("backbone", list(SAMPLED))
def test_each_build_kind_of_every_group_on_other_architectures(backbone):
    """Each sampled method one epoch of one step (16 images): finite test
    logits of its head count; its gradient reaches the backbone's stem."""
    data = digits_subset(16, 10, 10, SAMPLED[backbone])
    cfg = dataclasses.replace(PROFILES["quick"], cycles=1, epochs_per_cycle=1, batch_size=16)
    names = [n for g in GROUPS for n in sampled(g) if refusal(backbone, n) is None]
    assert len(names) >= len(GROUPS)
    for name in names:
        method = create_method(name)
        method.setup(data.num_classes, 0)
        torch.manual_seed(0)
        model, bb = build_model(backbone, data.image_size, method.heads, data.num_classes,
                                arch=model_arch(method))
        stem = next(p for p in bb.features.parameters()).detach().clone()
        out = train(model, method, cfg, data, 0, progress=False)
        assert out.test_logits.shape == (10, method.heads, CLASSES), name
        assert np.isfinite(out.test_logits).all(), name
        assert not torch.equal(stem, next(p for p in bb.features.parameters())), name


@pytest.mark.parametrize("backbone", [FULL, *SAMPLED])
def test_a_method_that_cannot_be_built_is_refused_before_anything_is_written(
        tmp_path, capsys, backbone):
    refused = [n for g in GROUPS for n in GROUPS[g] if refusal(backbone, n)]
    assert "packed" in refused  # grouped convolutions: conv/BN backbones only
    for name in refused:
        assert run(backbone, name, tmp_path / name) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and f"'{backbone}'" in err and name in err, err
        assert not (tmp_path / name / "digits").exists()
