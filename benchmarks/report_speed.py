"""Wall time of `bench report` on a paper-sized grid of records: 3 datasets x
3 backbones x 8 methods x 5 seeds = 360 synthetic records (random logits of
the paper's class counts and head counts; `--n` test and validation images
each), reported twice into one folder: cold (every value computed from the
logits) and warm (every value from the report's cache). Not a test: it
prints the times, and with --other PATH the same for a second checkout (an
older commit from `git worktree add`), interleaved so the machine's load
hits both alike, and the ratios.

    .venv/bin/python benchmarks/report_speed.py [--n 2000] [--repeat 1] [--other PATH]

Each checkout runs from a scratch copy laid out as installed (bench/,
bench/methods, bench/datasets), ahead of the editable install on the path.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
GRID = {"pathmnist": 9, "chaoyang": 4, "kvasir": 23}  # dataset -> classes
BACKBONES = ("resnet50", "convnext_tiny", "swin_tiny")
HEADS = {"sl1h": 1, "ls": 1, "mbls": 1, "mixup": 1, "dca": 1, "2hsl": 2, "2hml": 2, "4hml": 4}
# drop the editable install's finder: the scratch copy on PYTHONPATH is the one imported
SITE = ("import sys\nsys.meta_path[:] = [f for f in sys.meta_path\n"
        "                 if 'editable' not in repr(f).lower()]\n")


def write_grid(root: Path, n: int, seeds: int = 5) -> int:
    """The synthetic records under `root`, written by this checkout's store."""
    from bench.calib import measures
    from bench.core import store
    from bench.calib.metrics import head_probs

    rng, count = np.random.default_rng(0), 0
    for ds, k in GRID.items():
        labels = rng.integers(0, k, n)
        for bb in BACKBONES:
            for method, heads in HEADS.items():
                for seed in range(seeds):
                    z = rng.normal(0, 2, (2, n, heads, k)).astype(np.float32)
                    z[:, np.arange(n), :, labels] += 2.0
                    metrics = {s: measures.stored_values(head_probs(z[i]), labels)
                               for i, s in enumerate(("val", "test"))}
                    path = store.record_dir(root, ds, bb, method, "abc123", seed)
                    store.write_record(path, {"dataset": ds, "backbone": bb, "method": method,
                                              "seed": seed, "heads": heads}, metrics,
                                       {"val_logits": z[0], "val_labels": labels,
                                        "test_logits": z[1], "test_labels": labels})
                    count += 1
    return count


def lay_out(tree: Path, into: Path) -> Path:
    """`tree`'s sources as installed, with the editable finder switched off."""
    shutil.copytree(tree / "bench", into / "bench", ignore=shutil.ignore_patterns("__pycache__"))
    for sub in ("methods", "datasets"):  # a tree from before they moved into bench/
        if (tree / sub).is_dir():
            shutil.copytree(tree / sub, into / "bench" / sub,
                            ignore=shutil.ignore_patterns("__pycache__"))
    (into / "sitecustomize.py").write_text(SITE)
    return into


def timed_report(src: Path, results: Path, out: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(src)}
    env.pop("BENCH_PLUGINS", None)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "bench.cli", "report", "--results", str(results),
                    "--out", str(out), "--no-plots", "--no-progress"], env=env, check=True,
                   stdout=subprocess.DEVNULL, cwd=tempfile.gettempdir())
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=2000, help="test and validation images per record")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--other", type=Path, help="a second checkout to time beside this one")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        print(f"{write_grid(tmp / 'results', args.n)} records, {args.n} test + {args.n} "
              "validation images each")
        trees = {"this": REPO, **({"other": args.other.resolve()} if args.other else {})}
        srcs = {name: lay_out(tree, tmp / f"src-{name}") for name, tree in trees.items()}
        times = {(name, kind): [] for name in trees for kind in ("cold", "warm")}
        for r in range(args.repeat):
            for name, src in srcs.items():
                out = tmp / f"out-{name}-{r}"
                times[(name, "cold")].append(timed_report(src, tmp / "results", out))
                times[(name, "warm")].append(timed_report(src, tmp / "results", out))
        for kind in ("cold", "warm"):
            line = "  ".join(f"{name} {statistics.median(times[(name, kind)]):.1f} s"
                             for name in trees)
            if args.other:
                ratio = (statistics.median(times[("other", kind)])
                         / statistics.median(times[("this", kind)]))
                line += f"  (other / this: {ratio:.2f}x)"
            print(f"bench report, {kind}: {line}")
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
