"""Terminal and Markdown versions of the report tables (tabulate).

Same rows, numbers, ranks and marks as the LaTeX tables; one extra column,
the signed calibration gap (mean confidence - accuracy, x100), shows whether
a model is over- (>0) or under-confident (<0), which ECE alone hides.
"""
from __future__ import annotations

from tabulate import tabulate

from bench.calib import measures as M
from bench.report.render.footnotes import table_notes
from bench.report.render.tables import (COST_HEADS, Table, backbone_name, block_texts, ci_note,
                                 columns, copied_note, mean_pm, method_name, number,
                                 rank_note)

DITTO = '"'


def block_heads(table: Table) -> tuple:
    """The value heads of one backbone block; the first is prefixed with the
    backbone's name (headers)."""
    return (*[M.get(m).head + M.get(m).arrow for m in columns(table.metrics, table.gap)],
            "Rank↓")


def _value(cell, metric: str, with_std: bool, ci: bool = False) -> str:
    interval = cell.ci.get(metric) if ci else None
    # one notation per table: the std, or (--ci) the interval
    std = cell.std[metric] if with_std and not ci and cell.std is not None else None
    text = mean_pm(cell.mean[metric], std)
    if with_std and interval is not None:
        text += f" [{number(interval[0])}, {number(interval[1])}]"
    if cell.sig.get(metric):
        text += "*"
    if metric == "acc" and cell.short:
        text += f" ({cell.n}/{cell.N})"
    return text


def _rank(cell, markdown: bool) -> str:
    text = f"{cell.rank:.1f}"
    if cell.mark == "best":
        return f"**_{text}_**" if markdown else f"{text} (1st)"
    if cell.mark == "second":
        return f"**{text}**" if markdown else f"{text} (2nd)"
    return text


def headers(table: Table) -> list[str]:
    out = ["Method"]
    heads = block_heads(table)
    for b in table.backbones:
        out += [f"{backbone_name(b, table.names)} {heads[0]}", *heads[1:]]
        out += list(COST_HEADS) if table.cost else []
    return out


def rows(table: Table, markdown: bool) -> list[list[str]]:
    width = len(block_heads(table)) + (len(COST_HEADS) if table.cost else 0)
    std = table.spec.spread
    out = []
    for row in table.rows:
        line = [row.label + ("†" if row.copied else "")]
        for b in table.backbones:
            line += block_texts(table, table.cells.get((row.key, b)), width, DITTO,
                                lambda g: f"{g * 100:+.2f}",
                                lambda c, m: _value(c, m, std, table.ci),
                                lambda c: _rank(c, markdown))
        out.append(line)
    return out


def grid(table: Table, markdown: bool = False) -> str:
    """The table's rows under its headers, without notes."""
    return tabulate(rows(table, markdown), headers=headers(table),
                    tablefmt="github" if markdown else "simple", disable_numparse=True)


def render(table: Table, markdown: bool = False, missing=()) -> str:
    sep = "\n\n" if markdown else "\n"
    return grid(table, markdown) + sep + sep.join(notes_of(table, missing))


def notes_of(table: Table, missing=()) -> list[str]:
    """The footnotes under a table, plain text."""
    notes = []
    if missing:
        notes.append("(n/N): mean over only n of the N seeds asked: " + "; ".join(missing))
    if table.any_empty:
        notes.append("--: no finished run for that backbone")
    if table.any_sig:
        notes.append(f"*: differs from {method_name(table.reference, table.names)} "
                     f"({table.sig_test} over seeds, p < 0.05)")
    if table.gap:
        notes.append("Gap: mean confidence - accuracy (x100); < 0 means under-confident")
    notes += ["†: " + copied_note(table)] if table.any_copied else []
    return notes + [n for n in (rank_note(table), ci_note(table)) if n] + table_notes(table)
