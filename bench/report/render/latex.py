"""LaTeX tables in the paper's layout (pure: a tables.Table in, text out).

One tabular: a column of bold method names, then per backbone a block
ACC↑ / ECE↓ / Gap / NLL↓ / Rank↓ (optionally Params / Train s / Train img/s / Infer) under a bold
multicolumn header with a cmidrule; values x100 with two decimals, Rank with
one; best Rank per block underlined bold, second best bold; D-Ens between
double rules; in the TS table each method is followed by its +TS row whose
ACC is a ditto mark. A table wider than the line (many backbones, measures
or cost columns) is scaled down to fit it; one that fits keeps its size.
Only booktabs, rotating (sideways tables), amssymb and graphicx.
"""
from __future__ import annotations

from pathlib import Path

from bench.calib import measures as M
from bench.core.files import write_text
from bench.core.pathnames import path_name
from bench.report.render.footnotes import table_notes
from bench.report.render.tables import (COST_HEADS, TEX_PM, Table, backbone_name, block_texts,
                                 ci_note, columns, copied_note, dataset_name, mean_pm,
                                 method_name, number, rank_note)

# The paper printed \textquotedbl, which exists only in T1 font encoding; a
# closing double quote is the typographic ditto mark and compiles anywhere.
DITTO = "''"
RANK_HEAD = r"Rank$_\downarrow$"
PREAMBLE = ("\\documentclass{article}\n\\usepackage{booktabs}\n\\usepackage{rotating}\n"
            "\\usepackage{amssymb}\n\\usepackage{graphicx}\n")
# graphicx's \resizebox sees the tabular's natural \width: scaled to the line
# only when wider than it, so a table that fits is set at its own size
FIT_OPEN = "\\resizebox{\\ifdim\\width>\\linewidth\\linewidth\\else\\width\\fi}{!}{%"
_ESCAPES = {"\\": r"\textbackslash{}", "_": r"\_", "%": r"\%", "&": r"\&", "#": r"\#",
            "$": r"\$", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\^{}"}


def tex_escape(text: str) -> str:
    return "".join(_ESCAPES.get(ch, ch) for ch in str(text))


def block_heads(table: Table) -> list[str]:
    """Column heads of one backbone block: the measures and Rank, then any costs."""
    heads = [M.get(m).latex for m in columns(table.metrics, table.gap)] + [RANK_HEAD]
    return heads + (list(COST_HEADS) if table.cost else [])


def _sup(marks: list[str]) -> str:
    return f"$^{{{','.join(marks)}}}$" if marks else ""


def metric_cell(cell, metric: str, with_std: bool, ci: bool = False) -> str:
    interval = cell.ci.get(metric) if ci else None
    # one notation per table: the std, or (--ci) the interval
    std = cell.std[metric] if with_std and not ci and cell.std is not None else None
    text = mean_pm(cell.mean[metric], std, TEX_PM)
    if with_std and interval is not None:
        text += f" [{number(interval[0])}, {number(interval[1])}]"
    marks = ["*"] if cell.sig.get(metric) else []
    if metric == "acc" and cell.short:
        marks.append(f"{cell.n}/{cell.N}")
    return text + _sup(marks)


def rank_cell(cell) -> str:
    text = f"{cell.rank:.1f}"
    if cell.mark == "best":
        return f"\\underline{{\\textbf{{{text}}}}}"
    return f"\\textbf{{{text}}}" if cell.mark == "second" else text


def row_cells(table: Table, row) -> list[str]:
    width = len(block_heads(table))
    out = [f"\\textbf{{{tex_escape(row.suffix or row.label)}}}"
           + ("$^\\dagger$" if row.copied and not row.ts else "")]
    for b in table.backbones:
        out += block_texts(table, table.cells.get((row.key, b)), width, DITTO,
                           lambda g: f"${g * 100:+.2f}$",
                           lambda c, m: metric_cell(c, m, table.spec.spread, table.ci),
                           rank_cell)
    return out


def header(table: Table) -> list[str]:
    heads = block_heads(table)
    width = len(heads)
    names = " & ".join(f"\\multicolumn{{{width}}}{{c}}{{\\textbf{{{tex_escape(backbone_name(b, table.names))}}}}}"
                       for b in table.backbones)
    rules = " ".join(f"\\cmidrule(lr){{{2 + i * width}-{1 + (i + 1) * width}}}"
                     for i in range(len(table.backbones)))
    return [f"& {names} \\\\", rules, " & " + " & ".join(heads * len(table.backbones)) + " \\\\"]


def rule_between(table: Table, prev, row) -> str:
    if table.spec.calibrated:  # a heavy rule between methods, each with its calibrated rows
        return "\\midrule" if row.section == prev.section else "\\midrule[1.15pt]"
    return "\\midrule" if prev.section == row.section else "\\midrule\n\\midrule"


def tabular(table: Table) -> str:
    width = len(block_heads(table))
    spec = "c " + " ".join("c" * width for _ in table.backbones)
    lines = [f"\\begin{{tabular}}{{{spec}}}", "\\toprule", *header(table),
             "\\midrule[1.15pt]" if table.spec.calibrated else "\\midrule"]
    for i, row in enumerate(table.rows):
        if i:
            lines.append(rule_between(table, table.rows[i - 1], row))
        lines.append(" & ".join(row_cells(table, row)) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines)


def footnotes(table: Table, missing: list[str]) -> list[str]:
    out = []
    if missing:
        out.append("$^{n/N}$ mean over only $n$ of the $N$ seeds asked: "
                   + tex_escape("; ".join(missing)) + ".")
    if table.any_empty:
        out.append("--: no finished run for that backbone.")
    if table.any_sig:
        ref = tex_escape(method_name(table.reference, table.names))
        out.append(f"$^{{*}}$ differs from {ref} ({tex_escape(table.sig_test)} "
                   "over seeds, paired by seed, two-sided $p<0.05$).")
    if table.gap:
        out.append("Gap: mean confidence $-$ accuracy ($\\times$100); $<0$ means under-confident.")
    if table.cost:
        out.append("Params in millions; Train: seconds and images/s of training per run; "
                   "Infer: ms per test image; D-Ens: sums over its members (images/s: "
                   "their mean).")
    if table.any_copied:
        out.append("$^\\dagger$ " + tex_escape(copied_note(table)) + ".")
    # {} first: after the \\ joining the notes, a "[" would be read as its spacing argument
    out += ["{}" + tex_escape(n) for n in (rank_note(table), ci_note(table)) if n]
    out += ["{}" + tex_escape(n) + "." for n in table_notes(table)]
    return out


def fill_caption(template: str, dataset: str, n: int) -> str:
    """The caption with {dataset} and {n} filled in. Read as a Python format
    string (the default captions double LaTeX's braces: \\textbf{{...}}); a
    caption written with plain LaTeX braces (\\textbf{bold}, \\frac{1}{2}) is
    not one, and keeps every brace as written."""
    try:
        return template.format(dataset=dataset, n=n)
    except (KeyError, IndexError, ValueError, AttributeError):
        return template.replace("{dataset}", dataset).replace("{n}", str(n))


def fragment(table: Table, missing: list[str] = ()) -> str:
    """The table float, ready for \\input{} in a paper."""
    sideways = table.spec.spread or (table.cost and len(table.backbones) > 1)
    env = "sidewaystable" if sideways else "table"
    text = fill_caption(table.caption, tex_escape(dataset_name(table.dataset, table.names)), table.n_asked)
    caption = f"\\caption{{{text}}}\\label{{{table.label}}}"
    notes = footnotes(table, list(missing))
    body = [f"\\begin{{{env}}}", "\\centering", "\\renewcommand{\\arraystretch}{1.03}",
            "\\setlength\\tabcolsep{2pt}"]
    body += [caption, "\\smallskip"] if sideways else []  # the paper: caption above sideways
    body += [FIT_OPEN, tabular(table) + "}"]
    if notes:
        body.append("\\par\\smallskip{\\footnotesize " + " \\\\\n".join(notes) + "\\par}")
    body += [] if sideways else [caption]
    body.append(f"\\end{{{env}}}")
    return "\n".join(body) + "\n"


def eval_float(lines: list[str], colsep: str, note: str, title: str, label: str) -> str:
    """An evaluation table's float (--ood, --sets, their shift tables): the
    tabular `lines` fitted to the line width, a footnote line, the caption."""
    return "\n".join(["\\begin{table}", "\\centering", f"\\setlength\\tabcolsep{{{colsep}}}",
                      FIT_OPEN, "\n".join(lines) + "}",
                      "\\par\\smallskip{\\footnotesize " + note + "\\par}",
                      f"\\caption{{{title}.}}\\label{{tab:{label}}}", "\\end{table}"]) + "\n"


def write_table(tdir: Path, stem: str, tex: str, md: str) -> list[Path]:
    """TDIR/stem.tex (the float), stem_doc.tex (it compiled alone) and stem.md;
    a ':' of a name in the stem is '+' (bench.core.pathnames)."""
    stem = path_name(stem)
    files = {tdir / f"{stem}.tex": tex, tdir / f"{stem}_doc.tex": document([stem]),
             tdir / f"{stem}.md": md + "\n"}
    for path, text in files.items():
        write_text(path, text)
    return list(files)


def document(fragment_names: list[str]) -> str:
    """A wrapper that \\input{}s fragments lying beside it."""
    inputs = "\n\\clearpage\n".join(f"\\input{{{name}}}" for name in fragment_names)
    return PREAMBLE + "\\begin{document}\n" + inputs + "\n\\end{document}\n"
