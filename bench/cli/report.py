"""`bench report`: run records -> CSV, LaTeX / Markdown / terminal tables,
reliability diagrams, significance tests and a critical-difference diagram.

The command parses its flags into a bench.report.ReportOptions, builds the
report with bench.report.build (everything computed from saved records, no
dataset, no GPU), writes it with Report.write and prints its summary.
bench.report.document lists the files written.
"""
from __future__ import annotations

from bench.core import store
from bench.report import stats
from bench.report.options import KINDS, ReportOptions, metric_choices
from bench.report.tables import REFERENCE
from bench.cli.typed import options_from


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
                                     f"{', '.join(metric_choices())}; default: the paper's "
                                     "(ece,nll); Rank averages the columns shown")
    p.add_argument("--ci", action="store_true",
                   help="95%% intervals in the std table in place of ± std (over seeds; "
                        "D-Ens and one-seed cells: bootstrap over test samples)")
    p.add_argument("--variants", metavar="LIST",
                   help="post-hoc calibrators fitted on the validation split, comma list of "
                        "ts, vs, dirichlet, hb, iso, ets (`bench list`): a post-hoc table per "
                        "dataset, each method's un-scaled row then one row per calibrator")
    p.add_argument("--no-ts", action="store_true", help="skip temperature scaling")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=report)


def options_of(args) -> ReportOptions:
    """The parsed flags as ReportOptions."""
    return options_from(ReportOptions, args)


def report(args) -> int:
    from bench.core.errors import BenchError
    from bench.report import build
    from bench.report.output import write_failures, write_report
    from bench.report.pipeline import NoRecords
    from bench.sweep.runstate import live_holder

    opts = options_of(args)
    opts.validate()  # a bad value stops before anything is read or written
    if not str(args.results).strip():
        store.require_results_dir(args.results)  # '' would read the current directory
    out = store.require_writable_dir(args.out, "--out")
    try:
        rep = build(args.results, opts, cache_dir=out, live=live_holder)
    except NoRecords as err:
        if not err.failures:
            raise
        # nothing to tabulate, but every run that failed is named, and listed as always
        raise BenchError(f"{err}; listed in {write_failures(err.failures, out)}") from None
    write_report(rep, out)  # the whole report, swapped in at once, or none
    print(rep.text)
    return 0
