"""docs/methods.md "Your own method" followed as written, from an empty folder
to a compiled LaTeX table: the section's files (each fenced python/toml block
whose first line names its path) are saved under myplugin/, then every fenced
sh block of the section runs in that folder with the `bench` of this
environment. Nothing here restates the commands: an edit of the doc that
breaks the path breaks this test."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

DOC = Path(__file__).resolve().parents[2] / "docs" / "methods.md"
TITLE = "## Your own method"


def section() -> str:
    text = DOC.read_text()
    start = text.index(TITLE)
    end = text.find("\n## ", start + len(TITLE))
    return text[start:end if end > 0 else None]


def blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced block, in order."""
    return re.findall(r"^```(\w+)\n(.*?)^```", text, re.S | re.M)


def test_section_has_the_files_and_a_runnable_walkthrough():
    found = blocks(section())
    files = [body.splitlines()[0] for lang, body in found if lang in ("python", "toml")]
    assert files == ["# mymethod/__init__.py", "# pyproject.toml"]
    shell = [body for lang, body in found if lang == "sh"]
    assert shell and "pdflatex" in shell[-1] and "bench run" in shell[0]


def test_walkthrough_runs_from_an_empty_folder_to_a_compiled_table(tmp_path):
    assert shutil.which("pdflatex"), "pdflatex missing: ./setup.sh installs it"
    plugin = tmp_path / "myplugin"
    shells = []
    for lang, body in blocks(section()):
        if lang == "sh":
            shells.append(body)
            continue
        target = plugin / body.splitlines()[0].removeprefix("#").strip()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("BENCH_") and k != "PYTHONPATH"}
    # this environment's `bench` (and python) first, as after `pip install mhml-bench`
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    for body in shells:
        res = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", body], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, f"{body}\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}"
    tables = tmp_path / "reports" / "tables"
    assert (tables / "all_tables.pdf").stat().st_size > 1000
    log = (tables / "all_tables.log").read_text(errors="replace")
    assert not [ln for ln in log.splitlines() if ln.startswith("!")]
    # the researcher's row, under its label, ranked beside the paper's SL1H
    main = (tables / "digits_main.tex").read_text()
    rows = [ln for ln in main.splitlines() if ln.startswith(r"\textbf{")]
    assert any(r.startswith(r"\textbf{CP (ours)}") for r in rows), rows
    assert any(r.startswith(r"\textbf{SL1H}") for r in rows), rows
    runs = pd.read_csv(tmp_path / "reports" / "runs.csv")
    assert set(runs["method"]) == {"sl1h", "mymethod"}
    assert runs["acc"].between(0, 1).all() and len(runs) == 2
