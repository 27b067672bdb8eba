"""`bench report`: run records -> CSV, LaTeX / Markdown / terminal tables,
reliability diagrams, significance tests and a critical-difference diagram.

The command parses its flags into a bench.report.ReportOptions, builds the
report with bench.report.build (everything computed from saved records, no
dataset, no GPU), writes it with Report.write and prints its summary.
bench.report.document lists the files written.
"""
from __future__ import annotations

from bench.core import store
from bench.core.errors import BenchError
from bench.report import build
from bench.report.options import ReportOptions
from bench.report.pipeline import NoRecords
from bench.cli.fields import add_fields
from bench.cli.typed import options_from

# the flags of `bench report` that are not ReportOptions fields
PLACES = ("--results", "--out")


def add_parser(sub) -> None:
    p = sub.add_parser("report", help="tables (LaTeX/Markdown/CSV), reliability diagrams, "
                                      "significance tests from run records")
    # where from and where to: build()'s and bench.api.report's own arguments,
    # not ReportOptions' (the only flags not declared by a field)
    p.add_argument("--results", default="results", help="run-record root")
    p.add_argument("--out", default="reports", help="output folder")
    add_fields(p, ReportOptions)  # every other flag from its ReportOptions field
    p.set_defaults(func=report)


def options_of(args) -> ReportOptions:
    """The parsed flags as ReportOptions."""
    return options_from(ReportOptions, args)


def report(args) -> int:
    # start-up: `bench report --help` builds this module's parser; writing and
    # the run-state lock only when a report is made
    from bench.report.output import write_failures, write_report
    from bench.sweep.runstate import live_holder

    opts = options_of(args)
    opts.validate()  # a bad value stops before anything is read or written
    # both checked before anything is read or written (neither creates a folder):
    # a bad --out first, so its line names it; a missing --results is said as
    # such, not as "no records"
    out = store.require_writable_dir(args.out, "--out")
    store.require_results_dir(args.results)
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
