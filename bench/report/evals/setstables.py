"""The prediction-set tables, figure and files (`bench report --sets`).

One table per dataset x backbone: a row per method (table order), each
followed by its calibrated rows (+TS, the --variants calibrators) as in the
TS and shift tables, D-Ens its own row; per conformal score (LAC, APS,
RAPS) a block Cov / Size / SSC, mean ± std over seeds. A coverage more
than the binomial margin below its target 1 - alpha is marked (the
guarantee holds on average over calibration splits; one split's coverage
scatters around it by about sqrt(alpha (1 - alpha) / n_test)).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from tabulate import tabulate

from bench.calib import conformal as CF
from bench.calib import measures as M
from bench.core.paper import DENS
from bench.report.render import latex
from bench.report.numbers.aggregate import write_frame
from bench.report.evals.sets import SetsData, stats_frame
from bench.report.evals.shifttables import shift_rows
from bench.report.plotting.plots import save, subplots
from bench.report.render.tables import TEX_PM, backbone_name, dataset_name, mean_pm

DASH = "–"
LOW = "▾"  # coverage below its target by more than the binomial margin (Markdown)
PERCENT = {"coverage", "sscov", "empty"}  # shown x100; set size in classes


def blocks(stats: pd.DataFrame) -> list[tuple]:
    return sorted({(d, b) for d, b in zip(stats["dataset"], stats["backbone"])})


def table_rows(data: SetsData, stats: pd.DataFrame, block, sections=None, labels=None):
    """The rows (bench.report.render.tables.Row) of one block that have values."""
    ds, bb = block
    sub = stats[(stats["dataset"] == ds) & (stats["backbone"] == bb)]
    present = {DENS if v == "dens" else m for m, v in zip(sub["method"], sub["variant"])}
    have = set(sub["row"])
    return [r for r in shift_rows(present, data.variants, sections, labels) if r.key in have]


def _value(sub: pd.DataFrame, row: str, score: str, measure: str):
    hit = sub[(sub["row"] == row) & (sub["score"] == score) & (sub["measure"] == measure)]
    return None if hit.empty else hit.iloc[0]


def _text(hit, measure: str, pm: str, low: str) -> str:
    if hit is None:
        return DASH
    scale, form = (100, "{:.1f}") if measure in PERCENT else (1, "{:.2f}")
    std = None if pd.isna(hit["std"]) else hit["std"]
    text = mean_pm(hit["mean"], std, pm, scale, form)
    return text + (low if measure == "coverage" and _low(hit) else "")


def _low(hit) -> bool:
    """Coverage below 1 - alpha by more than twice its binomial standard error
    on the test split's size (recorded as `n_test` in the frame where known)."""
    n = hit.get("n_test")
    if n is None or pd.isna(n) or not n:
        return False
    a = float(hit["alpha"])
    return hit["mean"] < 1 - a - 2 * math.sqrt(a * (1 - a) / float(n))


def heads(tex: bool) -> list[str]:
    out = []
    for s in CF.SCORES.names():
        for m in M.set_names():
            meas = M.get(m)
            out.append(f"{CF.SCORES.get(s).head} {meas.latex if tex else meas.head + meas.arrow}")
    return out


def body(data, stats, block, sections, labels, pm: str, low: str) -> tuple[list, list]:
    ds, bb = block
    sub = stats[(stats["dataset"] == ds) & (stats["backbone"] == bb)]
    rows = table_rows(data, stats, block, sections, labels)
    cells = [[_text(_value(sub, r.key, s, m), m, pm, low) for s in CF.SCORES.names()
              for m in M.set_names()] for r in rows]
    return rows, cells


def note(alpha: float, rule: CF.SetRule = CF.DETERMINISTIC) -> str:
    return (f"Split conformal sets at alpha = {alpha:g} (target coverage {100 * (1 - alpha):g}%), "
            "calibrated on the validation split after each row's calibrator; mean ± std over "
            "seeds (D-Ens: one number). Cov and SSC (lowest coverage over set-size strata) "
            f"x100, Size in classes, Empty: share of empty sets x100; {LOW}: coverage below "
            "the target by more than twice its binomial standard error. RAPS: "
            f"k_reg = {CF.RAPS.k_reg}, lambda = {CF.RAPS.lam}; " + rule_note(rule))


def rule_note(rule: CF.SetRule) -> str:
    """How the sets were made beyond the score, one sentence."""
    text = ("APS and RAPS randomised as TorchCP (U ~ Uniform[0, 1) per calibration image and "
            f"per test image and class, seed {rule.seed})" if rule.randomize
            else "APS and RAPS not randomised")
    return text + ("; every set holds the top class." if rule.top_label else ".")


def markdown(data, stats, block, sections=None, labels=None) -> str:
    rows, cells = body(data, stats, block, sections, labels, " ± ", LOW)
    text = tabulate([[r.label, *c] for r, c in zip(rows, cells)],
                    headers=["Method", *heads(False)], tablefmt="github", disable_numparse=True)
    return text + "\n\n" + note(data.alpha, data.rule)


def fragment(data, stats, block, sections=None, labels=None, where: str = "",
             tag: str = "sets") -> str:
    """The LaTeX table float of one dataset x backbone, fitted to the line;
    `where` is added to its title (e.g. ", on site X"), `tag` ends its label."""
    ds, bb = block
    rows, cells = body(data, stats, block, sections, labels, TEX_PM, "$^\\blacktriangledown$")
    k, n_scores = len(M.set_names()), len(CF.SCORES.names())
    lines = [f"\\begin{{tabular}}{{l {'c' * k * n_scores}}}", "\\toprule",
             "& " + " & ".join(f"\\multicolumn{{{k}}}{{c}}{{\\textbf{{{CF.SCORES.get(s).head}}}}}"
                               for s in CF.SCORES.names()) + " \\\\",
             " ".join(f"\\cmidrule(lr){{{2 + i * k}-{1 + (i + 1) * k}}}" for i in range(n_scores)),
             "Method & " + " & ".join(h.split(" ", 1)[1] for h in heads(True)) + " \\\\",
             "\\midrule"]
    lines += [f"\\textbf{{{latex.tex_escape(r.label)}}} & "
              + " & ".join(c.replace(DASH, "--") for c in cs) + " \\\\"
              for r, cs in zip(rows, cells)]
    lines += ["\\bottomrule", "\\end{tabular}"]
    tex_note = latex.tex_escape(note(data.alpha, data.rule)).replace("±", "$\\pm$").replace(
        LOW, "$^\\blacktriangledown$")
    title = (f"Conformal prediction sets on the \\textbf{{"
             f"{latex.tex_escape(dataset_name(ds, labels))} dataset}}, "
             f"{latex.tex_escape(backbone_name(bb, labels))}{latex.tex_escape(where)}")
    return latex.eval_float(lines, "2pt", tex_note, title, f"{ds}_{bb}_{tag}")


def figure(data, stats, block, sections=None, labels=None):
    """Coverage (with its target) and mean set size per row, one bar per score."""
    ds, bb = block
    sub = stats[(stats["dataset"] == ds) & (stats["backbone"] == bb)]
    rows = table_rows(data, stats, block, sections, labels)
    scores = CF.SCORES.names()
    fig, (ax_c, ax_s) = subplots(1, 2, figsize=(max(7.0, 0.9 * len(rows) + 3), 3.6))
    x, width = np.arange(len(rows)), 0.8 / len(scores)
    for i, s in enumerate(scores):
        for ax, m, scale in ((ax_c, "coverage", 100), (ax_s, "setsize", 1)):
            vals = [_value(sub, r.key, s, m) for r in rows]
            ax.bar(x - 0.4 + width * (i + 0.5), [np.nan if v is None else v["mean"] * scale
                                                  for v in vals],
                   width, label=CF.SCORES.get(s).head, color=f"C{i}")
    ax_c.axhline(100 * (1 - data.alpha), color="black", ls="--", lw=1, label="1 - alpha")
    ax_c.set_ylabel("coverage (%)")
    shown = sub.loc[sub["measure"] == "coverage", "mean"] * 100
    low = min([100 * (1 - 3 * data.alpha) - 5, *(shown - 5)])  # every bar's top in view
    ax_c.set_ylim(max(0.0, low), 100.5)
    ax_s.set_ylabel("mean set size (classes)")
    for ax in (ax_c, ax_s):
        ax.set_xticks(x)
        ax.set_xticklabels([r.label for r in rows], rotation=60, ha="right", fontsize=7)
        ax.grid(axis="y", alpha=0.3)
    # beside the axes, never over a bar (the saved figure's tight box keeps it)
    ax_s.legend(*ax_c.get_legend_handles_labels(), fontsize=7, loc="upper left",
                bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.suptitle(f"{dataset_name(ds, labels)} / {backbone_name(bb, labels)}: prediction sets "
                 f"at alpha = {data.alpha:g}", fontsize=9)
    return fig


def table_stats(data: SetsData) -> pd.DataFrame:
    """stats_frame with `n_test` (the test split's size per dataset, for the mark)."""
    stats = stats_frame(data)
    return stats.assign(n_test=[data.n_test.get(d) for d in stats["dataset"]])


def write(data: SetsData, out: Path, sections=None, labels=None,
          plots: bool = True) -> tuple[list[Path], list[tuple]]:
    """OUT/tables/sets_<ds>_<bb>.{tex,md} (+ _doc.tex), OUT/sets/sets_long.csv,
    OUT/sets/sets_table.csv, OUT/figures/sets_<ds>_<bb>.{png,pdf}; returns
    (files, (title, Markdown) sections of report.md)."""
    stats = table_stats(data)
    tdir = out / "tables"
    written, secs = [], []
    for block in blocks(stats):
        ds, bb = block
        stem = f"sets_{ds}_{bb}"
        md = markdown(data, stats, block, sections, labels)
        written += latex.write_table(tdir, stem, fragment(data, stats, block, sections, labels),
                                     md)
        secs.append((f"{dataset_name(ds, labels)} / {backbone_name(bb, labels)}: conformal "
                     f"prediction sets (alpha = {data.alpha:g})", md))
        if plots:
            written += save(figure(data, stats, block, sections, labels),
                            out / "figures" / stem)
    written.append(write_frame(out / "sets" / "sets_long.csv", data.frame))
    written.append(write_frame(out / "sets" / "sets_table.csv", stats))
    return written, secs
