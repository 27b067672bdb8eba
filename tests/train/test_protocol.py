"""The released code's protocol (docs/fidelity.md): torchvision backbones and their
stochastic depth, torchvision-layout weights through --weights, the resolved
protocol of the whole paper grid through `--dry-run --json`, and drop path
inside fused groups."""
from __future__ import annotations

import json
import os
import random

import numpy as np
import pytest
import torch
import torchvision
from torchvision.ops import StochasticDepth

from bench.cli.main import main
from bench.train.backbones import build_model, create_backbone
from bench.train.nets import MultiHeadNet, RowDropPath
from bench.train.weights import resolve_weights
from tests.datasets.test_datasets import write_chaoyang, write_kvasir, write_npz

K = 4


def module_rate(model) -> float:
    """The configured drop-path rate, read from the modules (the last block has it)."""
    rates = [m.p for m in model.modules() if isinstance(m, (StochasticDepth, RowDropPath))]
    return max(rates, default=0.0)


@pytest.mark.parametrize("name, rate, sizes", [
    ("resnet50", 0.0, (28, 32, 150, 224)),
    ("convnext_tiny", 0.1, (32, 150, 224)),  # 28 px fails in the last downsampling
    ("swin_tiny", 0.2, (28, 32, 150, 224)),
])
def test_torchvision_backbones_sizes_and_drop_path(name, rate, sizes):
    torch.manual_seed(0)
    bb = create_backbone(name, sizes[0])
    assert bb.impl == "torchvision" and module_rate(bb.features) == pytest.approx(rate)
    assert bb.drop_path == pytest.approx(rate)
    model = MultiHeadNet(bb, 2, K).eval()
    with torch.no_grad():
        for size in sizes:  # one model takes every size: trained at 150, tested at 224
            assert model(torch.zeros(1, 3, size, size)).shape == (1, 2, K)
    assert module_rate(create_backbone(name, 32, drop_path=0.3).features) == \
        pytest.approx(0.0 if name == "resnet50" else 0.3)


def test_timm_alternative_keeps_timm_defaults():
    assert create_backbone("swin_tiny", 32, impl="timm").drop_path == pytest.approx(0.1)
    assert create_backbone("convnext_tiny", 32, impl="timm").drop_path == 0.0
    bb = create_backbone("timm:resnet10t", 32)  # any timm model, offline, random init
    assert bb.impl == "timm" and bb.weights == "random"


def test_torchvision_state_dict_loads_through_weights(tmp_path):
    """A state dict in torchvision's own layout (classifier included) loads into
    the backbone; the heads stay new (ConvNeXt: a fresh LayerNorm2d per head)."""
    torch.manual_seed(3)
    src = torchvision.models.convnext_tiny()
    torch.save(src.state_dict(), tmp_path / "cx.pth")
    spec = resolve_weights("convnext_tiny", weights=str(tmp_path / "cx.pth"), impl="torchvision")
    model, bb = build_model("convnext_tiny", 32, heads=2, num_classes=K, weights=spec)
    assert torch.equal(model.backbone.features[0][0].weight, src.features[0][0].weight)
    assert bb.weights.startswith("file:cx.pth sha256:")
    norm = model.per_head[1][0][0]
    assert type(norm).__name__ == "LayerNorm2d" and torch.equal(norm.weight, torch.ones(768))
    with torch.no_grad():  # head = the released code's LayerNorm2d + Flatten + Linear
        for head in model.per_head:
            head[0][0].load_state_dict(src.classifier[0].state_dict())
        x = torch.randn(2, 3, 32, 32)
        feats = src.eval().avgpool(src.features(x))
        expected = model.per_head[0][1](src.classifier[1](src.classifier[0](feats)))
        torch.testing.assert_close(model.eval()(x)[:, 0], expected)
    torch.save(torchvision.models.resnet18().state_dict(), tmp_path / "r18.pth")
    with pytest.raises(Exception, match="do not fit"):
        build_model("resnet50", 28, 1, K, weights=resolve_weights(
            "resnet50", weights=str(tmp_path / "r18.pth"), impl="torchvision"))


# --------------------------------------------------------- the paper grid --
TRAIN_OTHER = {"ls", "mbls", "mixup", "dca"}  # train_other.py: --im_size 150
MULTI_HEAD = {"2hsl": 2, "2hml": 2, "4hml": 4}


def expected_protocol(dataset: str, backbone: str, method: str, n_train: int) -> dict:
    """docs/fidelity.md's table, row by row, written out independently of the code."""
    if dataset == "pathmnist":
        train = 32 if backbone == "convnext_tiny" else 28
        sizes = {"augment": 28, "train": train, "val": train, "test": train}
    else:
        train = 150 if method in TRAIN_OTHER else 224
        sizes = {"augment": train, "train": train, "val": train, "test": 224}
    enum = {"resnet50": "ResNet50_Weights", "convnext_tiny": "ConvNeXt_Tiny_Weights",
            "swin_tiny": "Swin_T_Weights"}[backbone]
    version = "V2" if backbone == "resnet50" and method in MULTI_HEAD else "V1"
    heads = MULTI_HEAD.get(method, 1)
    return {"sizes": sizes, "backbone_impl": "torchvision", "pretrained": True,
            "weights": f"torchvision:{enum}.IMAGENET1K_{version}",
            "drop_path": {"resnet50": 0.0, "convnext_tiny": 0.1, "swin_tiny": 0.2}[backbone],
            "loss": "released" if heads > 1 else method, "heads": heads,
            "drop_last": True, "checkpoint_score": "released",
            "steps_per_epoch": n_train // 8}


def released_groups(k: int, m: int, seed: int) -> list:
    state = random.getstate()
    random.seed(seed)
    classes = list(range(k))
    random.shuffle(classes)
    random.setstate(state)
    return [list(map(int, g)) for g in np.array_split(classes, m)]


def fake_torch_hub(root) -> None:
    """Files named as torchvision's weight URLs: the dry run reads only their digest."""
    from torchvision.models import get_weight

    ckpt = root / "hub" / "checkpoints"
    ckpt.mkdir(parents=True)
    for tag in ("ResNet50_Weights.IMAGENET1K_V1", "ResNet50_Weights.IMAGENET1K_V2",
                "ConvNeXt_Tiny_Weights.IMAGENET1K_V1", "Swin_T_Weights.IMAGENET1K_V1"):
        (ckpt / os.path.basename(get_weight(tag).url)).write_bytes(tag.encode())


def test_paper_grid_dry_run_is_design_1b(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    fake_torch_hub(tmp_path / "torch")
    roots = {"chaoyang": tmp_path / "chaoyang", "kvasir": tmp_path / "labeled-images",
             "pathmnist": tmp_path / "pm"}
    write_chaoyang(roots["chaoyang"], per_class_train=(10, 10, 10, 10))
    write_kvasir(roots["kvasir"], per_class=(10, 15, 10, 20))
    roots["pathmnist"].mkdir()
    write_npz(roots["pathmnist"] / "pathmnist.npz", counts=(45, 18, 18))
    rows = []
    for dataset, root in roots.items():
        assert main(["run", "--method", "paper", "--dataset", dataset, "--data-root", str(root),
                     "--backbone", "all",  # the paper's three
                     "--seeds", "2", "--pretrained", "--results", str(tmp_path / "res"),
                     "--dry-run", "--json", "--no-progress"]) == 0
        rows += [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 3 * 3 * 8 * 2
    n_train = {"chaoyang": 40 - 40 // 5, "kvasir": 55 - 55 // 5 - (55 - 55 // 5) // 5,
               "pathmnist": 45}
    classes = {"chaoyang": 4, "kvasir": 4, "pathmnist": 9}
    for row in rows:
        want = expected_protocol(row["dataset"], row["backbone"], row["method"],
                                 n_train[row["dataset"]])
        assert {k: row[k] for k in want} == want, (row["dataset"], row["backbone"], row["method"])
        groups = row["class_groups"]
        if row["method"] in ("2hml", "4hml"):
            assert groups == released_groups(classes[row["dataset"]], want["heads"], row["seed"])
        else:
            assert groups is None
        assert row["status"] == "missing"


def test_paper_text_profile_changes_the_protocol_and_the_hash(tmp_path, capsys):
    def dry(*extra):
        assert main(["run", "--method", "ls,4hml", "--dataset", "digits", "--seeds", "1",
                     "--results", str(tmp_path), "--dry-run", "--json", *extra]) == 0
        return [json.loads(line) for line in capsys.readouterr().out.splitlines()]

    released, text = dry(), dry("--profile", "paper-text")
    assert [r["loss"] for r in released] == ["ls", "released"]
    assert [r["loss"] for r in text] == ["ls", "paper"]
    assert released[1]["class_groups"] == released_groups(10, 4, 0)
    assert text[1]["class_groups"] == [list(map(int, g)) for g in np.array_split(
        np.random.default_rng(0).permutation(10), 4)]
    # a paper-text run never reuses a released-protocol record
    assert not {r["config"] for r in released} & {r["config"] for r in text}
    assert dry("--profile", "paper-text", "--set", "mh_loss=released")[1]["loss"] == "released"


# ------------------------------------------------------- fused drop path --
def _fused_outputs(rate: float, members: int = 3):
    from bench.train.fused import FusedModel

    import copy

    torch.manual_seed(0)
    model, _ = build_model("convnext_tiny", 32, heads=1, num_classes=K, drop_path=rate)
    with torch.no_grad():  # ConvNeXt's layer scale starts at 1e-6: make the branches count
        for name, p in model.named_parameters():
            if name.endswith("layer_scale"):
                p.fill_(1.0)
    models = [copy.deepcopy(model) for _ in range(members)]
    alone = copy.deepcopy(model).train()
    x = torch.randn(4, 3, 32, 32)
    fm = FusedModel(models, "cpu")
    fm.train(True)
    with torch.no_grad():
        return fm(x.expand(members, *x.shape).contiguous()), alone(x)


def test_fused_equals_alone_with_drop_path_off():
    fused, alone = _fused_outputs(0.0)
    for s in range(fused.shape[0]):
        torch.testing.assert_close(fused[s], alone, rtol=1e-4, atol=1e-4)


def test_fused_members_draw_their_own_drop_path_masks():
    """Same weights, same input, drop path on: the members differ (own masks);
    torchvision's in-place StochasticDepth would make vmap refuse the call."""
    fused, _ = _fused_outputs(0.5)
    assert not torch.allclose(fused[0], fused[1]) and not torch.allclose(fused[1], fused[2])


def test_row_drop_path_has_torchvision_distribution():
    """Kept with probability 1 - p and scaled by 1/(1 - p), per sample, also under vmap."""
    from torch.func import vmap

    torch.manual_seed(0)
    mod = RowDropPath(0.25).train()
    x = torch.ones(4, 5000, 3)
    out = vmap(mod, randomness="different")(x)
    kept = out[..., 0] != 0
    assert (out[..., 0][kept] == pytest.approx(1 / 0.75))
    assert (out == out[..., :1]).all()  # one draw per sample ("row")
    assert kept.float().mean(1).sub(0.75).abs().max() < 0.03
    assert not torch.equal(kept[0], kept[1])


# ------------------------------------------------------- resolved settings --
def test_resolve_sizes_rules():
    import dataclasses

    from bench.core.config import TrainConfig
    from bench.core.errors import BenchError
    from bench.methods import create_method
    from bench.train.protocol import Sizes, resolve_sizes

    cfg, ls, sl = TrainConfig(), create_method("ls"), create_method("sl1h")
    assert resolve_sizes(cfg, 224, "resnet50", ls) == Sizes(150, 150, 224)
    assert resolve_sizes(cfg, 224, "resnet50", sl) == Sizes(224, 224, 224)
    uniform = dataclasses.replace(cfg, size_rule="uniform")
    assert resolve_sizes(uniform, 224, "resnet50", ls) == Sizes(224, 224, 224)
    assert resolve_sizes(cfg, 28, "convnext_tiny", ls) == Sizes(28, 32, 32)
    assert resolve_sizes(dataclasses.replace(cfg, image_size=64), 28, "resnet50", sl) \
        == Sizes(64, 64, 64)
    with pytest.raises(BenchError, match="timm's Swin takes one size"):
        resolve_sizes(dataclasses.replace(cfg, backbone_impl="timm"), 224, "swin_tiny", ls)


def test_checkpoint_score_released_applies_softmax_to_mean_probabilities():
    from scipy.special import softmax
    from sklearn.metrics import roc_auc_score

    from bench.train.protocol import checkpoint_auc, checkpoint_probs

    rng = np.random.default_rng(0)
    logits = 3 * rng.standard_normal((40, 2, 3))
    labels = np.arange(40) % 3
    mean = softmax(logits, axis=-1).mean(1)
    np.testing.assert_allclose(checkpoint_probs(logits, "mean_prob"), mean, rtol=1e-6)
    np.testing.assert_allclose(checkpoint_probs(logits, "released"), softmax(mean, axis=-1),
                               rtol=1e-6)
    assert checkpoint_auc(logits, labels, "released") == pytest.approx(
        roc_auc_score(labels, softmax(mean, axis=-1), multi_class="ovr", average="macro"))
    one = logits[:, :1]  # single head: softmax once, as the released code
    np.testing.assert_allclose(checkpoint_probs(one, "released"), softmax(one[:, 0], -1),
                               rtol=1e-6)


def test_drop_last_steps():
    from bench.core.schedule import steps_per_epoch

    assert steps_per_epoch(17, 8, drop_last=True) == 2  # 17 // 8
    assert steps_per_epoch(18, 8, drop_last=False) == 3  # a trailing batch of two is kept
    assert steps_per_epoch(5, 8, drop_last=True) == 1  # never zero steps



def test_dry_run_without_cached_weights_shows_the_protocol_and_a_real_run_stops(
        tmp_path, monkeypatch, capsys):
    """--pretrained with an empty torch hub: the dry run lists every run as
    'no weights' (config unknown: it hashes the weights' digest) with its
    protocol; the real run stops in one line before writing anything."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "empty-hub"))
    argv = ["run", "--dataset", "digits", "--backbone", "resnet50", "--method", "sl1h,2hml",
            "--seeds", "1", "--pretrained", "--results", str(tmp_path / "res"), "--no-progress"]
    assert main([*argv, "--dry-run", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["method"], r["status"], r["config"]) for r in rows] == [
        ("sl1h", "no weights", None), ("2hml", "no weights", None)]
    assert [r["weights"] for r in rows] == ["torchvision:ResNet50_Weights.IMAGENET1K_V1",
                                            "torchvision:ResNet50_Weights.IMAGENET1K_V2"]
    assert main([*argv, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "2 runs: 2 no weights; a real run would train 0" in out
    assert out.count("| ?") == 2 and "--download" in out
    assert main(argv) == 2
    assert "no ImageNet weights for resnet50" in capsys.readouterr().err
    assert not (tmp_path / "res").exists() or not any((tmp_path / "res").rglob("*.json"))


def test_backbone_all_is_the_papers_three(tmp_path, capsys):
    """`--backbone all` / `paper`: resnet50, convnext_tiny, swin_tiny (the CPU
    helpers smallcnn and resnet18 are named explicitly: smallcnn has no
    ImageNet weights, so `all --pretrained` would otherwise always fail)."""
    def backbones(name):
        assert main(["run", "--method", "sl1h", "--dataset", "digits", "--seeds", "1",
                     "--backbone", name, "--results", str(tmp_path), "--dry-run", "--json"]) == 0
        return [json.loads(line)["backbone"] for line in capsys.readouterr().out.splitlines()]

    assert backbones("all") == backbones("paper") == ["resnet50", "convnext_tiny", "swin_tiny"]
    assert backbones("smallcnn,all") == ["smallcnn", "resnet50", "convnext_tiny", "swin_tiny"]
