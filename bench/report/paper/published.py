"""The paper's published numbers as data: every table, tagged with source and erratum.

`bench/report/paper/published.csv` holds one row per printed table row
(table id = the .tex label, or `notebook` for the authors' own printed
output), generated from the paper's LaTeX source by this module's
`transcribe` (numbers are parsed, never typed):

    python -m bench.report.paper.published PAPER.tex NOTEBOOK.csv > bench/report/paper/published.csv

`reference()` turns it into the one number per (dataset, backbone, method,
variant, metric) that `bench report --compare paper` compares with, taking
each value from where it is trustworthy (docs/fidelity.md, errata):
- means: the main tables (Chaoyang, Kvasir), the appendix table (PathMNIST),
  the temperature-scaling tables (variants `ts-base` and `ts`);
- stds: the notebook for Chaoyang and Kvasir (the appendix std columns are
  shifted one column); for PathMNIST, which has no notebook output, the
  appendix stds read with the same shift undone (printed ECE std = ACC std,
  printed NLL std = ECE std, no NLL std) and tagged `suspect`;
- the Kvasir +TS Swin-T block repeats the ConvNeXt-T block: kept, tagged,
  and never judged against.
"""
from __future__ import annotations

import csv
import io
import re
import sys
from functools import lru_cache
from importlib import resources

from bench.core.paper import DENS, PRINTED_BACKBONES, PRINTED_METHODS
from bench.calib import measures as M
from bench.calib import variants as V

METRICS = M.paper()  # the columns the paper published (ACC, ECE, NLL)
COLUMNS = ("table", "dataset", "backbone", "method", "variant", "acc", "acc_std", "ece",
           "ece_std", "nll", "nll_std", "rank", "mark", "erratum")
SEEDS = 5  # every published mean ± std is over 5 training runs; D-Ens is one model
SHIFTED = "std-columns-shifted"  # printed ECE std = ACC std, NLL std = ECE std, ACC std = ?
SUSPECT = "std-suspect"  # PathMNIST: shifted columns, no notebook output to correct them
REPEATED = "block-repeats-convnext"  # Kvasir +TS Swin-T block = ConvNeXt-T block
MARKS = {"ft": "best", "sd": "second"}


# ---------------------------------------------------------------- .tex -> rows


def _cell(text: str) -> tuple[float | None, float | None, str | None]:
    """'80.71$\\pm$0.10' -> (80.71, 0.10, None); '\\sd{2.7}' -> (2.7, None,
    'second'); '\\textquotedbl' (ditto) -> (None, None, 'ditto')."""
    text = text.strip()
    if text == r"\textquotedbl":
        return None, None, "ditto"
    m = re.fullmatch(r"\\(ft|sd)\{([\d.]+)\}", text)
    if m:
        return float(m.group(2)), None, MARKS[m.group(1)]
    mean, _, std = text.partition(r"$\pm$")
    return float(mean), float(std) if std else None, None


def _dataset(label: str) -> str:
    return label.split("_")[0]


def _tabulars(tex: str) -> list[tuple[str, str]]:
    """(label, tabular body) for every table environment, in order. A label
    belongs to the tabular of the same position inside its environment (the
    appendix puts two captioned tabulars in one sidewaystable)."""
    out = []
    for env in re.findall(r"\\begin\{(?:sideways)?table\}(.*?)\\end\{(?:sideways)?table\}",
                          tex, re.S):
        labels = re.findall(r"\\label\{([^}]+)\}", env)
        bodies = re.findall(r"\\begin\{tabular\}\{[^}]*\}(.*?)\\end\{tabular\}", env, re.S)
        out += list(zip(labels, bodies))
    return out


def parse_table(label: str, body: str) -> list[dict]:
    """One tabular -> one dict per (printed row, backbone), COLUMNS' keys."""
    backbones = [PRINTED_BACKBONES[b] for b in re.findall(r"\\multicolumn\{4\}\{c\}\{\\textbf\{([^}]+)\}\}", body)]
    is_ts = label.endswith("_ts")
    rows, previous = [], {}
    for line in body.splitlines():
        m = re.match(r"\s*\\textbf\{([^}]+)\}(.*?)\\\\", line)
        if not m or "&" not in m.group(2):
            continue
        name, cells = m.group(1), m.group(2).split("&")[1:]
        if name == V.TS.label:  # the printed +TS row
            method, variant = previous["method"], V.TS.column
        else:
            method = PRINTED_METHODS[name]
            variant = (V.TS_BASE if is_ts else V.PLAIN).column
        for i, backbone in enumerate(backbones):
            row = {"table": label, "dataset": _dataset(label), "backbone": backbone,
                   "method": method, "variant": variant, "mark": "", "erratum": ""}
            block = [_cell(c) for c in cells[4 * i:4 * i + 4]]
            for metric, (mean, std, tag) in zip(METRICS, block):
                # a ditto mark repeats the value of the row above (the +TS row's ACC)
                row[metric] = previous[backbone][metric] if tag == "ditto" else mean
                row[f"{metric}_std"] = std
            row["rank"], _, mark = block[3]
            row["mark"] = mark or ""
            rows.append(row)
            previous[backbone] = row
        previous["method"] = method
    return rows


def _errata(rows: list[dict]) -> None:
    kvasir_ts = {(r["backbone"], r["method"], r["variant"]): r for r in rows
                 if r["table"] == "kvasir_ts"}
    for r in rows:
        tags = []
        if r["acc_std"] is not None:
            tags.append(SHIFTED if r["dataset"] != "pathmnist" else f"{SHIFTED};{SUSPECT}")
        if r["table"] == "kvasir_ts" and r["backbone"] == "swin_tiny":
            twin = kvasir_ts[("convnext_tiny", r["method"], r["variant"])]
            if all(twin[m] == r[m] for m in METRICS):
                tags.append(REPEATED)
        r["erratum"] = ";".join(tags)


def _notebook_rows(notebook_csv: str) -> list[dict]:
    rows = []
    for r in csv.DictReader(io.StringIO(notebook_csv)):
        row = {"table": "notebook", "dataset": r["dataset"], "backbone": r["backbone"],
               "method": r["method"], "variant": "", "rank": None, "mark": "", "erratum": ""}
        for m in METRICS:
            row[m] = float(r[f"{m}_mean"])
            row[f"{m}_std"] = float(r[f"{m}_std"]) if r[f"{m}_std"] else None
        rows.append(row)
    return rows


def transcribe(tex: str, notebook_csv: str) -> list[dict]:
    """Every table of the paper plus the notebook output, as rows."""
    rows = [r for label, body in _tabulars(tex) for r in parse_table(label, body)]
    _errata(rows)
    return rows + _notebook_rows(notebook_csv)


def to_csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: "" if r[k] is None else r[k] for k in COLUMNS})
    return buf.getvalue()


# ---------------------------------------------------------------- shipped data


@lru_cache(maxsize=1)
def _shipped_text() -> str:
    return resources.files("bench.report.paper").joinpath("published.csv").read_text()


def rows() -> list[dict]:
    """The shipped published.csv, numbers as floats (None where not printed)."""
    out = []
    for r in csv.DictReader(io.StringIO(_shipped_text())):
        for k in (*METRICS, *(f"{m}_std" for m in METRICS), "rank"):
            r[k] = float(r[k]) if r[k] else None
        out.append(r)
    return out


def _std(means: dict, stds: dict | None, metric: str, dataset: str):
    """(std, source) of one published value; see the module docstring."""
    if dataset == "pathmnist":
        shifted = {"acc": "ece_std", "ece": "nll_std"}.get(metric)
        value = means[shifted] if shifted else None
        return value, f"pathmnist_dispersion (shift undone; {SUSPECT})" if value is not None else ""
    if stds is None or stds[f"{metric}_std"] is None:
        return None, ""
    return stds[f"{metric}_std"], "notebook"


def reference() -> list[dict]:
    """One published value per (dataset, backbone, method, variant, metric):
    mean, std (None where none was published), n seeds, their sources and
    caveats (errata tags); `judge` is False where the printed value is known
    to be wrong."""
    all_rows = rows()
    notebook = {(r["dataset"], r["backbone"], r["method"]): r for r in all_rows
                if r["table"] == "notebook"}
    sources = {"chaoyang", "kvasir", "pathmnist_dispersion", "chaoyang_ts", "kvasir_ts"}
    out = []
    for r in all_rows:
        if r["table"] not in sources:
            continue
        key = (r["dataset"], r["backbone"], r["method"])
        for m in METRICS:
            std, std_source = (None, "") if r["variant"] else _std(r, notebook.get(key), m,
                                                                      r["dataset"])
            out.append({"dataset": r["dataset"], "backbone": r["backbone"], "method": r["method"],
                        "variant": r["variant"], "metric": m, "mean": r[m], "std": std,
                        "n": 1 if r["method"] == DENS else SEEDS, "source": r["table"],
                        "std_source": std_source, "caveat": r["erratum"],
                        "judge": REPEATED not in r["erratum"]})
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m bench.report.paper.published PAPER.tex NOTEBOOK.csv "
              "> published.csv", file=sys.stderr)
        return 2
    with open(argv[0]) as tex, open(argv[1]) as nb:
        sys.stdout.write(to_csv(transcribe(tex.read(), nb.read())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
