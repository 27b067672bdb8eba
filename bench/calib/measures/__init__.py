"""Every measure a report can show, declared once: the Measure registry.

The package owns the measures: this registry, their functions
(bench.calib.measures.functions), their intervals (.intervals: bootstrap
over test samples, Student t over seeds) and dl2ce's vectorised resampler
(.debiased). The checkpoint AUC is registered from bench.calib.metrics,
where training computes it.

A Measure is a pure function of (probabilities [N, K], labels [N]) -> a
fraction, with what the rest of the harness needs to know about it: its
table heads, which way is better, the range its intervals are clipped to,
whether it enters Rank, whether the trainer stores it in metrics.json,
whether the paper's tables show it, whether it has a bootstrap interval over
test samples, and a version (bump it when its definition changes: every
cached value of it is recomputed). metrics.json, the tables, ranks, CSVs,
`--metrics`, `--ci`, `bench list` and bench.api all read this registry.

A plugin registers its own measure from the module that registers its
methods (bench.plugins.register_measure); it reaches every table by that
registration alone:

    @register_measure("mce", head="MCE", help="maximum calibration error")
    def mce(probs, labels) -> float: ...
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from bench.calib import conformal as CF
from bench.calib.measures import functions as F
from bench.calib.measures import intervals as B
from bench.calib.measures.debiased import dl2ce_interval_resamples
from bench.calib.metrics import auc_ovr_macro
from bench.core.registry import Registry


@dataclass(frozen=True)
class Measure:
    name: str
    fn: Callable[[np.ndarray, np.ndarray], float]
    head: str  # Markdown / terminal column head, e.g. "ACC"
    higher: bool | None = False  # True: higher is better; None: signed (no best)
    lo: float = 0.0  # the range an interval of it is clipped to
    hi: float = 1.0
    rank: bool = True  # may enter Rank (a signed measure never does)
    stored: bool = False  # the trainer writes it to metrics.json (val and test)
    paper: bool = False  # a column of the paper's tables
    # fn(probs, labels, idx [R, N]) -> the value on R resamples at once, whose
    # 2.5 and 97.5 percentiles are the measure's bootstrap interval over test
    # samples (.intervals; dl2ce's are recentred: .debiased)
    resample: Callable | None = None
    # a prediction-set measure: fn(sets [N, K] bool, labels) -> float, of the
    # conformal sets of `bench report --sets` (bench.calib.conformal), never a
    # column of the probability tables: names() and all_measures() leave it out
    sets: bool = False
    version: int = 1
    help: str = ""

    def __post_init__(self):
        # where the code came from (bench.core.plugins.origin reads __module__):
        # the measure's function, built-in or a plugin's
        object.__setattr__(self, "__module__", self.fn.__module__)

    def __call__(self, probs: np.ndarray, labels: np.ndarray) -> float:
        return float(self.fn(probs, labels))

    @property
    def boot(self) -> bool:
        return self.resample is not None

    @property
    def arrow(self) -> str:
        return "" if self.higher is None else ("↑" if self.higher else "↓")

    @property
    def latex(self) -> str:
        """The LaTeX head: ACC$^\\uparrow$, ECE$_\\downarrow$, Gap."""
        if self.higher is None:
            return self.head
        return self.head + (r"$^\uparrow$" if self.higher else r"$_\downarrow$")

    def clip(self, interval: tuple[float, float]) -> tuple[float, float]:
        """An interval cut to the measure's range (a Student-t interval of five
        ACCs near 1 would otherwise reach above 100%)."""
        lo, hi = interval
        return max(lo, self.lo), min(hi, self.hi)


MEASURES = Registry("measure")


def register_measure(name: str, head: str = "", description: str = "", **fields):
    """Decorator: register fn(probs, labels) -> float as the Measure `name`."""
    def deco(fn):
        measure = Measure(name, fn, head or name.upper(), **fields)
        MEASURES.add(name, measure, description or fields.get("help", "")
                     or (fn.__doc__ or "").strip().splitlines()[0])
        return fn
    return deco


def get(name: str) -> Measure:
    return MEASURES.get(name)


def names() -> list[str]:
    """The measures of probabilities (every table column, CSV, --metrics)."""
    return [n for n in MEASURES.names() if not MEASURES.get(n).sets]


def all_measures() -> list[Measure]:
    return [MEASURES.get(n) for n in names()]


def set_names() -> list[str]:
    """The measures of prediction sets (bench report --sets), in registration order."""
    return [n for n in MEASURES.names() if MEASURES.get(n).sets]


def stored() -> tuple[str, ...]:
    """What metrics.json holds per split (the trainer computes them)."""
    return tuple(m.name for m in all_measures() if m.stored)


def paper() -> tuple[str, ...]:
    """The paper's columns (ACC, ECE, NLL), in registration order."""
    return tuple(m.name for m in all_measures() if m.paper)


def bootstrapped() -> tuple[str, ...]:
    """The measures with a bootstrap interval over test samples."""
    return tuple(m.name for m in all_measures() if m.boot)


def rank_of(columns) -> tuple[tuple[str, bool], ...]:
    """(measure, higher is better) that Rank averages over `columns`."""
    return tuple((c, get(c).higher) for c in columns if get(c).rank)


def compute(probs: np.ndarray, labels: np.ndarray, which=None) -> dict[str, float]:
    """measure -> value (a fraction) of every measure named in `which`
    (default: every registered one)."""
    return {n: get(n)(probs, labels) for n in (which if which is not None else names())}


def bootstrap(probs: np.ndarray, labels: np.ndarray) -> dict[str, tuple[float, float]]:
    """measure -> 95% percentile interval over 1,000 resamples of the test
    samples (seed fixed: reproducible), for every measure that has one."""
    return B.bootstrap_ci(probs, labels, {n: get(n).resample for n in bootstrapped()})


def stored_values(probs: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """What the trainer writes to metrics.json for one split."""
    return compute(probs, labels, stored())


# --------------------------------------------------------------- built-in --
# Registration order is the order of CSV columns and of --metrics' choices; a
# table puts Gap (signed, never ranked) right after ECE (bench.report.render.tables).
def _add(name, fn, head, **fields):
    register_measure(name, head, **fields)(fn)


_add("acc", F.accuracy, "ACC", higher=True, stored=True, paper=True, resample=B.acc_resamples,
     help="accuracy of the top prediction")
_add("ece", F.ece, "ECE", stored=True, paper=True, resample=B.ece_resamples,
     help="expected calibration error, 15 equal-width bins (torchmetrics' l1)")
_add("nll", F.nll, "NLL", hi=float("inf"), stored=True, paper=True,
     resample=B.nll_resamples,
     help="mean -log p_y, p_y clipped to float32's eps (docs/fidelity.md)")
_add("brier", F.brier, "Brier", hi=2.0, stored=True,
     help="multiclass Brier score, mean of sum_k (p_k - 1[y=k])^2")
_add("auc", auc_ovr_macro, "AUC", higher=True, stored=True,
     help="macro one-vs-rest ROC AUC (the checkpoint score)")
_add("gap", F.calibration_gap, "Gap", higher=None, lo=-1.0, rank=False, stored=True,
     help="mean confidence - accuracy; > 0 over-confident, < 0 under-confident")
_add("aece", F.adaptive_ece, "aECE", help="ECE over 15 equal-mass bins")
_add("cwece", F.classwise_ece, "cwECE", help="classwise ECE (Kull et al. 2019), 15 bins")
# dl2ce has an interval too: near perfect calibration the plug-in ECE's
# interval misses the true value (docs/reports.md, "Intervals"); dl2ce's covers it
_add("dl2ce", F.debiased_l2, "dL2CE", resample=dl2ce_interval_resamples,
     help="debiased top-label L2 calibration error (Kumar et al. 2019)")
_add("smece", F.smooth_ece, "smECE", help="smooth ECE (Blasiok and Nakkiran 2024)")
_add("aurc", F.aurc, "AURC", help="area under the risk-coverage curve")
for _n in F.BIN_COUNTS:
    _add(f"ece{_n}", F.ece_at(_n), f"ECE{_n}", help=f"ECE with {_n} equal-width bins")

# Prediction sets (bench report --sets): of the sets, not of probabilities.
# Coverage is signed in the sense that matters (near 1 - alpha, not "higher"):
# never ranked; smaller sets are better at equal coverage.
_add("coverage", CF.coverage, "Cov", higher=None, rank=False, sets=True,
     help="prediction sets: share of images whose true class is in the set (bench report --sets)")
_add("setsize", CF.mean_size, "Size", hi=float("inf"), rank=False, sets=True,
     help="prediction sets: mean number of classes per set")
_add("sscov", CF.size_stratified_coverage, "SSC", higher=True, rank=False, sets=True,
     help="prediction sets: lowest coverage among set-size strata 0-1, 2-3, 4-10, 11-100, 101+ "
          "(Angelopoulos et al. 2021)")
_add("empty", CF.empty_share, "Empty", rank=False, sets=True,
     help="prediction sets: share of images whose set is empty (none with --sets-top-label)")
