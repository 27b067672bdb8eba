"""What a report is asked for: `ReportOptions`, one frozen dataclass holding
every choice the `bench report` flags make (field names are the flags'
names, `--no-ts` -> `no_ts`; defaults are the command's), and the parsing
and checks of its text-valued fields.

The command line builds one from its arguments; from Python,
`bench.report.build(results, ReportOptions(metrics="ece,aece"))`. A bad
value is a one-line BenchError, raised before anything is read or written.
"""
from __future__ import annotations

from dataclasses import dataclass

from bench.core.errors import BenchError, choices_error
from bench.core.seeds import parse_seeds
from bench.report.captions import check_caption
from bench.core.paper import DENS
from bench.report.stats import TESTS
from bench.core import measures as M
from bench.report.tables import CAPTIONS, CI_CAPTION, REFERENCE
KINDS = ("main", "std", "ts", "posthoc")


def metric_choices() -> tuple:
    """--metrics' allowed names: every registered measure but ACC (always shown)."""
    return tuple(m for m in M.names() if m != "acc")
COMPARE_CHOICES = ("paper",)


@dataclass(frozen=True)
class ReportOptions:
    """Filters, rows, columns, statistics and outputs of one report."""

    dataset: tuple | None = None  # comma lists, as the repeatable --dataset
    backbone: tuple | None = None
    method: tuple | None = None
    config: str | None = None  # --config: PREFIX, METHOD=PREFIX[:LABEL], latest, most-seeds
    seeds: str | None = None  # N, A-B or a comma list; None: every seed seen
    order: str | None = None  # 'sl1h,ls;dens;2hml,4hml'
    caption_main: str | None = None
    caption_std: str | None = None
    caption_ts: str | None = None
    caption_posthoc: str | None = None
    cost: bool = False
    significance: bool = False
    significance_ref: str = REFERENCE
    label: tuple = ()  # KEY=TEXT items
    no_gap: bool = False
    published_rows: bool = False
    test: str = "auto"
    alpha: float = 0.05
    per_seed: bool = False
    compare: str | None = None  # 'paper' or None
    metrics: str | None = None  # comma list of metric_choices(); None: the paper's columns
    ci: bool = False
    variants: str | None = None  # comma list of post-hoc calibrators: the post-hoc table
    no_ts: bool = False
    no_plots: bool = False
    no_progress: bool = False

    def validate(self) -> None:
        """The checks that need no records, in the order the command makes them."""
        if not 0 < self.alpha < 1:
            raise BenchError(f"--alpha {self.alpha}: a significance level must be > 0 and < 1 "
                             "(e.g. 0.05)")
        if self.test not in TESTS:
            raise choices_error("--test", self.test, TESTS)
        if self.compare is not None and self.compare not in COMPARE_CHOICES:
            raise choices_error("--compare", self.compare, COMPARE_CHOICES)
        metrics = parse_metrics(self.metrics)
        parse_variants(self.variants)
        if self.published_rows:
            from bench.report import copied

            copied.check_metrics(metrics)
        parse_sections(self.order)
        if self.seeds is not None:
            parse_seeds(self.seeds)
        for kind in KINDS:  # an unpaired brace would stop pdflatex after the report is written
            check_caption(f"--caption-{kind}", getattr(self, f"caption_{kind}"))

    # the parsed forms the pipeline reads
    @property
    def datasets(self) -> list[str] | None:
        return csv_list(self.dataset)

    @property
    def backbones(self) -> list[str] | None:
        return csv_list(self.backbone)

    @property
    def methods(self) -> list[str] | None:
        return csv_list(self.method)

    @property
    def metric_columns(self) -> tuple:
        return parse_metrics(self.metrics)

    @property
    def variant_list(self) -> tuple:
        return parse_variants(self.variants)

    @property
    def sections(self):
        return parse_sections(self.order)

    @property
    def seed_list(self) -> list[int] | None:
        return None if self.seeds is None else parse_seeds(self.seeds)

    def caption(self, kind: str) -> str:
        """The caption asked for, else what the table's cells hold."""
        own = getattr(self, f"caption_{kind}")
        if own:
            return own
        return CI_CAPTION if kind == "std" and self.ci else CAPTIONS[kind]


def csv_list(values) -> list[str] | None:
    """['a,b', 'c'] (a repeatable comma-list flag) -> ['a', 'b', 'c']; none -> None."""
    if isinstance(values, str):
        values = [values]
    items = [v.strip() for text in values or [] for v in text.split(",") if v.strip()]
    return items or None


def parse_metrics(text: str | None) -> tuple:
    """'ece,aece,smece' -> ('ece', 'aece', 'smece'); None -> () (the paper's columns)."""
    if text is None:
        return ()
    items = tuple(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    bad = [m for m in items if m not in metric_choices()]
    if bad or not items:
        raise BenchError(f"--metrics '{text}': unknown {', '.join(bad) or 'empty list'}; "
                         f"allowed: {', '.join(metric_choices())}")
    return items


def parse_variants(text: str | None) -> tuple:
    """'ts,vs,iso' -> ('ts', 'vs', 'iso'): the calibrators of the post-hoc
    table (bench.core.variants); None -> () (no such table)."""
    if text is None:
        return ()
    from bench.core import variants as V

    items = tuple(dict.fromkeys(v.strip() for v in text.split(",") if v.strip()))
    bad = [v for v in items if v not in V.posthoc()]
    if bad or not items:
        raise BenchError(f"--variants '{text}': unknown {', '.join(bad) or 'empty list'}; "
                         f"allowed: {', '.join(V.posthoc())}")
    return items


def parse_sections(text: str | None):
    """'sl1h,ls;dens;2hml,4hml' -> sections of method keys (';' = double rule)."""
    if not text:
        return None  # the paper's order, unknown methods appended
    sections = tuple(tuple(m.strip() for m in sec.split(",") if m.strip())
                     for sec in text.split(";"))
    if not any(sections):
        raise BenchError(f"--order '{text}': expected e.g. 'sl1h,ls;dens;2hml,4hml'")
    return tuple(s for s in sections if s)


def check_order(text: str | None, present: set) -> None:
    """--order names only methods (or D-Ens) that have records here, so a typo
    is named instead of leaving a table empty."""
    sections = parse_sections(text)
    if sections is None:
        return
    from bench.methods import METHODS

    here = sorted(present) + [DENS]
    named = [m for sec in sections for m in sec]
    for name in named:  # a registered method without records here is just absent
        if name not in here and name not in METHODS:
            raise BenchError(f"--order: unknown method '{name}'; choose from: {', '.join(here)} "
                             "(',' separates rows, ';' draws a double rule)")
    if not set(named) & set(here):
        raise BenchError(f"--order {text}: none of these methods has records here; choose "
                         f"from: {', '.join(here)}")
