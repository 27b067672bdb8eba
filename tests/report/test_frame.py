"""bench.results.load (the results frame), damaged records, config choice
in `bench report`, and the README's Python API snippet."""
import csv
import json
import shutil

import numpy as np
import pytest
from report_records import COST, KNOWN, write_known

import bench.results
from bench.cli.main import main
from bench.core import store
from bench.core.errors import BenchError
from bench.report.numbers import configs
from bench.report.numbers.frame import damaged


@pytest.fixture
def known(tmp_path):
    return write_known(tmp_path / "results")


def _csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_frame_has_one_row_per_record_with_config_metrics_and_cost(known):
    df = bench.results.load(known)
    assert len(df) == sum(len(v["acc"]) for v in KNOWN.values())
    row = df[(df.backbone == "resnet50") & (df.method == "2hml") & (df.seed == 1)].iloc[0]
    assert row.acc == pytest.approx(KNOWN[("resnet50", "2hml")]["acc"][1] / 100)
    assert row.val_ece == pytest.approx(KNOWN[("resnet50", "2hml")]["ece"][1] / 100)
    assert (row.dataset, row.config_hash, row.heads) == ("toy", "abc123", 2)
    assert row.n_params == COST["2hml"] and row.train_seconds == 11.0


def test_readme_python_api_snippet(known):
    """The README's "Python API" lines, checked against the known values."""
    df = bench.results.load(known)
    ece = df.groupby(["method", "backbone"])["ece"].mean()
    for (backbone, method), values in KNOWN.items():
        assert ece[(method, backbone)] == pytest.approx(np.mean(values["ece"]) / 100)


def _record(root, backbone="resnet50", method="sl1h", seed=1):
    return store.record_dir(root, "toy", backbone, method, "abc123", seed)


@pytest.mark.parametrize("harm", ["truncate", "delete"])
@pytest.mark.parametrize("no_ts", [False, True])
def test_damaged_predictions_are_skipped_and_listed(known, tmp_path, capsys, harm, no_ts):
    """A truncated or deleted predictions.npz never aborts
    a report: the record is skipped with a note and listed as damaged."""
    npz = _record(known) / "predictions.npz"
    if harm == "truncate":
        npz.write_bytes(npz.read_bytes()[: npz.stat().st_size // 2])
    else:
        npz.unlink()
    assert damaged(_record(known)).startswith("predictions.npz: ")
    assert damaged(_record(known, seed=0)) is None
    out = tmp_path / "out"
    argv = ["report", "--results", str(known), "--out", str(out), "--no-plots", "--no-progress"]
    assert main(argv + (["--no-ts"] if no_ts else [])) == 0
    assert "skipped damaged record" in capsys.readouterr().out
    failed = [r for r in _csv(out / "failed_runs.csv") if r["reason"].startswith("damaged: ")]
    assert [(f["backbone"], f["method"], f["seed"], f["config_hash"]) for f in failed] == [
        ("resnet50", "sl1h", "1", "abc123")]
    runs = _csv(out / "runs.csv")
    assert not any((r["backbone"], r["method"], r["seed"]) == ("resnet50", "sl1h", "1")
                   for r in runs)


def test_damaged_metrics_json(known):
    (_record(known) / "metrics.json").write_text('{"status": "done", "test": ')
    assert damaged(_record(known)).startswith("metrics.json: ")


def _second_config(root, hash_="zzz999", seeds=(0,), backbone="resnet50", method="sl1h"):
    for seed in seeds:
        src = _record(root, backbone, method, seed)
        dst = src.parent.parent / hash_ / f"seed{seed}"
        shutil.copytree(src, dst)
        cfg = store.read_json(dst / "config.json")
        cfg["train"] = {"epochs_per_cycle": 1}
        (dst / "config.json").write_text(__import__("json").dumps(cfg))
        _reseal(dst)


def _reseal(record):
    """After a test edits config.json on purpose, record its new checksum
    (as write_record would have), so the record is not taken for damaged."""
    metrics = store.read_json(record / "metrics.json")
    if "files" in metrics:
        metrics["files"]["config.json"] = store.file_sum(record / "config.json")
        metrics = store.with_digest(metrics)  # metrics.json vouches for itself too
        (record / "metrics.json").write_text(__import__("json").dumps(metrics))


def test_two_configs_stop_the_report_with_one_line(known, tmp_path, capsys):
    _second_config(known)
    out = tmp_path / "out"
    assert main(["report", "--results", str(known), "--out", str(out), "--no-plots",
                 "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "toy/resnet50/sl1h has records of 2 configs" in err
    assert "abc123 (3 seeds; epochs_per_cycle=?)" in err
    assert "zzz999 (1 seeds; epochs_per_cycle=1)" in err
    assert not out.exists()  # nothing written before the input is known good


def test_config_accepts_one_prefix_per_method(known, tmp_path):
    _second_config(known)
    _second_config(known, "yyy888", backbone="resnet50", method="2hml", seeds=(0, 1))
    fail = _record(known).parent / "_sweep"
    fail.mkdir()
    (fail / "seed5.failed.json").write_text('{"status": "failed", "reason": "boom"}')
    out = tmp_path / "out"
    assert main(["report", "--results", str(known), "--out", str(out), "--no-plots",
                 "--no-progress", "--no-ts", "--config", "zzz,yyy"]) == 0
    runs = _csv(out / "runs.csv")
    chosen = {(r["backbone"], r["method"]): r["config_hash"] for r in runs}
    assert chosen[("resnet50", "sl1h")] == "zzz999" and chosen[("resnet50", "2hml")] == "yyy888"
    assert chosen[("convnext_tiny", "sl1h")] == "abc123"  # its only config
    # a failure of a config that was not selected is still listed, with its hash
    failed = {(f["method"], f["seed"], f["config_hash"]) for f in _csv(out / "failed_runs.csv")}
    assert ("sl1h", "5", "abc123") in failed
    assert "toy_main" in (out / "tables" / "all_tables.tex").read_text()


def test_config_prefix_matching_nothing_is_an_error(known, tmp_path, capsys):
    assert main(["report", "--results", str(known), "--out", str(tmp_path / "o"),
                 "--config", "abc,nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("bench: error: --config nope: matches no record; configs present: abc123; "
                   "or a rule: latest, most-seeds")


def test_config_per_method_and_by_rule(known, tmp_path):
    """--config METHOD=PREFIX picks for that method only; the rules
    latest / most-seeds decide every cell that prefixes leave open."""
    import os

    _second_config(known)  # resnet50/sl1h: abc123 (3 seeds) and zzz999 (1 seed, newer)
    _second_config(known, "yyy888", backbone="resnet50", method="2hml", seeds=(0, 1))
    for rec in (known / "toy" / "resnet50" / "sl1h" / "zzz999").glob("seed*"):
        os.utime(rec / "metrics.json", (4e9, 4e9))  # zzz999 is the newest record

    def chosen(choice):
        out = tmp_path / choice.replace(",", "_").replace("=", "-")
        assert main(["report", "--results", str(known), "--out", str(out), "--no-plots",
                     "--no-progress", "--no-ts", "--config", choice]) == 0
        return {(r["backbone"], r["method"]): r["config_hash"] for r in _csv(out / "runs.csv")}

    c = chosen("sl1h=zzz,2hml=abc")
    assert c[("resnet50", "sl1h")] == "zzz999" and c[("resnet50", "2hml")] == "abc123"
    c = chosen("most-seeds")
    assert c[("resnet50", "sl1h")] == "abc123"  # 3 seeds beat 1
    assert c[("resnet50", "2hml")] == "abc123"  # 3 seeds beat yyy888's 2
    c = chosen("latest")
    assert c[("resnet50", "sl1h")] == "zzz999"
    c = chosen("2hml=yyy,most-seeds")  # a prefix first, the rule for the rest
    assert c[("resnet50", "2hml")] == "yyy888" and c[("resnet50", "sl1h")] == "abc123"
    assert main(["report", "--results", str(known), "--out", str(tmp_path / "x"),
                 "--config", "sl1h=nope"]) == 2


def _damage(known, backbone, method):
    npz = _record(known, backbone, method) / "predictions.npz"
    npz.write_bytes(npz.read_bytes()[:100])


@pytest.mark.parametrize("filters, runs, bad", [
    ({}, 23 - 2, {("resnet50", "sl1h"), ("convnext_tiny", "4hml")}),
    ({"methods": ["sl1h"]}, 6 - 1, {("resnet50", "sl1h")}),
    ({"backbones": ["convnext_tiny"]}, 11 - 1, {("convnext_tiny", "4hml")}),
    ({"backbones": ["convnext_tiny"], "methods": ["sl1h", "ls"]}, 5, set()),
    ({"datasets": ["toy"], "methods": ["4hml"]}, 6 - 1, {("convnext_tiny", "4hml")}),
    ({"datasets": ["other"]}, 0, set()),
])
def test_load_runs_filters_records_and_damaged_ones_alike(known, filters, runs, bad):
    from bench.report.numbers import aggregate

    _damage(known, "resnet50", "sl1h")
    _damage(known, "convnext_tiny", "4hml")
    damaged_rows = []
    got = aggregate.load_runs(known, damaged=damaged_rows, **filters)
    assert len(got) == runs
    for key, allowed in (("dataset", "datasets"), ("backbone", "backbones"),
                         ("method", "methods")):
        if filters.get(allowed):
            assert {getattr(r, key) for r in got} <= set(filters[allowed])
    assert {(d["backbone"], d["method"]) for d in damaged_rows} == bad


@pytest.mark.parametrize("key", ["reason", "error", "message", "exception"])
def test_failure_reason_from_any_of_its_keys(tmp_path, key):
    from bench.report.numbers import aggregate

    d = tmp_path / "toy" / "resnet50" / "sl1h" / "abc123"
    d.mkdir(parents=True)
    (d / "seed3.failed.json").write_text(json.dumps({key: "boom\nsecond line"}))
    (row,) = aggregate.find_failures(tmp_path)
    assert (row["reason"], row["seed"], row["method"]) == ("boom", "3", "sl1h")


@pytest.mark.parametrize("record, reason", [
    ({"error": "x" * 300}, "x" * 200),  # one line, cut at 200 characters
    ({"status": "failed"}, "status failed"),  # no reason key: the status is the reason
    ({"last_step": 7}, "status unknown"),  # not even a status
    ({"reason": "", "status": "running"}, "status running"),  # an empty reason is none
])
def test_failure_reason_without_a_reason_text(tmp_path, record, reason):
    from bench.report.numbers import aggregate

    d = tmp_path / "toy" / "resnet50" / "sl1h" / "abc123"
    d.mkdir(parents=True)
    (d / "seed0.failed.json").write_text(json.dumps(record))
    (row,) = aggregate.find_failures(tmp_path)
    assert row["reason"] == reason


def test_find_failures_lists_what_is_not_done_and_skips_records_being_written(tmp_path):
    """The sweep's layout (<hash>/_sweep/seed<k>.failed.json, <hash>/seed<k>/metrics.json),
    written here by hand: finished runs are not failures, unfinished ones are, a
    directory starting with "." (a record mid-write) is skipped without stopping the
    scan, a file that cannot be parsed is a failure named as unreadable."""
    from bench.report.numbers import aggregate

    run = tmp_path / "toy" / "resnet50" / "sl1h"

    def put(rel, obj):
        path = run / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(obj if isinstance(obj, str) else json.dumps(obj))

    put("h1/seed0/metrics.json", {"status": store.DONE})
    put("h1/seed1/metrics.json", {"status": "running"})
    put("h1/.seed2.tmp/metrics.json", {"status": "running"})  # sorted before the rest
    put(".h0/_sweep/seed3.failed.json", {"reason": "mid-write"})
    put("h2/_sweep/seed4.failed.json", {"reason": "nan loss", "last_step": 12})
    put("h2/_sweep/seed5.failed.json", '{"reason": "trunc')
    put("h3/seed6/failed.json", {"error": "legacy layout"})  # a failure inside the seed dir
    rows = {r["seed"]: r for r in aggregate.find_failures(tmp_path)}
    assert sorted(rows) == ["1", "4", "5", "6"]
    assert rows["1"]["reason"] == "status running" and rows["1"]["config_hash"] == "h1"
    four = rows["4"]
    assert (four["reason"], four["last_step"], four["config_hash"]) == ("nan loss", 12, "h2")
    assert rows["5"]["reason"].startswith("unreadable seed5.failed.json: ")
    assert rows["6"]["reason"] == "legacy layout"
    assert {(r["dataset"], r["backbone"], r["method"]) for r in rows.values()} == {
        ("toy", "resnet50", "sl1h")}


def test_failure_rows_prefer_the_record_own_fields_to_its_path(tmp_path):
    """A record's own seed / config_hash / method / last step win over what its path
    says; where it has none the path fills them, and a missing step stays empty."""
    from bench.report.numbers import aggregate

    files = {
        "toy/resnet50/sl1h/h1/seed1/metrics.json":
            {"status": "failed", "seed": 11, "config_hash": "full-h1", "method": "ls", "step": 30},
        "toy/resnet50/sl1h/h2/_sweep/seed2.failed.json": {"reason": "x"},
        "toy/resnet50/sl1h/seed3.failed.json": {"reason": "y", "last_step": 5, "step": 9},
    }
    for rel, obj in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(json.dumps(obj))
    rows = sorted(aggregate.find_failures(tmp_path), key=lambda r: str(r["seed"]))
    got = [(r["seed"], r["config_hash"], r["method"], r["last_step"]) for r in rows]
    assert got == [(11, "full-h1", "ls", 30), ("2", "h2", "sl1h", ""), ("3", "", "sl1h", 5)]


def test_config_notes_name_the_rule_and_every_ignored_config(known):
    """The note says how the config was chosen (the rule's name only when the rule
    alone chose) and lists every config it ignored."""
    import os

    from bench.report.numbers import aggregate

    _second_config(known)  # resnet50/sl1h: abc123 (3 seeds), zzz999 (1 seed), yyy777 (2 seeds)
    _second_config(known, "yyy777", seeds=(0, 1))
    for rec in (known / "toy" / "resnet50" / "sl1h" / "zzz999").glob("seed*"):
        os.utime(rec / "metrics.json", (4e9, 4e9))  # zzz999 is the newest record
    runs = aggregate.load_runs(known)
    cell = "toy/resnet50/sl1h: using config"
    _, notes = configs.select_configs(runs, "latest")
    assert notes == [f"{cell} zzz999 (1 seeds, chosen by --config latest), "
                     "ignoring abc123 (3 seeds), yyy777 (2 seeds)"]
    _, notes = configs.select_configs(runs, "most-seeds")
    assert notes == [f"{cell} abc123 (3 seeds, chosen by --config most-seeds), "
                     "ignoring yyy777 (2 seeds), zzz999 (1 seeds)"]
    for choice in ("sl1h=yyy,latest", "latest,sl1h=yyy"):  # the prefix chose, in any order
        _, notes = configs.select_configs(runs, choice)
        assert notes == [f"{cell} yyy777 (2 seeds, chosen by --config), "
                         "ignoring abc123 (3 seeds), zzz999 (1 seeds)"]
    with pytest.raises(BenchError) as err:
        configs.select_configs(runs, "nope")
    assert str(err.value) == ("--config nope: matches no record; configs present: abc123, "
                              "yyy777, zzz999; or a rule: latest, most-seeds")


# docs/reports.md's runs.csv row
RUNS_COLUMNS = ["dataset", "backbone", "method", "config_hash", "seed", "heads", "acc", "ece",
                "nll", "brier", "auc", "gap", "n_params", "train_seconds",
                "train_images_per_s", "infer_ms_per_image", "path"]
# after the path: the measures computed from the logits, their bootstrap bounds
MEASURE_COLUMNS = ["aece", "cwece", "dl2ce", "smece", "aurc", "ece5", "ece10", "ece15", "ece20",
                   "ece30", "acc_boot_lo", "acc_boot_hi", "ece_boot_lo", "ece_boot_hi",
                   "nll_boot_lo", "nll_boot_hi", "dl2ce_boot_lo", "dl2ce_boot_hi",
                   "boot_resamples", "boot_seed"]
FAILURE_HEADER = ["dataset", "backbone", "method", "seed", "reason", "last_step", "path",
                  "config_hash"]


def test_csv_files_have_the_documented_columns_and_values(known, tmp_path):
    """Headers exactly as docs/reports.md lists them (no index column), every identity
    cell filled, and the writers create the folders they write into."""
    from bench.report.numbers import aggregate

    runs = aggregate.load_runs(known)
    path = aggregate.write_runs_csv(runs, tmp_path / "a" / "b" / "runs.csv")
    raw = path.read_bytes()  # csv.writer's \r\n line ends, as before pandas wrote them
    assert raw.count(b"\r\n") == len(runs) + 1 == raw.count(b"\n")
    with open(path) as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == RUNS_COLUMNS + MEASURE_COLUMNS and len(rows) == len(runs) + 1
    got = {tuple(r[:5]) + (r[len(RUNS_COLUMNS) - 1],) for r in rows[1:]}
    assert got == {(r.dataset, r.backbone, r.method, r.chash, str(r.seed), str(r.path))
                   for r in runs}
    groups, _ = aggregate.build_cells(runs, with_ts=False)
    expected = aggregate.expected_seeds(runs)
    path = aggregate.write_cells_csv(groups, expected, tmp_path / "c" / "d" / "g.csv")
    table = _csv(path)
    metrics, costs = RUNS_COLUMNS[6:12], RUNS_COLUMNS[12:16]
    extra = MEASURE_COLUMNS[:10]
    assert list(table[0]) == ["dataset", "backbone", "row", "method", "config_hash", "n", "N",
                              "seeds", *[f"{m}_{s}" for m in metrics for s in ("mean", "std")],
                              *costs, "variant",
                              *[f"{m}_{s}" for m in extra for s in ("mean", "std")],
                              *[f"{m}_ci_{s}" for m in (*metrics, *extra) for s in ("lo", "hi")]]
    assert list(aggregate.cells_frame({}, {}).columns) == list(table[0])  # header even if empty
    assert list(aggregate.runs_frame([]).columns) == RUNS_COLUMNS + MEASURE_COLUMNS
    cell = next(r for r in table if (r["backbone"], r["row"]) == ("resnet50", "sl1h"))
    assert (cell["dataset"], cell["method"], cell["config_hash"], cell["seeds"]) == (
        "toy", "sl1h", "abc123", "0 1 2")
    failures = [{"dataset": "toy", "backbone": "resnet50", "method": "ls", "seed": 3,
                 "reason": "boom", "path": "p", "config_hash": "h"}]
    path = aggregate.write_failures_csv(failures, tmp_path / "e" / "f" / "failed.csv")
    with open(path) as fh:
        assert list(csv.reader(fh)) == [FAILURE_HEADER,
                                        ["toy", "resnet50", "ls", "3", "boom", "", "p", "h"]]


def test_ambiguous_configs_error_names_only_the_settings_that_differ(known):
    from bench.report.numbers import aggregate

    _second_config(known)
    _second_config(known, "yyy777", seeds=(0, 1))
    cell = known / "toy" / "resnet50" / "sl1h"
    trains = {"abc123": {"batch_size": 8, "epochs_per_cycle": 3, "lr": 0.1},
              "zzz999": {"batch_size": 8, "epochs_per_cycle": 1, "lr": 0.1},
              "yyy777": {"batch_size": 8, "epochs_per_cycle": 1, "lr": 0.2}}
    for hash_, train in trains.items():
        for record in (cell / hash_).glob("seed*"):
            cfg = store.read_json(record / "config.json")
            (record / "config.json").write_text(json.dumps({**cfg, "train": train}))
            _reseal(record)
    with pytest.raises(BenchError) as err:
        configs.select_configs(aggregate.load_runs(known, backbones=["resnet50"],
                                                     methods=["sl1h"]))
    assert str(err.value) == (
        "toy/resnet50/sl1h has records of 3 configs: abc123 (3 seeds; epochs_per_cycle=3, "
        "lr=0.1); yyy777 (2 seeds; epochs_per_cycle=1, lr=0.2); zzz999 (1 seeds; "
        "epochs_per_cycle=1, lr=0.1); choose with --config METHOD=PREFIX[,...], --config "
        "latest|most-seeds, METHOD=PREFIX:LABEL (each config its own row), or "
        "--method/--backbone")


def test_build_groups_advances_the_progress_bar_once_per_cell(known):
    from bench.report.numbers import aggregate

    class Count:
        n = 0

        def update(self, k):
            self.n += k

    runs = aggregate.load_runs(known)
    count = Count()
    aggregate.build_cells(runs, with_ts=False, progress=count)
    assert count.n == len({(r.dataset, r.backbone, r.method) for r in runs}) > 1


def test_a_cell_of_one_run_is_a_group_of_one(known):
    from bench.report.numbers import aggregate

    run = aggregate.load_runs(known)[0]
    groups, _ = aggregate.build_cells([run], with_ts=False)
    (key, group), = groups.items()
    assert key == (run.dataset, run.backbone, run.method) and group.seeds == (run.seed,)
    assert group.mean("acc") == run.record.stored("test")["acc"] and group.std("acc") == 0.0
