"""`--compare paper` rendered: Markdown and LaTeX tables, the ours-against-published figure.

Text from bench.report.paper.compare's rows; `figure` and `write` are the only functions that
write files.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

from bench.core.files import write_text
from bench.report.paper.compare import Z_FLAG, show
from bench.report.paper.published import METRICS
from bench.report.plotting import plots
from bench.report.render.tables import backbone_name, dataset_name, mean_pm

HEAD = ("Dataset", "Backbone", "Method", "Metric", "Ours", "n", "Published", "Diff", "z",
        "Within noise", "Note")
HELD = {True: "held", False: "not held", None: "not evaluable"}


def _pm(mean, std) -> str:
    return mean_pm(mean, std, scale=1)  # the rows are x100 already


def _signed(x: float) -> str:
    return f"{round(x, 9) + 0.0:+.2f}"  # float noise must not print as -0.00


def _z(z) -> str:
    return "--" if z is None else _signed(z)


def _note(r: dict) -> str:
    parts = []
    if r["basis"] in ("ours only", "published only"):
        parts.append(f"z from {r['basis']}")
    if r["caveat"]:
        parts.append(r["caveat"])
    return "; ".join(parts)


def cells(r: dict) -> list[str]:
    return [dataset_name(r["dataset"]), backbone_name(r["backbone"]),
            show(r["method"], r["variant"]), r["metric"].upper(),
            _pm(r["ours_mean"], r["ours_std"]), str(r["ours_n"]),
            _pm(r["pub_mean"], r["pub_std"]), _signed(r["diff"]), _z(r["z"]),
            r["within"], _note(r)]


def _paper(c: dict) -> str:
    """The claim on the published numbers of the same block."""
    if c["paper_numbers"] in ("", "erratum"):
        return c["paper_numbers"] or "no such block"
    return HELD[c["paper_held"]]


def _md_table(head, rows) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
            *("| " + " | ".join(c) + " |" for c in rows)]


def markdown(rows: list[dict], claim_rows: list[dict], notes: list[str]) -> str:
    """The whole comparison page: claims, then values, then what is missing."""
    flagged = sum(r["within"] == "no" for r in rows)
    out = ["# Our runs against the published numbers", "",
           f"{len(rows)} values compared, {flagged} outside noise (|z| > {Z_FLAG:g}). "
           "Ours: mean ± population std over n seeds; published: the paper's tables, stds "
           "from the authors' notebook (Chaoyang, Kvasir) or the appendix (PathMNIST, "
           "suspect); see docs/reports.md.", "", "## The paper's claims on these runs", ""]
    out += _md_table(("Dataset", "Backbone", "Claim", "Ours", "Numbers", "Paper"),
                     [[dataset_name(c["dataset"]), backbone_name(c["backbone"]), c["text"],
                       HELD[c["held"]], c["numbers"],
                       _paper(c)] for c in claim_rows])
    out += ["", "## Values", ""] + _md_table(HEAD, [cells(r) for r in rows])
    if notes:
        out += ["", "## Missing", ""] + [f"- {n}" for n in notes]
    return "\n".join(out) + "\n"


def _tex(text: str) -> str:
    return (text.replace("±", r"$\pm$").replace("_", r"\_").replace("%", r"\%")
            .replace("&", r"\&"))


def latex(rows: list[dict]) -> str:
    """One longtable (booktabs) of every compared value; flagged rows bold."""
    cols = HEAD[:-1]  # the note column would not fit a page: it is in the Markdown
    lines = [r"% needs \usepackage{booktabs,longtable}",
             r"\begin{longtable}{lll l rr r rr l}", r"\toprule",
             " & ".join(cols) + r" \\", r"\midrule", r"\endhead"]
    for r in rows:
        c = [_tex(x) for x in cells(r)[:-1]]
        if r["within"] == "no":
            c = [rf"\textbf{{{x}}}" for x in c]
        lines.append(" & ".join(c) + r" \\")
    lines += [r"\bottomrule",
              rf"\caption{{Our runs against the published numbers: difference and two-sample "
              rf"$z$; bold: $|z| > {Z_FLAG:g}$.}}", r"\end{longtable}"]
    return "\n".join(lines) + "\n"


DOCUMENT = (r"\documentclass{article}" "\n" r"\usepackage{booktabs,longtable}" "\n"
            r"\begin{document}" "\n" r"\small" "\n" r"\input{paper}" "\n"
            r"\end{document}" "\n")


def figure(rows: list[dict], stem: Path) -> list[Path]:
    """Ours against published, one panel per metric, identity line, error
    bars where a std is known, values outside noise circled in red; files
    stem.png and stem.pdf."""
    fig, axes = plots.subplots(1, len(METRICS), figsize=(4.2 * len(METRICS), 4.0))
    for ax, metric in zip(axes, METRICS):
        sub = [r for r in rows if r["metric"] == metric]
        for ds in sorted({r["dataset"] for r in sub}):
            pts = [r for r in sub if r["dataset"] == ds]
            ax.errorbar([r["pub_mean"] for r in pts], [r["ours_mean"] for r in pts],
                        xerr=[r["pub_std"] or 0 for r in pts],
                        yerr=[r["ours_std"] or 0 for r in pts], fmt="o", ms=4,
                        label=dataset_name(ds))
        flagged = [r for r in sub if r["within"] == "no"]
        if flagged:
            ax.scatter([r["pub_mean"] for r in flagged], [r["ours_mean"] for r in flagged],
                       s=60, facecolors="none", edgecolors="red", label=f"|z| > {Z_FLAG:g}")
        values = [v for r in sub for v in (r["pub_mean"], r["ours_mean"])]
        if values:
            lo, hi = min(values), max(values)
            pad = 0.05 * (hi - lo or 1.0)
            ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], "k--", lw=0.8)
            ax.legend(fontsize=7)
        ax.set(title=metric.upper(), xlabel="published", ylabel="ours")
    fig.tight_layout()
    return plots.save(fig, stem)


ROW_COLUMNS = ("dataset", "backbone", "method", "variant", "metric", "ours_mean", "ours_std",
               "ours_n", "pub_mean", "pub_std", "pub_n", "diff", "z", "basis", "within",
               "source", "std_source", "caveat")
CLAIM_COLUMNS = ("dataset", "backbone", "claim", "text", "held", "numbers", "paper_held",
                 "paper_numbers")


def write(comparison: dict, out: Path, figures: bool = True) -> tuple[list[Path], str]:
    """OUT/compare/paper.{md,tex,csv}, claims.csv and (figures) the scatter of
    a comparison {"rows", "claims", "notes"} (bench.report.paper.compare's compare
    and claims); returns the files and a one-line summary."""
    rows, notes, claim_rows = comparison["rows"], comparison["notes"], comparison["claims"]
    d = out / "compare"
    d.mkdir(parents=True, exist_ok=True)
    write_text(d / "paper.md", markdown(rows, claim_rows, notes))
    write_text(d / "paper.tex", latex(rows))
    write_text(d / "paper_doc.tex", DOCUMENT)
    for name, cols, data in (("paper.csv", ROW_COLUMNS, rows),
                             ("claims.csv", CLAIM_COLUMNS, claim_rows)):
        buf = io.StringIO(newline="")
        w = csv.DictWriter(buf, cols, extrasaction="ignore")
        w.writeheader()
        w.writerows({k: "" if v is None else v for k, v in r.items()} for r in data)
        write_text(d / name, buf.getvalue())
    written = [d / "paper.md", d / "paper.tex", d / "paper_doc.tex", d / "paper.csv",
               d / "claims.csv"]
    if figures and rows:
        written += figure(rows, out / "figures" / "compare_paper")
    held = sum(c["held"] is True for c in claim_rows)
    evaluated = sum(c["held"] is not None for c in claim_rows)
    summary = (f"--compare paper: {len(rows)} values compared, "
               f"{sum(r['within'] == 'no' for r in rows)} outside noise (|z| > {Z_FLAG:g}); "
               # relative to the report folder: report.md is written in a staging
               # folder renamed into --out at the end (bench.report.output)
               f"claims held {held} of {evaluated} evaluated; compare/paper.md")
    return written, summary
