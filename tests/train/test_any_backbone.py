"""Any torchvision classifier as `tv:<name>` (and `bench list --backbones`):
the classifier's last Linear removed, the heads on its in_features."""
from __future__ import annotations

import pytest
import torch
import torchvision

from bench.cli.main import main
from bench.core.errors import BenchError
from bench.train.backbone_checks import check_arch
from bench.train.backbones import build_model
from bench.train.weights import resolve_weights


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("name,last", [("resnet18", "fc"), ("mobilenet_v3_small", "classifier.3")])
def test_tv_models_get_heads_on_their_classifiers_input(name, last):
    """The feature size is the original last Linear's in_features (read from a
    fresh torchvision model), for one head, M heads, MC-Dropout and BatchEnsemble."""
    ref = torchvision.models.get_model(name, weights=None).get_submodule(last)
    x = torch.randn(4, 3, 16, 16)
    for heads, arch in ((1, ()), (3, ()), (4, ("mcdropout", 0.5)), (2, ("batchensemble", 2))):
        model, bb = build_model(f"tv:{name}", 16, heads, 5, arch=arch)
        assert bb.dim == ref.in_features
        if not arch:  # the bare features (BatchEnsemble's expect a tiled batch)
            assert bb.features(x).shape == (4, ref.in_features)
        out = model(x)
        assert out.shape == (4, heads, 5)
        out.logsumexp(-1).sum().backward()
        first = next(p for p in bb.features.parameters())
        assert first.grad is not None and first.grad.abs().sum() > 0  # reaches the stem


def test_packed_and_classifierless_models_are_refused_in_one_line():
    with pytest.raises(BenchError, match="packed: backbone 'tv:resnet18'") as err:
        check_arch("tv:resnet18", ("packed", 4, 2, 1), False)
    assert "\n" not in str(err.value)
    with pytest.raises(BenchError, match="no Linear classifier"):
        build_model("tv:squeezenet1_0", 32, 1, 5)


def test_missing_cached_weights_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    with pytest.raises(BenchError, match="ResNet18_Weights.IMAGENET1K_V1") as err:
        resolve_weights("tv:resnet18", pretrained=True, impl="torchvision")
    assert "\n" not in str(err.value)


def test_list_backbones_by_pattern(capsys):
    assert main(["list", "--backbones", "tv:resnet1*"]) == 0
    assert capsys.readouterr().out.split() == ["tv:resnet101", "tv:resnet152", "tv:resnet18"]
    assert main(["list", "--backbones", "timm:resnet10t"]) == 0
    assert capsys.readouterr().out.split() == ["timm:resnet10t"]
    assert main(["list", "--backbones", "nothing*"]) == 2
    assert "no backbone matches" in capsys.readouterr().err


@pytest.mark.usefixtures("one_thread")
def test_timm_vit_is_built_at_the_run_size():
    """A fixed-size timm model (ViT) gets img_size = the run's image size."""
    model, bb = build_model("timm:test_vit", 32, 2, 5)
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 2, 5)
    assert bb.features.patch_embed.img_size == (32, 32)


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("backbone", ["tv:mobilenet_v3_small", "timm:test_efficientnet"])
@pytest.mark.parametrize("name", ["sl1h", "2hml", "mcdropout", "batchensemble"])
def test_one_tiny_epoch_per_model_building_path(tiny, backbone, name):
    """One head, M heads, MC-Dropout's head and BatchEnsemble, each trained one
    tiny epoch: finite logits of the method's head count on the test split."""
    import dataclasses

    import numpy as np

    from bench.core.config import PROFILES
    from bench.methods import create_method
    from bench.train.backbones import model_arch
    from bench.train.loop import train

    cfg = dataclasses.replace(PROFILES["quick"], cycles=1, epochs_per_cycle=1)
    method = create_method(name)
    method.setup(tiny.num_classes, 0)
    torch.manual_seed(0)
    model, _ = build_model(backbone, tiny.image_size, method.heads, tiny.num_classes,
                           arch=model_arch(method))
    out = train(model, method, cfg, tiny, 0, progress=False)
    assert out.test_logits.shape == (len(tiny.test), method.heads, tiny.num_classes)
    assert np.isfinite(out.test_logits).all()
