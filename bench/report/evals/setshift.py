"""Prediction sets where the guarantee breaks: `bench report --sets` on the
records' evaluation sets (bench.core.evalfiles) with labels, the corrupted
test split of `--eval shift` and the other sites of `--eval site:SOURCE`.

The sets are calibrated exactly as in-distribution (bench.report.evals.sets: the
row's variant on the validation split, threshold from its true-class
scores) and applied to the shifted images. Exchangeability is gone there,
so nothing holds the coverage at 1 - alpha: the tables show how far below
it each method falls, per severity (mean over corruptions) and per site.

Entries are cached with the report's other values under
`sets-<set>:<alpha>:<variant>:<paths>`, keyed by the records' digests, their
sets' recorded sha256 and the versions of bench.report.evals.sets.
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
from bench.report.evals import shift as S
from bench.report.numbers.cells import Cache
from bench.report.evals.sets import (MIN_MEMBERS, VERSION, cache_prefix, versions,
                                     on_validation, row_key)

SITE_PREFIX = "site-"
LONG_COLUMNS = ["dataset", "backbone", "method", "variant", "seed", "eval_set", "corruption",
                "severity", "score", "alpha", "measure", "value"]


def calibration(variant: V.Variant, preds) -> tuple[np.ndarray, np.ndarray]:
    """The variant's validation probabilities and labels (bench.report.evals.sets)."""
    cal = [on_validation(p) for p in preds] if variant.ensemble else on_validation(preds)
    probs, labels, _ = variant.apply(cal)
    return probs, labels


def measured(cal, test_probs, labels, alpha: float, rule: CF.SetRule) -> dict:
    """score -> measure -> value of the sets of `test_probs` [N, K]."""
    out = {}
    for score in CF.SCORES.names():
        sets, _ = CF.prediction_sets(*cal, test_probs, score, alpha, rule)
        out[score] = {m: M.get(m).fn(sets, labels) for m in M.set_names()}
    return out


def _cached(name: str, records, variant, alpha, cache: Cache, compute,
            rule: CF.SetRule) -> dict:
    key_name = f"{cache_prefix('sets-' + name, rule)}:{alpha!r}:{variant.name}:" + "|".join(
        str(r.path) for r in records)
    key = f"v{VERSION}.{variant.version}:{versions()}:" + "|".join(
        f"{r.digest}/{r.eval_digest(name)}" for r in records)
    hit = cache.used.get(key_name) or cache.entries.get(key_name)
    if not (hit and hit.get("key") == key):
        hit = {"key": key, "value": compute()}
    cache.used[key_name] = hit
    return hit["value"]


def shift_entry(records, variant, alpha, cache: Cache, rule: CF.SetRule) -> dict:
    """{"corruptions", "severities", "values": [C][S] of measured()} on the
    records' shift sets (one record; an ensemble: its members)."""
    def compute():
        preds = [r.predictions for r in records]
        cal = calibration(variant, preds if variant.ensemble else preds[0])
        grids = [S.read(r) for r in records]
        probs, labels = S.slices(variant, records, grids)
        return {"corruptions": [str(c) for c in grids[0]["corruptions"]],
                "severities": [int(s) for s in grids[0]["severities"]],
                "values": [[measured(cal, p, labels, alpha, rule) for p in per_c]
                           for per_c in probs]}

    return _cached(S.SHIFT, records, variant, alpha, cache, compute, rule)


def site_entry(records, name: str, variant, alpha, cache: Cache, rule: CF.SetRule) -> dict:
    """measured() on the records' site set `name` (an ensemble: its members')."""
    def compute():
        preds = [r.predictions for r in records]
        cal = calibration(variant, preds if variant.ensemble else preds[0])
        sets = [r.eval_set(name) for r in records]
        moved = [{**p, "test_logits": np.asarray(s["logits"]), "test_labels":
                  np.asarray(s["labels"])} for p, s in zip(preds, sets)]
        probs, labels, _ = variant.apply(moved if variant.ensemble else moved[0])
        return measured(cal, probs, labels, alpha, rule)

    return _cached(name, records, variant, alpha, cache, compute, rule)


@dataclass
class ShiftSets:
    alpha: float
    variants: tuple
    rows: list = field(default_factory=list)  # LONG_COLUMNS tuples
    notes: list = field(default_factory=list)
    n_test: dict = field(default_factory=dict)  # (dataset, eval_set) -> images per slice
    rule: CF.SetRule = CF.DETERMINISTIC  # how sets are made from a score

    @property
    def frame(self) -> pd.DataFrame:
        df = pd.DataFrame(self.rows, columns=LONG_COLUMNS)
        return df.astype({"seed": "Int64", "severity": "Int64"})


def _rows(out: ShiftSets, who: tuple, name: str, corruption, severity, values: dict) -> None:
    out.rows += [(*who, name, corruption, severity, s, out.alpha, m, values[s][m])
                 for s in CF.SCORES.names() for m in M.set_names()]


def _add(out: ShiftSets, run, method, variant, seed, records, names, cache) -> None:
    who = (run.dataset, run.backbone, method, variant.name, seed)
    for name in names:
        if name == S.SHIFT:
            e = shift_entry(records, variant, out.alpha, cache, out.rule)
            for c, per_c in zip(e["corruptions"], e["values"]):
                for sev, v in zip(e["severities"], per_c):
                    _rows(out, who, name, c, sev, v)
        else:
            _rows(out, who, name, None, None, site_entry(records, name, variant, out.alpha,
                                                         cache, out.rule))


def labelled_sets(record) -> list[str]:
    """The record's evaluation sets with labels of its own classes."""
    return sorted(n for n in record.evals if n == S.SHIFT or n.startswith(SITE_PREFIX))


def compute(runs: list, variants, alpha: float, cache: Cache,
            rule: CF.SetRule = CF.DETERMINISTIC) -> ShiftSets:
    """Every run's shift and site sets under `variants`, and D-Ens of the sl1h
    seeds that share them; a set that cannot be read is named in notes."""
    out = ShiftSets(CF.check_alpha(alpha), tuple(v for v in variants if v != V.PLAIN),
                    rule=rule)
    groups = defaultdict(list)
    for r in sorted(runs, key=lambda r: (r.dataset, r.backbone, r.method, r.seed)):
        names = labelled_sets(r.record)
        if not names:
            continue
        try:
            for v in variants:
                _add(out, r, r.method, v, r.seed, [r.record], names, cache)
        except (BenchError, ValueError, KeyError) as err:
            out.notes.append(f"no shifted prediction sets for {r.path}: {err}")
            continue
        groups[(r.dataset, r.backbone, r.method, r.chash, tuple(names))].append(r)
    for (_, _, method, _, names), members in groups.items():
        if method == ENSEMBLE_OF and len(members) >= MIN_MEMBERS:
            try:
                _add(out, members[0], DENS, V.DENS, None, [m.record for m in members], names,
                     cache)
            except (BenchError, ValueError, KeyError) as err:
                out.notes.append(f"no shifted D-Ens prediction sets: {err}")
    return out


def stats_frame(data: ShiftSets) -> pd.DataFrame:
    """Per dataset, backbone, row, set, severity (shift: each measure first
    averaged over corruptions per seed), score, measure: mean and population
    std over seeds, and `gap` = coverage - (1 - alpha)."""
    df = data.frame
    cols = ["dataset", "backbone", "row", "method", "variant", "eval_set", "severity", "score",
            "alpha", "measure", "mean", "std", "n", "gap"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    df = df.assign(row=[row_key(m, v) for m, v in zip(df["method"], df["variant"])],
                   severity=df["severity"].fillna(-1), seed=df["seed"].fillna(-1))
    keys = ["dataset", "backbone", "row", "method", "variant", "eval_set", "severity", "score",
            "alpha", "measure"]
    per_seed = df.groupby(keys + ["seed"], sort=True)["value"].mean().reset_index()
    g = per_seed.groupby(keys, sort=True)["value"]
    out = g.agg(mean="mean", n="count").reset_index()
    out["std"] = g.agg(lambda v: float(np.std(v.to_numpy(), ddof=0))).to_numpy()
    out.loc[out["variant"] == "dens", "std"] = np.nan
    out["gap"] = np.where(out["measure"] == "coverage", out["mean"] - (1 - out["alpha"]), np.nan)
    out["severity"] = out["severity"].astype("Int64").replace(-1, pd.NA)
    return out[cols]
