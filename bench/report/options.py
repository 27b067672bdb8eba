"""What a report is asked for: `ReportOptions`, one frozen dataclass holding
every choice the `bench report` flags make (field names are the flags'
names, `--no-ts` -> `no_ts`; defaults are the command's; each field declares
its flag, help text included: bench.core.flags), and the parsing and checks
of its text-valued fields.

The command line builds one from its arguments; from Python,
`bench.report.build(results, ReportOptions(metrics="ece,aece"))`. A bad
value is a one-line BenchError, raised before anything is read or written.
"""
from __future__ import annotations

from dataclasses import dataclass

from bench.core.errors import BenchError, choices_error
from bench.core.flags import ITEMS, REPEAT, SEEDS, Options, check_needs, option
from bench.core.seeds import parse_seeds
from bench.report.render.captions import check_caption
from bench.core.paper import DENS
from bench.report.numbers.stats import TESTS
from bench.calib import measures as M
from bench.calib import variants as V
from bench.report.render import kinds
from bench.report.render.tables import REFERENCE
from bench.calib.conformal import SetRule, check_alpha
from bench.report.paper import copied

KINDS = tuple(k.name for k in kinds.TABLES)  # one --caption-<kind> each
COMPARE_CHOICES = ("paper",)


def metric_choices() -> tuple:
    """--metrics' allowed names: every registered measure but ACC (always shown)."""
    return tuple(m for m in M.names() if m != "acc")


def _caption(kind: str):
    """The --caption-<kind> field of one table kind (KINDS)."""
    return option(None, f"LaTeX caption of the {kind} table ({{dataset}} and {{n}} are filled "
                        "in; LaTeX braces are kept)")


def _only(what: str):
    return option(None, f"only these {what}s (comma list)", kind=REPEAT)


@dataclass(frozen=True)
class ReportOptions(Options):
    """Filters, rows, columns, statistics and outputs of one report. Each
    field declares its `bench report` flag (bench.core.flags); the command
    line's flags are built from these declarations."""

    dataset: tuple | None = _only("dataset")  # comma lists, as the repeatable --dataset
    backbone: tuple | None = _only("backbone")
    method: tuple | None = _only("method")
    # PREFIX, METHOD=PREFIX[:LABEL], latest, most-seeds
    config: str | None = option(
        None, "which config where a method has several: comma-separated PREFIX, "
        "METHOD=PREFIX, or a rule (latest, most-seeds); METHOD=PREFIX:LABEL (repeatable for a "
        "method): each such config its own row, an ablation; docs/reports.md")
    # N, A-B or a comma list; None: every seed seen
    seeds: str | None = option(
        None, "seeds asked, as in bench run: N (0..N-1), A-B or a comma list; default: every "
        "seed seen", kind=SEEDS)
    # 'sl1h,ls;dens;2hml,4hml'
    order: str | None = option(
        None, "rows, e.g. 'sl1h,ls;dens;2hml,4hml' (';' = double rule); default: the paper's "
        "order; an explicit order shows only the methods it names")
    # one per table kind (KINDS; tests check they agree)
    caption_main: str | None = _caption("main")
    caption_std: str | None = _caption("std")
    caption_ts: str | None = _caption("ts")
    caption_posthoc: str | None = _caption("posthoc")
    cost: bool = option(False, "add params / train s / train img/s / infer ms columns")
    significance: bool = option(
        False, "mark cells that differ from the reference (paired test over seeds)")
    significance_ref: str = option(
        REFERENCE, f"the reference of the paired tests (default {REFERENCE})", metavar="METHOD")
    # KEY=TEXT items: read with the records' names (bench.report.numbers.names)
    label: tuple = option(
        (), "display name of a method, dataset or backbone, e.g. --label confpen='CP (ours)' "
        "(repeatable)", kind=ITEMS, metavar="KEY=TEXT")
    no_gap: bool = option(False, "leave out the Gap column")
    published_rows: bool = option(
        False, "add the paper's published rows (marked, not re-run) to the tables of its "
        "dataset x backbone blocks, for methods without records here; refused where the "
        "re-run rows were trained otherwise (profile, epochs, pretraining, image or split "
        "sizes)")
    # the copied rows beside re-run rows of another protocol (bench.report.paper.comparable)
    published_rows_anyway: bool = option(
        False, "with --published-rows: place them even beside re-run rows trained otherwise "
        "than the published ones; each table's footnote names the differences")
    test: str = option("auto", "paired test: auto = t-test below 6 seeds, Wilcoxon from 6",
                       choices=TESTS)
    alpha: float = option(
        0.05, "significance level of --significance and of the Nemenyi critical difference in "
        "the CD diagrams, in (0, 1) (default 0.05)")
    per_seed: bool = option(False, "reliability diagrams per seed too",
                            needs=("no_plots", False))
    compare: str | None = option(  # 'paper' or None
        None, "paper: our means against the published ones (z, |z| > 2 flagged), the paper's "
        "claims tested on these runs (OUT/compare/)", choices=COMPARE_CHOICES)
    # comma list of metric_choices(); None: the paper's columns
    metrics: str | None = option(
        None, lambda: f"table columns after ACC, comma list of {', '.join(metric_choices())}; "
        "default: the paper's (ece,nll); Rank averages the columns shown")
    ci: bool = option(False, "95%% intervals in the std table in place of ± std (over seeds; "
                             "D-Ens and one-seed cells: bootstrap over test samples)")
    # comma list of post-hoc calibrators: the post-hoc table
    variants: str | None = option(
        None, "post-hoc calibrators fitted on the validation split, comma list of ts, vs, "
        "dirichlet, hb, iso, ets (`bench list`): a post-hoc table per dataset, each method's "
        "un-scaled row then one row per calibrator", metavar="LIST")
    # the records' evaluation sets (bench.core.evalfiles; docs/shift.md, "Reports")
    shift: bool = option(
        False, "calibration under distribution shift: per dataset x backbone, each method's "
        "--metrics columns averaged over corruptions at each severity (post-hoc calibrators "
        "fitted in-distribution), ECE box plots, a tidy CSV; needs records evaluated with "
        "--eval shift")
    ood: bool = option(
        False, "out-of-distribution detection: AUROC / FPR95 of MSP, entropy and (multi-head) "
        "the heads' mutual information per dataset x backbone x OOD set; needs records "
        "evaluated with --eval ood:DATASET")
    # conformal prediction sets (bench.calib.conformal; docs/reports.md, "Prediction sets")
    sets: bool = option(
        False, "conformal prediction sets (LAC, APS, RAPS) calibrated on the validation split: "
        "coverage, mean set size and size-stratified coverage per method and calibrator (+TS, "
        "--variants, D-Ens); a table and a figure per dataset x backbone, tidy CSVs")
    # not --alpha: that is the significance level of --significance already
    sets_alpha: float = option(
        0.1, "miscoverage of --sets, in (0, 1) (default 0.1: sets that hold the true class "
        "90%% of the time)", needs=("sets", None))
    # how sets are made from a score (bench.calib.conformal.SetRule)
    sets_randomize: bool = option(
        False, "--sets: randomised APS and RAPS, TorchCP's convention (score less U x p_k, "
        "U uniform, seeded by --sets-seed)", needs=("sets", None))
    sets_seed: int = option(0, "seed of --sets-randomize's uniform draws (default 0)",
                            needs=("sets_randomize", None))
    sets_top_label: bool = option(
        False, "--sets: every set also holds the top class (no empty sets)",
        needs=("sets", None))
    no_ts: bool = option(False, "skip temperature scaling")
    no_plots: bool = option(False)
    # bench.api.report shows no progress bar unless asked (no_progress=False)
    no_progress: bool = option(False, api_default=True)

    def validate(self) -> None:
        """The checks that need no records, in the order the command makes them."""
        if not 0 < self.alpha < 1:
            raise BenchError(f"--alpha {self.alpha}: a significance level must be > 0 and < 1 "
                             "(e.g. 0.05)")
        if self.sets or self.sets_alpha != 0.1:
            check_alpha(self.sets_alpha)
        if self.sets_seed < 0:
            raise BenchError(f"--sets-seed {self.sets_seed}: a seed must be >= 0")
        if self.test not in TESTS:
            raise choices_error("--test", self.test, TESTS)
        if self.compare is not None and self.compare not in COMPARE_CHOICES:
            raise choices_error("--compare", self.compare, COMPARE_CHOICES)
        metrics = parse_metrics(self.metrics)
        parse_variants(self.variants)
        check_needs(self)  # --sets-randomize without --sets, ...
        if self.published_rows_anyway and not self.published_rows:
            raise BenchError("--published-rows-anyway: it places the rows of --published-rows "
                             "beside unlike runs; add --published-rows (or drop it)")
        if self.published_rows:
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
    def set_rule(self) -> SetRule:
        """How --sets makes sets from a score (bench.calib.conformal.SetRule)."""
        return SetRule(self.sets_randomize, self.sets_seed, self.sets_top_label)

    @property
    def seed_list(self) -> list[int] | None:
        return None if self.seeds is None else parse_seeds(self.seeds)

    def caption(self, kind: str) -> str:
        """The caption asked for, else what the table's cells hold."""
        own = getattr(self, f"caption_{kind}")
        if own:
            return own
        return kinds.get(kind).caption_for(self.ci)


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
    table (bench.calib.variants); None -> () (no such table)."""
    if text is None:
        return ()

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
    # start-up: `import bench.api` loads this module, and bench.methods imports
    # every method module: the registry only when a name is looked up
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
