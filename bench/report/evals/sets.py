"""Conformal prediction sets from saved logits (`bench report --sets`).

For every run under every variant a table shows (plain, +TS unless
--no-ts, the --variants calibrators; D-Ens of the sl1h seeds), per
conformal score of bench.calib.conformal (LAC, APS, RAPS): the variant's
probabilities on the validation split calibrate the sets, its test
probabilities are turned into sets, and every prediction-set Measure
(bench.calib.measures.set_names: coverage, mean size, size-stratified
coverage) is taken of them.

The validation probabilities of a variant are the variant applied to the
record with its validation split standing as the test split too, so a
calibrator fitted on the validation split (TS, VS, ...) is fitted exactly
as for its test rows, then applied to the validation logits: the sets
after TS are calibrated on the same split TS was fitted on. TS changes
one number from that split's NLL, so the exchangeability the guarantee
rests on is left practically intact (docs/reports.md, "Prediction sets").

How sets are made from a score (randomised APS/RAPS, the top label always
in) is the report's SetRule (bench.calib.conformal; --sets-randomize,
--sets-seed, --sets-top-label), `data.rule`.

Entries are cached with the report's other values (OUT/cache/measures.json)
under `sets:<alpha>:<variant>:<paths>` (`sets[<rule>]:...` for a rule other
than the default), keyed by the records' digests and the versions of this
layout, the variant, the scores and the measures.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bench.calib import conformal as CF
from bench.calib import measures as M
from bench.calib import variants as V
from bench.core.errors import BenchError
from bench.core.paper import DENS, ENSEMBLE_OF
from bench.report.numbers.cells import Cache

VERSION = 1  # of a sets entry's layout; bump and every sets entry is recomputed
MIN_MEMBERS = 2  # as bench.report.numbers.aggregate: one seed is no ensemble
LONG_COLUMNS = ["dataset", "backbone", "method", "variant", "seed", "score", "alpha", "measure",
                "value"]


def on_validation(preds: dict) -> dict:
    """A record's predictions with its validation split as the test split too."""
    return {**preds, "test_logits": preds["val_logits"], "test_labels": preds["val_labels"]}


def set_values(variant: V.Variant, preds, alpha: float,
               rule: CF.SetRule = CF.DETERMINISTIC) -> dict:
    """score -> {measure -> value, "q": the calibrated threshold}, and
    "n_test": the test split's size, of one record's predictions (an
    ensemble: the list of its members'), sets made as `rule` says."""
    cal = [on_validation(p) for p in preds] if variant.ensemble else on_validation(preds)
    val_probs, val_labels, _ = variant.apply(cal)
    test_probs, test_labels, _ = variant.apply(preds)
    out = {"n_test": int(len(test_labels))}
    for score in CF.SCORES.names():
        sets, q = CF.prediction_sets(val_probs, val_labels, test_probs, score, alpha, rule)
        out[score] = {m: M.get(m).fn(sets, test_labels) for m in M.set_names()}
        out[score]["q"] = q if np.isfinite(q) else None  # JSON has no inf: every set full
    return out


def versions() -> str:
    """The scores' and set measures' versions, part of every sets cache key."""
    scores = ",".join(f"{s}{CF.SCORES.get(s).version}" for s in CF.SCORES.names())
    return scores + ";" + ",".join(f"{m}{M.get(m).version}" for m in M.set_names())


def cache_prefix(kind: str, rule: CF.SetRule) -> str:
    """'sets' (or 'sets-<set>'), with the rule where it is not the default
    (so the default's cache entries keep their names)."""
    return f"{kind}[{rule.text()}]" if rule.text() else kind


def entry(records: list, variant: V.Variant, alpha: float, cache: Cache,
          rule: CF.SetRule = CF.DETERMINISTIC) -> dict:
    """set_values of one record (an ensemble: all members), cached."""
    name = f"{cache_prefix('sets', rule)}:{alpha!r}:{variant.name}:" + "|".join(
        str(r.path) for r in records)
    key = f"v{VERSION}.{variant.version}:{versions()}:" + "|".join(r.digest for r in records)
    hit = cache.used.get(name) or cache.entries.get(name)
    if not (hit and hit.get("key") == key):
        preds = [r.predictions for r in records]
        hit = {"key": key, "value": set_values(variant, preds if variant.ensemble else preds[0],
                                               alpha, rule)}
    cache.used[name] = hit
    return hit["value"]


@dataclass
class SetsData:
    """Every (run or D-Ens) x variant x score x measure value of a report."""

    alpha: float
    variants: tuple  # the calibrated rows' variants (ts and --variants)
    rows: list = field(default_factory=list)  # LONG_COLUMNS tuples
    notes: list = field(default_factory=list)
    n_test: dict = field(default_factory=dict)  # dataset -> test split size (the table's mark)
    # the records' shift and site sets (bench.report.evals.setshift.ShiftSets), where any has one
    shifted: object = None
    rule: CF.SetRule = CF.DETERMINISTIC  # how sets are made from a score

    @property
    def frame(self) -> pd.DataFrame:
        """The tidy frame (sets/sets_long.csv, bench.results.sets): fractions,
        set sizes in classes; D-Ens has no seed."""
        df = pd.DataFrame(self.rows, columns=LONG_COLUMNS)
        return df.astype({"seed": "Int64"})


def _add(data: SetsData, ds, bb, method, variant: V.Variant, seed, values: dict) -> None:
    data.n_test[ds] = values["n_test"]
    for score in CF.SCORES.names():
        per = values[score]
        data.rows += [(ds, bb, method, variant.name, seed, score, data.alpha, m, per[m])
                      for m in M.set_names()]


def compute(runs: list, variants, alpha: float, cache: Cache,
            rule: CF.SetRule = CF.DETERMINISTIC) -> SetsData:
    """The sets of every run under `variants` (plain first, then the
    calibrators) and of D-Ens (the sl1h seeds of one config, >= 2)."""
    alpha = CF.check_alpha(alpha)
    data = SetsData(alpha, tuple(v for v in variants if v != V.PLAIN), rule=rule)
    groups = defaultdict(list)
    for r in sorted(runs, key=lambda r: (r.dataset, r.backbone, r.method, r.seed)):
        try:
            for v in variants:
                _add(data, r.dataset, r.backbone, r.method, v, r.seed,
                     entry([r.record], v, alpha, cache, rule))
        except (BenchError, ValueError, KeyError) as err:
            data.notes.append(f"no prediction sets for {r.path}: {err}")
            continue
        groups[(r.dataset, r.backbone, r.method, r.chash)].append(r)
    for (ds, bb, method, _), members in groups.items():
        if method == ENSEMBLE_OF and len(members) >= MIN_MEMBERS:
            try:
                _add(data, ds, bb, DENS, V.DENS, None,
                     entry([r.record for r in members], V.DENS, alpha, cache, rule))
            except (BenchError, ValueError) as err:
                data.notes.append(f"{ds}/{bb}: no D-Ens prediction sets: {err}")
    return data


def row_key(method: str, variant: str) -> str:
    """The table row of a frame row: 'sl1h', 'sl1h+ts', 'dens'."""
    return method if variant in ("plain", "dens") else V.get(variant).key(method)


def stats_frame(data: SetsData) -> pd.DataFrame:
    """Mean and population std over seeds (ddof=0; D-Ens: one number, no std)
    per dataset, backbone, row, score and measure (sets/sets_table.csv), with
    the coverage's distance to its target 1 - alpha in `gap` (coverage rows)."""
    df = data.frame
    cols = ["dataset", "backbone", "row", "method", "variant", "score", "alpha", "measure",
            "mean", "std", "n", "gap"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    df = df.assign(row=[row_key(m, v) for m, v in zip(df["method"], df["variant"])])
    keys = ["dataset", "backbone", "row", "method", "variant", "score", "alpha", "measure"]
    g = df.groupby(keys, sort=True)["value"]
    out = g.agg(mean="mean", n="count").reset_index()
    out["std"] = g.agg(lambda v: float(np.std(v.to_numpy(), ddof=0))).to_numpy()
    out.loc[out["variant"] == "dens", "std"] = np.nan
    out["gap"] = np.where(out["measure"] == "coverage", out["mean"] - (1 - out["alpha"]), np.nan)
    return out[cols]
