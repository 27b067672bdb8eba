"""A record names all the code that made its numbers (issue 48, bench.core.codeunits):
an edit to MC-Dropout's network in a copy of the tree retrains MC-Dropout
alone, with a one-line note; an edit to the shared training loop retrains
nothing and is named; --accept-code-change reuses the records; records
written before code identity keep their hash."""
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

import bench
from bench.cli.main import main
from bench.core import codeunits, store
from bench.core.errors import BenchError
from bench.methods import METHODS, create_method
from bench.report.pipeline import setup_notes
from bench.sweep import codechange
from bench.sweep.options import RunOptions
from bench.sweep.plan import plan

ARGS = ["run", "--method", "sl1h,mcdropout", "--dataset", "digits", "--profile", "demo",
        "--seeds", "1", "--dry-run"]


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A copy of the package whose sources the code identity reads (and the
    pins it reads and writes), so edits never touch the real tree."""
    root = tmp_path / "tree"
    shutil.copytree(Path(bench.__file__).parent, root / "bench",
                    ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(codeunits, "PACKAGE_ROOT", root)
    monkeypatch.setattr(codeunits, "PINS", root / "bench/core/codepins.json")
    return root


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def grid(results):
    return plan(RunOptions(method="sl1h,mcdropout", dataset="digits", profile="demo",
                           seeds="1", results=str(results)))


def write_records(g) -> dict:
    """A complete record per run, as written before code identity (no
    code_units in config.json); method -> config hash."""
    for spec in g.specs:
        payload = json.loads(json.dumps(g.experiments[spec.chash].payload(), default=str))
        store.write_record(spec.record, {**payload, "seed": spec.seed,
                                         "config_hash": spec.chash}, {"status": "done"}, {})
    return {s.method: s.chash for s in g.specs}


def todo(g) -> list[str]:
    return sorted(s.method for s in g.specs if not store.is_complete(s.record))


def dry_run(results, capsys, *more) -> str:
    capsys.readouterr()
    assert main([*ARGS, "--results", str(results), *more]) == 0
    return capsys.readouterr().out


def test_an_edit_to_mcdropouts_network_retrains_mcdropout_alone(tree, tmp_path, capsys):
    results = tmp_path / "results"
    before = write_records(grid(results))
    # the pins reproduce today's hashes (tests/core/test_hash_pins.py pins them too)
    assert before == {"sl1h": "dac6a4ee8459", "mcdropout": "ae354bca086c"}
    assert todo(grid(results)) == []
    # AlwaysDropout: reached from MCDropoutNet, the unit MC-Dropout declares
    edit(tree / "bench/train/nets.py", "dropout(x, self.p, training=True)",
         "dropout(x, self.p * 0.5, training=True)")
    g = grid(results)
    after = {s.method: s.chash for s in g.specs}
    assert after["sl1h"] == before["sl1h"] and after["mcdropout"] != before["mcdropout"]
    assert todo(g) == ["mcdropout"]
    out = dry_run(results, capsys)
    assert (f"mcdropout: method code changed (bench.train.nets:MCDropoutNet) since config "
            f"{before['mcdropout']} (1 record); training config {after['mcdropout']}") in out
    assert "sl1h:" not in out and "shared training code" not in out
    # the edit declared neutral: the old records count as today's code
    out = dry_run(results, capsys, "--accept-code-change")
    assert "accepted: bench.train.nets:MCDropoutNet" in out
    assert {s.method: s.chash for s in grid(results).specs} == before


def test_an_edit_to_the_shared_loop_retrains_nothing_and_is_named(tree, tmp_path, capsys):
    results = tmp_path / "results"
    before = write_records(grid(results))
    # comments, docstrings and moved imports are not edits
    edit(tree / "bench/train/loop.py", "import math\n", "")
    edit(tree / "bench/train/loop.py", "def ", "import math\n# a comment\ndef ")
    g = grid(results)
    assert {s.method: s.chash for s in g.specs} == before and todo(g) == []
    assert codechange.shared_changes(g.specs, g.experiments) == {}
    # a real edit: reused, but named
    edit(tree / "bench/train/loop.py", "def ", "LOOP_EDIT = 1\n\n\ndef ")
    g = grid(results)
    assert {s.method: s.chash for s in g.specs} == before and todo(g) == []
    out = dry_run(results, capsys)
    assert ("shared training code changed (bench.train.loop) since 2 of the records this run "
            "reuses") in out
    assert dry_run(results, capsys, "--accept-code-change").count("accepted:") == 1
    assert "shared training code" not in dry_run(results, capsys)


def test_the_report_names_mixed_shared_code_and_nothing_for_older_records(tree):
    old = {"method": "sl1h"}  # no code_units: made by the pinned versions
    pins = codeunits.load_pins()
    same = {"code_units": dict(pins["baseline"])}
    other = {"code_units": {**pins["baseline"], "bench.train.graphstep": "0" * 16}}
    assert codeunits.mixed_shared([old, same]) == []
    assert codeunits.mixed_shared([old, same, other]) == ["bench.train.graphstep (2 versions)"]
    runs = [SimpleNamespace(dataset="digits", record=SimpleNamespace(provenance={}, config=c))
            for c in (old, same, other)]
    assert setup_notes(runs[:2]) == []  # records on disk alone: the report is unchanged
    (note,) = setup_notes(runs)
    assert note.startswith("digits: the records in these tables were made with different "
                           "versions of the shared training code: bench.train.graphstep "
                           "(2 versions)")


def test_a_units_digest_counts_what_runs_and_follows_its_helpers(tmp_path, monkeypatch):
    monkeypatch.setattr(codeunits, "PACKAGE_ROOT", tmp_path)
    mod = tmp_path / "pkg" / "m.py"
    mod.parent.mkdir()

    def digests(source: str) -> tuple:
        mod.write_text(source)
        return codeunits.unit_digest("pkg.m:Net"), codeunits.unit_digest("pkg.m:other")

    base = digests("import torch\nRATE = 0.5\n\ndef helper(x):\n    return x * RATE\n\n"
                   "class Net:\n    def f(self, x):\n        return helper(x)\n\n"
                   "def other():\n    return 1\n")
    # a docstring, a comment, a type hint, a moved import, the layout: the same
    same = digests('"""doc"""\nRATE = 0.5  # why\n\n\ndef helper(x: float) -> float:\n'
                   '    """twice"""\n    return x*RATE\n\nclass Net:\n    def f(self, x):\n'
                   '        import torch\n        return helper(x)\n\ndef other():\n'
                   '    return 1\n')
    assert same == base
    # a constant Net reaches through its helper moves Net's unit, not other's
    moved = digests(mod.read_text().replace("RATE = 0.5", "RATE = 0.25"))
    assert moved[0] != base[0] and moved[1] == base[1]
    with pytest.raises(BenchError, match="defines no top-level 'Gone'"):
        codeunits.unit_digest("pkg.m:Gone")


def test_every_built_in_method_declares_units_that_exist():
    for name in METHODS.names():
        method = create_method(name)
        units = codeunits.record_units(method)  # a unit that is not there: BenchError
        assert type(method).__module__ in units and set(codeunits.SHARED) <= set(units)
        assert set(method.code) <= set(units)


def test_the_shipped_shared_code_is_at_an_accepted_version():
    """An edit to shared training code in this repository is a decision, not a
    surprise: it is accepted as equal (codepins.json's `same`, when it changes no
    number) or pinned anew. Otherwise the first records it trains would be
    reported as mixed code versions against every earlier one."""
    pins = codeunits.load_pins()
    moved = [u for u in codeunits.SHARED
             if codeunits.canonical(pins, u, codeunits.unit_digest(u)) != pins["baseline"].get(u)]
    assert moved == [], f"shared units edited without a pin: {moved} (docs/architecture.md, Code identity)"


@pytest.mark.parametrize("path, old, new, unit", [
    # the small CNN's layers (nets.py) and its builder (backbones.py): backbone
    # code every method's model starts from
    ("bench/train/nets.py", "conv_bn(3, 32, 1), conv_bn(32, 64, 2)",
     "conv_bn(3, 32, 2), conv_bn(32, 64, 2)", "bench.train.nets:smallcnn_features"),
    ("bench/train/backbones.py", "Backbone(smallcnn_features(), 128,",
     "Backbone(smallcnn_features(), 128 + 0,", "bench.train.backbones"),
])
def test_an_edit_to_backbone_code_retrains_nothing_and_is_named(tree, tmp_path, capsys,
                                                                 path, old, new, unit):
    results = tmp_path / "results"
    before = write_records(grid(results))
    edit(tree / path, old, new)
    g = grid(results)
    assert {s.method: s.chash for s in g.specs} == before and todo(g) == []
    out = dry_run(results, capsys)
    assert f"shared training code changed ({unit}) since 2 of the records" in out


def test_rankmixups_new_default_retrains_and_says_why(tree, tmp_path, capsys):
    """Records of older rankmixup code, made before rm_form existed (its
    `rows` reading, a legacy value out of the hash): today's default
    (`authors`) trains anew, named in one line as the method's code change."""
    results = tmp_path / "results"
    opts = dict(method="rankmixup", dataset="digits", profile="demo", seeds="1",
                results=str(results))
    path = tree / "bench/methods/rankmixup.py"
    today = path.read_text()
    edit(path, "batch_multiple = 2\n", "batch_multiple = 2\n    older = 1\n")  # the older code
    rows = plan(RunOptions(**opts, overrides=(("rm_form", "rows"),)))
    for spec in rows.specs:  # records as written since code identity: with code_units
        exp = rows.experiments[spec.chash]
        payload = json.loads(json.dumps(exp.payload(), default=str))
        store.write_record(spec.record, {**payload, "seed": spec.seed, "config_hash": spec.chash,
                                         "code_units": dict(exp.code_units)},
                           {"status": "done"}, {})
    before = {s.method: s.chash for s in rows.specs}
    assert todo(rows) == [] and "rm_form" not in rows.experiments[rows.specs[0].chash].payload()[
        "method_params"]
    path.write_text(today)
    g = plan(RunOptions(**opts))
    after = {s.method: s.chash for s in g.specs}
    assert after["rankmixup"] != before["rankmixup"] and todo(g) == ["rankmixup"]
    capsys.readouterr()
    assert main(["run", "--method", "rankmixup", "--dataset", "digits", "--profile", "demo",
                 "--seeds", "1", "--dry-run", "--results", str(results)]) == 0
    assert (f"rankmixup: method code changed (bench.methods.rankmixup) since config "
            f"{before['rankmixup']} (1 record); training config {after['rankmixup']}"
            ) in capsys.readouterr().out


# method, its earlier reading's --set, that reading's hash and its own unit's
# digest in the tree before the new default (commit aad1fa6^: computed there
# with this plan, digits, demo, seed 0)
EARLIER = [("rankmixup", ("rm_form", "rows"), "f181bbcafa52", "4f6099a611096719"),
           ("adafocal", ("adafocal_precision", "float64"), "1493bc738ca3", "a54717ac47a274d0")]


@pytest.mark.parametrize("method,legacy,old_hash,old_digest", EARLIER)
def test_the_earlier_reading_keeps_its_records_and_the_new_default_says_why(
        tmp_path, capsys, method, legacy, old_hash, old_digest):
    """The edit that brought the new default is pinned as the same version
    as the code before it (codepins.json `same`): at the legacy value today's
    code computes what that code did, so its records keep their hash and are
    reused; the default trains anew, named as the method's code change."""
    results = tmp_path / "results"
    opts = dict(method=method, dataset="digits", profile="demo", seeds="1", results=str(results))
    rows = plan(RunOptions(**opts, overrides=(legacy,)))
    assert [s.chash for s in rows.specs] == [old_hash]
    unit = f"bench.methods.{method}"
    for spec in rows.specs:  # a record as the earlier code wrote it: its own digest
        exp = rows.experiments[spec.chash]
        payload = json.loads(json.dumps(exp.payload(), default=str))
        assert legacy[0] not in payload["method_params"]
        store.write_record(spec.record, {**payload, "seed": spec.seed, "config_hash": spec.chash,
                                         "code_units": {**dict(exp.code_units),
                                                        unit: old_digest}},
                           {"status": "done"}, {})
    assert codeunits.unit_digest(unit) != old_digest  # the code did move
    assert todo(plan(RunOptions(**opts, overrides=(legacy,)))) == []
    g = plan(RunOptions(**opts))
    (new,) = {s.chash for s in g.specs}
    assert new != old_hash and todo(g) == [method]
    capsys.readouterr()
    assert main(["run", "--method", method, "--dataset", "digits", "--profile", "demo",
                 "--seeds", "1", "--dry-run", "--results", str(results)]) == 0
    assert (f"{method}: method code changed ({unit}) since config {old_hash} (1 record); "
            f"training config {new}") in capsys.readouterr().out


@pytest.mark.parametrize("method,chash", [("acls", "25bcc9ef6c5b"), ("dualfocal", "0bb24b802fb5")])
def test_the_tie_rule_keeps_acls_and_dual_focal_records(tmp_path, method, chash):
    """torch.max / topk for amax moved their digests; the pins count the edit
    as the same version (it changes a gradient only at an exact float tie; a
    CPU demo run's predictions were bit for bit the same): the hash before it."""
    g = plan(RunOptions(method=method, dataset="digits", profile="demo", seeds="1",
                        results=str(tmp_path / "results")))
    assert [s.chash for s in g.specs] == [chash]
