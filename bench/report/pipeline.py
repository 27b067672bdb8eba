"""`build(results_dir, options) -> Report` (public as bench.report.build):
the whole report computed from saved run records (no dataset, no GPU),
nothing written.

The steps, in order: read the finished records that match the filters and
the failed or unfinished runs; pick the config of each row (--config);
display names; one cell per (dataset, backbone, row) with its per-seed
values, the deep ensemble and temperature-scaled rows; the extra measures
from the saved logits (cached); the paired significance tests; the
published rows (--published-rows); the tables; the Friedman tests over the
main tables; the comparison with the paper (--compare paper). Report.write
(bench.report.document) then writes what `bench report` writes.
"""
from __future__ import annotations


from collections import defaultdict

import pandas as pd
from tqdm import tqdm

from bench.core import codeunits, store
from bench.core.errors import BenchError
from bench.core.provenance import mixed_setup
from bench.report.document import Report
from bench.report.evals import evalsets, ood, sets, setshift, shift, shifttables
from bench.report.numbers import aggregate, configs, names, paired, stats, unfinished
from bench.report.numbers import cells as cells_mod
from bench.report.options import ReportOptions, check_order
from bench.report.paper import comparable, compare, copied
from bench.report.plotting import figures as figs
from bench.report.render import kinds
from bench.report.render.footnotes import thin_note, validation_note
from bench.report.render.tables import TableSpec, backbone_name, build_table, columns


FRIEDMAN_COLUMNS = ["metric", "blocks", "methods", "chi2", "p", "cd", "avg_ranks"]


def build(results_dir="results", options: ReportOptions | None = None, *,
          cache_dir=None, live=None) -> Report:
    """The report of the records under `results_dir`. `cache_dir`: a report
    folder whose cache/measures.json holds measures computed before (the
    command passes its --out); without it the measures are computed afresh.
    `live`: record -> who trains it now, or None (bench.sweep.runstate's
    live_holder, which `bench report` and bench.api pass); a run in training
    is then not listed as unfinished."""
    opts = options or ReportOptions()
    opts.validate()
    runs, failures, notes = load(results_dir, opts, live)
    for kind in ("shift", "ood"):  # a flag with no set at all stops here, nothing written
        if getattr(opts, kind):
            evalsets.require(runs, kind, results_dir)
            evalsets.require_same_images(runs, kind)
    check_order(opts.order, {r.method for r in runs})
    ablation = {configs.ablation_key(m, p): label
                for m, rows in configs.parse_ablation(opts.config).items()
                for p, label in rows.items()}
    labels, more = names.report_names(runs, list(opts.label or ()), ablation)
    notes += more
    if opts.significance:
        paired.check_reference(opts.significance_ref, {r.method for r in runs})
    expected = aggregate.expected_seeds(runs)
    if opts.seeds is not None:  # every seed asked counts, found or not
        expected = {ds: tuple(opts.seed_list) for ds in expected}
    n_cells = len({(r.dataset, r.backbone, r.method) for r in runs})
    cache = cells_mod.cache_for(cache_dir) if cache_dir else cells_mod.Cache()
    with tqdm(total=n_cells, desc="aggregate", disable=opts.no_progress) as bar:
        cells, more = aggregate.build_cells(runs, with_ts=not opts.no_ts, progress=bar,
                                            cache=cache, variants=opts.variant_list)
    notes += more
    marks, tests = paired.significance(cells, opts.test, opts.alpha, opts.significance_ref)
    sig = pd.DataFrame(tests, columns=list(paired.COLUMNS))
    notes += _significance_notes(opts, sig)
    pub = copied.published_cells(cells, not opts.no_ts) if opts.published_rows else {}
    if opts.published_rows and not pub:
        notes.append(copied.NONE_ADDED)
    unlike = _unlike(opts, runs, pub, labels)
    test_names = " / ".join(sorted(set(sig["test"]))) or None  # which test(s) ran
    fit_notes = fitting_notes(runs, opts)
    tables = make_tables(opts, {**cells, **pub}, expected, marks, test_names, labels, unlike,
                         fit_notes)
    cd, f_rows, f_notes = figs.friedman_tests(tables, opts.alpha)
    if not opts.no_plots:  # the Friedman results go with the CD diagrams
        notes += f_notes
    shift_rep = shift_report(opts, runs, cache, expected, labels) if opts.shift else None
    ood_rep = ood.compute(runs, cache, labels, opts.sections) if opts.ood else None
    sets_rep = sets_report(opts, runs, cache) if opts.sets else None
    notes += sets_rep.notes if sets_rep is not None else []
    # a damaged manifest is named by both --shift and --ood: once here
    notes += dict.fromkeys(n for r in (shift_rep, ood_rep) if r is not None for n in r.notes)
    return Report(
        options=opts, run_list=runs, cell_map=cells, labels=labels, tables=tables, failures=failures, notes=notes,
        runs=aggregate.runs_frame(runs, cache), groups=aggregate.cells_frame(cells, expected),
        significance=sig, friedman=pd.DataFrame(f_rows, columns=FRIEDMAN_COLUMNS),
        comparison=_comparison(cells) if opts.compare == "paper" else None,
        cd_results=cd, cache=cache, shift=shift_rep, ood=ood_rep, sets=sets_rep)


def shift_report(opts: ReportOptions, runs, cache, expected: dict, labels: dict):
    """--shift: each run's trained row, +TS (unless --no-ts) and the --variants
    calibrators, and D-Ens, under every corruption and severity, for the
    table's columns and ECE (the box plots)."""
    variants = list(kinds.SHIFT.rows(not opts.no_ts, opts.variant_list))
    which = list(dict.fromkeys([*columns(opts.metric_columns, not opts.no_gap), "ece"]))
    data = shift.compute(runs, variants, cache, which)
    return shifttables.build(data, variants[1:], expected, opts.metric_columns,
                             not opts.no_gap, opts.sections, labels)


def sets_report(opts: ReportOptions, runs, cache):
    """--sets: each run's trained row, +TS (unless --no-ts) and the --variants
    calibrators, and D-Ens, as conformal prediction sets (bench.report.evals.sets),
    on the test split and on the records' shift and site sets (setshift)."""
    variants = list(kinds.SHIFT.rows(not opts.no_ts, opts.variant_list))  # as --shift's rows
    data = sets.compute(runs, variants, opts.sets_alpha, cache, opts.set_rule)
    shifted = setshift.compute(runs, variants, opts.sets_alpha, cache,
                               opts.set_rule)  # shift and site sets
    data.shifted = shifted if shifted.rows else None
    data.notes += shifted.notes
    return data


def _unlike(opts: ReportOptions, runs, pub: dict, labels: dict) -> dict[str, tuple]:
    """dataset -> how its re-run rows differ from the protocol of the copied
    rows beside them (bench.report.paper.comparable), for the tables' footnote;
    without --published-rows-anyway any difference stops the report."""
    found = comparable.block_differences(runs, {(ds, bb) for ds, bb, _ in pub}, labels)
    if found and not opts.published_rows_anyway:
        raise comparable.refusal(found, labels)
    out: dict[str, list] = {}
    for (ds, bb), texts in found.items():
        out.setdefault(ds, []).extend(f"{backbone_name(bb, labels)} {t}" for t in texts)
    return {ds: tuple(texts) for ds, texts in out.items()}


def _significance_notes(opts: ReportOptions, sig: pd.DataFrame) -> list[str]:
    few = sorted({int(n) for n in sig["n"] if n < stats.MIN_SEEDS_NOTE})
    if opts.significance and few:
        return [f"caution: some paired tests compare only {', '.join(map(str, few))} "
                f"seed(s); below {stats.MIN_SEEDS_NOTE} a test has almost no power and a "
                "marked difference is weak evidence"]
    return []


def _comparison(cells: dict) -> dict:
    """--compare paper: our means against the published ones, and the claims."""
    ours = compare.rows_from_groups(cells)
    rows, notes = compare.compare(ours)
    return {"rows": rows, "claims": compare.claims(ours), "notes": notes}


def load(results, opts: ReportOptions, live=None) -> tuple[list, list[dict], list[str]]:
    """(runs of the chosen configs, failures of every config, notes). Damaged
    records are skipped with a note and listed as failures. A folder that
    does not exist (or '', which would read the current one) is said as such,
    not as one without records."""
    store.require_results_dir(results)
    damaged: list = []
    runs = aggregate.load_runs(results, opts.datasets, opts.backbones, opts.methods,
                               damaged=damaged)
    if opts.seeds is not None:
        wanted = set(opts.seed_list)
        runs = [r for r in runs if r.seed in wanted]
    done = {(r.dataset, r.backbone, r.method, r.chash, str(r.seed)) for r in runs}
    # a failure that a later rerun replaced by a finished record is history, not news
    found = aggregate.find_failures(results) + unfinished.unfinished_runs(
        results, live=live)  # a run training now is not unfinished
    failures = [f for f in found
                if (f["dataset"], f["backbone"], f["method"], f["config_hash"],
                    str(f["seed"])) not in done] + damaged
    notes = [f"skipped damaged record {f['path']}: {f['reason'].removeprefix('damaged: ')}"
             for f in damaged]
    if not runs:
        raise NoRecords(results, failures)
    runs, more = configs.select_configs(runs, opts.config)
    return runs, failures, notes + more + setup_notes(runs)


class NoRecords(BenchError):
    """No finished record matched the filters; `failures` are the damaged,
    failed or unfinished runs found (each named in the one-line message;
    `bench report` also writes them to failed_runs.csv)."""

    def __init__(self, results, failures: list[dict]):
        self.failures = failures
        found = store.datasets_under(results)
        named = "; ".join(f"{f['dataset']}/{f['backbone']}/{f['method']} seed {f['seed']} "
                          f"({f['reason']})" for f in failures)
        super().__init__(f"no finished run records under {results}/ matching the filters "
                         f"(datasets with records: {', '.join(found) or 'none'}); "
                         f"{len(failures)} failed or unfinished runs"
                         + (f": {named}" if named else ""))


def setup_notes(runs) -> list[str]:
    """A note per dataset whose records differ in what changes numbers without
    changing the config hash (torch threads, device, versions, the shared
    training code: bench.core.codeunits)."""
    notes = []
    for ds in sorted({r.dataset for r in runs}):
        provs = [r.record.provenance for r in runs if r.dataset == ds]
        mixed = mixed_setup(provs)
        if mixed:
            notes.append(f"{ds}: the records in these tables were made with different "
                         f"{'; '.join(mixed)} (config.json provenance); numbers can differ "
                         "for that reason alone")
        code = codeunits.mixed_shared([r.record.config for r in runs if r.dataset == ds])
        if code:
            notes.append(f"{ds}: the records in these tables were made with different versions "
                         f"of the shared training code: {'; '.join(code)} (config.json "
                         "code_units); numbers can differ for that reason; `bench run "
                         "--accept-code-change` if the edit changes no number")
    return notes


def fitting_notes(runs: list, opts: ReportOptions) -> dict:
    """(dataset, table kind) -> the footnotes of its calibrated rows: records
    without a validation split (left out), and those whose split is too
    small for a calibrator the table shows."""
    out: dict = defaultdict(list)
    fitted = [k for k in kinds.TABLES if k.calibrated]
    for ds, labels in aggregate.without_validation(runs).items():
        for kind in fitted:
            out[(ds, kind.name)].append(validation_note(labels))
    for kind in fitted:
        variants = kind.fitted(not opts.no_ts, opts.variant_list)
        for ds, lines in aggregate.thin_validation(runs, variants).items():
            out[(ds, kind.name)].append(thin_note(lines))
    return dict(out)


def make_tables(opts: ReportOptions, cells: dict, expected: dict, sig_marks: dict,
                sig_name: str | None = None, labels=None, unlike=None,
                fit_notes=None) -> list:
    """Every table: per dataset the main, std and (unless --no-ts) TS table;
    `sig_marks` from bench.report.numbers.paired, `sig_name` the test(s) behind them;
    `unlike`: dataset -> how re-run rows differ from the copied rows' protocol."""
    tables = []
    for ds in sorted(expected):
        sig = {(b, k): v for (d, b, k), v in sig_marks.items() if d == ds}
        for kind in kinds.TABLES:
            if not kind.shown(not opts.no_ts, opts.variant_list):
                continue
            spec = TableSpec(kind, backbones=opts.backbones, sections=opts.sections,
                             cost=opts.cost and kind.cost, sig_test=sig_name,
                             caption=opts.caption(kind.name),
                             notes=(fit_notes or {}).get((ds, kind.name), ()),
                             metrics=opts.metric_columns, ci=opts.ci, labels=labels,
                             gap=not opts.no_gap, reference=opts.significance_ref,
                             variants=opts.variant_list, unlike=(unlike or {}).get(ds, ()))
            t = build_table(spec, ds, cells, expected[ds], sig if opts.significance else None)
            if t is not None:
                tables.append(t)
    return tables
