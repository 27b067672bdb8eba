"""Image sizes a timm:/tv: model cannot take are refused in one line, exit 2,
before anything is written: a timm model built for one input size (ViTs:
fixed_input_size) asked to train at one size and test at another
(size_rule=released: the train_other.py methods at 150 px, tests at 224 px on
Chaoyang and Kvasir), and a model whose layers shrink the image to nothing."""
from __future__ import annotations

import dataclasses

import pytest
import torch
import torchvision

from bench.cli.main import main
from bench.core.config import PROFILES
from bench.core.errors import BenchError
from bench.core.sizes import resolve_sizes
from bench.methods import create_method
from bench.train.backbone_checks import check_builds, check_sizes


def test_the_released_150_224_split_is_refused_for_a_vit():
    """LS under the paper profile on a 224 px dataset (Chaoyang, Kvasir)
    trains at 150 px (the released train_other.py) and tests at 224 px."""
    sizes = resolve_sizes(PROFILES["paper"], 224, "timm:test_vit", create_method("ls"))
    assert (sizes.train, sizes.test) == (150, 224)
    with pytest.raises(BenchError) as err:
        check_sizes("timm:test_vit", sizes.train, sizes.test, "ls")
    text = str(err.value)
    assert "\n" not in text
    for part in ("'timm:test_vit'", "ls trains at 150 px and tests at 224 px",
                 "--set size_rule=uniform"):
        assert part in text, text
    uniform = dataclasses.replace(PROFILES["paper"], size_rule="uniform")
    sizes = resolve_sizes(uniform, 224, "timm:test_vit", create_method("ls"))
    assert sizes.train == sizes.test == 224
    check_sizes("timm:test_vit", sizes.train, sizes.test, "ls")  # the way out


@pytest.mark.parametrize("backbone", ["timm:test_resnet", "tv:resnet18", "resnet50", "smallcnn"])
def test_models_of_any_size_may_train_and_test_at_two(backbone):
    check_sizes(backbone, 150, 224, "ls")


def test_bench_run_refuses_it_before_anything_is_written(tmp_path, capsys):
    results = tmp_path / "results"
    argv = ["run", "--method", "sl1h", "--dataset", "digits", "--backbone", "timm/test_vit",
            "--profile", "quick", "--set", "image_size=16", "--set", "test_size=24",
            "--results", str(results)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "'timm:test_vit'" in err and "16 px" in err and "24 px" in err
    assert not results.exists()


@pytest.mark.usefixtures("one_thread")
@pytest.mark.filterwarnings("ignore:The default weight initialization of GoogleNet")
def test_a_size_a_library_model_cannot_take_is_refused_with_the_size_it_takes(tmp_path, capsys):
    """torchvision's GoogLeNet pools 8 px to nothing and takes 32 px (checked
    on torchvision's model itself), at the training or the test size."""
    ref = torchvision.models.get_model("googlenet", weights=None, init_weights=False).eval()
    with torch.no_grad():
        ref(torch.zeros(2, 3, 32, 32))
        with pytest.raises(RuntimeError, match="too small"):
            ref(torch.zeros(2, 3, 8, 8))
    for train, test in ((8, 8), (32, 8)):
        with pytest.raises(BenchError) as err:
            check_builds("tv:googlenet", train, test)
        assert str(err.value).startswith("backbone 'tv:googlenet' cannot take 8 px images (")
        assert str(err.value).endswith("it takes 32 px: --set image_size=32")
    check_builds("tv:googlenet", 32, 32)
    results = tmp_path / "results"
    assert main(["run", "--method", "sl1h", "--dataset", "digits", "--backbone", "tv:googlenet",
                 "--profile", "quick", "--set", "image_size=8", "--results", str(results)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "cannot take 8 px" in err and not results.exists()
