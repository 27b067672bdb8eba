"""Start-up of the `bench` command: `bench --help`, `bench list` and a
one-run `bench run --dry-run` on digits, each in a fresh process, several
times; prints the median and the fastest wall-clock time, and the median CPU
time (user + system: less sensitive than the wall clock to other work on a
shared machine). Not a test (a timing on a
shared machine is not a pass/fail); tests/cli/test_startup.py checks what
makes it fast: neither torch nor the report package loads before argparse.

    .venv/bin/python benchmarks/startup.py [--repeat 5] [--other PATH]

--other PATH times a second checkout the same way (its sources first on
PYTHONPATH, e.g. an older commit from `git worktree add`), interleaved with
this one so that the machine's load hits both alike; prints the ratio.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMANDS = {
    "bench --help": ["--help"],
    "bench list": ["list"],
    "bench run --dry-run": ["run", "--dry-run", "--method", "sl1h", "--dataset", "digits",
                            "--seeds", "1", "--no-progress"],
}


def once(argv: list[str], tree: Path, results: str) -> tuple[float, float]:
    """(wall, CPU) seconds of one `python -m bench.cli ARGV` of `tree` in a fresh process."""
    env = {k: v for k, v in os.environ.items() if k != "BENCH_PLUGINS"}
    # its sources first: they shadow whichever checkout is installed (editable)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")])
    extra = ["--results", results] if argv[0] == "run" else []
    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run([sys.executable, "-m", "bench.cli", *argv, *extra], env=env, check=True,
                   stdout=subprocess.DEVNULL, cwd=tempfile.gettempdir())
    wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _summary(name: str, times: list[tuple[float, float]]) -> str:
    wall, cpu = [w for w, _ in times], [c for _, c in times]
    return (f"{name}: wall median {statistics.median(wall):.2f} s (min {min(wall):.2f}), "
            f"CPU median {statistics.median(cpu):.2f} s")


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--other", type=Path, help="a second checkout to time beside this one")
    args = p.parse_args()
    trees = {"this": REPO, **({"other": args.other.resolve()} if args.other else {})}
    with tempfile.TemporaryDirectory() as results:
        for label, argv in COMMANDS.items():
            times = {name: [] for name in trees}
            for _ in range(args.repeat):  # interleaved: load changes hit both trees
                for name, tree in trees.items():
                    times[name].append(once(argv, tree, results))
            line = "  ".join(_summary(name, t) for name, t in times.items())
            if args.other:
                ratio = (statistics.median(w for w, _ in times["other"])
                         / statistics.median(w for w, _ in times["this"]))
                line += f"  (other / this, wall: {ratio:.1f}x)"
            print(f"{label:22s} {line}")
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
