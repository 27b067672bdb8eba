"""`bench report --published-rows` places the paper's rows only beside runs
trained as the published ones: a tiny fabricated PathMNIST trained for one
epoch is refused in one line naming its split sizes (and every other
difference); records whose config is the paper's protocol are accepted;
--published-rows-anyway places them and the footnote names the differences."""
import dataclasses

import numpy as np
import pytest

from bench.cli.main import main
from bench.core import store
from bench.core.config import PROFILES
from bench.core.settings import hashed

# the paper's split sizes (docs/datasets.md, `bench data check`), written out
PUBLISHED = {"chaoyang": {"train": 3217, "val": 804, "test": 2139},
             "pathmnist": {"train": 89996, "val": 10004, "test": 7180}}


def write(root, dataset, backbone, method, sizes, profile="paper", splits=True, chash="abc",
          **train):
    """A record whose config.json says it was trained with `profile` at
    `sizes` = (augment, train, test) px on the published splits."""
    cfg = dataclasses.replace(PROFILES[profile], **dict(zip(
        ("augment_size", "image_size", "test_size"), sizes)), **train)
    config = {"dataset": dataset, "backbone": backbone, "method": method, "seed": 0,
              "heads": 1, "train": hashed(cfg)}
    if splits:
        config["split_sizes"] = PUBLISHED[dataset]
    z = np.zeros((8, 1, 4), np.float32)
    z[:, 0, 0] = 2.0
    y = np.zeros(8, np.int64)
    test = {"acc": 0.8, "ece": 0.05, "nll": 0.5}
    store.write_record(store.record_dir(root, dataset, backbone, method, chash, 0), config,
                       {"test": test, "val": test},
                       {"val_logits": z, "val_labels": y, "test_logits": z, "test_labels": y})


def report(root, out, *extra):
    return main(["report", "--results", str(root), "--out", str(out), "--no-plots",
                 "--no-progress", "--no-ts", "--published-rows", *extra])


def test_records_of_the_papers_protocol_are_accepted(tmp_path, capsys):
    """Sizes written by hand from docs/fidelity.md: 224 px on Chaoyang, LS
    trained at 150 px under `paper` (the released train_other.py), every
    size 224 under `paper-text`; PathMNIST ConvNeXt augmented at 28 and
    resized to 32."""
    root = tmp_path / "r"
    write(root, "chaoyang", "resnet50", "sl1h", (224, 224, 224))
    write(root, "chaoyang", "resnet50", "ls", (150, 150, 224))
    write(root, "chaoyang", "convnext_tiny", "ls", (224, 224, 224), profile="paper-text")
    write(root, "pathmnist", "convnext_tiny", "sl1h", (28, 32, 32))
    assert report(root, tmp_path / "out") == 0, capsys.readouterr().err
    md = (tmp_path / "out" / "tables" / "chaoyang_main.md").read_text()
    assert "MbLS†" in md and "trained otherwise" not in md
    assert "4HML†" in (tmp_path / "out" / "tables" / "pathmnist_main.md").read_text()


@pytest.mark.parametrize("change,named", [
    (dict(sizes=(224, 224, 224), method="ls"),
     "image size 224/224/224 px augment/train/test (paper: 150/150/224)"),
    (dict(pretrained=False), "from scratch (paper: ImageNet weights)"),
    (dict(cycles=3, epochs_per_cycle=4), "epochs 12 = 3 x 4 (paper: 50 = 10 x 5)"),
    (dict(lr=0.1, backbone_impl="timm"), "lr 0.1 (paper: 0.01); backbone_impl timm (paper: "
                                         "torchvision)"),
    (dict(splits=False), "split sizes 8/8 val/test (paper: 804/2,139)"),
])
def test_each_difference_is_named_in_one_line_before_anything_is_written(
        tmp_path, capsys, change, named):
    args = {"sizes": (224, 224, 224), "method": "sl1h", **change}
    write(tmp_path / "r", "chaoyang", "resnet50", args.pop("method"), args.pop("sizes"),
          **args)
    out = tmp_path / "out"
    assert report(tmp_path / "r", out) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "Chaoyang / ResNet50 (" in err and named in err and "--published-rows-anyway" in err
    assert not out.exists()


def test_tiny_data_one_epoch_is_refused_naming_the_sizes_and_forced_says_so(tmp_path, capsys):
    """The issue's case, trained for real: a fabricated PathMNIST of 18/9/9
    images, quick profile, one epoch. The run's summary names the method and
    backbone as the tables do."""
    rng = np.random.default_rng(0)  # a PathMNIST file: official keys, labels (N, 1)
    np.savez(tmp_path / "pathmnist.npz", **{
        f"{split}_{kind}": (rng.integers(0, 255, (n, 28, 28, 3), dtype=np.uint8)
                            if kind == "images" else (np.arange(n) % 9).reshape(n, 1))
        for split, n in (("train", 18), ("val", 9), ("test", 9))
        for kind in ("images", "labels")})
    res = tmp_path / "res"
    assert main(["run", "--method", "sl1h", "--dataset", "pathmnist", "--data-root",
                 str(tmp_path), "--backbone", "resnet50", "--seeds", "1", "--profile", "quick",
                 "--set", "cycles=1", "epochs_per_cycle=1", "--results", str(res),
                 "--no-progress", "--device", "cpu"]) == 0
    summary = capsys.readouterr().out
    assert "| SL1H " in summary and "| ResNet50 " in summary and "| sl1h " not in summary
    (key,) = store.iter_records(res)
    config = store.read_json(key.path(res) / "config.json")
    assert config["split_sizes"] == {"train": 18, "val": 9, "test": 9}
    assert config["backbone_name"] == "ResNet50"
    out = tmp_path / "out"
    assert report(res, out) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and not out.exists()
    for named in ("PathMNIST / ResNet50 (SL1H): ",
                  "split sizes 18/9/9 train/val/test (paper: 89,996/10,004/7,180)",
                  "epochs 1 = 1 x 1 (paper: 50 = 10 x 5)",
                  "from scratch (paper: ImageNet weights)", "add --published-rows-anyway"):
        assert named in err, named
    assert report(res, out, "--published-rows-anyway") == 0
    for name in ("pathmnist_main.md", "pathmnist_main.tex"):
        text = (out / "tables" / name).read_text()
        assert "placed with --published-rows-anyway although the re-run rows were trained " \
               "otherwise: ResNet50 (SL1H): " in " ".join(text.split())
        assert "18/9/9 train/val/test (paper: 89,996/10,004/7,180)" in text


def test_anyway_without_published_rows_is_one_line(tmp_path, capsys):
    write(tmp_path / "r", "chaoyang", "resnet50", "sl1h", (224, 224, 224))
    assert main(["report", "--results", str(tmp_path / "r"), "--out", str(tmp_path / "o"),
                 "--published-rows-anyway"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "add --published-rows" in err
