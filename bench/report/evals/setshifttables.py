"""Tables of prediction sets under shift and on other sites (`bench report
--sets` on records with `--eval shift` / `--eval site:SOURCE` sets).

Shift: one table per dataset x backbone, a row per table row (method,
calibrated rows, D-Ens), per score a block of coverage at each severity
(0 = clean, then 1..5; mean over corruptions, then over seeds), and Δ: the
coverage at the worst severity minus the target 1 - alpha, i.e. by how much
the guarantee breaks. Site: per site set the in-distribution table's layout
(bench.report.evals.setstables), the site's images as the test split.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
from tabulate import tabulate

from bench.calib import conformal as CF
from bench.report.render import latex
from bench.report.evals import setstables
from bench.report.numbers.aggregate import write_frame
from bench.report.evals.setshift import SITE_PREFIX, ShiftSets, stats_frame
from bench.report.evals.shift import SHIFT
from bench.report.render.tables import backbone_name, dataset_name

DASH = "–"


def _shift_cells(stats: pd.DataFrame, rows, severities) -> list[list[str]]:
    cov = stats[stats["measure"] == "coverage"]
    out = []
    for r in rows:
        cells = []
        for s in CF.SCORES.names():
            mine = cov[(cov["row"] == r.key) & (cov["score"] == s)]
            by = {int(v): m for v, m in zip(mine["severity"], mine["mean"])}
            cells += [f"{by[v] * 100:.1f}" if v in by else DASH for v in severities]
            gap = mine.loc[mine["severity"] == max(severities), "gap"]
            cells.append(f"{gap.iloc[0] * 100:+.1f}" if len(gap) else DASH)
        out.append(cells)
    return out


def shift_note(alpha: float, rule: CF.SetRule = CF.DETERMINISTIC) -> str:
    return (f"Coverage (x100) of split conformal sets at alpha = {alpha:g} (target "
            f"{100 * (1 - alpha):g}%), calibrated on the in-distribution validation split after "
            "each row's calibrator, on the corrupted test images: mean over corruptions at each "
            "severity (0: clean), then over seeds. Δ: coverage at the highest severity minus "
            "the target. Set sizes: sets/sets_shift_table.csv."
            + ("" if rule == CF.DETERMINISTIC else " " + setstables.rule_note(rule)))


def shift_markdown(data: ShiftSets, stats, block, sections=None, labels=None) -> str:
    """One block of columns per score, one under the other (three scores x
    seven severities side by side are 22 columns, unreadable in a terminal),
    as the shift table's Markdown is per severity; the note once, under the last."""
    sub = _block(stats, block, SHIFT)
    rows = setstables.table_rows(data, sub, block, sections, labels)
    sevs = sorted(int(v) for v in sub["severity"].dropna().unique())
    cells, k = _shift_cells(sub, rows, sevs), len(sevs) + 1
    blocks = []
    for i, s in enumerate(CF.SCORES.names()):
        head = CF.SCORES.get(s).head
        heads = [f"{head} {'clean' if v == 0 else v}" for v in sevs] + [f"{head} Δ"]
        body = [[r.label, *c[i * k:(i + 1) * k]] for r, c in zip(rows, cells)]
        blocks.append(tabulate(body, headers=["Method", *heads], tablefmt="github",
                               disable_numparse=True))
    return "\n\n".join([*blocks, shift_note(data.alpha, data.rule)])


def shift_fragment(data: ShiftSets, stats, block, sections=None, labels=None) -> str:
    ds, bb = block
    sub = _block(stats, block, SHIFT)
    rows = setstables.table_rows(data, sub, block, sections, labels)
    sevs = sorted(int(v) for v in sub["severity"].dropna().unique())
    k, n = len(sevs) + 1, len(CF.SCORES.names())
    lines = [f"\\begin{{tabular}}{{l {'c' * k * n}}}", "\\toprule",
             "& " + " & ".join(f"\\multicolumn{{{k}}}{{c}}{{\\textbf{{{CF.SCORES.get(s).head}}}}}"
                               for s in CF.SCORES.names()) + " \\\\",
             " ".join(f"\\cmidrule(lr){{{2 + i * k}-{1 + (i + 1) * k}}}" for i in range(n)),
             "Severity & " + " & ".join([*("clean" if v == 0 else str(v) for v in sevs),
                                         "$\\Delta$"] * n) + " \\\\", "\\midrule"]
    lines += [f"\\textbf{{{latex.tex_escape(r.label)}}} & " + " & ".join(
        c.replace(DASH, "--") for c in cs) + " \\\\"
        for r, cs in zip(rows, _shift_cells(sub, rows, sevs))]
    lines += ["\\bottomrule", "\\end{tabular}"]
    note = latex.tex_escape(shift_note(data.alpha, data.rule)).replace("Δ", "$\\Delta$")
    title = (f"Conformal prediction sets under distribution shift on the \\textbf{{"
             f"{latex.tex_escape(dataset_name(ds, labels))} dataset}}, "
             f"{latex.tex_escape(backbone_name(bb, labels))}")
    return latex.eval_float(lines, "2pt", note, title, f"{ds}_{bb}_sets_shift")


def _block(stats, block, name) -> pd.DataFrame:
    ds, bb = block
    return stats[(stats["dataset"] == ds) & (stats["backbone"] == bb)
                 & (stats["eval_set"] == name)]


def write(data: ShiftSets, out: Path, sections=None, labels=None) -> tuple[list, list]:
    """OUT/tables/sets_shift_<ds>_<bb>.{tex,md}, sets_<site>_<ds>_<bb>.{tex,md}
    (+ _doc.tex), OUT/sets/sets_shift_long.csv and sets_shift_table.csv."""
    stats = stats_frame(data)
    tdir, written, secs = out / "tables", [], []
    for ds, bb, name in sorted({tuple(k) for k in stats[["dataset", "backbone", "eval_set"]]
                                .drop_duplicates().itertuples(index=False)}):
        block = (ds, bb)
        where = "under shift" if name == SHIFT else f"on {name.removeprefix(SITE_PREFIX)}"
        stem = f"sets_{name}_{ds}_{bb}"
        if name == SHIFT:
            md = shift_markdown(data, stats, block, sections, labels)
            tex = shift_fragment(data, stats, block, sections, labels)
        else:
            sub = _block(stats, block, name).assign(n_test=None)
            md = setstables.markdown(data, sub, block, sections, labels)
            tex = setstables.fragment(data, sub, block, sections, labels, f", {where}",
                                      f"sets_{name}")
        written += latex.write_table(tdir, stem, tex, md)
        secs.append((f"{dataset_name(ds, labels)} / {backbone_name(bb, labels)}: conformal "
                     f"prediction sets {where} (alpha = {data.alpha:g})", md))
    written.append(write_frame(out / "sets" / "sets_shift_long.csv", data.frame))
    written.append(write_frame(out / "sets" / "sets_shift_table.csv", stats))
    return written, secs
