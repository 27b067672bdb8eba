"""Every way a report turns saved logits into test probabilities, declared
once: the Variant registry.

A Variant is a post-processor of one record's predictions (validation and
test logits, labels) or, for an ensemble, of all seeds' records of a
config. It returns the test probabilities (and what it fitted, e.g. the
temperature); every report cell is then measure(variant(records)) for the
measures of bench.calib.measures. The built-ins:

    plain     mean of the head softmaxes (paper eq. 1): the trained runs
    ts-base   head logits averaged, T = 1: the TS table's un-scaled row
    ts        temperature scaling fitted on validation NLL (head logits
              averaged first, paper appendix)
    dens      deep ensemble: mean of the members' predictions (the sl1h seeds)
    vs, dirichlet, hb, iso, ...   post-hoc calibrators (bench.calib.posthoc),
              fitted on the validation split, on the head-averaged logits
    copied    the paper's published numbers: no computation here

Each carries the spellings users see of it: `value` (groups.csv's
`variant`; the plain rows keep their historical 'seeds'), `column`
(published.csv and the comparison's CSVs), `suffix` (the row key:
`sl1h+ts`), `label` (a table's row name: `SL1H+TS`) and `shown` (the
comparison's row name). `version`: bump it when the computation changes and
every cached value of the variant is recomputed. A plugin registers its own
with bench.plugins.register_variant.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from bench.calib.temperature import ensemble_probs, fit_temperature, mean_head_logits, scaled_probs
from bench.calib.posthoc import CALIBRATORS
from bench.core.errors import BenchError
from bench.calib.metrics import head_probs
from bench.core.registry import Registry


@dataclass(frozen=True)
class Variant:
    name: str
    # predictions dict (or, ensemble: a list of them) -> (test probs [N, K], info)
    probs: Callable | None
    value: str = ""  # groups.csv spelling ('' = name)
    column: str = ""  # published.csv / comparison spelling
    suffix: str = ""  # row key: method + suffix
    label: str = ""  # table row name: display name + label
    shown: str = ""  # comparison row name: display name + shown
    ensemble: bool = False  # one output from every seed's record
    posthoc: bool = False  # a calibrator `bench report --variants` can pick
    boot: bool = False  # its one-number cells get bootstrap intervals
    version: int = 1
    help: str = ""
    # a calibrator's (posthoc): K -> how many numbers its fit estimates, and
    # what the fit does, for the footnotes under its rows
    params: Callable | None = None
    fitted: str = ""

    def __post_init__(self):
        object.__setattr__(self, "value", self.value or self.name)
        if self.probs is not None:  # plugins.origin reads where the code came from
            object.__setattr__(self, "__module__", self.probs.__module__)

    def __str__(self) -> str:
        return self.value

    def key(self, method: str) -> str:
        """The row key of `method` in this variant: 'sl1h+ts'."""
        return method + self.suffix

    def apply(self, preds) -> tuple[np.ndarray, np.ndarray, dict]:
        """(test probabilities, test labels, what was fitted) of one record's
        predictions, or of a list of them for an ensemble."""
        if self.probs is None:
            raise BenchError(f"variant {self.name}: nothing to compute (copied numbers)")
        probs, info = self.probs(preds)
        labels = (preds[0] if self.ensemble else preds)["test_labels"]
        return probs, labels, info


VARIANTS = Registry("variant")


def register_variant(name: str, description: str = "", **fields):
    """Decorator: register probs(predictions) -> (test probs, info) as Variant `name`."""
    def deco(fn):
        VARIANTS.add(name, Variant(name, fn, help=description, **fields),
                     description or (fn.__doc__ or "").strip().splitlines()[0])
        return fn
    return deco


def get(name: str) -> Variant:
    return VARIANTS.get(name)


def posthoc() -> list[str]:
    """The calibrators `--variants` accepts."""
    return [n for n in VARIANTS.names() if get(n).posthoc]


def of_column(text: str) -> Variant:
    """A published.csv / comparison `variant` -> its table variant ('' -> plain)."""
    return next(v for v in (PLAIN, TS_BASE, TS) if v.column == text)


# --------------------------------------------------------------- built-in --
@register_variant("plain", "mean of the head softmaxes: the trained runs", value="seeds",
                  boot=True)
def _plain(p):
    return head_probs(p["test_logits"]), {}


@register_variant("ts-base", "head logits averaged, T = 1: the TS table's un-scaled row",
                  column="ts-base", suffix="@ts-base", shown=" (T=1)")
def _ts_base(p):
    return scaled_probs(p["test_logits"], 1.0), {}


@register_variant("ts", "temperature scaling fitted on validation NLL (head logits averaged); "
                  "rows <method>+ts, printed +TS",
                  column="ts", suffix="+ts", label="+TS", shown="+TS", posthoc=True,
                  params=lambda k: 1, fitted="one temperature, validation NLL (L-BFGS on log T)")
def _ts(p):
    t = fit_temperature(p["val_logits"], p["val_labels"])
    return scaled_probs(p["test_logits"], t), {"temperature": t}


@register_variant("dens", "D-Ens: deep ensemble, mean prediction of the sl1h seeds", ensemble=True,
                  boot=True)
def _dens(preds):
    first = preds[0]["test_labels"]
    if any(not np.array_equal(first, q["test_labels"]) for q in preds):
        raise BenchError("ensemble members disagree on the test labels")
    return ensemble_probs([q["test_logits"] for q in preds]), {"members": len(preds)}


VARIANTS.add("copied", Variant("copied", None, help="the paper's published numbers"),
             "the paper's published numbers, copied (bench report --published-rows)")


def posthoc_variant(name: str, fit, apply, text: str, version: int = 1, params=None,
                    fitted: str = "") -> None:
    """Register a calibrator fitted on the validation split's head-averaged
    logits (the +TS rows' input) and applied to the test split's."""
    def probs(p):
        params = fit(mean_head_logits(p["val_logits"]), np.asarray(p["val_labels"]))
        return apply(mean_head_logits(p["test_logits"]), params), {}
    probs.__module__ = getattr(fit, "__module__", __name__)
    VARIANTS.add(name, Variant(name, probs, column=name, suffix=f"+{name}",
                               label=f"+{name.upper() if len(name) <= 3 else name.title()}",
                               shown=f"+{name}", posthoc=True, version=version, help=text,
                               params=params, fitted=fitted), text)


PLAIN, TS_BASE, TS, DENS, COPIED = (get(n) for n in ("plain", "ts-base", "ts", "dens", "copied"))
# The variants of the paper's tables, in row order: a main table's row, then
# a temperature-scaling table's un-scaled and scaled rows.
TABLE_VARIANTS = (PLAIN, TS_BASE, TS)
TS_VARIANTS = (TS_BASE, TS)


def _register_calibrators() -> None:
    for name, c in CALIBRATORS.items():
        posthoc_variant(name, c.fit, c.apply, c.title, c.version, c.params, c.fitted)


_register_calibrators()
