"""Compare the records of two result folders run by run (same relative paths).

    python benchmarks/compare_records.py RESULTS_A RESULTS_B

Used by gpu_check.sh to compare a `--fuse methods` sweep with the same sweep
unfused on a GPU: prints each run's test ACC / ECE / NLL in both folders and
the largest test-logit difference, and says which runs exist in only one.
On a GPU the two differ by floating-point reassociation (grouped versus plain
convolutions, cuDNN's algorithm choice), so this reports; it does not judge.
Exit code 1 when a run is missing from either folder or the folders are empty.
Reads records through bench.core.store: `bench` must be importable (installed, or
PYTHONPATH=<folder holding bench/>, as gpu_check.sh sets it).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from bench.core import store


def records(root: Path) -> dict:
    """Complete records (as bench.core.store finds them) by path relative to root."""
    return {Path(k.label): k.path(root) for k in store.iter_records(root)}


def row(rel, a: Path, b: Path) -> str:
    ma, mb = (store.read_json(d / "metrics.json")["test"] for d in (a, b))
    la, lb = (store.load_predictions(d)["test_logits"] for d in (a, b))
    cells = "  ".join(f"{k} {100 * ma[k]:.2f}/{100 * mb[k]:.2f}" for k in ("acc", "ece", "nll"))
    return f"{rel}  {cells}  max|dlogit| {np.abs(la - lb).max():.2e}"


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python benchmarks/compare_records.py RESULTS_A RESULTS_B", file=sys.stderr)
        return 2
    a, b = (Path(p) for p in args)
    ra, rb = records(a), records(b)
    for rel in sorted(set(ra) & set(rb)):
        print(row(rel, ra[rel], rb[rel]))
    only = sorted(set(ra) ^ set(rb))
    for rel in only:
        print(f"{rel}: only in {a if rel in ra else b}")
    print(f"{len(set(ra) & set(rb))} runs in both, {len(only)} in one only")
    return 1 if only or not ra else 0


if __name__ == "__main__":
    raise SystemExit(main())
