"""The paper profiles start from ImageNet weights by default, as the released
code always did (the card's own command is the published protocol)."""
from __future__ import annotations

import json

import pytest

from bench.cli.main import main
from tests.datasets.test_datasets import write_npz
from tests.train.test_protocol import fake_torch_hub


def _dry(argv, capsys) -> list[dict]:
    assert main([*argv, "--dry-run", "--json"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


@pytest.fixture
def pathmnist(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    fake_torch_hub(tmp_path / "torch")
    root = tmp_path / "pm"
    root.mkdir()
    write_npz(root / "pathmnist.npz", counts=(45, 18, 18))
    return ["--data-root", str(root), "--results", str(tmp_path / "res")]


@pytest.mark.parametrize("profile", [[], ["--profile", "paper"], ["--profile", "paper-text"]])
def test_the_cards_command_is_pretrained(pathmnist, profile, capsys):
    """`bench run --method 4hml --dataset pathmnist --seeds 5` (the card's own
    command) loads ImageNet weights under the paper profiles, as released."""
    rows = _dry(["run", "--method", "4hml", "--dataset", "pathmnist", "--seeds", "5",
                 *profile, *pathmnist], capsys)
    assert len(rows) == 5 and all(r["pretrained"] is True for r in rows)
    assert {r["weights"] for r in rows} == {"torchvision:ResNet50_Weights.IMAGENET1K_V2"
                                            if not profile or profile[1] == "paper" else
                                            "torchvision:ResNet50_Weights.IMAGENET1K_V1"}
    # --pretrained still says the same thing: the same runs, the same config hash
    again = _dry(["run", "--method", "4hml", "--dataset", "pathmnist", "--seeds", "5",
                  *profile, "--pretrained", *pathmnist], capsys)
    assert [r["config"] for r in again] == [r["config"] for r in rows]


def test_no_pretrained_opts_out_and_quick_stays_from_scratch(pathmnist, capsys):
    base = ["run", "--method", "4hml", "--dataset", "pathmnist", "--seeds", "1", *pathmnist]
    (off,) = _dry([*base, "--no-pretrained"], capsys)
    (quick,) = _dry([*base, "--profile", "quick"], capsys)
    assert (off["pretrained"], off["weights"]) == (False, "random")
    assert (quick["pretrained"], quick["weights"]) == (False, "random")
    (on,) = _dry([*base, "--profile", "quick", "--pretrained"], capsys)
    assert on["pretrained"] is True


def test_smallcnn_has_no_weights_and_is_unaffected(tmp_path, capsys):
    rows = _dry(["run", "--dataset", "digits", "--backbone", "smallcnn", "--seeds", "1",
                 "--results", str(tmp_path)], capsys)
    assert [(r["pretrained"], r["weights"]) for r in rows] == [(False, "random")]


def test_offline_without_weights_names_no_pretrained(tmp_path, monkeypatch,
                                                                  capsys):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "empty-hub"))
    argv = ["run", "--dataset", "digits", "--backbone", "resnet50", "--seeds", "1",
            "--results", str(tmp_path / "res"), "--no-progress", "--set", "cycles=1",
            "--set", "epochs_per_cycle=1", "--set", "image_size=16",  # tiny if it trained
            "--data-opt", "train_per_class=1"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no ImageNet weights for resnet50" in err
    assert "--no-pretrained" in err
    assert not (tmp_path / "res").exists() or not any((tmp_path / "res").rglob("*.json"))


def test_weights_and_no_pretrained_contradict(tmp_path, capsys):
    w = tmp_path / "w.pt"
    w.write_bytes(b"x")
    assert main(["run", "--backbone", "resnet50", "--weights", str(w), "--no-pretrained",
                 "--results", str(tmp_path / "r"), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--no-pretrained" in err and "w.pt" in err
