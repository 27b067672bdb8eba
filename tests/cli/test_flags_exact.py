"""Every flag is taken only as spelled: no argparse prefix matching (`--seed 3`
is not `--seeds 3`), an unknown flag is one line naming the nearest one, and
an option that only means something beside another is refused without it."""
import ast
from pathlib import Path

import pytest

from bench.cli.main import OneLineParser, main
from bench.core.methodgroups import METHOD_GROUPS, SPELLED
from bench.core.paper import EXTRA_BASELINES, PAPER_METHODS

ROOT = Path(__file__).resolve().parents[2]


def _parser_calls(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(
                node.func, "id", None)) == "ArgumentParser":
            yield node


def test_every_argument_parser_in_bench_and_benchmarks_refuses_abbreviations():
    files = [*ROOT.joinpath("bench").rglob("*.py"), *ROOT.joinpath("benchmarks").rglob("*.py")]
    calls = [(p, c) for p in files for c in _parser_calls(p)]
    assert len(calls) >= 15  # the speed scripts and benchmarks: the scan found them
    loose = [f"{p.relative_to(ROOT)}:{c.lineno}" for p, c in calls
             if not any(k.arg == "allow_abbrev" and getattr(k.value, "value", True) is False
                        for k in c.keywords)]
    assert loose == []
    assert OneLineParser().allow_abbrev is False  # bench's own, its subcommands' too


@pytest.mark.parametrize("argv, line", [
    (["run", "--seed", "3"], "bench run: error: unknown option --seed; did you mean --seeds?"),
    (["run", "--seed=3"], "bench run: error: unknown option --seed; did you mean --seeds?"),
    (["run", "--resu", "x"], "bench run: error: unknown option --resu; did you mean --results?"),
    (["run", "--dry-r"], "bench run: error: unknown option --dry-r; did you mean --dry-run?"),
    (["report", "--result", "x"],
     "bench report: error: unknown option --result; did you mean --results?"),
    (["eval", "--resu", "x"], "bench eval: error: unknown option --resu; did you mean --results?"),
])
def test_an_abbreviated_or_misspelt_flag_is_refused_in_one_line(argv, line, capsys, tmp_path,
                                                               monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert capsys.readouterr().err == line + "\n"
    assert not any(tmp_path.iterdir())  # refused before anything was written


def test_seed_3_trains_nothing_from_the_command_line(tmp_path):
    """The program itself (not only main()): exit status 2, one line on stderr."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "bench.cli", "run", "--seed", "3", "--results",
                          str(tmp_path / "r")], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == "bench run: error: unknown option --seed; did you mean --seeds?\n"
    assert not (tmp_path / "r").exists()


def test_the_api_names_the_keyword_meant():
    import bench.api
    from bench.core.errors import BenchError

    with pytest.raises(BenchError, match=r"unknown option seed; .*did you mean seeds\?$"):
        bench.api.run(seed=3)


REPORT_NEEDS = [
    (["--sets-randomize"], "--sets-randomize applies with --sets only; add --sets"),
    (["--sets-top-label"], "--sets-top-label applies with --sets only; add --sets"),
    (["--sets-alpha", "0.2"], "--sets-alpha applies with --sets only; add --sets"),
    (["--sets", "--sets-seed", "3"],
     "--sets-seed applies with --sets-randomize only; add --sets-randomize"),
    (["--per-seed", "--no-plots"], "--per-seed has no effect with --no-plots; drop one of them"),
]


@pytest.mark.parametrize("argv, message", REPORT_NEEDS)
def test_a_report_option_without_the_one_it_needs_is_refused(argv, message, capsys, tmp_path):
    (tmp_path / "results").mkdir()
    out = tmp_path / "out"
    assert main(["report", "--results", str(tmp_path / "results"), "--out", str(out),
                 *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"bench: error: {message}") and err.count("\n") == 1
    assert not out.exists()


RUN_NEEDS = [
    (["--partition", "gpu"], "--partition applies with --executor slurm only"),
    (["--time", "30"], "--time applies with --executor slurm only"),
    (["--array-parallelism", "4"], "--array-parallelism applies with --executor slurm only"),
]


@pytest.mark.parametrize("argv, message", RUN_NEEDS)
def test_a_run_option_without_the_one_it_needs_is_refused(argv, message, capsys, tmp_path):
    assert main(["run", "--dry-run", "--results", str(tmp_path / "r"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"bench: error: {message}") and err.count("\n") == 1
    assert not (tmp_path / "r").exists()


def test_the_needed_option_given_lets_it_through(capsys, tmp_path):
    assert main(["run", "--dry-run", "--results", str(tmp_path / "r"), "--fuse", "seeds",
                 "--fuse-max", "2", "--seeds", "2", "--profile", "quick"]) == 0


@pytest.mark.parametrize("name, search", [
    ("timm:doesnotexist", "timm has no model 'doesnotexist'; search its names with bench list "
                          "--backbones 'timm:*doesnotexist*'"),
    ("timm/doesnotexist.a1", "timm has no model 'doesnotexist'; search its names with bench "
                             "list --backbones 'timm:*doesnotexist*'"),
    ("tv:resnet1", "torchvision has no model 'resnet1'; search its names with bench list "
                   "--backbones 'tv:*resnet1*'"),
    ("timm:", "names no timm model; give timm:NAME (list them: bench list --backbones "
              "'timm:*')"),
    ("tv:", "names no torchvision model; give tv:NAME (list them: bench list --backbones "
            "'tv:*')"),
])
def test_an_unknown_library_model_is_answered_with_the_search_to_run(name, search, capsys,
                                                                     tmp_path):
    assert main(["run", "--dry-run", "--results", str(tmp_path), "--backbone", name]) == 2
    err = capsys.readouterr().err
    assert search in err and err.count("\n") == 1
    assert "choose from" not in err and "smallcnn" not in err  # not the registered names


def test_the_suggested_search_finds_the_models(capsys):
    assert main(["list", "--backbones", "tv:*resnet1*"]) == 0
    assert "tv:resnet18" in capsys.readouterr().out


def test_packed_on_a_library_model_says_what_is_allowed(capsys, tmp_path):
    assert main(["run", "--dry-run", "--results", str(tmp_path), "--method", "packed",
                 "--backbone", "tv:resnet18", "--no-pretrained", "--profile", "quick"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert ("'tv:resnet18' is not built as Packed-Ensembles: library models (timm:NAME, "
            "tv:NAME) never are; allowed: the registered conv / batch-norm backbones "
            "smallcnn, resnet18 (timm's ResNet-18) and resnet50") in err


def test_a_report_of_a_missing_folder_says_it_does_not_exist(capsys, tmp_path):
    out = tmp_path / "out"
    assert main(["report", "--results", str(tmp_path / "nonexistent"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (f"bench: error: --results {tmp_path / 'nonexistent'}: does not exist; give "
                   "the folder `bench run` wrote its records to\n")
    assert not out.exists()


def test_run_help_names_every_method_group_and_what_it_holds(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps the lines
    start = text.index("--method METHOD method name")
    method = text[start:text.index("--dataset DATASET", start)]
    groups = {"paper": PAPER_METHODS, "all": EXTRA_BASELINES, **METHOD_GROUPS}
    for group, members in groups.items():
        assert f"{group} = " in method, group
        for m in members:
            assert SPELLED.get(m, m) in method, (group, m)
    assert "BatchEnsemble" in method and "Packed-Ensembles" in method
