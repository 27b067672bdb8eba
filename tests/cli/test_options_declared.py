"""Options declared once (issue 31): every `bench run` / `bench report` flag is
built from a field of its options dataclass (RunOptions, ReportOptions) and
every field is a flag; bench.api takes the field names and nothing else;
the command line's text and a notebook's dict, list or int give equal
options."""
from __future__ import annotations

import argparse
import dataclasses

import pytest

import bench.api as api
from bench.cli.main import build_parser, main
from bench.cli.report import PLACES, options_of
from bench.cli.typed import options_from
from bench.core.errors import BenchError
from bench.core.flags import declared
from bench.report.options import KINDS, ReportOptions
from bench.sweep.options import RunOptions

HELP = {"-h", "--help"}


def command(name: str) -> argparse.ArgumentParser:
    return build_parser([name])._subparsers._group_actions[0].choices[name]


def flags_of(parser) -> dict[str, set]:
    """dest -> every option string that sets it (help left out)."""
    out: dict = {}
    for a in parser._actions:
        if a.option_strings and not set(a.option_strings) <= HELP:
            out.setdefault(a.dest, set()).update(a.option_strings)
    return out


def declared_flags(cls) -> dict[str, set]:
    return {d.name: set(d.spellings) | ({f"--no-{d.spelling[2:]}"} if d.kind == "either"
                                         else set()) for d in declared(cls)}


def test_every_run_flag_is_a_runoptions_field_and_every_field_a_flag():
    """... but --grid and --save-grid, GridOptions' (bench.sweep.gridfile): a
    grid file's own flags."""
    from bench.sweep.gridfile import GridOptions

    assert flags_of(command("run")) == {**declared_flags(RunOptions),
                                        **declared_flags(GridOptions)}


def test_every_report_flag_is_a_reportoptions_field_but_results_and_out():
    """The documented exceptions: --results and --out (build()'s and
    bench.api.report's own arguments) and --plugin (every command's: it is
    RunOptions' `plugin`, added to each command by bench.cli.main)."""
    flags = flags_of(command("report"))
    assert flags.pop("plugin") == {"--plugin"} and RunOptions.__dataclass_fields__["plugin"]
    assert {d for d, f in flags.items() if f & set(PLACES)} == {"results", "out"}
    for place in ("results", "out"):
        flags.pop(place)
    assert flags == declared_flags(ReportOptions)


def test_each_table_kind_has_its_caption_field_and_flag():
    names = {f.name for f in dataclasses.fields(ReportOptions) if f.name.startswith("caption_")}
    assert names == {f"caption_{k}" for k in KINDS}
    assert {f"--caption-{k}" for k in KINDS} <= set().union(*flags_of(command("report")).values())


def test_the_api_signatures_are_the_fields():
    import inspect

    run = inspect.signature(api.run).parameters
    assert set(run) == {f.name for f in dataclasses.fields(RunOptions)}
    assert list(run)[:6] == list(api.RUN_POSITIONAL)
    report = inspect.signature(api.report).parameters
    assert set(report) == {"results_dir", "out_dir"} | {f.name for f in
                                                         dataclasses.fields(ReportOptions)}


@pytest.mark.parametrize("call, cls", [(api.run, RunOptions), (api.report, ReportOptions)])
def test_the_api_refuses_an_unknown_name_listing_the_allowed_ones(call, cls, tmp_path,
                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)  # api.report's default out_dir: nothing may appear
    with pytest.raises(BenchError) as err:
        call(colour="red")
    line = str(err.value)
    assert "\n" not in line and "unknown option colour; allowed: " in line
    allowed = line.split("allowed: ")[1].split(", ")
    assert allowed == sorted(f.name for f in dataclasses.fields(cls))
    assert not any(tmp_path.iterdir())


def test_an_option_given_by_position_and_keyword_is_one_error(tmp_path):
    with pytest.raises(BenchError, match="method given twice"):
        api.run("sl1h", method="2hml", results=tmp_path / "r")
    with pytest.raises(BenchError, match="at most 6 positional"):
        api.run("sl1h", "digits", None, 1, "quick", {}, "extra")
    assert not (tmp_path / "r").exists()


def test_command_line_text_and_python_values_give_equal_options():
    args = build_parser(["run"]).parse_args(
        ["run", "--method", "sl1h,2hml", "--seeds", "2-2", "--set", "lr=0.5", "heads=2",
         "--set", "augment=false", "--data-opt", "train_per_class=10", "--data-opt",
         "label_noise=0.1", "--jobs", "3", "--pretrained", "--plugin", "mine"])
    cli = options_from(RunOptions, args)
    # a training key is typed as it is parsed (its field is known); heads is
    # 2hml's and stays text until the plan knows the run's methods
    assert cli.overrides == (("lr", 0.5), ("heads", "2"), ("augment", False))
    assert cli.data_opts == (("train_per_class", "10"), ("label_noise", "0.1"))
    from bench.core.flags import from_keywords

    py = from_keywords(RunOptions, "t", dict(
        method=["sl1h", "2hml"], seeds=[2], overrides={"lr": 0.5, "heads": 2, "augment": False},
        data_opts={"train_per_class": 10, "label_noise": 0.1}, jobs=3, pretrained=True,
        plugin=["mine"], no_progress=False))
    # the same options, but the method's value as the caller typed it: the
    # plan converts both to the field's type (test_typed_overrides.py)
    assert dataclasses.replace(py, overrides=cli.overrides) == cli
    assert dict(py.overrides) == {**dict(cli.overrides), "heads": 2}
    assert py.overrides == (("lr", 0.5), ("heads", 2), ("augment", False))


def test_report_keywords_and_flags_give_equal_options():
    flags = ["report", "--dataset", "digits", "--method", "sl1h,2hml", "--seeds", "3",
             "--label", "sl1h=Base", "--metrics", "ece,aece", "--alpha", "0.1", "--ci",
             "--no-progress"]
    assert api._report_options(dict(dataset="digits", method=["sl1h,2hml"], seeds=3,
                                     label={"sl1h": "Base"}, metrics=["ece", "aece"],
                                     alpha=0.1, ci=True)) == \
        options_of(build_parser(["report"]).parse_args(flags))
    assert ReportOptions(label={"a": "B"}) == ReportOptions(label=("a=B",))


def test_a_bad_set_item_is_one_line_before_anything_is_written(tmp_path, capsys):
    assert main(["run", "--results", str(tmp_path / "r"), "--set", "lr"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "bench: error: --set expects key=value, got 'lr'"
    assert not (tmp_path / "r").exists()


def test_the_fuse_seeds_alias_still_sets_fuse():
    args = build_parser(["run"]).parse_args(["run", "--fuse-seeds"])
    assert options_from(RunOptions, args).fuse == "seeds"


def test_positional_arguments_keep_their_order(tmp_path):
    tiny = {"cycles": 1, "epochs_per_cycle": 1, "image_size": 16}
    by_position = api.run("sl1h", "digits", "smallcnn", 1, "quick", tiny,
                          results=tmp_path / "r", dry_run=True)
    by_name = api.run(method="sl1h", dataset="digits", backbone="smallcnn", seeds=1,
                      profile="quick", overrides=tiny, results=tmp_path / "r", dry_run=True)
    assert by_position.equals(by_name) and list(by_name["status"]) == ["missing"]


@pytest.mark.parametrize("options, message", [
    (dict(overrides=5), "--set 5: expected a dict, KEY=VALUE texts or (key, value) pairs"),
    (dict(overrides=[("lr",)]), "--set expects key=value, got ('lr',)"),
    (dict(data_opts=["x"]), "--data-opt expects key=value, got 'x'"),
    (dict(plugin=3), "--plugin 3: expected a text or a list of them")])
def test_a_value_of_the_wrong_shape_is_one_line(options, message, tmp_path):
    with pytest.raises(BenchError) as err:
        api.run(results=tmp_path / "r", **options)
    assert str(err.value) == message and not (tmp_path / "r").exists()
