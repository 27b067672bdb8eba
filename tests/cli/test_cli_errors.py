"""Every bad input gives a non-zero exit and ONE line naming the bad value."""
import subprocess
import sys

import pytest

from bench.cli.main import main

CASES = [
    (["--method", "nope"], "unknown method 'nope'; choose from: sl1h"),
    (["--dataset", "nope"], "unknown dataset 'nope'; choose from: digits"),
    (["--backbone", "nope"], "unknown backbone 'nope'; choose from: smallcnn"),
    (["--profile", "nope"], "unknown profile 'nope'; choose from: paper, paper-text, quick"),
    (["--set", "nope=1"], "unknown --set key 'nope'; choose from:"),
    (["--set", "lr=fast"], "--set lr=fast: expected float"),
    (["--set", "cycles=1.5"], "--set cycles=1.5: expected int"),
    (["--set", "augment_mode=foo"], "unknown augment_mode 'foo'; choose from: batched, per_image"),
    (["--set", "compile_mode=fast"], "unknown compile_mode 'fast'; choose from: default"),
    (["--seeds", "0"], "--seeds 0: need at least one seed"),
    (["--seeds", "x"], "--seeds x: expected N"),
]


@pytest.mark.parametrize("argv, message", CASES)
def test_bad_run_input_is_one_line(argv, message, capsys, tmp_path):
    code = main(["run", "--results", str(tmp_path), *argv])
    err = capsys.readouterr().err
    assert code != 0
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())  # nothing was written


def test_console_script_exit_code(tmp_path):
    out = subprocess.run([sys.executable, "-m", "bench.cli.main", "run", "--method", "nope"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.count("\n") == 1


def test_list_shows_every_registry(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for word in ("methods:", "datasets:", "backbones:", "profiles:", "sl1h", "digits",
                 "smallcnn", "resnet18", "quick", "paper"):
        assert word in out


ARGPARSE_CASES = [
    (["run", "--jobs", "x"], "bench run: error: argument --jobs: invalid int value: 'x'"),
    (["run", "--jobs-per-gpu", "1.5"], "argument --jobs-per-gpu: invalid int value: '1.5'"),
    (["nope"], "bench: error: argument command: invalid choice: 'nope'"),
    ([], "bench: error: the following arguments are required: command"),
    (["report", "--zzzz"], "bench report: error: unknown option --zzzz; see bench report "
                           "--help"),  # no flag near it (a near one is named: test_flags_exact)
    (["run", "--seeds"], "bench run: error: argument --seeds: expected one argument"),
]


@pytest.mark.parametrize("argv, message", ARGPARSE_CASES)
def test_argparse_errors_are_one_line_with_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert message in err and "--help" in err
    assert len(err.strip().splitlines()) == 1, err


def test_unknown_method_names_every_registered_method_grouped(capsys, tmp_path):
    """Every name the registry holds can be read off the error, the group
    members beside their group ('extra (mdca, ...)'), on one line."""
    from bench.methods import METHODS, METHOD_GROUPS

    code = main(["run", "--results", str(tmp_path), "--method", "nope"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    named = {w.strip("(),;") for w in err.split("choose from:")[1].split()}
    missing = [m for m in METHODS.names() if m not in named]
    assert missing == []
    for group, members in METHOD_GROUPS.items():
        assert f"{group} ({', '.join(members)})" in err
