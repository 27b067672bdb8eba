"""Bad input refused in one line before anything is trained or written
(points 1, 2, 8 and 12 of a new-user review), and the training settings
that `bench run --dry-run` shows so they can be checked before a long run."""
from __future__ import annotations

import json

import pytest
import torch

from bench.cli.main import main
from bench.core.errors import BenchError

RUN = ["run", "--dataset", "digits", "--backbone", "smallcnn", "--seeds", "1", "--no-progress",
       "--profile", "quick", "--set", "cycles=1", "--set", "epochs_per_cycle=1"]


def one_line(capsys, argv) -> str:
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def run_argv(tmp_path, *extra) -> list[str]:
    return [*RUN, "--results", str(tmp_path / "results"), *extra]


# ------------------------------------------------- point 1: LaTeX captions --
def test_point1_caption_with_latex_braces_renders(tmp_path, capsys):
    from report_records import write_known

    write_known(tmp_path / "results")
    caption = r"\textbf{bold} results on {dataset}, $\frac{1}{2}$ of {n} runs"
    assert main(["report", "--results", str(tmp_path / "results"), "--out", str(tmp_path / "o"),
                 "--caption-main", caption, "--no-plots", "--no-ts", "--no-progress"]) == 0
    tex = (tmp_path / "o" / "tables" / "toy_main.tex").read_text()
    assert r"\caption{\textbf{bold} results on Toy, $\frac{1}{2}$ of 3 runs}" in tex \
        or r"\caption{\textbf{bold} results on toy, $\frac{1}{2}$ of 3 runs}" in tex, tex


def test_point1_default_captions_still_format_doubled_braces():
    from bench.report.render.latex import fill_caption

    assert fill_caption(r"\textbf{{{dataset} dataset}} over {n}", "Kvasir", 5) == \
        r"\textbf{Kvasir dataset} over 5"
    assert fill_caption(r"\underline{x} {dataset}/{n}", "Kvasir", 5) == r"\underline{x} Kvasir/5"


# ----------------------------------------- point 2: --json without --dry-run --
def test_point2_json_without_dry_run_is_refused(tmp_path, capsys):
    err = one_line(capsys, run_argv(tmp_path, "--json"))
    assert "--json" in err and "--dry-run" in err
    assert not (tmp_path / "results").exists()


# ------------------------------------------- point 8: values checked up front --
@pytest.mark.parametrize("value", ["inf", "1e309", "-inf", "nan"])
def test_point8_non_finite_lr_is_refused(tmp_path, capsys, value):
    err = one_line(capsys, run_argv(tmp_path, "--set", f"lr={value}"))
    assert f"--set lr={value}: expected float" in err and "finite" in err
    assert not (tmp_path / "results").exists()


def test_point8_non_finite_method_float_is_refused(tmp_path, capsys):
    err = one_line(capsys, run_argv(tmp_path, "--method", "ls", "--set", "epsilon=1e309"))
    assert "epsilon=1e309" in err and "finite" in err


@pytest.mark.parametrize("key", ["cycles", "epochs_per_cycle"])
def test_point8_absurd_schedule_is_refused(tmp_path, capsys, key):
    err = one_line(capsys, run_argv(tmp_path, "--set", f"{key}=99999999999999999999"))
    assert f"--set {key}=99999999999999999999: must be >= 1 and <= 1000" in err


@pytest.mark.parametrize("device, expect", [
    ("bogus", "unknown device 'bogus'; choose from: cpu, cuda, cuda:N"),
    ("cuda", "--device cuda: no CUDA device is visible; use --device cpu"),
    ("cuda:1", "--device cuda:1: no CUDA device is visible; use --device cpu"),
])
def test_point8_device_checked_before_any_run(tmp_path, capsys, monkeypatch, device, expect):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    err = one_line(capsys, run_argv(tmp_path, "--device", device))
    assert expect in err
    assert not (tmp_path / "results").exists()


def test_point8_device_index_beyond_visible_gpus(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    err = one_line(capsys, run_argv(tmp_path, "--device", "cuda:2"))
    assert "--device cuda:2: only 2 CUDA device(s) are visible (cuda:0..cuda:1)" in err


def test_point8_empty_weights_is_refused(tmp_path, capsys):
    err = one_line(capsys, run_argv(tmp_path, "--weights", ""))
    assert "--weights ''" in err
    assert not (tmp_path / "results").exists()


def test_point8_state_dict_on_smallcnn_fails_before_the_run(tmp_path, capsys):
    torch.save({"conv.weight": torch.zeros(3)}, tmp_path / "w.pt")
    err = one_line(capsys, run_argv(tmp_path, "--weights", str(tmp_path / "w.pt")))
    assert "smallcnn" in err and "no pretrained weights" in err
    assert not (tmp_path / "results").exists()


def test_point8_state_dict_with_wrong_keys_fails_before_the_run(tmp_path, capsys):
    torch.save({"conv.weight": torch.zeros(3)}, tmp_path / "w.pt")
    argv = run_argv(tmp_path, "--weights", str(tmp_path / "w.pt"))
    argv[argv.index("smallcnn")] = "resnet18"
    err = one_line(capsys, argv)
    assert f"weights {tmp_path / 'w.pt'} do not fit" in err and "missing" in err
    assert not (tmp_path / "results").exists()


def _report(tmp_path, *extra) -> list[str]:
    from report_records import write_known

    write_known(tmp_path / "results")
    return ["report", "--results", str(tmp_path / "results"), "--out", str(tmp_path / "o"),
            "--no-plots", "--no-progress", *extra]


@pytest.mark.parametrize("alpha", ["5", "0", "1", "-0.1", "nan"])
def test_point8_alpha_outside_0_1_is_refused(tmp_path, capsys, alpha):
    err = one_line(capsys, _report(tmp_path, "--alpha", alpha))
    assert f"--alpha {float(alpha)}: a significance level must be > 0 and < 1" in err
    assert not (tmp_path / "o").exists()


def test_point8_unknown_order_method_is_refused(tmp_path, capsys):
    err = one_line(capsys, _report(tmp_path, "--order", "sl1h,foo;dens"))
    assert "--order: unknown method 'foo'; choose from: 2hml, 4hml, ls, sl1h, dens" in err
    assert not (tmp_path / "o").exists()


def test_point8_order_naming_no_method_with_records_is_refused(tmp_path, capsys):
    err = one_line(capsys, _report(tmp_path, "--order", "mixup,dca"))
    assert "--order mixup,dca: none of these methods has records here" in err


def test_point8_order_may_name_a_registered_method_without_records(tmp_path, capsys):
    assert main(_report(tmp_path, "--order", "sl1h,mixup;4hml", "--no-ts")) == 0


def test_point8_contradictory_config_rules_are_refused(tmp_path, capsys):
    err = one_line(capsys, _report(tmp_path, "--config", "latest,most-seeds"))
    assert "--config latest,most-seeds: two rules contradict each other" in err
    assert not (tmp_path / "o").exists()


def test_point8_contradictory_config_prefixes_name_both():
    from bench.report.numbers.configs import parse_config_choice

    with pytest.raises(BenchError, match=r"^--config sl1h=abc,sl1h=def: two configs for sl1h"):
        parse_config_choice("sl1h=abc,sl1h=def", ["abc123", "def456"])
    # a longer prefix of the same hash is the same choice, not a contradiction
    assert parse_config_choice("sl1h=ab,sl1h=abc1", ["abc123"])[1] == {"sl1h": "abc1"}


# ------------------------------------- point 8: --dry-run shows the settings --
def test_point8_dry_run_json_shows_training_settings(tmp_path, capsys):
    argv = run_argv(tmp_path, "--dry-run", "--json", "--set", "lr=0.05", "--set",
                    "momentum=0.9", "--set", "batch_size=16", "--set", "augment=false")
    assert main(argv) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    assert {k: row[k] for k in ("lr", "momentum", "batch_size", "cycles", "epochs_per_cycle",
                                "epochs", "augment")} == {
        "lr": 0.05, "momentum": 0.9, "batch_size": 16, "cycles": 1, "epochs_per_cycle": 1,
        "epochs": 1, "augment": False}


def test_point8_dry_run_table_shows_training_settings(tmp_path, capsys):
    assert main([*RUN[:8], "--profile", "demo", "--results", str(tmp_path / "r"),
                 "--dry-run"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "steps/epoch" in line)
    for col in ("SGD lr/mom/wd", "batch", "cycles x epochs", "augment"):
        assert col in header
    row = out.splitlines()[-1]
    assert "0.1/0.9/0" in row and "3x30" in row and "| off" in row


# ------------------------------------------------------ point 12: smaller --
def test_point12_seed_range_backwards_says_so(tmp_path, capsys):
    err = one_line(capsys, [*RUN[:5], "--seeds", "5-3", "--results", str(tmp_path / "r")])
    assert "--seeds 5-3: the range starts above its end (5 > 3); write 3-5" in err


def test_point12_method_key_on_another_method_names_its_owners(tmp_path, capsys):
    err = one_line(capsys, run_argv(tmp_path, "--method", "sl1h", "--set", "epsilon=2"))
    assert "--set epsilon: not a key of sl1h; it belongs to ls" in err


def test_point12_weights_error_is_clean_and_cut_at_a_word(tmp_path, capsys):
    from bench.train.weights import short_reason

    err = RuntimeError("Weights only load failed. This file can still be loaded, to do so you "
                       "have two options, \x1b[1mdo those steps only if you trust the source "
                       "of the checkpoint\x1b[0m.\nmore")
    text = short_reason(err)
    assert "\x1b" not in text and "\n" not in text and len(text) <= 100
    assert text.endswith(" ...") and text[:-4] in err.args[0].replace("\x1b[1m", "")
    assert short_reason(ValueError("short one")) == "short one"


def test_point12_profile_and_alpha_help():
    from bench.cli.main import build_parser

    sub = build_parser()._subparsers._group_actions[0].choices
    profile = next(a for a in sub["run"]._actions if a.dest == "profile")
    alpha = next(a for a in sub["report"]._actions if a.dest == "alpha")
    assert "demo" in profile.help
    assert alpha.help and "(0, 1)" in alpha.help


def test_point12_setup_sh_prints_a_line_before_each_long_step(tmp_path):
    """setup.sh on a fresh copy, pip and pdflatex stubbed: a progress line
    comes before the first (slow) pip call."""
    import shutil
    import subprocess
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    shutil.copy(repo / "setup.sh", tmp_path / "setup.sh")
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (stubs / "pdflatex").write_text("#!/bin/sh\n")
    (stubs / "python3").write_text(  # `python3 -m venv .venv` makes the stub python
        "#!/bin/sh\nmkdir -p .venv/bin\n"
        "printf '#!/bin/sh\\necho \"CALL $*\" >&2\\n' > .venv/bin/python\n"
        "chmod +x .venv/bin/python\n")
    for f in stubs.iterdir():
        f.chmod(0o755)
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "PYTHON": str(stubs / "python3")}
    res = subprocess.run(["bash", str(tmp_path / "setup.sh")], cwd=tmp_path, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=60)  # one stream: the order of lines is kept
    assert res.returncode == 0, res.stdout
    lines = res.stdout.splitlines()
    first_pip = next(i for i, line in enumerate(lines) if "pip install" in line)
    assert any(line.startswith("setup.sh: installing torch") for line in lines[:first_pip])
    assert lines[-1] == "setup.sh: done"
