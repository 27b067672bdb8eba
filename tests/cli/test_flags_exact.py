"""Every flag is taken only as spelled: no argparse prefix matching (`--seed 3`
is not `--seeds 3`), an unknown flag is one line naming the nearest one, and
an option that only means something beside another is refused without it."""
import ast
from pathlib import Path

import pytest
import timm
import torchvision

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


TIMM_TAKES = f"timm:NAME takes any of the {len(timm.list_models()):,} models timm lists"
TV_TAKES = (f"tv:NAME takes any of the {len(torchvision.models.list_models(torchvision.models))}"
            " models torchvision lists")


@pytest.mark.parametrize("name, line", [
    ("timm:doesnotexist", f"--backbone timm:doesnotexist: 'doesnotexist' is not a timm model "
                          f"({TIMM_TAKES}); search them with bench list --backbones "
                          "'timm:*doesnotexist*'"),
    ("timm/doesnotexist.a1", f"--backbone timm/doesnotexist.a1: 'doesnotexist' is not a timm "
                             f"model ({TIMM_TAKES}); search them with bench list --backbones "
                             "'timm:*doesnotexist*'"),
    ("timm:mobilenetv3_smal", f"--backbone timm:mobilenetv3_smal: 'mobilenetv3_smal' is not a "
                              f"timm model ({TIMM_TAKES}); closest: timm:mobilenetv3_small_100, "
                              "timm:mobilenetv3_small_075, timm:mobilenetv3_small_050; search "
                              "them with bench list --backbones 'timm:*mobilenetv3_smal*'"),
    ("tv:resnet1", f"--backbone tv:resnet1: 'resnet1' is not a torchvision model ({TV_TAKES}); "
                   "closest: tv:resnet18, tv:resnet152, tv:resnet101; search them with bench "
                   "list --backbones 'tv:*resnet1*'"),
    ("timm:", f"--backbone 'timm:' names no model; {TIMM_TAKES} (list them: bench list "
              "--backbones 'timm:*')"),
    ("tv:", f"--backbone 'tv:' names no model; {TV_TAKES} (list them: bench list --backbones "
            "'tv:*')"),
])
def test_an_unknown_library_model_is_answered_with_the_search_to_run(name, line, capsys,
                                                                     tmp_path):
    """One line: the prefix takes the library's names, this one is not among
    them, the closest ones where difflib finds some, the search to run."""
    assert main(["run", "--dry-run", "--results", str(tmp_path), "--backbone", name]) == 2
    assert capsys.readouterr().err == f"bench: error: {line}\n"


def test_the_closest_names_are_models_the_library_builds(capsys):
    assert main(["list", "--backbones", "timm:mobilenetv3_small_0*"]) == 0
    listed = capsys.readouterr().out
    assert "timm:mobilenetv3_small_075" in listed and "timm:mobilenetv3_small_050" in listed


def test_the_suggested_search_finds_the_models(capsys):
    assert main(["list", "--backbones", "tv:*resnet1*"]) == 0
    assert "tv:resnet18" in capsys.readouterr().out


@pytest.mark.parametrize("backbone, tail", [
    ("tv:resnet18", ", never on a library model (timm:NAME, tv:NAME); for a packed resnet18 "
                    "write --backbone resnet18 (the registered build), not tv:resnet18"),
    ("timm:resnet50", ", never on a library model (timm:NAME, tv:NAME); for a packed resnet50 "
                      "write --backbone resnet50 (the registered build), not timm:resnet50"),
    ("tv:vgg11", ", never on a library model (timm:NAME, tv:NAME)"),
    ("convnext_tiny", ""),
])
def test_packed_on_a_backbone_it_is_not_built_for_says_what_is_allowed(backbone, tail, capsys,
                                                                       tmp_path):
    """tv:resnet18 is refused while `resnet18` is allowed: the line tells the
    two spellings apart instead of naming the user's own word as allowed."""
    assert main(["run", "--dry-run", "--results", str(tmp_path), "--method", "packed",
                 "--backbone", backbone, "--no-pretrained", "--profile", "quick"]) == 2
    assert capsys.readouterr().err == (
        f"bench: error: packed: backbone '{backbone}' is not built as Packed-Ensembles; it is "
        "built only on the registered conv / batch-norm backbones smallcnn, resnet18 and "
        f"resnet50{tail}\n")


def test_packed_builds_on_what_the_refusal_names(tmp_path):
    assert main(["run", "--dry-run", "--results", str(tmp_path), "--method", "packed",
                 "--backbone", "smallcnn,resnet18,resnet50", "--no-pretrained",
                 "--profile", "quick"]) == 0


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
