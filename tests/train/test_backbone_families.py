"""A sample of timm and torchvision architecture families, each through what
`bench run` does with it (benchmarks/backbone_sweep.py runs every family):
the plan-time probe, then one training step for one head and for M heads,
the heads built on the width the backbone gives (measured, not timm's
`num_features`)."""
from __future__ import annotations

import pytest
import timm
import torch

from bench.cli.main import main
from bench.core.errors import BenchError
from bench.methods import create_method
from bench.train.backbone_checks import check_builds
from bench.train.backbones import build_model, create_backbone, model_arch

SIZE, CLASSES, BATCH = 32, 5, 4
FAMILIES = ["timm:mobilenetv3_small_050", "timm:test_efficientnet", "timm:regnetx_002",
            "timm:ghostnet_050", "timm:test_convnext", "timm:test_vit",
            "timm:deit_tiny_patch16_224", "timm:mixer_s32_224", "tv:densenet121",
            "tv:shufflenet_v2_x0_5"]


def one_step(backbone: str, name: str) -> torch.Tensor:
    """One training step of method `name` on `backbone`; its logits."""
    method = create_method(name)
    method.setup(CLASSES, 0)
    torch.manual_seed(0)
    model, _ = build_model(backbone, SIZE, method.heads, CLASSES, arch=model_arch(method))
    x, y = torch.randn(BATCH, 3, SIZE, SIZE), torch.arange(BATCH) % CLASSES
    inputs, target = method.batch(x, y, torch.Generator().manual_seed(0))
    logits = model.train()(inputs)
    method.loss(logits, target).backward()
    stem = next(p for p in model.backbone.parameters())
    assert stem.grad is not None and stem.grad.abs().sum() > 0  # reaches the first layer
    return logits


@pytest.mark.usefixtures("one_thread")
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("backbone", FAMILIES)
def test_each_family_trains_one_step_or_is_refused_in_one_line(backbone):
    try:
        check_builds(backbone, SIZE, SIZE)
    except BenchError as err:  # the other outcome the harness allows: one line, at plan time
        assert "\n" not in str(err) and backbone in str(err)
        return
    for name in ("sl1h", "2hml"):
        logits = one_step(backbone, name)
        assert logits.shape == (BATCH, create_method(name).heads, CLASSES)
        assert torch.isfinite(logits).all()


@pytest.mark.usefixtures("one_thread")
def test_heads_go_on_the_width_the_model_gives_not_num_features():
    """MobileNetV3's conv_head follows the pool: timm's own model without a
    classifier gives 1,024 features per image where num_features says 288."""
    ref = timm.create_model("mobilenetv3_small_050", num_classes=0).eval()
    with torch.no_grad():
        width = ref(torch.zeros(1, 3, SIZE, SIZE)).shape[1]
    assert (ref.num_features, width) == (288, 1024)
    model, bb = build_model("timm:mobilenetv3_small_050", SIZE, 3, CLASSES)
    assert bb.dim == 1024 and model.head.in_features == 1024
    assert model(torch.randn(2, 3, SIZE, SIZE)).shape == (2, 3, CLASSES)


def test_measuring_the_width_leaves_the_model_and_the_rng_as_built():
    """The measurement's forward changes no parameter, buffer, module mode or
    the global RNG: the model equals one built by timm directly."""
    torch.manual_seed(0)
    ref = timm.create_model("test_efficientnet", num_classes=0)
    torch.manual_seed(0)
    bb = create_backbone("timm:test_efficientnet", SIZE)
    after = torch.rand(3)
    torch.manual_seed(0)
    timm.create_model("test_efficientnet", num_classes=0)
    assert torch.equal(after, torch.rand(3))
    mine, theirs = bb.features.state_dict(), ref.state_dict()
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)
    assert [m.training for m in bb.features.modules()] == [m.training for m in ref.modules()]


def test_a_model_that_cannot_take_heads_is_refused_by_the_dry_run(tmp_path, capsys):
    results = tmp_path / "results"
    assert main(["run", "--method", "sl1h", "--dataset", "digits", "--backbone",
                 "tv:squeezenet1_0", "--profile", "quick", "--set", "image_size=32",
                 "--results", str(results), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "tv:squeezenet1_0" in err and "no Linear classifier" in err
    assert not results.exists()
