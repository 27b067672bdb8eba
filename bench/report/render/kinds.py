"""Every kind of report table, declared once: which rows it shows, how its
cells read, its caption and title, and what its footnotes explain.

The Markdown, LaTeX, CSV and terminal writers (markdown, latex, textables,
document, footnotes) and the pipeline read a table's TableKind
(`Table.spec`) and never compare its name: a new kind is a new entry here.
The paper's three (Galdran et al. 2023): `main` (means), `std` (mean ± std,
or 95% intervals with --ci: the supplementary's sideways tables) and `ts`
(each method followed by its temperature-scaled row, ranks over all rows
shown); with `--variants` a fourth, `posthoc` (each method's un-scaled row
followed by one row per post-hoc calibrator, ranked as the TS table); with
`--shift`, `shift` (bench.report.evals.shifttables builds it, one per backbone).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from bench.calib import variants as V
from bench.core.errors import choices_error

_BEST = (r"For each model, \underline{{\textbf{{best}}}} and \textbf{{second best}} ranks "
         r"are marked.")


@dataclass(frozen=True)
class TableKind:
    name: str  # file names <dataset>_<name>.*, the label tab:<dataset>_<name>, --caption-<name>
    title: str  # the Markdown section's title: what the cells hold
    caption: str  # the LaTeX caption template ({dataset}, {n}; braces doubled)
    # (with_ts, --variants) -> the variants of each method's rows, in order;
    # None: one row per method, its trained runs (D-Ens included)
    variants: Callable[[bool, tuple], tuple] | None = None
    # whether `bench report` makes it for each dataset: (with_ts, --variants) -> bool
    shown: Callable[[bool, tuple], bool] = lambda with_ts, variants: True
    spread: bool = False  # cells show the spread over seeds (--ci: the interval); sideways
    ci_title: str = ""  # title and caption with --ci (spread tables)
    ci_caption: str = ""
    calibrated: bool = False  # rows fitted on validation: its footnotes, a heavy rule per method
    calibrators: bool = False  # its footnote names each calibrator it shows
    ts_methods: bool = False  # only the methods of the paper's TS table (paper.TS_METHODS)
    cost: bool = False  # may carry the --cost columns
    headline: bool = False  # printed by `bench report`; the blocks of the Friedman test
    cells_csv: bool = False  # its cells as CSV beside it (no groups.csv view of its rows)

    def rows(self, with_ts: bool = True, variants: tuple = ()) -> tuple | None:
        return None if self.variants is None else self.variants(with_ts, tuple(variants))

    def title_for(self, ci: bool) -> str:
        return self.ci_title if ci and self.spread else self.title

    def caption_for(self, ci: bool) -> str:
        return self.ci_caption if ci and self.spread else self.caption

    def fitted(self, with_ts: bool = True, variants: tuple = ()) -> list:
        """The calibrators its rows fit on a validation split (their fitting notes)."""
        return [v for v in self.rows(with_ts, variants) or () if v.posthoc]


MAIN = TableKind(
    "main", "results",
    r"Results on the \textbf{{{dataset} dataset}} with different architectures and "
    r"strategies. " + _BEST,
    cost=True, headline=True)
STD = TableKind(
    "std", "mean ± std over seeds",
    r"Results on the \textbf{{{dataset} dataset}}, mean $\pm$ standard deviation "
    r"over {n} training runs.",
    spread=True, cost=True,
    ci_title="mean and 95% interval [lo, hi] over seeds",
    ci_caption=(r"Results on the \textbf{{{dataset} dataset}}, mean and 95\% interval "
                r"[lo, hi] over {n} training runs."))
TS = TableKind(
    "ts", "with/out temperature scaling (+TS rows: head logits averaged, then scaled)",
    r"Results on the \textbf{{{dataset} dataset}} with/out Temperature Scaling "
    r"(\textbf{{+TS}}). " + _BEST,
    variants=lambda with_ts, variants: V.TS_VARIANTS,
    shown=lambda with_ts, variants: with_ts,
    calibrated=True, ts_methods=True)
POSTHOC = TableKind(
    "posthoc", "with/out post-hoc calibration fitted on the validation split (head "
               "logits averaged first)",
    r"Results on the \textbf{{{dataset} dataset}} with/out post-hoc calibration "
    r"fitted on the validation set. " + _BEST,
    variants=lambda with_ts, variants: (V.TS_BASE, *(V.get(v) for v in variants)),
    shown=lambda with_ts, variants: bool(variants),
    calibrated=True, calibrators=True, cells_csv=True)
# --shift: its caption and title are bench.report.evals.shifttables' (one per backbone)
SHIFT = TableKind(
    "shift", "", "",
    variants=lambda with_ts, variants: (
        V.PLAIN, *(V.get(v) for v in dict.fromkeys(["ts"] * with_ts + list(variants)))),
    shown=lambda with_ts, variants: False)

# the tables of each dataset, in the order they are written
TABLES = (MAIN, STD, TS, POSTHOC)
KINDS = {k.name: k for k in (*TABLES, SHIFT)}


def get(kind) -> TableKind:
    """A TableKind, or the one named `kind`."""
    if isinstance(kind, TableKind):
        return kind
    if kind not in KINDS:
        raise choices_error("table kind", kind, list(KINDS))
    return KINDS[kind]


def computed_variants(with_ts: bool = True, variants=()) -> list:
    """The per-seed variants a report computes (every runs.csv and groups.csv
    row): the trained rows, the TS table's two unless --no-ts, then the rows
    of the other tables it shows (--variants: `@ts-base` and the calibrators;
    no `+ts` row under --no-ts unless `--variants ts` asks for one)."""
    out = [V.PLAIN] + (list(V.TS_VARIANTS) if with_ts else [])
    shown = [v for k in TABLES if k.shown(with_ts, tuple(variants)) for v in k.rows(
        with_ts, variants) or ()]
    return out + [v for v in dict.fromkeys(shown) if v not in out]
