"""`--config latest` takes the newest config made by today's method code: a
method edited then reverted leaves a newer config that today's code no longer
makes, and the reverted code's older records are today's again."""
import json
import os
import shutil

from report_records import write_known

from bench.core import codeunits, store
from bench.report.numbers import aggregate, configs

UNIT = "bench.methods.sl1h"  # sl1h's own code (bench.core.codeunits.own_units)


def _with_code(root, hash_, digest, mtime, seeds=(0, 1, 2)):
    """Records of resnet50/sl1h under `hash_`, made by sl1h code of `digest`."""
    for seed in seeds:
        src = store.record_dir(root, "toy", "resnet50", "sl1h", "abc123", seed)
        dst = src.parent.parent / hash_ / f"seed{seed}"
        if dst != src:
            shutil.copytree(src, dst)
        cfg = store.read_json(dst / "config.json")
        cfg["code_units"] = {UNIT: digest}
        (dst / "config.json").write_text(json.dumps(cfg))
        metrics = store.read_json(dst / "metrics.json")
        if "files" in metrics:  # the edit made on purpose: sealed as write_record would
            metrics["files"]["config.json"] = store.file_sum(dst / "config.json")
            (dst / "metrics.json").write_text(json.dumps(store.with_digest(metrics)))
        os.utime(dst / "metrics.json", (mtime, mtime))


def test_latest_prefers_todays_code_over_a_newer_config_of_edited_code(tmp_path):
    root = write_known(tmp_path / "results")
    today = codeunits.unit_digest(UNIT)
    _with_code(root, "abc123", today, 1e9)  # the reverted code: today's, older
    _with_code(root, "zzz999", "0" * 16, 4e9, seeds=(0,))  # the edit: newer
    runs = aggregate.load_runs(root)
    kept, notes = configs.select_configs(runs, "latest")
    assert {r.chash for r in kept if (r.backbone, r.method) == ("resnet50", "sl1h")} == \
        {"abc123"}
    assert notes == ["toy/resnet50/sl1h: using config abc123 (3 seeds, chosen by --config "
                     "latest: the newest config made by today's method code; zzz999 is newer, "
                     "made by other code), ignoring zzz999 (1 seeds)"]


def test_latest_takes_the_newest_where_both_or_neither_are_todays_code(tmp_path):
    root = write_known(tmp_path / "results")
    for old, new in ((codeunits.unit_digest(UNIT),) * 2, ("1" * 16, "2" * 16)):
        shutil.rmtree(root.parent)
        root = write_known(tmp_path / "results")
        _with_code(root, "abc123", old, 1e9)
        _with_code(root, "zzz999", new, 4e9, seeds=(0,))
        kept, notes = configs.select_configs(aggregate.load_runs(root), "latest")
        assert "zzz999" in {r.chash for r in kept}
        assert notes == ["toy/resnet50/sl1h: using config zzz999 (1 seeds, chosen by --config "
                         "latest), ignoring abc123 (3 seeds)"]


def test_made_by_today_reads_the_records_own_units():
    today = codeunits.unit_digest(UNIT)
    assert codeunits.made_by_today({"code_units": {UNIT: today}}) is True
    assert codeunits.made_by_today({"code_units": {UNIT: "0" * 16}}) is False
    assert codeunits.made_by_today({}) is None  # before code identity: cannot say
    shared_only = {u: "0" * 16 for u in codeunits.SHARED}  # shared code is never own code
    assert codeunits.made_by_today({"code_units": shared_only}) is None
