"""The report tables as data: rows, per-backbone cells, ranks and marks.

Pure: groups in, a Table out. bench.report.render.latex and bench.report.render.textables render it.
Its kind (main, std, ts, posthoc, shift) is a TableKind of bench.report.render.kinds,
declared there once. A table carries everything its caption and footnotes
say, so they describe the rows it shows and nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from bench.core import paper
from bench.core.paper import COPIED_SUFFIX
from bench.calib import variants as V
from bench.calib import measures as M
from bench.report.render import kinds
from bench.report.render.kinds import TableKind
from bench.report.numbers.ranks import mean_ranks, rank_marks
from bench.core.errors import BenchError

REFERENCE = "sl1h"  # what the significance tests compare against (--significance-ref)
COST_HEADS = ("Params (M)", "Train (s)", "Train (img/s)", "Infer (ms)")

GAP = "gap"  # the signed measure every table shows in one place (columns)


def paper_metrics() -> tuple:
    """The paper's columns after ACC (ECE, NLL): `--metrics`' default."""
    return tuple(m for m in M.paper() if m != "acc")


def columns(metrics: tuple = (), gap: bool = True) -> list[str]:
    """A backbone block's value columns: ACC, then the chosen measures (the
    paper's ECE and NLL by default), with Gap in its one place, right after
    ECE (after ACC where ECE is not shown); Rank follows. gap=False (--no-gap)
    leaves Gap out."""
    chosen = [m for m in (metrics or paper_metrics()) if m not in ("acc", GAP)]
    cols = ["acc", *chosen]
    if gap:
        cols.insert(cols.index("ece") + 1 if "ece" in cols else 1, GAP)
    return cols


def rank_metrics(metrics: tuple = ()) -> tuple:
    """(metric, higher is better) that Rank averages: the shown columns that rank."""
    return M.rank_of(columns(metrics, gap=False))


# The sign between a mean and its std in LaTeX (the terminal's and Markdown's
# is mean_pm's default)
TEX_PM = r"$\pm$"


def number(x: float, scale: float = 100.0, form: str = "{:.2f}") -> str:
    """A value as the tables print it: a fraction x100 with two decimals."""
    return form.format(x * scale)


def mean_pm(mean: float, std: float | None = None, pm: str = " ± ", scale: float = 100.0,
            form: str = "{:.2f}") -> str:
    """'80.71 ± 0.52': a mean and its std as every table prints them (each
    value x`scale` in `form`, `pm` between them: TEX_PM in LaTeX); the mean
    alone where `std` is None (a one-number cell)."""
    text = number(mean, scale, form)
    return text if std is None else text + pm + number(std, scale, form)


def block_texts(table, cell, width: int, ditto: str, gap, value, rank) -> list[str]:
    """One backbone block of a table row as text, for either renderer (LaTeX,
    Markdown/plain): '--' x width where the cell is missing, else its value
    columns, Rank and any costs. `gap(x)`, `value(cell, metric)` and
    `rank(cell)` format in the renderer's own syntax."""
    if cell is None:
        return ["--"] * width
    out = []
    for m in columns(table.metrics, table.gap):
        if m == "acc" and cell.ditto_acc:  # the TS table's un-scaled row repeats ACC
            out.append(ditto)
        elif m == "gap":
            out.append(gap(cell.mean["gap"]) if "gap" in cell.mean else "--")
        else:
            out.append(value(cell, m))
    return out + [rank(cell)] + (cost_texts(cell.cost) if table.cost else [])


def cost_texts(cost: dict) -> list[str]:
    """The cost columns of a cell, in COST_HEADS order ('--' where a record
    lacks the number, e.g. records written before it was stored)."""
    def one(key, text):
        return text(cost[key]) if key in cost else "--"

    return [one("n_params", lambda v: f"{v / 1e6:.2f}"),
            one("train_seconds", lambda v: f"{v:.1f}"),
            one("train_images_per_s", lambda v: f"{v:.1f}"),
            one("infer_ms_per_image", lambda v: f"{v:.3f}")]


def registered_method(key: str):
    """The Method a registered name builds (its display name and section),
    or None for a name no registry knows (D-Ens, an old record's method)."""
    # start-up: `import bench.api` loads this module, and bench.methods imports
    # every method module: the registry only when a name is looked up
    from bench.methods import METHODS

    try:  # an ablation row METHOD@PREFIX is its method's
        return METHODS.get(key.partition("@")[0])()
    except BenchError:
        return None


def method_name(key: str, labels: dict | None = None) -> str:
    """--label, else the method's declared display name, else its key in capitals."""
    if labels and key in labels:
        return labels[key]
    method = registered_method(key)
    if method is not None:
        return method.display()
    return paper.METHOD_NAMES.get(key.partition("@")[0], key.upper())


def backbone_name(key: str, labels: dict | None = None) -> str:
    """--label or the recorded display name (bench.report.numbers.names), else the
    built-in spelling (the paper's for its backbones), else the key."""
    return ((labels or {}).get(key) or paper.BACKBONE_NAMES.get(key)
            or paper.OTHER_BACKBONE_NAMES.get(key, key))


def dataset_name(key: str, labels: dict | None = None) -> str:
    return (labels or {}).get(key) or paper.DATASET_NAMES.get(key, key)


@dataclass(frozen=True)
class Row:
    key: str  # group key: 'sl1h', 'dens', 'sl1h+ts', 'sl1h@ts-base'
    method: str  # method key it belongs to
    label: str  # display name ('SL1H', '+TS' rows carry the method's label + '+TS')
    section: int  # rows of different sections are separated by a double rule
    ts: bool = False  # a +TS row (ditto ACC)
    suffix: str = ""  # a scaled row's variant label ('+TS', '+VS'): LaTeX prints it alone
    copied: bool = False  # the paper's published numbers, not re-run (marked with a dagger)


@dataclass(frozen=True)
class Cell:
    mean: dict  # metric -> mean (fraction)
    std: dict  # metric -> population std, or None (single number)
    n: int
    N: int  # seeds asked
    rank: float
    mark: str | None  # 'best' | 'second' | None
    ditto_acc: bool = False
    sig: dict = field(default_factory=dict)  # metric -> p < alpha against SL1H
    cost: dict = field(default_factory=dict)
    missing: tuple = ()  # seeds asked but absent
    ci: dict = field(default_factory=dict)  # metric -> 95% interval (lo, hi) or None

    @property
    def short(self) -> bool:
        return self.n < self.N


@dataclass(frozen=True)
class Table:
    spec: TableKind  # its kind: rows, caption, title, footnotes (bench.report.render.kinds)
    dataset: str
    backbones: tuple
    rows: tuple
    cells: dict  # (row key, backbone) -> Cell
    caption: str  # template: {dataset} and {n} are filled in by the renderer
    label: str
    n_asked: int = 0
    cost: bool = False
    sig_test: str | None = None  # name of the test used for the marks, if any
    notes: tuple = ()
    metrics: tuple = ()  # --metrics: the chosen measures; () = the paper's columns
    ci: bool = False  # --ci: intervals in the std table's place
    labels: tuple = ()  # (key, display name) pairs of --label and recorded dataset names
    gap: bool = True  # the Gap column (--no-gap drops it)
    reference: str = REFERENCE  # what the significance marks compare against
    # how its re-run rows differ from the protocol of its copied rows
    # (--published-rows-anyway, bench.report.paper.comparable): said in the footnote
    unlike: tuple = ()

    @property
    def kind(self) -> str:
        """The kind's name: the file names', CSVs' and library's spelling."""
        return self.spec.name

    @property
    def names(self) -> dict:
        return dict(self.labels)

    @property
    def any_empty(self) -> bool:
        """Some row has no finished run for some backbone (shown as --)."""
        return any((r.key, b) not in self.cells for r in self.rows for b in self.backbones)

    @property
    def any_copied(self) -> bool:
        return any(r.copied for r in self.rows)

    @property
    def any_sig(self) -> bool:
        """A significance footnote only where some cell carries a mark."""
        return bool(self.sig_test) and any(any(c.sig.values()) for c in self.cells.values())


def order_backbones(keys) -> list[str]:
    """The paper's column order (ResNet50, ConvNeXt, Swin-T), then the rest."""
    known = [b for b in paper.BACKBONE_NAMES if b in keys]
    return known + sorted(k for k in keys if k not in paper.BACKBONE_NAMES)


def ordered_methods(present, sections=None) -> list[list[str]]:
    """Sections of method keys in display order, keeping only those present.
    With the default order, methods it does not name join the section their
    Method declares (single-head baselines after the paper's baselines,
    multi-head models after 4HML); an explicit order shows exactly the
    methods it names."""
    def with_ablations(m):  # the rows METHOD@PREFIX of an ablation follow their method
        return [m] * (m in present) + sorted(k for k in present if k.startswith(m + "@"))

    out = [[k for m in sec for k in with_ablations(m)] for sec in (sections or paper.TABLE_SECTIONS)]
    if sections is None:
        known = {k for sec in out for k in sec}
        for m in sorted(m for m in present if m not in known):
            method = registered_method(m)
            baseline = method is not None and method.table_section() == "baseline"
            out[0 if baseline else -1].append(m)
    return [sec for sec in out if sec]


def table_rows(kind, present, sections=None, labels: dict | None = None,
               variants=()) -> list[Row]:
    kind = kinds.get(kind)
    per_variant = kind.rows(True, variants)
    rows = []
    for i, sec in enumerate(ordered_methods(present, sections)):
        for m in sec:
            name, copied = method_name(m, labels), m.endswith(COPIED_SUFFIX)
            if per_variant is None:
                rows.append(Row(m, m, name, i, copied=copied))
            elif not m.startswith(paper.DENS):
                # per method: un-scaled (logits averaged, T=1), then the scaled
                # rows; each method its own section so heavy rules separate them
                section = len(rows)
                for v in per_variant:
                    rows.append(Row(v.key(m), m, name + v.label, section, ts=v is V.TS,
                                    copied=copied, suffix=v.label))
    return rows


def reference_row(key: str, reference: str, rows) -> str | None:
    """The row a significance mark of row `key` compares with: the reference
    method's row of the same kind (its un-scaled row in a TS or post-hoc
    table), or None when the table does not show it (a mark against a row
    the reader cannot see is never printed)."""
    shown = {r.key: r for r in rows}
    row = shown[key]
    ref = reference if row.key == row.method else V.TS_BASE.key(reference)
    return ref if ref in shown and ref != key else None


def round_printed(x: float) -> float:
    """Rank on the printed numbers (x100, 2 decimals), so a reader can check
    every Rank cell from the table itself, as with the paper's tables."""
    return round(x * 100, 2)


def block_cells(rows, backbone, groups, dataset, expected, sig=None, metrics=(),
                reference: str = REFERENCE) -> dict:
    present = [r for r in rows if (dataset, backbone, r.key) in groups]
    gs = [groups[(dataset, backbone, r.key)] for r in present]
    means = [{m: g.mean(m) for m in g.values} for g in gs]
    by = rank_metrics(metrics)
    ranks = mean_ranks([{m: round_printed(d[m]) for m, _ in by} for d in means], by)
    marks = rank_marks(ranks)
    cells = {}
    for r, g, mean, rank, mark in zip(present, gs, means, ranks, marks):
        std = None if g.single else {m: g.std(m) for m in g.values}
        asked = () if r.copied else expected  # a copied row is the paper's 5 runs
        cells[(r.key, backbone)] = Cell(
            mean, std, g.n, len(asked) or g.n, rank, mark,
            ditto_acc=r.ts, cost=dict(g.cost),
            sig=(sig or {}).get((backbone, r.key), {}) if reference_row(r.key, reference, rows)
            else {},
            missing=tuple(s for s in asked if s not in g.seeds),
            ci=dict(g.extra.get("ci", {})))
    return cells


@dataclass(frozen=True, kw_only=True)
class TableSpec:
    """What one table shows, from the report's options: its kind and every
    choice of rows, columns, marks and notes (build_table fills it with data)."""
    kind: TableKind | str = field(kw_only=False)
    backbones: tuple | None = None  # --backbones' order; None: every backbone with runs
    sections: tuple | None = None  # --methods' rows in sections; None: the kind's own
    cost: bool = False
    sig_test: str | None = None  # name of the test behind the marks
    caption: str | None = None  # None: the kind's caption
    notes: tuple = ()
    metrics: tuple = ()
    ci: bool = False
    labels: dict | None = None
    gap: bool = True
    reference: str = REFERENCE
    variants: tuple = ()
    unlike: tuple = ()


def build_table(spec: TableSpec | TableKind | str, dataset: str, groups: dict, expected: tuple,
                sig: dict | None = None) -> Table | None:
    """groups: (dataset, backbone, row key) -> aggregate.CellData; expected: the
    seeds asked (n/N marks short cells). sig: optional
    (backbone, row key) -> {metric: bool}. A bare kind stands for its default
    spec. None when nothing to show."""
    s = spec if isinstance(spec, TableSpec) else TableSpec(spec)
    kind = kinds.get(s.kind)
    have = {b for d, b, _ in groups if d == dataset}
    bbs = [b for b in s.backbones if b in have] if s.backbones else order_backbones(have)
    methods = {g.row_method for (d, b, k), g in groups.items() if d == dataset and b in bbs}
    if kind.ts_methods:
        methods = {m for m in methods if (s.sections or m.partition("@")[0] in paper.TS_METHODS)
                   and any((dataset, b, V.TS.key(m)) in groups for b in bbs)}
    rows = [r for r in table_rows(kind, methods, s.sections, s.labels, s.variants)
            if any((dataset, b, r.key) in groups for b in bbs)]
    if not rows:
        return None
    cells = {}
    for b in bbs:
        cells.update(block_cells(rows, b, groups, dataset, expected, sig, s.metrics, s.reference))
    return Table(kind, dataset, tuple(bbs), tuple(rows), cells, s.caption or kind.caption,
                 f"tab:{dataset}_{kind.name}", len(expected), s.cost,
                 s.sig_test if sig else None, tuple(s.notes), tuple(s.metrics), s.ci,
                 tuple(sorted((s.labels or {}).items())), s.gap, s.reference, tuple(s.unlike))


def rank_note(table: Table) -> str | None:
    """Which columns Rank averages, where they are not the paper's."""
    if not table.metrics or tuple(table.metrics) == paper_metrics():
        return None
    names = ", ".join(M.get(m).head for m, _ in rank_metrics(table.metrics))
    return f"Rank: mean of the per-column ranks over {names}"


def copied_note(table: Table) -> str | None:
    """The footnote of a table with copied rows (the dagger's meaning)."""
    if not table.any_copied:
        return None
    note = (f"copied from the paper ({paper.CITATION}), not re-run here: its published means "
            "(no std); Rank is computed over all rows shown, copied and re-run")
    if table.unlike:
        note += ("; placed with --published-rows-anyway although the re-run rows were trained "
                 "otherwise: " + ". ".join(table.unlike))
    return note


# Why an ECE interval may not hold the true ECE, with the numbers of
# benchmarks/ci_coverage.py (docs/reports.md, "Intervals")
ECE_BIAS = ("ECE (binned plug-in) is biased upwards near perfect calibration: an interval of "
            "it can miss the true ECE entirely (simulated, 10 classes, true ECE 0.0006: the "
            "bootstrap interval covered it in 0 of 200 test sets at n = 200, 1,000 and 5,000); "
            "the bootstrap interval of the debiased dL2CE (--metrics dl2ce) covered the true "
            "dL2CE in 200 of 200")


def ci_note(table: Table) -> str | None:
    if not (table.ci and table.spec.spread):
        return None
    boot = ", ".join(M.get(m).head for m in M.bootstrapped())
    note = ("[lo, hi]: 95% interval of the mean over seeds (Student t), cut to the "
            f"measure's range; one-number rows (D-Ens, one seed): 95% bootstrap interval over "
            f"test samples ({boot}); a value without one has no interval")
    return note + ". " + ECE_BIAS if "ece" in columns(table.metrics) else note


def missing_notes(table: Table) -> list[str]:
    """One line per short cell, naming the missing seeds (+TS rows repeat
    their method's seeds and are left out)."""
    out = []
    for r in table.rows:
        for b in table.backbones:
            c = table.cells.get((r.key, b))
            if c is not None and c.short and not r.suffix:
                seeds = ", ".join(map(str, c.missing))
                out.append(f"{method_name(r.method, table.names)} / "
                           f"{backbone_name(b, table.names)}: {c.n} of {c.N} "
                           f"seeds (missing {seeds})")
    return out
