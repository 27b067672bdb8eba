"""The shift report's tables, box-plot data and files (`bench report --shift`).

A shift table is a bench.report.render.tables.Table per dataset x backbone whose
column blocks are the severities (0 = clean, 1..5) instead of backbones:
each block ACC / ECE / Gap / NLL (or the --metrics columns) and Rank, ranked
within the block by bench.report.render.tables.block_cells as every other table;
rows are each method's trained row, then its calibrated rows (+TS and the
--variants calibrators, fitted in-distribution), and D-Ens. The LaTeX and
Markdown renderers are the other tables' (bench.report.render.latex, textables).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from bench.core.paper import DENS
from bench.report.render import kinds, latex, textables
from bench.report.numbers.aggregate import write_frame
from bench.report.evals.shift import ShiftData, long_frame, severity_cells, severity_key
from bench.report.plotting import plots as P
from bench.report.plotting.shiftplots import box_figure
from bench.report.render.tables import (Row, Table, backbone_name, block_cells, dataset_name,
                                 method_name, missing_notes, ordered_methods)

# a format string for latex.fill_caption ({dataset}, {n}; LaTeX braces doubled);
# BACKBONE and CORRUPTIONS are put in first, as plain text
CAPTION = (r"Calibration under distribution shift on the \textbf{{{dataset} dataset}}, "
           r"BACKBONE: each measure averaged over the CORRUPTIONS corruptions at each "
           r"severity (0: the clean test images through the same resize path), mean over "
           r"{n} training runs; post-hoc calibrators fitted on the in-distribution "
           r"validation split; ranks within each severity, \underline{{\textbf{{best}}}} "
           r"and \textbf{{second best}} marked.")
BOX_MEASURE = "ece"  # what the Ovadia-style box plots show
CELL_COLUMNS = ["dataset", "backbone", "row", "method", "variant", "severity", "n", "N", "rank",
                "mark"]


def shift_rows(present, variants, sections=None, labels=None) -> list[Row]:
    """Per method (table order): its trained row, then one row per calibrator
    (printed '+TS' beneath it, as the TS table); D-Ens its own row. ACC is
    printed in every row: the calibrators average head logits, the trained
    row head softmaxes, so a multi-head model's ACC can differ."""
    rows = []
    for i, sec in enumerate(ordered_methods(present, sections)):
        for m in sec:
            name = method_name(m, labels)
            rows.append(Row(m, m, name, i))
            if m != DENS:
                rows += [Row(v.key(m), m, name + v.label, i, suffix=v.label) for v in variants]
    return rows


def severity_labels(severities) -> dict:
    return {severity_key(s): ("Clean (0)" if s == 0 else f"Severity {s}") for s in severities}


@dataclass
class ShiftReport:
    data: ShiftData
    tables: list = field(default_factory=list)  # (backbone, Table)
    boxes: dict = field(default_factory=dict)  # (dataset, backbone) -> box_data

    @property
    def frame(self) -> pd.DataFrame:
        """The tidy long frame (shift/shift_long.csv)."""
        return long_frame(self.data)

    @property
    def notes(self) -> list:
        return self.data.notes


def build(data: ShiftData, variants, expected: dict, metrics=(), gap=True, sections=None,
          labels=None) -> ShiftReport:
    """The shift tables and box-plot data of computed outcomes; `variants`
    the calibrated rows' variants (ts and --variants), `expected`: dataset ->
    seeds asked (n/N marks)."""
    cells = severity_cells(data.outcomes)
    rep = ShiftReport(data)
    for ds, bb in sorted({(ds, bb) for ds, bb, _, _ in cells}):
        mine = {(d, b, k, s): c for (d, b, k, s), c in cells.items() if (d, b) == (ds, bb)}
        table = shift_table(ds, bb, mine, variants=variants, expected=expected.get(ds, ()),
                            metrics=metrics, gap=gap, sections=sections, labels=labels,
                            n_corruptions=len(_corruptions(data, ds, bb)))
        rep.tables.append((bb, table))
        rep.boxes[(ds, bb)] = box_data(data, ds, bb, table)
    return rep


def _corruptions(data: ShiftData, ds: str, bb: str) -> list:
    return next(o.entry["corruptions"] for o in data.outcomes if (o.dataset, o.backbone) == (ds, bb))


def shift_table(ds, bb, cells: dict, *, variants, expected, metrics, gap, sections, labels,
                n_corruptions: int) -> Table:
    present = {c.row_method for c in cells.values()}
    severities = sorted({s for _, _, _, s in cells})
    rows = [r for r in shift_rows(present, variants, sections, labels)
            if any((ds, bb, r.key, s) in cells for s in severities)]
    groups = {(d, severity_key(s), k): c for (d, _, k, s), c in cells.items()}
    blocks = {}
    for s in severities:
        blocks.update(block_cells(rows, severity_key(s), groups, ds, tuple(expected),
                                  metrics=metrics))
    names = {**(labels or {}), **severity_labels(severities)}
    bb_tex = latex.tex_escape(backbone_name(bb, labels)).replace("{", "{{").replace("}", "}}")
    caption = CAPTION.replace("BACKBONE", bb_tex).replace("CORRUPTIONS", str(n_corruptions))
    return Table(kinds.SHIFT, ds, tuple(severity_key(s) for s in severities), tuple(rows), blocks,
                 caption,
                 f"tab:{ds}_{bb}_shift", len(expected), metrics=tuple(metrics),
                 labels=tuple(sorted(names.items())), gap=gap)


def markdown(table: Table, missing=()) -> str:
    """The Markdown of a shift table: one block of columns per severity, one
    under the other (six severities side by side are 31 columns, unreadable
    in a terminal or a README), each ranked as in the LaTeX table; the notes
    once, under the last."""
    blocks = [textables.grid(dataclasses.replace(table, backbones=(sev,)), markdown=True)
              for sev in table.backbones]
    return "\n\n".join(blocks + textables.notes_of(table, missing))


def box_data(data: ShiftData, ds: str, bb: str, table: Table) -> dict:
    """What the box plot of one dataset x backbone draws: {"rows": labels in
    table order, "severities", "boxes": (label, severity) -> the ECE of every
    corruption (and seed) at that severity}."""
    label = {r.key: r.label for r in table.rows}
    boxes: dict = {}
    for o in data.outcomes:
        if (o.dataset, o.backbone) != (ds, bb) or o.row not in label:
            continue
        grid = o.entry["values"][BOX_MEASURE]
        for j, s in enumerate(o.entry["severities"]):
            boxes.setdefault((label[o.row], s), []).extend(float(per_c[j]) for per_c in grid)
    severities = sorted({s for _, s in boxes})
    return {"rows": [r.label for r in table.rows], "severities": severities, "boxes": boxes}


def cells_frame(rep: ShiftReport) -> pd.DataFrame:
    """Every shift-table cell as shown: mean and std over seeds (fractions)."""
    out = []
    variant = {o.row: o.variant.name for o in rep.data.outcomes}
    for bb, t in rep.tables:
        for r in t.rows:
            for sev in t.backbones:
                c = t.cells.get((r.key, sev))
                if c is None:
                    continue
                out.append({"dataset": t.dataset, "backbone": bb, "row": r.key,
                            "method": r.method, "variant": variant[r.key],
                            "severity": int(sev.removeprefix("severity")), "n": c.n, "N": c.N,
                            "rank": c.rank, "mark": c.mark,
                            **{f"{m}_mean": v for m, v in c.mean.items()},
                            **{f"{m}_std": v for m, v in (c.std or {}).items()}})
    return pd.DataFrame(out, columns=CELL_COLUMNS if not out else None)


def write(rep: ShiftReport, out: Path, plots: bool = True) -> tuple[list[Path], list[tuple]]:
    """OUT/tables/shift_<ds>_<bb>.{tex,md} (+ _doc.tex), OUT/shift/shift_long.csv,
    OUT/shift/shift_cells.csv, OUT/figures/shift_ece_<ds>_<bb>.{png,pdf};
    returns (files, (title, Markdown) sections of report.md)."""
    tdir = out / "tables"
    written, sections = [], []
    for bb, t in rep.tables:
        name = f"shift_{t.dataset}_{bb}"
        missing = missing_notes(t)
        md = markdown(t, missing)
        written += latex.write_table(tdir, name, latex.fragment(t, missing), md)
        title = (f"{dataset_name(t.dataset, t.names)} / {backbone_name(bb, t.names)}: under "
                 "distribution shift (mean over corruptions at each severity)")
        sections.append((title, md))
    written.append(write_frame(out / "shift" / "shift_long.csv", rep.frame))
    written.append(write_frame(out / "shift" / "shift_cells.csv", cells_frame(rep)))
    if plots:
        for bb, t in rep.tables:
            title = (f"{dataset_name(t.dataset, t.names)} / {backbone_name(bb, t.names)}: "
                     "ECE under shift")
            fig = box_figure(rep.boxes[(t.dataset, bb)], title)
            written += P.save(fig, out / "figures" / f"shift_ece_{t.dataset}_{bb}")
    return written, sections
