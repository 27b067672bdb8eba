"""Issue 31, points 2-4: a table's caption, footnotes and significance marks
describe the rows it shows; every LaTeX table fits its page; Gap has one
place. Each test failed on the harness before the one-path report."""
import re
import shutil
import subprocess

import numpy as np
import pytest
from report_records import write_known

from bench.cli.main import main
from bench.core import store

ALL = "ece,aece,cwece,smece,brier,aurc,dl2ce,ece5,ece10,ece15,ece20,ece30"


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    return write_known(tmp_path_factory.mktemp("results"))


def report(results, out, *extra) -> None:
    assert main(["report", "--results", str(results), "--out", str(out), "--no-plots",
                 "--no-progress", *extra]) == 0


def test_point2_no_mark_against_a_row_the_table_does_not_show(known, tmp_path):
    """With LS as the reference, the TS table (SL1H, 2HML, 4HML rows) shows no
    LS row: none of its rows is starred and no footnote names LS. The main
    table, which shows LS, keeps its marks."""
    report(known, tmp_path, "--significance", "--significance-ref", "ls", "--test", "ttest")
    ts = (tmp_path / "tables" / "toy_ts.md").read_text()
    assert "LS" not in ts.split("\n\n")[0].replace("SL1H", "")  # no LS row in the TS table
    assert not re.search(r"\d\*(?!\*)", ts) and "differs from" not in ts  # (** is bold)
    assert "differs from" not in (tmp_path / "tables" / "toy_ts.tex").read_text()
    main_md = (tmp_path / "tables" / "toy_main.md").read_text()
    assert "*: differs from LS" in main_md


def _two_seeds(root, accs):
    """sl1h records whose stored ACCs are `accs` (ECE, NLL fixed)."""
    z = np.zeros((8, 1, 2), np.float32)
    y = np.zeros(8, np.int64)
    for seed, acc in enumerate(accs):
        test = {"acc": acc, "ece": 0.05, "nll": 0.3, "brier": 0.1, "auc": 0.9, "gap": 0.0}
        path = store.record_dir(root, "toy", "resnet50", "sl1h", "abc123", seed)
        store.write_record(path, {"dataset": "toy", "backbone": "resnet50", "method": "sl1h",
                                  "seed": seed, "heads": 1}, {"test": test, "val": test},
                           {"val_logits": z, "val_labels": y, "test_logits": z, "test_labels": y})
    return root


def test_point3_ci_tables_say_what_their_cells_hold(tmp_path):
    """--ci: the std table's caption and title name the 95% interval (not
    "mean ± standard deviation"), an interval is cut to its measure's range
    (two ACCs of 99 and 95: Student t reaches 122.4 before the cut), and a
    table has one notation (no "± 0.00" beside intervals)."""
    report(_two_seeds(tmp_path / "r", [0.99, 0.95]), tmp_path / "out", "--ci", "--no-ts")
    tex = (tmp_path / "out" / "tables" / "toy_std.tex").read_text()
    md = (tmp_path / "out" / "tables" / "toy_std.md").read_text()
    assert "95\\% interval" in tex and "standard deviation" not in tex and "\\pm" not in tex
    assert "±" not in md
    assert "97.00 [71.59, 100.00]" in md  # 97 +- 12.706 x 0.02, cut at 100
    assert "mean and 95% interval" in (tmp_path / "out" / "report.md").read_text()


def _overfull(tex_dir, name) -> list[float]:
    """pt of every overfull hbox when `name`_doc.tex is compiled."""
    subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", f"{name}_doc.tex"],
                   cwd=tex_dir, capture_output=True, timeout=120, check=True)
    log = (tex_dir / f"{name}_doc.log").read_text(errors="replace")
    return [float(x) for x in re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide", log)]


@pytest.mark.parametrize("extra", [
    (), ("--backbone", "resnet50"), ("--cost",), ("--metrics", ALL, "--ci", "--cost"),
    ("--variants", "ts,vs,dirichlet,hb,iso,ets", "--significance")])
def test_point4_every_latex_table_fits_its_page(known, tmp_path, extra):
    assert shutil.which("pdflatex"), "pdflatex missing: ./setup.sh installs it"
    report(known, tmp_path / "out", *extra)
    tex_dir = tmp_path / "out" / "tables"
    names = [p.name.removesuffix("_doc.tex") for p in sorted(tex_dir.glob("*_doc.tex"))]
    assert names
    for name in names:
        assert all(pt <= 1.0 for pt in _overfull(tex_dir, name)), (name, extra)


def test_point4_gap_has_one_place_right_after_ece(known, tmp_path):
    for extra, heads in (((), ["ACC↑", "ECE↓", "Gap", "NLL↓", "Rank↓"]),
                         (("--metrics", "ece,aece,brier"),
                          ["ACC↑", "ECE↓", "Gap", "aECE↓", "Brier↓", "Rank↓"]),
                         (("--metrics", "nll,aurc"), ["ACC↑", "Gap", "NLL↓", "AURC↓", "Rank↓"])):
        out = tmp_path / "-".join(extra or ("default",))
        report(known, out, *extra)
        head = (out / "tables" / "toy_main.md").read_text().splitlines()[0]
        cells = [c.strip() for c in head.strip("|").split("|")]
        assert cells[1:1 + len(heads)] == ["ResNet50 " + heads[0], *heads[1:]], extra
