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

from tqdm import tqdm

from bench.report import aggregate, copied, curves, latex, names, paired, stats, textables
from bench.report import figures as figs
from bench.core import store
from bench.report import unfinished
from bench.sweep.runstate import live_holder
from bench.core.paper import DENS
from bench.core.errors import BenchError
from bench.core.seeds import parse_seeds
from bench.report.tables import (CAPTIONS, METRIC_HEADS, REFERENCE, build_table, dataset_name,
                                 method_name, missing_notes)

METRIC_CHOICES = tuple(m for m in METRIC_HEADS if m != "acc")

KINDS = ("main", "std", "ts")


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
                                    "METHOD=PREFIX:LABEL (repeatable for a method): each such "
                                    "config its own row, an ablation; docs/reports.md")
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
                   help="mark cells that differ from the reference (paired test over seeds)")
    p.add_argument("--significance-ref", default=REFERENCE, metavar="METHOD",
                   help=f"the reference of the paired tests (default {REFERENCE})")
    p.add_argument("--label", action="append", metavar="KEY=TEXT",
                   help="display name of a method, dataset or backbone, e.g. "
                        "--label confpen='CP (ours)' (repeatable)")
    p.add_argument("--no-gap", action="store_true", help="leave out the Gap column")
    p.add_argument("--published-rows", action="store_true",
                   help="add the paper's published rows (marked, not re-run) to the tables "
                        "of its dataset x backbone blocks, for methods without records here")
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
        found = store.datasets_under(args.results)
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


# ---------------------------------------------------------------- tables


def make_tables(args, groups, expected, sig_marks, sig_name, labels=None) -> list:
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
                            metrics=parse_metrics(args.metrics), ci=args.ci, labels=labels,
                            gap=not args.no_gap, reference=args.significance_ref)
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
    if args.published_rows:
        copied.check_metrics(parse_metrics(args.metrics))
    runs, failures, notes = load(args)
    check_order(args.order, {r.method for r in runs})
    ablation = {aggregate.ablation_key(m, p): label
                for m, rows in aggregate.parse_ablation(args.config).items()
                for p, label in rows.items()}
    labels, more = names.report_names(runs, args.label, ablation)
    notes += more
    if args.significance:
        paired.check_reference(args.significance_ref, {r.method for r in runs})
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
    sig_marks, sig_rows = paired.significance(groups, args.test, args.alpha,
                                              args.significance_ref)
    sig_name = " / ".join(sorted({r[4] for r in sig_rows})) or None  # which test(s) ran
    few = sorted({r[5] for r in sig_rows if r[5] < stats.MIN_SEEDS_NOTE})
    if args.significance and few:
        notes.append(f"caution: some paired tests compare only {', '.join(map(str, few))} "
                     f"seed(s); below {stats.MIN_SEEDS_NOTE} a test has almost no power and a "
                     "marked difference is weak evidence")
    pub = copied.published_groups(groups, not args.no_ts) if args.published_rows else {}
    if args.published_rows and not pub:
        notes.append(copied.NONE_ADDED)
    shown = {**groups, **pub}
    tables = make_tables(args, shown, expected, sig_marks, sig_name, labels)
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
        sections = parse_sections(args.order)
        figures += figs.make_reliability(runs, out, args.per_seed, not args.no_progress,
                                            sections, labels)
        figures += figs.make_bin_sensitivity(groups, out, sections, labels)
        figures += curves.write_curves(runs, out / "figures",
                                       lambda m: method_name(m, labels),
                                       lambda ds, bb: figs.block_title(ds, bb, labels))
        cd_files, f_rows, f_notes = figs.make_friedman(tables, out, args.alpha)
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
    _print_summary(tables, failures, notes, written, runs, labels)
    return 0


def _print_summary(tables, failures, notes, written, runs, labels=None) -> None:
    for t in tables:
        if t.kind == "main":
            print(f"\n{dataset_name(t.dataset, labels)} (test set, x100)")
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
