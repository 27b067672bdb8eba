"""The --shift and --ood tables compile with pdflatex and fit their page (no
overfull box over 1 pt), also at their widest: every measure as a column and
every calibrator as a row (the pattern of test_table_description.py)."""
import re
import shutil
import subprocess

import pytest
from evalrecords import write

from bench.cli.main import main
from bench.calib import variants as V

ALL = "ece,aece,cwece,smece,brier,aurc,dl2ce,ece5,ece10,ece15,ece20,ece30"


def overfull(tex_dir, name) -> list[float]:
    """pt of every overfull hbox when `name`_doc.tex is compiled (fails on an error)."""
    subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", f"{name}_doc.tex"],
                   cwd=tex_dir, capture_output=True, timeout=120, check=True)
    log = (tex_dir / f"{name}_doc.log").read_text(errors="replace")
    return [float(x) for x in re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide", log)]


@pytest.mark.parametrize("extra", [(), ("--metrics", ALL, "--variants", ",".join(V.posthoc()))])
def test_shift_and_ood_tables_compile_and_fit(tmp_path, capsys, extra):
    assert shutil.which("pdflatex"), "pdflatex missing: ./setup.sh installs it"
    results = write(tmp_path / "results")
    out = tmp_path / "out"
    assert main(["report", "--results", str(results), "--out", str(out), "--shift", "--ood",
                 "--no-plots", "--no-progress", *extra]) == 0
    tex_dir = out / "tables"
    # the closing count is of every table written, the shift and OOD ones too
    assert f" {len(list(tex_dir.glob('*_doc.tex')))} tables, " in capsys.readouterr().out
    names = [p.name.removesuffix("_doc.tex") for p in sorted(tex_dir.glob("*_doc.tex"))
             if p.name.startswith(("shift_", "ood_"))]
    assert names == ["ood_toy_resnet50_kvasir", "shift_toy_resnet50"]
    for name in names:
        assert all(pt <= 1.0 for pt in overfull(tex_dir, name)), (name, extra)
    every = (tex_dir / "all_tables.tex").read_text()
    assert all(f"\\input{{{name}}}" in every for name in names)
