"""`bench run --grid FILE[:NAME]` and `--save-grid FILE`: the shipped grids give
the dry run of the command lines they replace, run for run; flags override
the file; a saved grid reads back into the same runs; every bad file is one
line, exit 2, nothing written."""
from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from bench.cli.main import main
from tests.datasets.test_datasets import write_chaoyang, write_kvasir, write_npz
from tests.train.test_protocol import fake_torch_hub

REPO = Path(__file__).resolve().parents[2]
TINY = ["--set", "cycles=1", "epochs_per_cycle=1", "image_size=16"]


def dry(capsys, *argv) -> list[dict]:
    assert main(["run", *argv, "--dry-run", "--json", "--no-progress"]) == 0, \
        capsys.readouterr().err
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_the_paper_file_is_run_all_shs_former_command_line(tmp_path, monkeypatch, capsys):
    """grids/paper.toml:DATASET (what ./run_all.sh now runs) against the
    command line run_all.sh held before the file, written out here."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    fake_torch_hub(tmp_path / "torch")
    roots = {"chaoyang": tmp_path / "chaoyang", "kvasir": tmp_path / "labeled-images",
             "pathmnist": tmp_path / "pm"}
    write_chaoyang(roots["chaoyang"], per_class_train=(10, 10, 10, 10))
    write_kvasir(roots["kvasir"], per_class=(10, 15, 10, 20))
    roots["pathmnist"].mkdir()
    write_npz(roots["pathmnist"] / "pathmnist.npz", counts=(45, 18, 18))
    results = str(tmp_path / "res")
    for dataset, root in roots.items():
        common = ["--data-root", str(root), "--results", results]
        by_flags = dry(capsys, "--method", "paper", "--dataset", dataset, "--backbone",
                       "resnet50,convnext_tiny,swin_tiny", "--seeds", "5", "--profile",
                       "paper", "--pretrained", *common)
        by_file = dry(capsys, "--grid", f"{REPO}/grids/paper.toml:{dataset}", *common)
        assert len(by_flags) == 3 * 8 * 5
        assert by_file == by_flags, dataset
    assert not Path(results).exists()


def test_the_quick_file_is_the_demo_command_line(tmp_path, capsys):
    results = str(tmp_path / "res")
    by_flags = dry(capsys, "--method", "all", "--dataset", "digits", "--seeds", "5",
                   "--profile", "demo", "--data-opt", "train_per_class=10", "--results",
                   results)
    by_file = dry(capsys, "--grid", str(REPO / "grids" / "quick.toml"), "--results", results)
    assert by_file == by_flags and len(by_flags) >= 5 * 10


def test_run_all_sh_runs_the_shipped_files():
    text = (REPO / "run_all.sh").read_text()
    assert '--grid "grids/paper.toml:$DATASET"' in text
    assert "--grid grids/quick.toml" in text


GRID = """\
method = ["sl1h", "2hml"]
seeds = 2
profile = "quick"
[set]
cycles = 1
epochs_per_cycle = 1
image_size = 16
lr = 0.05
[one]
method = "sl1h"
seeds = [3]
[one.set]
lr = 0.2
"""


def test_flags_and_named_grids_override_the_file_key_by_key(tmp_path, capsys):
    grid = tmp_path / "g.toml"
    grid.write_text(GRID)
    results = ["--results", str(tmp_path / "r")]
    top = dry(capsys, "--grid", str(grid), *results)
    assert [(r["method"], r["seed"], r["lr"]) for r in top] == [
        ("sl1h", 0, 0.05), ("sl1h", 1, 0.05), ("2hml", 0, 0.05), ("2hml", 1, 0.05)]
    one = dry(capsys, "--grid", f"{grid}:one", *results)
    assert [(r["method"], r["seed"], r["lr"], r["cycles"]) for r in one] == [
        ("sl1h", 3, 0.2, 1)]  # the named grid's set merged over the top level's
    # a flag wins over the file, its --set key by key, even at its default value
    over = dry(capsys, "--grid", str(grid), "--seeds", "1", "--set", "lr=0.3",
               "--profile", "quick", *results)
    assert [(r["method"], r["seed"], r["lr"], r["cycles"]) for r in over] == [
        ("sl1h", 0, 0.3, 1), ("2hml", 0, 0.3, 1)]
    by_flags = dry(capsys, "--method", "sl1h,2hml", "--seeds", "1", "--profile", "quick",
                   "--set", "cycles=1", "epochs_per_cycle=1", "image_size=16", "lr=0.3",
                   *results)
    assert over == by_flags


def test_a_saved_grid_reads_back_into_the_same_runs(tmp_path, capsys):
    saved = tmp_path / "saved.toml"
    argv = ["--method", "sl1h,2hml", "--seeds", "1-2", "--profile", "quick", *TINY,
            "--set", "lr=0.125", "--data-opt", "train_per_class=5", "--eval", "shift",
            "--jobs", "2", "--tensorboard", "--no-pretrained", "--results",
            str(tmp_path / "r")]
    first = dry(capsys, *argv, "--save-grid", str(saved))
    doc = tomllib.loads(saved.read_text())
    assert doc == {"method": "sl1h,2hml", "seeds": "1-2", "profile": "quick",
                   "set": {"cycles": 1, "epochs_per_cycle": 1, "image_size": 16, "lr": 0.125},
                   "results": str(tmp_path / "r"), "data-opt": {"train_per_class": "5"},
                   "pretrained": False, "tensorboard": True, "eval": ["shift"], "jobs": 2}
    assert dry(capsys, "--grid", str(saved)) == first
    # a grid file's values saved again with a flag over them
    again = tmp_path / "again.toml"
    dry(capsys, "--grid", str(saved), "--seeds", "4", "--save-grid", str(again))
    assert tomllib.loads(again.read_text()) == {**doc, "seeds": 4}


@pytest.mark.parametrize("text, suffix, message", [
    ('metod = "sl1h"\n', "", "unknown key 'metod'; allowed: method, dataset, backbone, seeds,"),
    ("[one]\nlr = 0.1\n", ":one", "unknown key 'lr' in [one]; allowed: method,"),
    ("dry-run = true\n", "", "unknown key 'dry-run'"),
    ('jobs = "two"\n', "", 'jobs = "two": expected an integer (as --jobs takes)'),
    ("pretrained = 1\n", "", "pretrained = 1: expected true or false (as --pretrained takes)"),
    ("method = 3\n", "", "method = 3: expected a text or a list of texts (as --method takes)"),
    ("[set]\nlr = [1]\n", "", "set.lr = [1]: expected a text, number or true/false"),
    ("set = 1\n", "", "set = 1: expected a table of KEY = VALUE (as --set takes)"),
    ("method = \n", "", "TOML syntax error: Invalid value (at line 1, column 10)"),
    ('seeds = 2\nmethod = "a\n', "", "(at line 2, column"),
    ("seeds = 2\n[a]\nseeds = 1\n", ":b", "no grid 'b' in the file; its grids: a"),
    ("seeds = 2\n", ":b", "no grid 'b' in the file; it holds no named grids"),
    ("[a]\nseeds = 1\n[b]\nseeds = 2\n", "", "holds named grids only: give one as"),
])
def test_a_bad_file_is_one_line_and_nothing_is_written(tmp_path, capsys, text, suffix,
                                                        message):
    grid = tmp_path / "bad.toml"
    grid.write_text(text)
    out = tmp_path / "saved.toml"
    assert main(["run", "--grid", f"{grid}{suffix}", "--results", str(tmp_path / "r"),
                 "--save-grid", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"bench: error: --grid {grid}")
    assert message in err
    assert not (tmp_path / "r").exists() and not out.exists()


@pytest.mark.parametrize("text, message", [
    # the same checks and messages as the command line's --set
    ('[set]\nlr = "fast"\n', "--set lr=fast: expected float, got 'fast'"),
    ("[set]\nlr = -1\n", "--set lr=-1.0: must be > 0"),
    ("[set]\nlr = inf\n", "--set lr=inf: expected float, got 'inf' (a finite number"),
    ("[set]\nheads = 0\n", "heads"),
    ("[set]\nno_such_key = 1\n", "unknown --set key 'no_such_key'"),
    ('[data-opt]\nno_such = "1"\n', "no_such"),
])
def test_a_bad_set_value_is_refused_as_the_flag_is(tmp_path, capsys, text, message):
    grid = tmp_path / "bad.toml"
    grid.write_text(f'method = "sl1h,2hml"\n{text}')
    assert main(["run", "--grid", str(grid), "--results", str(tmp_path / "r"),
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "r").exists()
    flag_text = text.split("\n")[1].replace(" = ", "=").replace('"', "")
    flag = "--set" if text.startswith("[set]") else "--data-opt"
    assert main(["run", "--method", "sl1h,2hml", flag, flag_text, "--results",
                 str(tmp_path / "r")]) == 2
    assert message in capsys.readouterr().err


def test_a_missing_or_unreadable_file_is_one_line(tmp_path, capsys):
    for spec, message in ((tmp_path / "none.toml", "no such file"),
                          (tmp_path, "cannot read it")):
        assert main(["run", "--grid", str(spec), "--results", str(tmp_path / "r")]) == 2
        err = capsys.readouterr().err
        assert err == f"bench: error: --grid {spec}: {message}" + err.split(message)[1]
        assert err.count("\n") == 1
    binary = tmp_path / "b.toml"
    binary.write_bytes(b"seeds = '\xff'\n")
    assert main(["run", "--grid", str(binary)]) == 2
    assert "not UTF-8 text" in capsys.readouterr().err


def test_every_run_flag_is_a_file_key_or_a_switch_of_one_command(capsys):
    """The flags read from the parser itself, the keys from `bench list --keys`."""
    import argparse

    from bench.cli.main import build_parser

    assert main(["list", "--keys"]) == 0
    listed = capsys.readouterr().out.split("grid file keys")[1].splitlines()[3:]
    keys = {line.split()[0]: line.split()[1] for line in listed if line.strip()}
    run = build_parser(["run"])._subparsers._group_actions[0].choices["run"]
    once = {"--help", "--grid", "--save-grid", "--dry-run", "--json", "--force",
            "--accept-code-change", "--no-progress", "--fuse-seeds", "--no-pretrained"}
    flags = {f for a in run._actions if isinstance(a, argparse.Action)
             for f in a.option_strings if f.startswith("--")} - once
    assert flags == set(keys.values())
    assert all(key == flag[2:] for key, flag in keys.items())
