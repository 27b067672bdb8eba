"""`bench` command line: list, run."""
from __future__ import annotations

import argparse
import sys

from .errors import BenchError


def _add_run(sub) -> None:
    p = sub.add_parser("run", help="train methods over seeds and print a summary")
    p.add_argument("--method", default="sl1h", help="method name(s), comma separated")
    p.add_argument("--dataset", default="digits")
    p.add_argument("--backbone", default=None, help="default: the dataset's default backbone")
    p.add_argument("--seeds", default="5", help="N (seeds 0..N-1), A-B, or a comma list")
    p.add_argument("--profile", default="paper", help="paper | quick")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a training or method hyper-parameter (repeatable)")
    p.add_argument("--results", default="results", help="run-record root")
    p.add_argument("--data-root", default=None, help="where dataset files live")
    p.add_argument("--device", default=None, help="cpu | cuda | cuda:N (default: cuda if present)")
    p.add_argument("--force", action="store_true", help="retrain finished seeds")
    p.add_argument("--no-progress", action="store_true")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list registered methods, datasets, backbones, profiles")
    _add_run(sub)
    return parser


def cmd_list(args) -> int:
    from .commands import list_registries

    print(list_registries())
    return 0


def cmd_run(args) -> int:
    from .commands import run

    return run(args)


COMMANDS = {"list": cmd_list, "run": cmd_run}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except BenchError as err:
        print(f"bench: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bench: interrupted; finished seeds are saved, rerun to continue", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
