"""Reports built for a new method: display names and sections from the
registry, --label, a recorded dataset name, the --data-opt help,
--significance-ref and --no-gap, on known records (no training)."""
import csv
import re

import numpy as np
import pytest
from PIL import Image
from report_records import write_known

from bench.cli import data as cli_data
from bench.sweep.options import DATA_OPTION_KEYS
from bench.cli.main import main
from bench.core import store
from bench.methods import METHODS, Method
from bench.report.render.tables import method_name, ordered_methods


class _Penalty(Method):
    display_name = "CP (ours)"

    def loss(self, logits, target):  # never trained here
        raise NotImplementedError


class _TwoHeads(Method):
    @property
    def heads(self):
        return 2

    def loss(self, logits, target):
        raise NotImplementedError


@pytest.fixture
def plugin_methods():
    """Two methods registered as a plugin would, removed afterwards."""
    METHODS.add("zzcp", lambda: _Penalty("zzcp"), "test: single head")
    METHODS.add("zz2h", lambda: _TwoHeads("zz2h"), "test: two heads")
    yield
    for name in ("zzcp", "zz2h"):
        METHODS._entries.pop(name)


def copy_method(root, src: str, dst: str, extra: dict | None = None,
                chash: str = "abc123") -> None:
    """Records of `dst` (config `chash`) with the numbers of `src`, written
    through bench.core.store."""
    for path in sorted(root.glob(f"toy/*/{src}/abc123/seed*")):
        cfg = {**store.read_json(path / "config.json"), "method": dst, **(extra or {})}
        p = store.load_predictions(path)
        new = store.record_dir(root, "toy", path.parts[-4], dst, chash, cfg["seed"])
        store.write_record(new, cfg, store.read_json(path / "metrics.json"),
                           {k: p[k] for k in ("val_logits", "val_labels", "test_logits",
                                              "test_labels")})


def report(root, out, *extra):
    return main(["report", "--results", str(root), "--out", str(out), "--no-plots",
                 "--no-progress", "--no-ts", *extra])


def md_labels(out, name="toy_main.md"):
    lines = (out / "tables" / name).read_text().splitlines()
    return [ln.split("|")[1].strip() for ln in lines[2:] if ln.startswith("|")]


def test_a_new_single_head_method_joins_the_baselines_under_its_display_name(
        tmp_path, plugin_methods):
    assert method_name("zzcp") == "CP (ours)" and method_name("zz2h") == "ZZ2H"
    assert ordered_methods({"sl1h", "4hml", "zzcp", "zz2h", "dens"}) == [
        ["sl1h", "zzcp"], ["dens"], ["4hml", "zz2h"]]
    root = write_known(tmp_path / "results")
    copy_method(root, "ls", "zzcp")
    assert report(root, tmp_path / "out") == 0
    assert md_labels(tmp_path / "out") == ["SL1H", "LS", "CP (ours)", "D-Ens", "2HML", "4HML"]
    tex = (tmp_path / "out" / "tables" / "toy_main.tex").read_text()
    # the new baseline sits before the double rule of D-Ens
    assert re.search(r"\\textbf\{CP \(ours\)\}[^\n]*\n\\midrule\n\\midrule\n\\textbf\{D-Ens\}",
                     tex)


def test_label_renames_methods_datasets_and_backbones(tmp_path, capsys):
    root = write_known(tmp_path / "results")
    out = tmp_path / "out"
    assert report(root, out, "--label", "ls=LS 0.05", "--label", "toy=Toy set",
                  "--label", "resnet50=RN-50") == 0
    assert md_labels(out)[:2] == ["SL1H", "LS 0.05"]
    md = (out / "tables" / "toy_main.md").read_text()
    assert "RN-50 ACC↑" in md and "ResNet50" not in md
    assert "## Toy set: " in (out / "report.md").read_text()
    assert r"\textbf{Toy set dataset}" in (out / "tables" / "toy_main.tex").read_text()
    capsys.readouterr()
    assert report(root, tmp_path / "bad", "--label", "lss=X") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--label lss" in err and "ls" in err
    assert not (tmp_path / "bad" / "tables").exists()


def test_a_recorded_dataset_name_titles_the_report(tmp_path):
    root = write_known(tmp_path / "results")
    for path in sorted(root.glob("toy/*/*/abc123/seed*")):  # rewrite each config with a name
        copy_method(root, path.parts[-3], path.parts[-3], {"dataset_name": "My Derm"})
    assert report(root, tmp_path / "out") == 0
    assert "## My Derm: " in (tmp_path / "out" / "report.md").read_text()
    assert r"\textbf{My Derm dataset}" in (tmp_path / "out" / "tables" / "toy_main.tex").read_text()


def test_folder_data_takes_a_display_name_outside_the_hash(tmp_path):
    from bench.datasets import DATASETS

    rng = np.random.default_rng(0)
    for cls in ("a", "b"):
        (tmp_path / "img" / cls).mkdir(parents=True)
        for i in range(10):
            Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(
                tmp_path / "img" / cls / f"{i}.png")
    load = DATASETS.get("folder")
    named = load(data_root=tmp_path / "img", image_size=8, progress=False, name="My Derm",
                 cache=str(tmp_path / "cache"))
    plain = load(data_root=tmp_path / "img", image_size=8, progress=False,
                 cache=str(tmp_path / "cache"))
    assert named.display_name == "My Derm" and plain.display_name == ""
    assert named.identity == plain.identity  # the run hash does not see the name


def test_data_opt_help_lists_every_builtin_datasets_keys():
    from bench.datasets import chaoyang, custom, digits, kvasir, medmnist

    tables = {"csv": custom.CSV_OPTIONS, "folder": custom.FOLDER_OPTIONS,
              "chaoyang, kvasir": {**chaoyang.OPTIONS, **kvasir.OPTIONS},
              "digits": digits.OPTIONS, "pathmnist and the other MedMNIST flags": medmnist.OPTIONS}
    assert {ds: sorted(k.split(", ")) for ds, k in DATA_OPTION_KEYS.items()} == \
        {ds: sorted(t) for ds, t in tables.items()}
    import argparse
    parser = argparse.ArgumentParser()
    cli_data.add_data_options(parser)
    text = parser.format_help()
    assert "label_noise" in " ".join(text.split()) and "name" in text


def _paired(out):
    with open(out / "stats" / "paired_tests.csv") as f:
        return list(csv.DictReader(f))


def test_significance_ref_picks_the_reference(tmp_path, capsys):
    root = write_known(tmp_path / "results")
    out = tmp_path / "out"
    assert report(root, out, "--significance", "--significance-ref", "4hml") == 0
    rows = _paired(out)
    assert {r["row"] for r in rows} == {"sl1h", "ls", "2hml"}
    # resnet50 4hml ECE is 2, 2, 2; sl1h's 6, 5, 4: the paired t-test of the differences
    from scipy import stats as sps
    want = sps.ttest_rel([6, 5, 4], [2, 2, 2]).pvalue
    got = [r for r in rows if (r["backbone"], r["row"], r["metric"]) == ("resnet50", "sl1h", "ece")]
    assert float(got[0]["p"]) == pytest.approx(want)
    md = (out / "tables" / "toy_main.md").read_text()
    assert "differs from 4HML" in md and "differs from SL1H" not in md
    assert "differs from 4HML" in (out / "tables" / "toy_main.tex").read_text()
    capsys.readouterr()
    assert report(root, tmp_path / "bad", "--significance", "--significance-ref", "dca") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--significance-ref dca" in err and "4hml" in err


def test_no_gap_drops_the_gap_column(tmp_path):
    root = write_known(tmp_path / "results")
    assert report(root, tmp_path / "out", "--no-gap") == 0
    for name in ("toy_main.md", "toy_main.tex", "toy_std.tex"):
        text = (tmp_path / "out" / "tables" / name).read_text()
        assert "Gap" not in text, name
    md = (tmp_path / "out" / "tables" / "toy_main.md").read_text().splitlines()
    assert md[0].count("|") == 1 + 2 * 4 + 1  # Method + 2 backbones x ACC ECE NLL Rank


def test_two_configs_of_one_method_are_two_labelled_rows(tmp_path, capsys):
    root = write_known(tmp_path / "results")
    copy_method(root, "2hml", "ls", chash="def456")  # a second ls config: 2hml's numbers
    assert report(root, tmp_path / "amb") == 2  # never picked silently
    assert "/ls has records of 2 configs" in capsys.readouterr().err
    out = tmp_path / "out"
    assert report(root, out, "--config", "ls=abc:eps 0.05,ls=def:eps 0.1") == 0
    assert md_labels(out) == ["SL1H", "eps 0.05", "eps 0.1", "D-Ens", "2HML", "4HML"]
    rows = {ln.split("|")[1].strip(): [c.strip() for c in ln.split("|")[2:-1]]
            for ln in (out / "tables" / "toy_main.md").read_text().splitlines()[2:]
            if ln.startswith("|")}
    # ResNet50 ACC: ls 78 (abc123), the def456 config 2HML's 81, 82, 83
    assert rows["eps 0.05"][0] == "78.00" and rows["eps 0.1"][0] == rows["2HML"][0] == "82.00"
    assert report(root, tmp_path / "lab", "--config", "ls=abc:A,ls=def:B",
                  "--label", "ls@def=B renamed") == 0
    assert md_labels(tmp_path / "lab")[1:3] == ["A", "B renamed"]
    capsys.readouterr()
    assert report(root, tmp_path / "bad", "--config", "ls=fff:C") == 2
    assert "--config ls=fff:C: matches no record" in capsys.readouterr().err
