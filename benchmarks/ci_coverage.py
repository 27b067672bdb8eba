"""How often the report's 95% bootstrap intervals cover the true calibration
error of a nearly calibrated model: the plug-in ECE (15 equal-width bins,
the paper's) against the debiased dL2CE (Kumar et al. 2019). Not a test: it
prints the numbers docs/reports.md ("Intervals") quotes; the test suite
checks the same effect on a smaller simulation
(tests/calib/test_debiased.py).

The model: K classes, logits z ~ N(0, 1) per class plus `--signal` on one
class drawn at random; the true class probabilities are q = softmax(z) and
the labels are drawn from q; the model predicts p = softmax(tau z), slightly
over-confident for tau > 1. The true values are population values, computed
from `--truth-n` samples with the exact probability that each prediction is
right (q at p's arg-max), no label noise:
- ECE: sum over the 15 equal-width confidence bins of |E[(conf - q_top) 1{bin}]|;
- dL2CE: sqrt(sum over 15 equal-mass (population quantile) bins of
  P(bin) E[conf - q_top | bin]^2), what the debiased estimator estimates.
Each of `--sets` test sets of n samples gets the intervals `bench report`
computes (1,000 resamples, numpy seed 0, percentile; the Measure registry's
resamplers), and a coverage count; and, for comparison, dL2CE's percentile
interval without the recentring (bench.calib.measures.debiased) and the mean widths.

    .venv/bin/python benchmarks/ci_coverage.py [--sets 200] [--sizes 200,1000,5000]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from bench.calib.measures import intervals as C
from bench.calib import measures as M
from bench.calib.measures.debiased import dl2ce_resamples


def draw(n: int, rng, k: int, signal: float, tau: float):
    """(model probs p [n, k], labels [n], exact P(right) of each prediction [n])."""
    z = rng.normal(size=(n, k))
    z[np.arange(n), rng.integers(0, k, n)] += signal
    q = np.exp(z - z.max(axis=1, keepdims=True))
    q /= q.sum(axis=1, keepdims=True)
    p = np.exp(tau * (z - z.max(axis=1, keepdims=True)))
    p /= p.sum(axis=1, keepdims=True)
    cum = q.cumsum(axis=1)
    labels = np.minimum((rng.random((n, 1)) > cum).sum(axis=1), k - 1)
    return p, labels, q[np.arange(n), p.argmax(axis=1)]


def truth(args, n_bins: int = 15) -> tuple[float, float]:
    """(ECE, dL2CE) of the population, from args.truth_n draws in chunks."""
    rng = np.random.default_rng(12345)
    conf, right = [], []
    for _ in range(args.truth_n // 1_000_000):
        p, _, q_top = draw(1_000_000, rng, args.k, args.signal, args.tau)
        conf.append(p.max(axis=1))
        right.append(q_top)
    conf, right = np.concatenate(conf), np.concatenate(right)
    gap = conf - right
    bins = np.minimum((conf * n_bins).astype(int), n_bins - 1)
    ece = np.abs(np.bincount(bins, weights=gap, minlength=n_bins)).sum() / len(conf)
    parts = np.array_split(gap[np.argsort(conf)], n_bins)
    dl2 = np.sqrt(sum(len(g) * g.mean() ** 2 for g in parts) / len(conf))
    return float(ece), float(dl2)


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", type=int, default=200)
    ap.add_argument("--sizes", default="200,1000,5000")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--signal", type=float, default=3.0)
    ap.add_argument("--tau", type=float, default=1.0015)
    ap.add_argument("--truth-n", type=int, default=20_000_000)
    args = ap.parse_args()
    t0 = time.perf_counter()
    true_ece, true_dl2 = truth(args)
    print(f"K={args.k} signal={args.signal} tau={args.tau}: true ECE {true_ece:.4f}, "
          f"true dL2CE {true_dl2:.4f} (from {args.truth_n:,} draws)")
    fns = {m: M.get(m).resample for m in ("ece", "dl2ce")}
    fns["dl2ce-unshifted"] = dl2ce_resamples
    rng = np.random.default_rng(0)
    print("| n | ECE mean | ECE interval covers | dL2CE mean | dL2CE interval covers "
          "(width) | unshifted dL2CE interval covers (width) |")
    print("|---|---|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        est = {"ece": [], "dl2ce": []}
        cover = {m: 0 for m in fns}
        width = {m: [] for m in fns}
        for _ in range(args.sets):
            p, y, _ = draw(n, rng, args.k, args.signal, args.tau)
            ci = C.bootstrap_ci(p, y, fns)
            for m in est:
                est[m].append(M.get(m)(p, y))
            for m, (lo, hi) in ci.items():
                true = true_ece if m == "ece" else true_dl2
                cover[m] += lo <= true <= hi
                width[m].append(hi - lo)
        print(f"| {n:,} | {np.mean(est['ece']):.4f} | {cover['ece']} of {args.sets} | "
              f"{np.mean(est['dl2ce']):.4f} | {cover['dl2ce']} of {args.sets} "
              f"({np.mean(width['dl2ce']):.4f}) | {cover['dl2ce-unshifted']} of {args.sets} "
              f"({np.mean(width['dl2ce-unshifted']):.4f}) |", flush=True)
    print(f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
