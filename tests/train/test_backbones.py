"""The paper's backbones (torchvision, as released; timm as the alternative) at
the paper's sizes, multi-head outputs, and weight loading."""
from __future__ import annotations

import numpy as np
import pytest
import timm
import torch
from safetensors.torch import save_file

from bench.core import store
from bench.train.backbones import build_model, create_backbone, fit_size
from bench.train.nets import MultiHeadNet
from bench.cli.main import main
from bench.core.errors import BenchError
from bench.train.weights import resolve_weights

K = 5


class Payload:  # an arbitrary pickled object: must never be unpickled
    pass


def write_npz(path, counts) -> None:
    """A tiny PathMNIST file: official key names, labels shaped (N, 1)."""
    rng = np.random.default_rng(0)
    arrays = {}
    for split, n in zip(("train", "val", "test"), counts):
        arrays[f"{split}_images"] = rng.integers(0, 255, (n, 28, 28, 3), dtype=np.uint8)
        arrays[f"{split}_labels"] = (np.arange(n) % 9).reshape(n, 1)
    np.savez(path, **arrays)


def fwd_bwd(model: MultiHeadNet, size: int, batch: int = 2) -> torch.Tensor:
    model.train()
    x = torch.randn(batch, 3, size, size)
    out = model(x)
    out.logsumexp(-1).sum().backward()
    return out


@pytest.mark.parametrize("name,size", [("resnet50", 28), ("convnext_tiny", 32),
                                       ("swin_tiny", 28)])
def test_pathmnist_sizes_with_1_2_4_heads(name, size):
    """1, 2 and 4 heads on one backbone: each model's forward, then one backward
    through all of them (the backbone's backward dominates CPU time)."""
    torch.manual_seed(0)
    bb = create_backbone(name, size)
    x = torch.randn(2, 3, size, size)
    models = {m: MultiHeadNet(bb, m, K).train() for m in (1, 2, 4)}
    outs = {m: model(x) for m, model in models.items()}
    sum(out.logsumexp(-1).sum() for out in outs.values()).backward()
    for m, out in outs.items():
        assert out.shape == (2, m, K)
        heads = models[m].per_head if models[m].per_head is not None else models[m].head
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in heads.parameters())
    first = next(p for p in bb.features.parameters() if p.requires_grad)
    assert torch.isfinite(first.grad).all() and first.grad.abs().sum() > 0  # reaches the stem


@pytest.mark.parametrize("name", ["resnet50", "convnext_tiny", "swin_tiny"])
def test_paper_size_224(name):
    model, _ = build_model(name, 224, heads=4, num_classes=K)
    out = fwd_bwd(model, 224)
    assert out.shape == (2, 4, K)
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_convnext_heads_each_have_their_own_fresh_layernorm(tmp_path):
    """Every head owns a NEW LayerNorm (weight 1, bias 0, as the released code's
    per-head LayerNorm2d), whatever the loaded weights hold; with the trained
    norm and fc copied in, a head equals timm's own convnext_tiny
    (pool -> LayerNorm -> fc)."""
    torch.manual_seed(0)
    ref = timm.create_model("convnext_tiny", num_classes=K).eval()
    with torch.no_grad():
        ref.head.norm.weight.uniform_(0.5, 1.5)
        ref.head.norm.bias.uniform_(-0.5, 0.5)
    path = tmp_path / "cx.safetensors"
    save_file({k: v.contiguous() for k, v in ref.state_dict().items()}, str(path))
    spec = resolve_weights("convnext_tiny", weights=str(path))
    model, bb = build_model("convnext_tiny", 32, heads=2, num_classes=K, weights=spec,
                            impl="timm")
    assert bb.weights.startswith("file:cx.safetensors sha256:")
    norm0, norm1 = model.per_head[0][0], model.per_head[1][0]
    assert norm0.weight is not norm1.weight
    for norm in (norm0, norm1):
        assert torch.equal(norm.weight, torch.ones(768)) and torch.equal(norm.bias, torch.zeros(768))
        assert norm.eps == ref.head.norm.eps
    with torch.no_grad():
        for head in model.per_head:
            head[0].weight.copy_(ref.head.norm.weight)
            head[0].bias.copy_(ref.head.norm.bias)
            head[1].weight.copy_(ref.head.fc.weight)
            head[1].bias.copy_(ref.head.fc.bias)
        x = torch.randn(2, 3, 32, 32)
        ours = model.eval()(x)
        theirs = ref(x)
    torch.testing.assert_close(ours[:, 0], theirs, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(ours[:, 1], theirs, rtol=1e-4, atol=1e-4)


def test_size_rules():
    assert fit_size("convnext_tiny", 28) == 32 and fit_size("convnext_tiny", 224) == 224
    assert fit_size("swin_tiny", 30, "timm") == 32 and fit_size("resnet50", 28) == 28
    assert fit_size("swin_tiny", 150) == 150  # torchvision's Swin pads
    with pytest.raises(BenchError, match="image_size=32"):
        build_model("convnext_tiny", 28, 1, K)


def test_weights_file_loaded_as_tensors_and_pickles_refused(tmp_path):
    torch.manual_seed(1)
    src = timm.create_model("resnet18", num_classes=1000)
    torch.save({"state_dict": src.state_dict()}, tmp_path / "r18.pth")  # a training checkpoint
    model, bb = build_model("resnet18", 28, 2, K,
                            weights=resolve_weights("resnet18", weights=str(tmp_path / "r18.pth")))
    assert torch.equal(model.backbone.conv1.weight, src.conv1.weight)
    assert bb.weights.startswith("file:r18.pth sha256:")

    torch.save({"conv1.weight": Payload()}, tmp_path / "evil.pth")
    with pytest.raises(BenchError, match="tensors only"):
        build_model("resnet18", 28, 1, K,
                    weights=resolve_weights("resnet18", weights=str(tmp_path / "evil.pth")))
    with pytest.raises(BenchError, match="do not fit"):
        build_model("resnet50", 28, 1, K,
                    weights=resolve_weights("resnet50", weights=str(tmp_path / "r18.pth")))


def test_pretrained_without_cache_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    import huggingface_hub.constants as hc

    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(tmp_path / "hf"))
    write_npz(tmp_path / "pathmnist.npz", counts=(9, 9, 9))
    code = main(["run", "--dataset", "pathmnist", "--data-root", str(tmp_path), "--backbone",
                 "resnet50", "--pretrained", "--seeds", "1", "--results",
                 str(tmp_path / "res"), "--no-progress", "--profile", "quick"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    # the released protocol: torchvision's V1 weights for a single-head model
    assert "ResNet50_Weights.IMAGENET1K_V1" in err and "--weights PATH" in err


def test_weights_recorded_in_config_and_hash(tmp_path):
    import dataclasses

    from bench.core.config import PROFILES
    from bench.datasets import load_dataset
    from bench.methods import create_method
    from bench.train.experiment import make_experiment

    write_npz(tmp_path / "pathmnist.npz", counts=(9, 9, 9))
    weights = tmp_path / "w.safetensors"
    save_file(timm.create_model("resnet18", num_classes=0).state_dict(), str(weights))
    assert main(["run", "--dataset", "pathmnist", "--data-root", str(tmp_path), "--backbone",
                 "resnet18", "--seeds", "1", "--results", str(tmp_path / "res"),
                 "--no-progress", "--profile", "quick", "--set", "cycles=1", "--set",
                 "epochs_per_cycle=1", "--device", "cpu", "--weights", str(weights)]) == 0
    (key,) = store.iter_records(tmp_path / "res")
    record = key.path(tmp_path / "res")
    config = store.read_json(record / "config.json")
    spec = resolve_weights("resnet18", weights=str(weights))
    assert config["backbone_weights"] == spec.label == config["weights"]
    assert spec.label.startswith("file:w.safetensors sha256:") and config["train"]["pretrained"]
    assert config["backbone_impl"] == "timm" and config["drop_path_rate"] == 0.0
    # The hash is reproducible from its parts and changes without the weights.
    cfg = dataclasses.replace(PROFILES["quick"], cycles=1, epochs_per_cycle=1, pretrained=True)
    bundle, method = load_dataset("pathmnist", tmp_path), create_method("sl1h", {})
    assert make_experiment(bundle, "resnet18", method, cfg, weights=spec).chash \
        == config["config_hash"]
    assert make_experiment(bundle, "resnet18", method, cfg).chash != config["config_hash"]


def test_pretrained_read_from_local_hf_cache(tmp_path, monkeypatch):
    """--pretrained finds the pinned tag in the Hugging Face cache layout
    (models--org--name/refs/main + snapshots/<rev>/model.safetensors)."""
    import huggingface_hub.constants as hc

    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(tmp_path))
    repo = tmp_path / "models--timm--resnet18.tv_in1k"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0123abc")
    (repo / "snapshots" / "0123abc").mkdir(parents=True)
    torch.manual_seed(2)
    src = timm.create_model("resnet18", num_classes=1000)
    save_file(src.state_dict(), str(repo / "snapshots" / "0123abc" / "model.safetensors"))
    spec = resolve_weights("resnet18", pretrained=True)
    assert spec.label.startswith("hf-hub:timm/resnet18.tv_in1k sha256:")
    model, bb = build_model("resnet18", 28, 2, K, pretrained=True)
    assert bb.weights == spec.label
    assert torch.equal(model.backbone.layer4[1].conv2.weight, src.layer4[1].conv2.weight)
