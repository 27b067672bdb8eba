"""One command that measures the paper's training step on a GPU and projects
the wall time of a run, a fused group and the whole paper grid.

    python -m bench.speed.gpuplan [--device cuda] [--datasets pathmnist,chaoyang,kvasir]
        [--backbones resnet50,convnext_tiny,swin_tiny] [--heads 1,2,4]
        [--strategies single,seeds,methods] [--steps 20] [--budget-s 420]
        [--compile] [--out gpuplan.json]
    python -m bench.speed.gpuplan --show gpuplan.json   # the tables again, from the JSON

Data are SYNTHETIC (random uint8 images, random labels) of the real shapes:
each dataset's paper image size (rounded up as the backbone needs) and its
true split counts, which enter only the projection. The step timed is the
harness's own (bench.speed.steptime), so the numbers describe what `bench run` does.
Jobs run most important first (the headline: PathMNIST ResNet50 4HML,
alone and as a 5-seed group, bf16 and fp32) and whatever does not fit the
budget is skipped and reported. See docs/speed.md, "Measuring on a GPU".
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import sys
import time
import traceback
from dataclasses import dataclass

import torch
from tqdm import tqdm

from bench.core.device import check_device, default_device, device_name
from bench.speed import projection as P
from bench.core.paper import PAPER_BACKBONES
from bench.train.backbones import BACKBONES, fit_size
from bench.core.config import apply_overrides, get_profile, parse_set, validate
from bench.core.errors import BenchError, choices_error
from bench.core.files import read_json, write_json
from bench.speed.gpuplan_report import render
from bench.speed.steptime import Job, OutOfBudget, measure

SYNTHETIC = ("data are SYNTHETIC (random uint8 images and labels) of the real shapes: "
             "paper image sizes, true split counts (counts enter the projection only)")


@dataclass(frozen=True)
class Settings:
    device: str = "cuda"
    datasets: tuple = ("pathmnist", "chaoyang", "kvasir")
    backbones: tuple = PAPER_BACKBONES
    heads: tuple = (1, 2, 4)
    strategies: tuple = P.STRATEGIES
    variants: tuple = ()  # () = every variant; else only these (P.VARIANTS' names)
    seeds: int = 5  # paper: 5 seeds; also the fused group sizes
    steps: int = 20  # timed steps per job
    warmup: int = 3  # untimed steps first (allocator, cuDNN, autotune)
    eval_images: int = 1024  # images timed per evaluation (capped at the split)
    budget_s: float = 420.0  # the whole command, wall clock
    image_size: int = 0  # 0 = each dataset's paper size; else forced (CPU tests)
    compile: bool = False  # also time compile=true (its compile time counts)
    profile: str = "paper"
    sets: tuple = ()
    threads: int = 0
    out: str = ""


def base_config(s: Settings):
    return apply_overrides(get_profile(s.profile), parse_set(list(s.sets)))


def check(s: Settings) -> None:
    """One-line errors for bad values, before any work."""
    shapes = P.data_shapes()
    for ds in s.datasets:
        if ds not in shapes:
            raise choices_error("datasets", ds, list(shapes))
    for bb in s.backbones:
        BACKBONES.get(bb)  # one-line error naming the valid backbones
    for h in s.heads:
        if h not in P.METHOD_FOR_HEADS:
            raise choices_error("heads", h, list(P.METHOD_FOR_HEADS))
    for st in s.strategies:
        if st not in P.STRATEGIES:
            raise choices_error("strategies", st, list(P.STRATEGIES))
    for v in s.variants:
        if v not in P.VARIANTS:
            raise choices_error("variants", v, list(P.VARIANTS))
    check_device(s.device)
    for name in ("seeds", "steps", "eval_images"):
        if getattr(s, name) < 1:
            raise BenchError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(s, name)}")
    if s.budget_s <= 0:
        raise BenchError(f"--budget-s must be > 0, got {s.budget_s}")
    if s.threads < 0:
        raise BenchError(f"--threads must be >= 0 (0 = torch's default), got {s.threads}")
    validate(base_config(s))  # unknown --set keys, profiles and choices fail here


# -------------------------------------------------------------------- plan --
def plan(s: Settings) -> list[Job]:
    """Jobs, most important first: the headline (PathMNIST ResNet50 4 heads,
    alone and fused x seeds, bf16 and fp32); with --compile, the same cell
    compiled (default mode, and reduce-overhead = CUDA graphs), alone and
    fused; then for bf16, then fp32:
    seed-fused and single runs of every cell at the largest head count (18
    jobs complete both grid projections: other head counts borrow it), the
    method-fused groups of every cell (their projection needs all of them:
    group sizes differ per head count, so nothing can be borrowed), then the
    other head counts; last single runs with channels_last at the largest
    head count."""
    shapes, cfg0 = P.data_shapes(), base_config(s)
    pairs = [(d, b) for d in s.datasets for b in s.backbones]
    order = []
    if "pathmnist" in s.datasets and 4 in s.heads:
        order += [(("pathmnist", headline_backbone(s.backbones)), st, 4, v)
                  for v in ("bf16", "fp32", "eager") for st in ("single", "seeds")
                  if st in s.strategies]
    top = max(s.heads)
    if s.compile:  # asked for: compiled steps (CUDA graphs too) of the headline cell next
        cell = (("pathmnist", headline_backbone(s.backbones)) if "pathmnist" in s.datasets
                else pairs[0])
        order += [(cell, st, top, v) for v in ("compile", "graphs")
                  for st in ("single", "seeds") if st in s.strategies]
    for v in ("bf16", "fp32"):  # every cell at the top head, then method groups
        order += [(pair, st, top, v) for st in ("seeds", "single") for pair in pairs]
        order += [(pair, "methods", h, v) for pair in pairs for h in s.heads]
        order += [(pair, st, h, v) for st in ("seeds", "single") for pair in pairs
                  for h in s.heads if h != top]
    order = [o for o in order if o[1] in s.strategies]
    if "single" in s.strategies:
        order += [(pair, "single", max(s.heads), "bf16_cl") for pair in pairs]
    if s.variants:  # a session with little device time picks what it needs
        order = [o for o in order if o[3] in s.variants]

    jobs, seen = [], set()
    for (ds, bb), st, h, v in order:
        shape = shapes[ds]
        cfg = apply_overrides(cfg0, parse_set(list(P.VARIANTS[v])))
        job = Job(ds, bb, fit_size(bb, s.image_size or shape.size), shape.classes, h,
                  "single" if st == "single" else "fused", P.group_members(st, h, s.seeds), v, cfg)
        k = job_key(job)
        if k not in seen and job.methods:
            seen.add(k)
            jobs.append(job)
    return jobs


def headline_backbone(backbones) -> str:
    """The headline backbone is ResNet50; a run without it (a CPU check with a
    small backbone) puts its first backbone in that place."""
    return "resnet50" if "resnet50" in backbones else backbones[0]


def job_key(job: Job) -> str:
    return P.key(job.dataset, job.backbone, job.heads, job.path, job.members, job.variant)


# ----------------------------------------------------------------- execute --
def run_jobs(s: Settings, jobs: list[Job], t_start: float, progress: bool = True,
             on_job=None, clock=time.perf_counter) -> dict:
    """Measure jobs in order within the budget. A job is skipped when its
    estimated cost (the last cost of the same dataset/backbone/path/group
    size; 5% of the budget for the first of its kind) does not fit what is left, or when the budget runs out while it
    runs; a job that fails (e.g. out of memory) is reported and the rest go on.
    `on_job(partial)`, if given, gets the results so far after every job;
    `clock` reads the time the budget is checked against (tests inject one)."""
    reserve = min(15.0, 0.05 * s.budget_s)  # for the tables and the JSON
    deadline = t_start + s.budget_s - reserve
    name = device_name(s.device)
    done, skipped, failed, costs, flops = [], [], [], {}, {}
    bar = tqdm(jobs, desc="gpuplan", unit="job", disable=not progress)
    for i, job in enumerate(bar):
        if on_job is not None and i:
            on_job({"measurements": done, "skipped": skipped, "failed": failed})
        k = job_key(job)
        bar.set_postfix_str(k)
        ck = (job.dataset, job.backbone, job.path, job.members)  # jobs of about one cost
        est = costs.get(ck, 0.05 * s.budget_s)  # the first of its kind: 5% of the budget
        left = deadline - clock()
        if left <= 0 or est > left:
            why = "budget spent" if left <= 0 else f"needs ~{est:.0f}s, {left:.0f}s left"
            skipped.append({"key": k, "reason": f"not started: {why}"})
            continue
        t0 = clock()
        fk = (job.dataset, job.backbone, job.heads)
        steps, eval_n = P.job_sizes(job.members, s.steps, s.eval_images,
                                    job.cfg.eval_batch_size)
        eval_n = min(eval_n, P.data_shapes()[job.dataset].val)
        try:
            m = measure(job, s.device, steps, s.warmup, eval_n, deadline,
                        flops=fk not in flops)
        except OutOfBudget as err:
            skipped.append({"key": k, "reason": str(err)})
            continue
        except Exception as err:  # noqa: BLE001 - one bad job must not end the run
            # the whole traceback goes to the JSON and, the first time an error
            # type is seen, to stderr: a first GPU run must be debuggable offline
            trace = traceback.format_exc()
            if not any(f["reason"].startswith(type(err).__name__) for f in failed):
                print(trace, file=sys.stderr, flush=True)
            failed.append({"key": k, "reason": f"{type(err).__name__}: {_first_line(err)}",
                           "traceback": trace[-4000:]})
            continue
        finally:
            _free(s.device)
        costs[ck] = clock() - t0
        if m["flops_step"] is not None:
            flops[fk] = m["flops_step"]
        done.append(row(job, m, flops.get(fk), costs[ck], name, s.device))
    bar.close()
    return {"measurements": done, "skipped": skipped, "failed": failed}


def row(job: Job, m: dict, flops_member, cost_s: float, name: str, device: str) -> dict:
    bs = job.cfg.batch_size
    steps_s = 1000.0 / m["ms_step"]
    tflops = None if flops_member is None else flops_member * job.members * steps_s / 1e12
    bf16 = job.cfg.bf16
    return {
        "key": job_key(job), "dataset": job.dataset, "backbone": job.backbone,
        "size": job.size, "heads": job.heads, "path": job.path, "members": job.members,
        "methods": sorted(set(job.methods)), "variant": job.variant,
        "ms_step": m["ms_step"], "steps_per_s": steps_s,
        "images_per_s": job.members * bs * steps_s,
        "eval_ms_image": m["eval_ms_image"], "eval_images_per_s": 1000.0 / m["eval_ms_image"],
        "flops_step_member": flops_member, "tflops": tflops,
        "peak": "n/a" if tflops is None else P.peak_fraction(tflops, name, bf16,
                                                             device == "cuda"),
        "first_step_s": m["first_step_s"], "build_s": m["build_s"], "cost_s": cost_s,
        "cudagraph_skips": m.get("cudagraph_skips"),
        "timed_steps": m["timed_steps"], "eval_images": m["eval_images"],
    }


def _first_line(err: Exception) -> str:
    return (str(err).strip().splitlines() or [""])[0][:200]


def _free(device: str) -> None:
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


# ------------------------------------------------------------- projections --
def project(results: dict) -> dict:
    """Headline and grid projections from a results dict (also after --show)."""
    s = results["settings"]
    cfg = results["config"]
    shapes = {k: P.DataShape(**v) for k, v in results["shapes"].items()}
    meas = {m["key"]: m for m in results["measurements"]}
    bs, epochs, cycles = cfg["batch_size"], cfg["cycles"] * cfg["epochs_per_cycle"], cfg["cycles"]
    headline = []
    bb = headline_backbone(s["backbones"])
    if "pathmnist" in shapes:
        for path, n in (("single", 1), ("fused", s["seeds"])):
            for v in P.VARIANTS:
                m = meas.get(P.key("pathmnist", bb, 4, path, n, v))
                if m:
                    sec = P.group_seconds(shapes["pathmnist"], bs, epochs, cycles,
                                          m["ms_step"], m["eval_ms_image"])
                    ev = P.eval_images(shapes["pathmnist"], cycles) * m["eval_ms_image"]
                    headline.append({"what": f"{bb} 4hml {'alone' if n == 1 else f'x{n} fused'}",
                                     "variant": v, "images_per_s": m["images_per_s"],
                                     "group_min": sec / 60, "per_run_min": sec / 60 / n,
                                     "eval_min": ev / 60000, "peak": m["peak"]})
    grid = []
    for st in s["strategies"]:
        for v in (P.VARIANTS if st == "single" else P.FUSED_VARIANTS):
            g = P.grid_projection(meas, shapes, s["backbones"], st, v, seeds=s["seeds"],
                                  batch_size=bs, epochs=epochs, cycles=cycles)
            if g["measured"]:
                grid.append(g)
    return {"headline": headline, "grid": grid,
            "grid_runs": len(shapes) * len(s["backbones"]) * len(P.PAPER_HEADS) * s["seeds"]}


def run(s: Settings, progress: bool = True, clock=time.perf_counter) -> dict:
    t_start = clock()
    check(s)
    if s.threads:
        torch.set_num_threads(s.threads)
    shapes = P.data_shapes()
    results = {
        "note": SYNTHETIC, "device": device_name(s.device), "torch": torch.__version__,
        "settings": {**dataclasses.asdict(s)}, "config": dataclasses.asdict(base_config(s)),
        "shapes": {d: dataclasses.asdict(shapes[d]) for d in s.datasets},
        # fp32 convolutions run in TF32 when cuDNN allows it (torch's default)
        "tf32": {"cudnn": torch.backends.cudnn.allow_tf32,
                 "matmul": torch.backends.cuda.matmul.allow_tf32},
    }
    jobs = plan(s)
    results["planned"] = len(jobs)

    def finish(part: dict) -> dict:
        out = {**results, **part, "elapsed_s": clock() - t_start}
        return {**out, **project(out)}

    def checkpoint(part: dict) -> None:  # a killed run still leaves its JSON
        save(finish(part), s.out)

    return finish(run_jobs(s, jobs, t_start, progress, checkpoint if s.out else None, clock))


# --------------------------------------------------------------------- CLI --
def _names(text: str) -> tuple:
    return tuple(t.strip() for t in text.split(",") if t.strip())


def _ints(flag: str):
    def parse(text: str) -> tuple:
        try:
            return tuple(int(t) for t in _names(text))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} expects comma-separated ints, got '{text}'")
    return parse


def parse_args(argv=None):
    d = Settings()
    p = argparse.ArgumentParser(
        allow_abbrev=False, prog="python -m bench.speed.gpuplan", description=__doc__.split("\n")[0])
    p.add_argument("--device", default=default_device())
    p.add_argument("--datasets", type=_names, default=d.datasets)
    p.add_argument("--backbones", type=_names, default=d.backbones)
    p.add_argument("--heads", type=_ints("--heads"), default=d.heads)
    p.add_argument("--strategies", type=_names, default=d.strategies)
    p.add_argument("--variants", type=_names, default=d.variants,
                   help=f"only these variants ({', '.join(P.VARIANTS)}; default all)")
    for k in ("seeds", "steps", "warmup", "eval_images", "budget_s", "image_size", "profile",
              "threads", "out"):
        p.add_argument("--" + k.replace("_", "-"), type=type(getattr(d, k)),
                       default=getattr(d, k))
    p.add_argument("--compile", action="store_true", help="also time compile=true (slow start)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="TrainConfig override for every job (e.g. epochs_per_cycle=5)")
    p.add_argument("--show", metavar="JSON", help="print the tables of a saved result, no run")
    p.add_argument("--no-progress", action="store_true")
    a = vars(p.parse_args(argv))
    show, progress = a.pop("show"), not a.pop("no_progress")
    return Settings(**{**a, "sets": tuple(a["sets"])}), show, progress


def main(argv=None) -> int:
    try:
        s, show, progress = parse_args(argv)
        if show:
            results = load(show)
        else:
            check(s)
            if s.threads:
                torch.set_num_threads(s.threads)
            print(f"device {device_name(s.device)} | torch {torch.__version__} | {SYNTHETIC}")
            print(f"settings: {_settings_line(s)}")
            results = run(s, progress)  # writes s.out after every job too
            if s.out:
                save(results, s.out)
    except BenchError as err:
        print(f"error: {err}")
        return 2
    print(render(results))
    if s.out and not show:
        print(f"results written to {s.out}")
    return 0


def _settings_line(s: Settings) -> str:
    cfg = base_config(s)
    return (f"datasets {','.join(s.datasets)} | backbones {','.join(s.backbones)} | heads "
            f"{','.join(map(str, s.heads))} | strategies {','.join(s.strategies)} | seeds "
            f"{s.seeds} | {s.steps} timed steps after {s.warmup} warm-up | eval "
            f"{s.eval_images} images at batch {cfg.eval_batch_size} | batch {cfg.batch_size}, "
            f"{cfg.epochs} epochs in {cfg.cycles} cycles | budget {s.budget_s:.0f}s"
            f"{' | compile on' if s.compile else ''}")


def save(results: dict, path: str) -> None:
    """Atomic: a run killed while writing leaves the previous file whole."""
    write_json(path, results, indent=1, sort_keys=False, default=None)


def load(path: str) -> dict:
    try:
        return read_json(path)
    except (OSError, ValueError) as err:
        raise BenchError(f"--show {path}: cannot read a gpuplan JSON ({_first_line(err)})")


if __name__ == "__main__":
    raise SystemExit(main())
