"""`bench report`: run records -> CSV, LaTeX / Markdown / terminal tables,
reliability diagrams, significance tests and a critical-difference diagram.

Everything is computed from saved records (no dataset, no GPU). Outputs:
  OUT/runs.csv, OUT/groups.csv, OUT/failed_runs.csv   tidy data
  OUT/tables/<dataset>_{main,std,ts}.tex (+ _doc.tex wrappers, .md)
  OUT/figures/reliability_<dataset>_<backbone>[_seed<k>].{png,pdf}
  OUT/figures/cd_<metric>.{png,pdf}, OUT/stats/*.csv
  OUT/report.md                                      everything in one page
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from tqdm import tqdm

from bench.report import aggregate, curves
from bench.report import latex
from bench.report import stats
from bench.core import store
from bench.report import textables
from bench.report import unfinished
from bench.sweep.runstate import live_holder
from bench.core.calibration import ensemble_probs
from bench.report.derived import DENS, ENSEMBLE_OF, has_ensemble
from bench.core.errors import BenchError
from bench.core.seeds import parse_seeds
from bench.core.metrics import head_probs
from bench.report.tables import (CAPTIONS, METRIC_HEADS, REFERENCE, backbone_name, build_table,
                                 dataset_name, method_name, missing_notes, ordered_methods)

METRIC_CHOICES = tuple(m for m in METRIC_HEADS if m != "acc")

KINDS = ("main", "std", "ts")
FRIEDMAN_METRICS = (("rank", False), ("acc", True), ("ece", False), ("nll", False))


def _csv_list(values) -> list[str] | None:
    items = [v.strip() for text in values or [] for v in text.split(",") if v.strip()]
    return items or None


def parse_metrics(text: str | None) -> tuple:
    """'ece,aece,smece' -> ('ece', 'aece', 'smece'); None -> () (the paper's columns)."""
    if text is None:
        return ()
    items = tuple(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    bad = [m for m in items if m not in METRIC_CHOICES]
    if bad or not items:
        raise BenchError(f"--metrics '{text}': unknown {', '.join(bad) or 'empty list'}; "
                         f"allowed: {', '.join(METRIC_CHOICES)}")
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


def add_parser(sub) -> None:
    p = sub.add_parser("report", help="tables (LaTeX/Markdown/CSV), reliability diagrams, "
                                      "significance tests from run records")
    p.add_argument("--results", default="results", help="run-record root")
    p.add_argument("--out", default="reports", help="output folder")
    for flag in ("dataset", "backbone", "method"):
        p.add_argument(f"--{flag}", action="append", help=f"only these {flag}s (comma list)")
    p.add_argument("--config", help="which config where a method has several: comma-separated "
                                    "PREFIX, METHOD=PREFIX, or a rule (latest, most-seeds); "
                                    "docs/reports.md")
    p.add_argument("--seeds", help="seeds asked, as in bench run: N (0..N-1), A-B or a comma "
                                   "list; default: every seed seen")
    p.add_argument("--order", help="rows, e.g. 'sl1h,ls;dens;2hml,4hml' (';' = double rule); "
                                   "default: the paper's order; an explicit order shows only "
                                   "the methods it names")
    for kind in KINDS:
        p.add_argument(f"--caption-{kind}", help=f"LaTeX caption of the {kind} table "
                                                 "({dataset} and {n} are filled in; "
                                                 "LaTeX braces are kept)")
    p.add_argument("--cost", action="store_true", help="add params / train s / train img/s / infer ms columns")
    p.add_argument("--significance", action="store_true",
                   help="mark cells that differ from SL1H (paired test over seeds)")
    p.add_argument("--test", default="auto", choices=stats.TESTS,
                   help="paired test: auto = t-test below 6 seeds, Wilcoxon from 6")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="significance level of --significance and of the Nemenyi critical "
                        "difference in the CD diagrams, in (0, 1) (default 0.05)")
    p.add_argument("--per-seed", action="store_true", help="reliability diagrams per seed too")
    p.add_argument("--compare", choices=("paper",),
                   help="paper: our means against the published ones (z, |z| > 2 flagged), "
                        "the paper's claims tested on these runs (OUT/compare/)")
    p.add_argument("--metrics", help="table columns after ACC, comma list of "
                                     f"{', '.join(METRIC_CHOICES)}; default: the paper's "
                                     "(ece,nll); Rank averages the columns shown")
    p.add_argument("--ci", action="store_true",
                   help="95%% intervals in the std table in place of ± std (over seeds; "
                        "D-Ens and one-seed cells: bootstrap over test samples)")
    p.add_argument("--no-ts", action="store_true", help="skip temperature scaling")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=report)


# ---------------------------------------------------------------- data


def load(args):
    """(runs of the chosen configs, failures of every config, notes). Damaged
    records are skipped with a note and listed as failures."""
    damaged: list = []
    runs = aggregate.load_runs(args.results, _csv_list(args.dataset), _csv_list(args.backbone),
                               _csv_list(args.method), damaged=damaged)
    if args.seeds is not None:
        wanted = set(parse_seeds(args.seeds))
        runs = [r for r in runs if r.seed in wanted]
    done = {(r.dataset, r.backbone, r.method, r.chash, str(r.seed)) for r in runs}
    # a failure that a later rerun replaced by a finished record is history, not news
    found = aggregate.find_failures(args.results) + unfinished.unfinished_runs(
        args.results, live=live_holder)  # a run training now is not unfinished
    failures = [f for f in found
                if (f["dataset"], f["backbone"], f["method"], f["config_hash"],
                    str(f["seed"])) not in done] + damaged
    notes = [f"skipped damaged record {f['path']}: {f['reason'].removeprefix('damaged: ')}"
             for f in damaged]
    if not runs:
        found = sorted({p.relative_to(args.results).parts[0] for p in
                        store.iter_records(args.results)}) if Path(args.results).exists() else []
        raise BenchError(f"no finished run records under {args.results}/ matching the filters "
                         f"(datasets with records: {', '.join(found) or 'none'}; "
                         f"{len(failures)} failed runs)")
    runs, more = aggregate.select_configs(runs, args.config)
    return runs, failures, notes + more + setup_notes(runs)


def setup_notes(runs) -> list[str]:
    """A note per dataset whose records differ in what changes numbers without
    changing the config hash (torch threads, device, versions)."""
    from bench.core.provenance import mixed_setup

    notes = []
    for ds in sorted({r.dataset for r in runs}):
        provs = [store.read_json(r.path / "config.json").get("provenance", {})
                 for r in runs if r.dataset == ds]
        mixed = mixed_setup(provs)
        if mixed:
            notes.append(f"{ds}: the records in these tables were made with different "
                         f"{'; '.join(mixed)} (config.json provenance); numbers can differ "
                         "for that reason alone")
    return notes


def significance(groups: dict, test: str, alpha: float) -> tuple[dict, list[list]]:
    """(dataset, backbone, row) -> {metric: p < alpha} against SL1H; CSV rows."""
    marks, rows = {}, []
    for (ds, bb, key), g in sorted(groups.items()):
        # TS-table rows are compared with that table's SL1H row (logits averaged).
        ref_key = f"{REFERENCE}@ts-base" if g.variant in ("ts", "ts-base") else REFERENCE
        ref = groups.get((ds, bb, ref_key))
        if ref is None or key == ref_key or g.single:
            continue
        res = stats.paired_vs_reference(g.values, g.seeds, ref.values, ref.seeds, test=test)
        marks[(ds, bb, key)] = {m: r is not None and r.p < alpha for m, r in res.items()}
        for m, r in res.items():
            if r is not None:
                rows.append([ds, bb, key, m, r.test, r.n, r.statistic, r.p, r.p < alpha])
    return marks, rows


# ---------------------------------------------------------------- tables


def make_tables(args, groups, expected, sig_marks, sig_name) -> list:
    sections = parse_sections(args.order)
    tables = []
    for ds in sorted(expected):
        sig = {(b, k): v for (d, b, k), v in sig_marks.items() if d == ds}
        for kind in KINDS:
            if kind == "ts" and args.no_ts:
                continue
            caption = getattr(args, f"caption_{kind}") or CAPTIONS[kind]
            t = build_table(kind, ds, groups, expected[ds], _csv_list(args.backbone), sections,
                            cost=args.cost and kind != "ts", sig=sig if args.significance else None,
                            sig_test=sig_name, caption=caption,
                            metrics=parse_metrics(args.metrics), ci=args.ci)
            if t is not None:
                tables.append(t)
    return tables


def write_tables(tables, out: Path) -> list[Path]:
    tdir = out / "tables"
    tdir.mkdir(parents=True, exist_ok=True)
    written = []
    for t in tables:
        name = f"{t.dataset}_{t.kind}"
        missing = missing_notes(t)
        (tdir / f"{name}.tex").write_text(latex.fragment(t, missing))
        (tdir / f"{name}_doc.tex").write_text(latex.document([name]))
        (tdir / f"{name}.md").write_text(textables.render(t, markdown=True, missing=missing) + "\n")
        written += [tdir / f"{name}.tex", tdir / f"{name}_doc.tex", tdir / f"{name}.md"]
    names = [f"{t.dataset}_{t.kind}" for t in tables]
    (tdir / "all_tables.tex").write_text(latex.document(names))
    return written + [tdir / "all_tables.tex"]


# ---------------------------------------------------------------- figures


def _probs(run) -> tuple:
    p = store.load_predictions(run.path)
    return p["test_logits"], p["test_labels"]


def reliability_panels(runs, seed=None, sections=None) -> list[tuple]:
    """(label, probs, labels) per method of one dataset/backbone, pooled over
    seeds (or one seed), in table order, with D-Ens when pooled."""
    by_method: dict = {}
    for r in runs:
        if seed is None or r.seed == seed:
            by_method.setdefault(r.method, []).append(_probs(r))
    order = [m for sec in ordered_methods(set(by_method) | {DENS}, sections) for m in sec]
    members = by_method.get(ENSEMBLE_OF, [])
    panels = []
    for m in order:
        if m == DENS and seed is None and has_ensemble(ENSEMBLE_OF, len(members)):
            panels.append((method_name(m), ensemble_probs([lg for lg, _ in members]),
                           members[0][1]))
        elif m in by_method:
            items = by_method[m]
            panels.append((method_name(m), np.concatenate([head_probs(lg) for lg, _ in items]),
                           np.concatenate([y for _, y in items])))
    return panels


def make_reliability(runs, out: Path, per_seed: bool, progress: bool,
                     sections=None) -> list[Path]:
    from bench.report import calplots, plots  # matplotlib: only when figures are drawn (CLI start-up)

    cells: dict = {}
    for r in runs:
        cells.setdefault((r.dataset, r.backbone), []).append(r)
    written = []
    for (ds, bb), rs in tqdm(sorted(cells.items()), desc="reliability", disable=not progress):
        seeds = [None] + (sorted({r.seed for r in rs}) if per_seed else [])
        for seed in seeds:
            what = "pooled over seeds" if seed is None else f"seed {seed}"
            panels = reliability_panels(rs, seed, sections)
            name = f"{dataset_name(ds)} / {backbone_name(bb)} ({what})"
            stem = f"{ds}_{bb}" + ("" if seed is None else f"_seed{seed}")
            written += plots.save(plots.reliability_figure(panels, name),
                                  out / "figures" / f"reliability_{stem}")
            written += plots.save(calplots.smooth_reliability_figure(panels, f"{name}, smoothed"),
                                  out / "figures" / f"smooth_reliability_{stem}")
    return written


def make_bin_sensitivity(groups: dict, out: Path, sections=None) -> list[Path]:
    """ECE against the number of bins, per dataset and backbone, one line per
    table row of the main table (trained rows and D-Ens)."""
    from bench.report import calplots, plots

    cells: dict = {}
    for (ds, bb, key), g in groups.items():
        if g.variant in ("seeds", "dens"):
            cells.setdefault((ds, bb), {})[g.row_method] = g
    written = []
    for (ds, bb), rows in sorted(cells.items()):
        order = [m for sec in ordered_methods(set(rows), sections) for m in sec]
        data = calplots.bin_sensitivity([(method_name(m), rows[m]) for m in order])
        fig = calplots.bin_sensitivity_figure(
            data, f"{dataset_name(ds)} / {backbone_name(bb)}: ECE against bin count")
        written += plots.save(fig, out / "figures" / f"ece_bins_{ds}_{bb}")
    return written


def make_friedman(tables, out: Path, alpha: float) -> tuple[list[Path], list[list], list[str]]:
    from bench.report import plots  # see make_reliability

    mains = [t for t in tables if t.kind == "main"]
    written, rows, notes = [], [], []
    for metric, higher in FRIEDMAN_METRICS:
        table = {}
        for t in mains:
            for r in t.rows:
                for b in t.backbones:
                    c = t.cells.get((r.key, b))
                    if c is not None:
                        table[((t.dataset, b), r.label)] = c.rank if metric == "rank" else c.mean[metric]
        labels = list(dict.fromkeys(r.label for t in mains for r in t.rows))
        methods, blocks, scores = stats.complete_blocks(table, labels)
        if len(methods) < 3 or len(blocks) < 2:
            notes.append(f"no Friedman test / CD diagram: needs >= 3 methods present in >= 2 "
                         f"(dataset, backbone) blocks; have {len(methods)} methods in "
                         f"{len(blocks)} blocks")
            break  # the same for every metric
        f = stats.friedman(scores, methods, ["/".join(b) for b in blocks], higher, alpha)
        rows.append([metric, len(blocks), len(methods), f.statistic, f.p, f.cd,
                     " ".join(f"{m}={r:.3f}" for m, r in zip(f.methods, f.avg_ranks))])
        fig = plots.cd_figure(list(f.methods), list(f.avg_ranks), f.cd,
                              f"{metric}: Friedman p = {f.p:.3g}, Nemenyi CD (alpha {alpha}) "
                              f"over {len(blocks)} blocks")
        written += plots.save(fig, out / "figures" / f"cd_{metric}")
    return written, rows, notes


# ---------------------------------------------------------------- command


def report(args) -> int:
    from bench.report import measures
    from bench.report.markdown import report_markdown

    if not 0 < args.alpha < 1:
        raise BenchError(f"--alpha {args.alpha}: a significance level must be > 0 and < 1 "
                         "(e.g. 0.05)")
    if not str(args.results).strip():
        store.require_results_dir(args.results)  # '' would read the current directory
    out = store.require_writable_dir(args.out, "--out")
    parse_metrics(args.metrics)  # a bad --metrics stops before anything is read or written
    runs, failures, notes = load(args)
    check_order(args.order, {r.method for r in runs})
    out.mkdir(parents=True, exist_ok=True)
    expected = aggregate.expected_seeds(runs)
    if args.seeds is not None:  # every seed asked counts, found or not
        expected = {ds: tuple(parse_seeds(args.seeds)) for ds in expected}
    n_cells = len({(r.dataset, r.backbone, r.method) for r in runs})
    with tqdm(total=n_cells, desc="aggregate", disable=args.no_progress) as bar:
        groups, more = aggregate.build_groups(runs, with_ts=not args.no_ts, progress=bar)
    notes += more
    cache = measures.cache_for(out)
    per_run = measures.attach(groups, runs, cache, with_ts=not args.no_ts)
    sig_marks, sig_rows = significance(groups, args.test, args.alpha)
    sig_name = " / ".join(sorted({r[4] for r in sig_rows})) or None  # which test(s) ran
    few = sorted({r[5] for r in sig_rows if r[5] < stats.MIN_SEEDS_NOTE})
    if args.significance and few:
        notes.append(f"caution: some paired tests compare only {', '.join(map(str, few))} "
                     f"seed(s); below {stats.MIN_SEEDS_NOTE} a test has almost no power and a "
                     "marked difference is weak evidence")
    tables = make_tables(args, groups, expected, sig_marks, sig_name)
    written = [measures.write(measures.runs_frame(runs, per_run), out / "runs.csv"),
               measures.write(measures.groups_frame(groups, expected), out / "groups.csv"),
               cache.save(),
               aggregate.write_failures_csv(failures, out / "failed_runs.csv"),
               aggregate.write_csv(out / "stats" / "paired_tests.csv",
                          ["dataset", "backbone", "row", "metric", "test", "n", "statistic", "p",
                           "significant"], sig_rows)]
    written += write_tables(tables, out)
    figures = []
    if not args.no_plots:
        figures += make_reliability(runs, out, args.per_seed, not args.no_progress,
                                    parse_sections(args.order))
        figures += make_bin_sensitivity(groups, out, parse_sections(args.order))
        figures += curves.write_curves(runs, out / "figures", method_name,
                                       lambda ds, bb: f"{dataset_name(ds)} / {backbone_name(bb)}")
        cd_files, f_rows, f_notes = make_friedman(tables, out, args.alpha)
        figures += cd_files
        notes += f_notes
        written.append(aggregate.write_csv(out / "stats" / "friedman.csv",
                                  ["metric", "blocks", "methods", "chi2", "p", "cd", "avg_ranks"],
                                  f_rows))
    if args.compare == "paper":
        from bench.report import compare, comparetables
        files, line = comparetables.write(compare.rows_from_groups(groups), out, not args.no_plots)
        written += files
        notes.append(line)
    md = out / "report.md"
    md.write_text(report_markdown(tables, failures, notes, figures, out))
    written += figures + [md]
    _print_summary(tables, failures, notes, written, runs)
    return 0


def _print_summary(tables, failures, notes, written, runs) -> None:
    for t in tables:
        if t.kind == "main":
            print(f"\n{dataset_name(t.dataset)} (test set, x100)")
            print(textables.render(t, missing=missing_notes(t)))
    for n in notes:
        print(f"note: {n}")
    if failures:
        print(f"\n{len(failures)} failed or unfinished runs (see failed_runs.csv):")
        for f in failures:
            print(f"  {f['dataset']}/{f['backbone']}/{f['method']} seed {f['seed']}: {f['reason']}")
    print(f"\n{len(runs)} runs, {len(tables)} tables, {len(written)} files:")
    for p in written:
        print(f"  {p}")
