"""Out-of-distribution detection tables (`bench report --ood`).

For every record with an `ood-<source>` evaluation set: the scores of
bench.calib.ood (MSP, entropy, and for a multi-head model the heads' mutual
information) on its test split (in-distribution, predictions.npz through
Record.predictions) and on the set (out-of-distribution), and their AUROC,
AUPR-In/Out and FPR95 (bench.calib.ood.evaluate, scikit-learn's). D-Ens: the
sl1h seeds' logits stacked as the heads of one model, so its MSP and entropy
are those of the ensemble's mean prediction and its MI the members'
disagreement.

One table per dataset x backbone x OOD set: a row per method (table order),
per score AUROC and FPR95, mean ± std over seeds (x100); MI is '–' for a
single-head row. Values cached in OUT/cache/measures.json under
`ood:<set>:<paths>`, keyed by the predictions digests, the sets' recorded
sha256, VERSION and the registered scores' versions.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from tabulate import tabulate

from bench.calib import ood as O
from bench.core.errors import BenchError
from bench.core.paper import DENS, ENSEMBLE_OF
from bench.report.render import latex
from bench.report.numbers.aggregate import write_frame
from bench.report.numbers.cells import Cache
from bench.report.evals.evalsets import OOD_PREFIX, usable
from bench.report.render.tables import (TEX_PM, backbone_name, dataset_name, mean_pm,
                                        method_name, ordered_methods)

VERSION = 1  # of bench.calib.ood's scores and metrics as cached here; bump when they change
SHOWN = ("auroc", "fpr95")  # the table's columns per score (the CSV holds every metric)
MIN_MEMBERS = 2
DASH = "–"  # a score a row cannot have (MI of a single head)
LONG_COLUMNS = ["dataset", "backbone", "method", "variant", "seed", "ood_set", "score", "metric",
                "value"]


def entry(records: list, name: str, cache: Cache) -> dict:
    """score -> metric -> value of the records' logits (one record, or an
    ensemble's members stacked as heads) on set `name`, cached."""
    key_name = f"ood:{name}:" + "|".join(str(r.path) for r in records)
    key = f"v{VERSION}:{O.scores_key()}:" + "|".join(f"{r.digest}/{r.eval_digest(name)}"
                                                     for r in records)
    hit = cache.used.get(key_name) or cache.entries.get(key_name)
    if not (hit and hit.get("key") == key):
        z_in = np.concatenate([r.predictions["test_logits"] for r in records], axis=1)
        z_out = np.concatenate([np.asarray(r.eval_set(name)["logits"]) for r in records], axis=1)
        hit = {"key": key, "value": O.evaluate(z_in, z_out)}
    cache.used[key_name] = hit
    return hit["value"]


@dataclass
class OodReport:
    rows: list = field(default_factory=list)  # LONG_COLUMNS tuples
    notes: list = field(default_factory=list)
    labels: dict = field(default_factory=dict)
    sections: tuple | None = None

    @property
    def frame(self) -> pd.DataFrame:
        """The tidy frame (ood/ood_long.csv): one row per run (or D-Ens) x set x
        score x metric, fractions."""
        df = pd.DataFrame(self.rows, columns=LONG_COLUMNS)
        return df.astype({"seed": "Int64"})  # an integer column with D-Ens's empty seed

    def blocks(self) -> list[tuple]:
        """(dataset, backbone, set) of every table, sorted."""
        return sorted({(r[0], r[1], r[5]) for r in self.rows})


def _add(rep: OodReport, ds, bb, method, variant, seed, name, result: dict) -> None:
    for score, metrics in result.items():
        rep.rows += [(ds, bb, method, variant, seed, name.removeprefix(OOD_PREFIX), score, m, v)
                     for m, v in metrics.items()]


def compute(runs: list, cache: Cache, labels=None, sections=None) -> OodReport:
    """Every intact OOD set of the runs, per run, and D-Ens of the sl1h seeds
    that share a set; damaged or malformed sets named in notes."""
    have, notes = usable(runs, "ood")
    rep = OodReport(notes=notes, labels=dict(labels or {}), sections=sections)
    members = defaultdict(list)
    for r in sorted(have, key=lambda r: (r.dataset, r.backbone, r.method, r.seed)):
        for name in have[r]:
            try:
                _add(rep, r.dataset, r.backbone, r.method, "plain", r.seed, name,
                     entry([r.record], name, cache))
            except (BenchError, ValueError, KeyError) as err:
                rep.notes.append(f"skipped OOD set {name} of {r.path}: {err}")
                continue
            members[(r.dataset, r.backbone, r.method, r.chash, name)].append(r)
    for (ds, bb, method, _, name), rs in members.items():
        if method == ENSEMBLE_OF and len(rs) >= MIN_MEMBERS:
            try:
                _add(rep, ds, bb, DENS, "dens", None, name, entry([r.record for r in rs], name,
                                                                  cache))
            except (BenchError, ValueError) as err:
                rep.notes.append(f"{ds}/{bb}: no D-Ens for OOD set {name}: {err}")
    return rep


def table_frame(rep: OodReport) -> pd.DataFrame:
    """Mean and population std over seeds (ddof=0) per dataset, backbone, set,
    method, score and metric (ood/ood_table.csv)."""
    df = rep.frame
    if df.empty:
        return pd.DataFrame(columns=[*LONG_COLUMNS[:4], "ood_set", "score", "metric", "mean",
                                     "std", "n"])
    keys = ["dataset", "backbone", "ood_set", "method", "variant", "score", "metric"]
    g = df.groupby(keys, sort=True)["value"]
    out = g.agg(mean="mean", n="count").reset_index()
    out["std"] = g.agg(lambda v: float(np.std(v.to_numpy(), ddof=0))).to_numpy()
    out.loc[out["variant"] == "dens", "std"] = np.nan  # one number
    return out


def _cell(sub: pd.DataFrame, method: str, score: str, metric: str) -> tuple | None:
    hit = sub[(sub["method"] == method) & (sub["score"] == score) & (sub["metric"] == metric)]
    if hit.empty:
        return None
    row = hit.iloc[0]
    return float(row["mean"]), (None if pd.isna(row["std"]) else float(row["std"]))


def table_rows(rep: OodReport, stats: pd.DataFrame, block) -> tuple[list[str], list[list]]:
    """(row labels, per row per score x SHOWN: (mean, std) or None)."""
    ds, bb, name = block
    sub = stats[(stats["dataset"] == ds) & (stats["backbone"] == bb) & (stats["ood_set"] == name)]
    order = [m for sec in ordered_methods(set(sub["method"]), rep.sections) for m in sec]
    cells = [[_cell(sub, m, s.name, metric) for s in O.all_scores() for metric in SHOWN]
             for m in order]
    return [method_name(m, rep.labels) for m in order], cells


def _text(c, pm: str = " ± ") -> str:
    return DASH if c is None else mean_pm(*c, pm)


def heads(tex: bool) -> list[str]:
    metric = {m.name: m for m in O.METRICS}
    arrow = (lambda up: r"$^\uparrow$" if up else r"$_\downarrow$") if tex else \
        (lambda up: "↑" if up else "↓")
    return [f"{s.head} {metric[m].head}{arrow(metric[m].higher)}" for s in O.all_scores()
            for m in SHOWN]


def markdown(rep: OodReport, stats: pd.DataFrame, block) -> str:
    names, cells = table_rows(rep, stats, block)
    body = [[n, *(_text(c) for c in row)] for n, row in zip(names, cells)]
    return tabulate(body, headers=["Method", *heads(False)], tablefmt="github",
                    disable_numparse=True) + "\n\n" + NOTE


NOTE = ("x100, mean ± std over seeds (D-Ens: one number). AUROC: area under the ROC curve "
        "of the score, in-distribution (the test split) positive; FPR95: share of OOD images "
        "taken as in-distribution where 95% of the test split is; MI: the heads' mutual "
        "information (multi-head models; D-Ens: its members'), – for one head.")


TEX_NOTE = latex.tex_escape(NOTE).replace("±", "$\\pm$").replace("–", "--")


def fragment(rep: OodReport, stats: pd.DataFrame, block) -> str:
    """The LaTeX table float of one dataset x backbone x set, fitted to the line."""
    ds, bb, name = block
    names, cells = table_rows(rep, stats, block)
    ncol = len(O.all_scores()) * len(SHOWN)
    lines = [f"\\begin{{tabular}}{{l {'c' * ncol}}}", "\\toprule",
             "& " + " & ".join(f"\\multicolumn{{{len(SHOWN)}}}{{c}}{{\\textbf{{{s.head}}}}}"
                               for s in O.all_scores()) + " \\\\",
             " ".join(f"\\cmidrule(lr){{{2 + i * len(SHOWN)}-{1 + (i + 1) * len(SHOWN)}}}"
                      for i in range(len(O.all_scores()))),
             "Method & " + " & ".join(h.split(" ", 1)[1] for h in heads(True)) + " \\\\",
             "\\midrule"]
    lines += [f"\\textbf{{{latex.tex_escape(n)}}} & "
              + " & ".join(_text(c, TEX_PM) if c else "--" for c in row) + " \\\\"
              for n, row in zip(names, cells)]
    lines += ["\\bottomrule", "\\end{tabular}"]
    title = (f"Out-of-distribution detection on the \\textbf{{{latex.tex_escape(dataset_name(ds, rep.labels))}"
             f" dataset}}, {latex.tex_escape(backbone_name(bb, rep.labels))}, against "
             f"\\textbf{{{latex.tex_escape(name)}}}")
    return latex.eval_float(lines, "3pt", TEX_NOTE, title, f"{ds}_{bb}_ood_{name}")


def write(rep: OodReport, out: Path) -> tuple[list[Path], list[tuple]]:
    """OUT/tables/ood_<ds>_<bb>_<set>.{tex,md} (+ _doc.tex), OUT/ood/ood_long.csv,
    OUT/ood/ood_table.csv; returns (files, (title, Markdown) sections)."""
    stats = table_frame(rep)
    tdir = out / "tables"
    written, sections = [], []
    for block in rep.blocks():
        ds, bb, name = block
        stem = f"ood_{ds}_{bb}_{name}"
        md = markdown(rep, stats, block)
        written += latex.write_table(tdir, stem, fragment(rep, stats, block), md)
        sections.append((f"{dataset_name(ds, rep.labels)} / {backbone_name(bb, rep.labels)}: "
                         f"out-of-distribution detection against {name}", md))
    written.append(write_frame(out / "ood" / "ood_long.csv", rep.frame))
    written.append(write_frame(out / "ood" / "ood_table.csv", stats))
    return written, sections
