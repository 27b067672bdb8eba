"""The report's figures from records and cells: reliability diagrams (per
dataset x backbone, pooled over seeds or per seed), ECE against the bin
count, and the Friedman / Nemenyi critical-difference diagrams.

matplotlib is imported only when a figure is drawn (bench.report.plotting.
plots.new_figure: the `bench` command's start-up stays light). `names` is
the report's display names (--label and the recorded dataset names), passed
to bench.report.render.tables' name functions.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from tqdm import tqdm

from bench.core.paper import DENS, ENSEMBLE_OF
from bench.calib import measures as M
from bench.calib import variants as V
from bench.report.numbers import stats
from bench.report.numbers.aggregate import has_ensemble
from bench.report.plotting import calplots, plots
from bench.report.render.tables import backbone_name, dataset_name, method_name, ordered_methods

def friedman_metrics() -> tuple:
    """(column, higher is better) the Friedman tests and CD diagrams cover:
    Rank, then the paper's measures."""
    return (("rank", False), *((m, M.get(m).higher) for m in M.paper()))


def block_title(ds: str, bb: str, names: dict | None = None) -> str:
    return f"{dataset_name(ds, names)} / {backbone_name(bb, names)}"


def reliability_panels(runs, seed=None, sections=None, names=None) -> list[tuple]:
    """(label, probs, labels) per method of one dataset/backbone, pooled over
    seeds (or one seed), in table order, with D-Ens when pooled: the plain and
    dens variants' probabilities (bench.calib.variants), as in the tables."""
    by_method: dict = {}
    for r in runs:
        if seed is None or r.seed == seed:
            by_method.setdefault(r.method, []).append(r)
    order = [m for sec in ordered_methods(set(by_method) | {DENS}, sections) for m in sec]
    members = by_method.get(ENSEMBLE_OF, [])
    panels = []
    for m in order:
        if m == DENS and seed is None and has_ensemble(ENSEMBLE_OF, len(members)):
            probs, labels, _ = V.DENS.apply([r.record.predictions for r in members])
            panels.append((method_name(m, names), probs, labels))
        elif m in by_method:
            out = [V.PLAIN.apply(r.record.predictions) for r in by_method[m]]
            panels.append((method_name(m, names), np.concatenate([p for p, _, _ in out]),
                           np.concatenate([y for _, y, _ in out])))
    return panels


def reliability_figures(runs, dataset: str, backbone: str, seed=None, sections=None,
                        names=None) -> tuple:
    """(binned, smoothed) reliability figures of one dataset x backbone, pooled
    over seeds (seed None) or of one seed."""

    rs = [r for r in runs if (r.dataset, r.backbone) == (dataset, backbone)]
    what = "pooled over seeds" if seed is None else f"seed {seed}"
    panels = reliability_panels(rs, seed, sections, names)
    name = f"{block_title(dataset, backbone, names)} ({what})"
    return (plots.reliability_figure(panels, name),
            calplots.smooth_reliability_figure(panels, f"{name}, smoothed"))


def make_reliability(runs, out: Path, per_seed: bool, progress: bool,
                     sections=None, names=None) -> list[Path]:

    cells: dict = {}
    for r in runs:
        cells.setdefault((r.dataset, r.backbone), []).append(r)
    written = []
    for (ds, bb), rs in tqdm(sorted(cells.items()), desc="reliability", disable=not progress):
        seeds = [None] + (sorted({r.seed for r in rs}) if per_seed else [])
        for seed in seeds:
            stem = f"{ds}_{bb}" + ("" if seed is None else f"_seed{seed}")
            binned, smooth = reliability_figures(rs, ds, bb, seed, sections, names)
            written += plots.save(binned, out / "figures" / f"reliability_{stem}")
            written += plots.save(smooth, out / "figures" / f"smooth_reliability_{stem}")
    return written


def make_bin_sensitivity(cells: dict, out: Path, sections=None, names=None) -> list[Path]:
    """ECE against the number of bins, per dataset and backbone, one line per
    table row of the main table (trained rows and D-Ens)."""

    blocks: dict = {}
    for (ds, bb, key), g in cells.items():
        if g.variant in (V.PLAIN, V.DENS):
            blocks.setdefault((ds, bb), {})[g.row_method] = g
    written = []
    for (ds, bb), rows in sorted(blocks.items()):
        order = [m for sec in ordered_methods(set(rows), sections) for m in sec]
        data = calplots.bin_sensitivity([(method_name(m, names), rows[m]) for m in order])
        fig = calplots.bin_sensitivity_figure(
            data, f"{block_title(ds, bb, names)}: ECE against bin count")
        written += plots.save(fig, out / "figures" / f"ece_bins_{ds}_{bb}")
    return written


def friedman_table(tables, metric: str) -> tuple[dict, list[str]]:
    """{((dataset, backbone), row label): score} of the main tables' re-run
    rows (Rank or a metric's mean), and the row labels in table order."""
    mains = [t for t in tables if t.spec.headline]
    table = {}
    for t in mains:
        for r in (r for r in t.rows if not r.copied):  # copied rows: no blocks of runs
            for b in t.backbones:
                c = t.cells.get((r.key, b))
                if c is not None:
                    table[((t.dataset, b), r.label)] = c.rank if metric == "rank" else c.mean[metric]
    labels = list(dict.fromkeys(r.label for t in mains for r in t.rows if not r.copied))
    return table, labels


def friedman_tests(tables, alpha: float) -> tuple[list, list[list], list[str]]:
    """The Friedman test and Nemenyi CD over (dataset, backbone) blocks per
    friedman_metrics() entry: ([(metric, Friedman)], friedman.csv rows, notes)."""
    results, rows, notes = [], [], []
    for metric, higher in friedman_metrics():
        methods, blocks, scores = stats.complete_blocks(*friedman_table(tables, metric))
        if len(methods) < 3 or len(blocks) < 2:
            notes.append(f"no Friedman test / CD diagram: needs >= 3 methods present in >= 2 "
                         f"(dataset, backbone) blocks; have {len(methods)} methods in "
                         f"{len(blocks)} blocks")
            break  # the same for every metric
        f = stats.friedman(scores, methods, ["/".join(b) for b in blocks], higher, alpha)
        results.append((metric, f))
        rows.append([metric, len(blocks), len(methods), f.statistic, f.p, f.cd,
                     " ".join(f"{m}={r:.3f}" for m, r in zip(f.methods, f.avg_ranks))])
    return results, rows, notes


def cd_figure(metric: str, f, alpha: float):
    """The critical-difference diagram of one friedman_tests result."""

    return plots.cd_figure(list(f.methods), list(f.avg_ranks), f.cd,
                           f"{metric}: Friedman p = {f.p:.3g}, Nemenyi CD (alpha {alpha}) "
                           f"over {len(f.blocks)} blocks")


def make_cd(results, out: Path, alpha: float) -> list[Path]:
    """OUT/figures/cd_<metric>.{png,pdf} per friedman_tests result."""

    written = []
    for metric, f in results:
        written += plots.save(cd_figure(metric, f, alpha), out / "figures" / f"cd_{metric}")
    return written
