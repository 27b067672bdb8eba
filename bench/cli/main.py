"""`bench` command line.

Each subcommand lives in its own module exposing `add_parser(sub)` (which
sets `func` on its parser: a function, or "module:function" for one whose
module loads only when the command runs) — adding a command is one line in
COMMANDS.
"""
from __future__ import annotations

import argparse
import difflib
import importlib
import os
import signal
import sys

from bench.cli.fields import add_fields
from bench.cli.interrupt import INTERRUPTED, quit_now, set_handler
from bench.core import plugins
from bench.core.errors import BenchError, disk_full_message, is_disk_full, missing_package_message
from bench.sweep.options import RunOptions

# command -> (its module, its line in `bench --help`). Only the module of the
# command being run is imported and builds its options; the others are listed
# by name, so `bench --help` and `bench list` never load torch or the report
# package (benchmarks/startup.py; tests/cli/test_startup.py keeps these lines
# equal to the help each module gives its command).
COMMANDS = {
    "list": ("bench.cli.commands", "list registered methods, datasets, backbones, profiles, "
             "measures, variants, OOD and conformal scores; --keys: every --set key"),
    "run": ("bench.cli.commands", "train a grid of methods x datasets x backbones x seeds"),
    "data": ("bench.cli.data", "inspect datasets"),
    "report": ("bench.cli.report", "tables (LaTeX/Markdown/CSV), reliability diagrams, "
               "significance tests from run records"),
    "eval": ("bench.cli.evaluate", "evaluate further sets (shift, ood:, site:) on finished "
             "records with kept weights"),
    "check": ("bench.cli.check", "verify every run record under --results; name the damaged "
              "ones"),
}
SUBCOMMANDS = tuple(dict.fromkeys(module for module, _ in COMMANDS.values()))


class OneLineParser(argparse.ArgumentParser):
    """argparse's errors in one line, like every other bench error (no usage
    block: it is 15 lines for `bench run`, and --help shows it). A flag is
    taken only as spelled: argparse's prefix matching would read `--seed 3`
    as `--seeds 3` (its subcommands' parsers are this class too, so the
    default holds for each)."""

    def __init__(self, *args, allow_abbrev: bool = False, **kwargs):
        super().__init__(*args, allow_abbrev=allow_abbrev, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def parse_known_args(self, args=None, namespace=None):
        """An unknown flag is refused here, by the (sub)command's parser that
        knows which flags there are, with the nearest spelling it takes."""
        parsed, extras = super().parse_known_args(args, namespace)
        unknown = next((a for a in extras if a.startswith("--")), None)
        if unknown is not None:
            self.exit(2, f"{self.prog}: error: {unknown_option(unknown, self)}\n")
        return parsed, extras


def unknown_option(given: str, parser: argparse.ArgumentParser) -> str:
    """'unknown option --seed; did you mean --seeds?': the flag a prefix of
    `given` starts or the closest spelling (difflib), else where to look."""
    flag = given.partition("=")[0]
    known = sorted(s for s in parser._option_string_actions if s.startswith("--"))
    near = [s for s in known if s.startswith(flag)][:2] or \
        difflib.get_close_matches(flag, known, n=2, cutoff=0.7)
    hint = f"did you mean {' or '.join(near)}?" if near else f"see {parser.prog} --help"
    return f"unknown option {flag}; {hint}"


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """Every command with its options; given `argv`, only the command it names
    gets them (the rest are listed by name and help: nothing else loads)."""
    parser = OneLineParser(
        prog="bench", description="Reproduce and extend Multi-Head Multi-Loss Model Calibration.")
    sub = parser.add_subparsers(dest="command", required=True)
    wanted = SUBCOMMANDS if argv is None else [COMMANDS[c][0] for c in _command(argv)]
    for module in wanted:
        importlib.import_module(module).add_parser(sub)
    for name, (_, text) in COMMANDS.items():
        if name not in sub.choices:
            sub.add_parser(name, help=text)
    for command in sub.choices.values():  # --plugin, as RunOptions declares it
        add_fields(command, RunOptions, only=("plugin",))
    return parser


def main(argv: list[str] | None = None) -> int:
    """The `bench` command (argv None: the program's own arguments). Ctrl-C at
    any moment is one line and 130 (bench.cli.interrupt); called from Python
    with argv, the caller's Ctrl-C handler is put back on return."""
    previous = set_handler(quit_now)  # start-up: seconds of imports, nothing written yet
    try:
        return _main(argv)
    finally:
        # the program's own shut-down (atexit handlers) quits in one line too
        set_handler(quit_now if argv is None or previous is None else previous)


def _command(argv: list[str]) -> list[str]:
    """[the command `argv` names] (its first word), or [] (none: `bench --help`)."""
    first = next((a for a in argv if not a.startswith("-")), None)
    return [first] if first in COMMANDS else []


def _main(argv: list[str] | None) -> int:
    try:
        # a value typed as it is parsed (--set lr=: bench.core.config.set_pair)
        # fails here, in the one line below
        args = build_parser(sys.argv[1:] if argv is None else argv).parse_args(argv)
        # (set on every command: `bench run` leaves a flag not given unset,
        # bench.cli.fields given_only, and the others ignore the attribute)
        if not sys.stderr.isatty():
            # no terminal (a log file, a pipe): bars would be \r-overwritten lines
            # running into the tables printed on stdout
            args.no_progress = True
        plugins.load(args.plugin)  # before any name is resolved; workers load them too
        set_handler(signal.default_int_handler)  # the command unwinds: locks, children
        status = _function(args.func)(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler below
        return status
    except BrokenPipeError:
        return _reader_went_away()
    except BenchError as err:
        print(f"bench: error: {err}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as err:
        message = missing_package_message(err)
        if message is None:
            raise
        print(f"bench: error: {message}", file=sys.stderr)
        return 2
    except OSError as err:
        if not is_disk_full(err):
            raise
        print(f"bench: error: {disk_full_message(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        set_handler(signal.SIG_IGN)  # a second Ctrl-C must not cut the line short
        print(INTERRUPTED, file=sys.stderr)
        return 130


def _function(func):
    """A command's function: itself, or the one a "module:function" names."""
    if not isinstance(func, str):
        return func
    module, name = func.split(":")
    return getattr(importlib.import_module(module), name)


def _reader_went_away() -> int:
    """stdout's reader closed the pipe (`bench list | head`): stop quietly, as
    Unix tools do on SIGPIPE, with its status 141 (128 + 13). stdout is pointed
    at /dev/null so the interpreter's own flush at exit cannot raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141


if __name__ == "__main__":
    sys.exit(main())
