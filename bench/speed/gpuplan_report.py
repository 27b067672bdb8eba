"""The summary tables of `python -m bench.speed.gpuplan` (pure: results dict -> text)."""
from __future__ import annotations

from tabulate import tabulate

GOAL_HOURS = 4.0  # the target: the whole paper grid in under 4 GPU-hours


def _f(v, fmt=".1f"):
    return "-" if v is None else format(v, fmt)


def measurements_table(rows: list) -> str:
    out = []
    for m in rows:
        flops = m.get("flops_step_member")
        out.append([f"{m['dataset']} {m['size']}px", m["backbone"], m["heads"],
                    m["path"] if m["members"] == 1 else f"fused x{m['members']}", m["variant"],
                    _f(m["ms_step"], ".2f"), _f(m["steps_per_s"]), _f(m["images_per_s"], ".0f"),
                    _f(m["eval_images_per_s"], ".0f"),
                    "-" if flops is None else f"{flops * m['members'] / 1e9:.2f}",
                    _f(m["tflops"], ".3f"), m["peak"], _f(m["first_step_s"], ".2f")])
    return tabulate(out, headers=["workload", "backbone", "heads", "run", "variant", "ms/step",
                                  "steps/s", "img/s", "eval img/s", "GFLOP/step",
                                  "TFLOP/s", "of peak", "1st step s"])


def headline_table(rows: list) -> str:
    out = [[r["what"], r["variant"], _f(r["images_per_s"], ".0f"), _f(r["group_min"]),
            _f(r["eval_min"], ".2f"), _f(r["per_run_min"]), r["peak"]] for r in rows]
    return tabulate(out, headers=["PathMNIST, paper epochs", "variant", "train img/s",
                                  "minutes (group)", "of which eval", "minutes per run",
                                  "of peak"])


def goal(g: dict) -> str:
    if g["complete"]:
        return "MET" if g["hours"] < GOAL_HOURS else "not met"
    return "not met" if g["hours"] >= GOAL_HOURS else "unknown (incomplete)"


def grid_table(rows: list) -> str:
    out = []
    for g in rows:
        hours = f"{g['hours']:.2f}" if g["complete"] else f">= {g['hours']:.2f}"
        cover = f"{g['measured']}/{g['groups']}"
        if g["substituted"]:
            cover += f" ({g['substituted']} with another head count)"
        out.append([g["strategy"], g["variant"], hours, cover, goal(g)])
    return tabulate(out, headers=["strategy", "variant", "device-hours", "groups measured",
                                  f"goal < {GOAL_HOURS:.0f} h"])


def render(results: dict) -> str:
    s = results["settings"]
    parts = [f"== gpuplan on {results['device']} (torch {results['torch']})",
             f"NOTE: {results['note']}", "", "Measurements (one row per job):",
             measurements_table(results["measurements"]) if results["measurements"]
             else "(none)"]
    tf32 = results.get("tf32", {})
    parts.append(f"'of peak': dense bf16 peak for bf16 rows, plain FP32 (not TF32) peak for "
                 f"fp32 rows; TF32 allowed: convolutions {tf32.get('cudnn')}, matmuls "
                 f"{tf32.get('matmul')} (TF32 convolutions can exceed the FP32 peak). FLOPs: "
                 f"model forward + backward only, counted on one member (FlopCounterMode).")
    for kind in ("skipped", "failed"):
        if results[kind]:
            parts += ["", f"{kind.capitalize()} ({len(results[kind])} of "
                      f"{results['planned']} jobs):"]
            parts += [f"  {x['key']}: {x['reason']}" for x in results[kind]]
    if results["headline"]:
        parts += ["", "Headline projection (the whole paper grid):", headline_table(results["headline"])]
    parts += ["", f"Grid projection: {len(results['shapes'])} datasets x "
              f"{len(s['backbones'])} backbones x 8 methods x {s['seeds']} seeds = "
              f"{results['grid_runs']} runs on one {results['device']}, groups back to back "
              f"(projected from the measured ms/step and eval ms/image):"]
    parts.append(grid_table(results["grid"]) if results["grid"] else "(nothing measured)")
    parts += ["", f"{len(results['measurements'])} of {results['planned']} jobs measured in "
              f"{results['elapsed_s']:.0f}s (budget {s['budget_s']:.0f}s)"]
    return "\n".join(parts)
