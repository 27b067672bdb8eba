"""`bench report --cost` shows the training images/s stored in run records:
terminal and Markdown tables, groups.csv and runs.csv, checked against the
values tests/report_records.py wrote."""
import csv
import re
import statistics

import pytest
from report_records import IMAGES_PER_S, KNOWN, write_known

from bench.cli.main import main

HEAD = "Train (img/s)"


def _expected(backbone: str, method: str) -> float:
    """Mean over the seeds that record exists for (ConvNeXt LS lacks seed 2)."""
    return statistics.fmean(IMAGES_PER_S[:len(KNOWN[(backbone, method)]["acc"])])


def _columns(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = write_known(tmp_path_factory.mktemp("results"))
    out = tmp_path_factory.mktemp("reports")
    return root, out


def test_terminal_and_markdown_tables_show_training_images_per_s(report, capsys):
    root, out = report
    assert main(["report", "--results", str(root), "--out", str(out), "--no-plots", "--no-ts",
                 "--no-progress", "--cost"]) == 0
    lines = capsys.readouterr().out.splitlines()
    head_at = next(i for i, ln in enumerate(lines) if HEAD in ln)
    heads = _columns(lines[head_at])
    where = [i for i, h in enumerate(heads) if h == HEAD]
    assert len(where) == 2  # one per backbone block (ResNet50, ConvNeXt)
    rows = {_columns(ln)[0]: _columns(ln) for ln in lines[head_at + 2:]
            if ln.strip() and not ln.startswith(("-", "(", "Gap", "--"))}
    for label, method in (("SL1H", "sl1h"), ("LS", "ls"), ("2HML", "2hml"), ("4HML", "4hml")):
        got = [rows[label][i] for i in where]
        assert got == [f"{_expected('resnet50', method):.1f}",
                       f"{_expected('convnext_tiny', method):.1f}"], label
    assert [rows["LS"][i] for i in where] == ["185.0", "162.5"]  # worked by hand
    # D-Ens trains its members one after another: images/s is their mean
    assert [rows["D-Ens"][i] for i in where] == [f"{statistics.fmean(IMAGES_PER_S):.1f}"] * 2
    md = (out / "tables" / "toy_main.md").read_text()
    head = next(ln for ln in md.splitlines() if HEAD in ln)
    ls = next(ln for ln in md.splitlines() if ln.startswith("| LS "))
    cells = [c.strip() for c in ls.strip("|").split("|")]
    heads_md = [c.strip() for c in head.strip("|").split("|")]
    assert [cells[i] for i, h in enumerate(heads_md) if h == HEAD] == ["185.0", "162.5"]


def test_csv_files_carry_training_images_per_s(report):
    root, out = report
    if not (out / "groups.csv").exists():
        assert main(["report", "--results", str(root), "--out", str(out), "--no-plots",
                     "--no-ts", "--no-progress", "--cost"]) == 0
    with open(out / "runs.csv") as f:
        runs = list(csv.DictReader(f))
    for r in runs:
        assert float(r["train_images_per_s"]) == IMAGES_PER_S[int(r["seed"])]
    with open(out / "groups.csv") as f:
        groups = {(r["backbone"], r["row"]): r for r in csv.DictReader(f)}
    assert float(groups[("convnext_tiny", "ls")]["train_images_per_s"]) == pytest.approx(162.5)
    assert float(groups[("resnet50", "dens")]["train_images_per_s"]) == pytest.approx(185.0)
