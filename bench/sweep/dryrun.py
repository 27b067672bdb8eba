"""What `bench run --dry-run` shows per run: its state on disk (done, damaged,
running, failed, missing, or no weights) and the protocol it would train under
(sizes, backbone library and weights, drop path, loss, class groups, steps,
optimiser, batch, cycles x epochs, augmentation, every method hyper-parameter
as resolved, and each plugin part's code digest), as two tables or one JSON
object per run."""
from __future__ import annotations

import dataclasses
import json

from tabulate import tabulate

from bench.core.plugins import BUILTIN
from bench.core.schedule import steps_per_epoch
from bench.core.seeds import format_seeds
from bench.methods import create_method
from bench.sweep.grid import bundle_for, run_status
from bench.sweep.slurm import sbatch_lines
from bench.train.backbones import backbone_impl, drop_path_rate

ROWS = 200  # a huge grid is summarised, not printed line by line
NO_WEIGHTS = ("ImageNet weights not in the local cache: a real run stops here; rerun "
              "once online with --download, or pass --weights PATH")


def spec_status(spec, exp) -> tuple[str, str]:
    """run_status, except that a run whose weights a dry run could not find
    is 'no weights' (its config hash depends on their digest, so it is unknown)."""
    if exp.weights is not None and not exp.weights.cached:
        return "no weights", NO_WEIGHTS
    return run_status(spec)


TODO = ("missing", "failed", "damaged")  # what a real run would train


def sbatch_text(rows: list[dict], opts) -> str:
    """--executor slurm: the sbatch parameters of the array a real run would submit."""
    todo = sum(r["status"] in TODO for r in rows)
    if not todo:
        return "SLURM: nothing to submit"
    lines = "\n".join(f"  {line}" for line in sbatch_lines(opts, todo))
    return f"SLURM: one job array of {todo} tasks; sbatch parameters:\n{lines}"


def dry_run_table(rows: list[dict], max_rows: int = ROWS) -> str:
    """One row per run (the `protocols` rows: each record is verified once):
    where it stands, and the tally of what a real run would do."""
    counts: dict = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    table = tabulate([[r["dataset"], r["backbone"], r["method"], r["seed"], r["config"] or "?",
                       r["status"], r["detail"]] for r in rows[:max_rows]],
                     headers=["dataset", "backbone", "method", "seed", "config", "status",
                              "detail"], tablefmt="github")
    if len(rows) > max_rows:
        table += f"\n... {len(rows) - max_rows} more runs not listed (counts below)"
    todo = sum(counts.get(k, 0) for k in TODO)
    tally = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    return f"{table}\n{len(rows)} runs: {tally}; a real run would train {todo}"


def run_protocol(spec, exp) -> dict:
    """One run's resolved protocol (no model is built, no weights are read)."""
    method = create_method(spec.method, dict(spec.method_overrides))
    bundle = bundle_for(spec.dataset, spec.backbone, spec.train, method, spec.data_root,
                        spec.load_options)
    cfg, params = exp.train, method.params_dict()
    groups = getattr(method, "head_groups", lambda k, s: None)(bundle.num_classes, spec.seed)
    status, detail = spec_status(spec, exp)
    return {
        "dataset": spec.dataset, "backbone": spec.backbone, "method": spec.method,
        "seed": spec.seed, "config": None if status == "no weights" else spec.chash,
        "status": status, "detail": detail,
        "sizes": {"augment": cfg.augment_size, "train": cfg.image_size,
                  "val": cfg.image_size, "test": cfg.test_size},
        "backbone_impl": backbone_impl(spec.backbone, cfg.backbone_impl),
        "weights": exp.weights.label.split(" sha256:")[0] if exp.weights else "random",
        "pretrained": exp.weights is not None,
        "drop_path": drop_path_rate(spec.backbone, cfg.backbone_impl, cfg.drop_path),
        "loss": params.get("mh_loss", method.name), "heads": method.heads,
        # every hyper-parameter as it will train: defaults, profile presets, --set
        "method_params": dataclasses.asdict(method.params),
        "code": plugin_code(exp),
        "class_groups": groups, "drop_last": cfg.drop_last,
        "steps_per_epoch": steps_per_epoch(len(bundle.train), cfg.batch_size, cfg.drop_last),
        "checkpoint_score": cfg.checkpoint_score,
        # the optimiser and schedule, checkable before any GPU hour is spent
        "lr": cfg.lr, "momentum": cfg.momentum, "weight_decay": cfg.weight_decay,
        "eta_min": cfg.eta_min, "batch_size": cfg.batch_size, "cycles": cfg.cycles,
        "epochs_per_cycle": cfg.epochs_per_cycle, "epochs": cfg.epochs,
        "augment": cfg.augment, "augment_mode": cfg.augment_mode if cfg.augment else None,
        # run options declared for the worker (bench.core.flags.Flag.worker): only
        # when some are, so a plain grid's JSON is what it always was
        **({"run_options": dict(spec.run_options)} if spec.run_options else {}),
    }


def plugin_code(exp) -> dict:
    """role -> identity (origin, files, sha256) of each plugin part of a run:
    the digest its config hash carries (built-in parts: none)."""
    return {role: ident for role, ident in exp.code_dict().items()
            if ident.get("origin") != BUILTIN}


def params_text(params: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items()) or "-"


def code_text(code: dict) -> str:
    """'method 3b20ea79' per plugin part (the digest's first 8 hex digits)."""
    return " ".join(f"{role} {ident['sha256'][:8]}" for role, ident in code.items()) \
        or "built-in"


def protocols(specs, experiments) -> list[dict]:
    return [run_protocol(spec, experiments[spec.chash]) for spec in specs]


def protocol_json(rows: list[dict]) -> str:
    """One JSON object per line, one line per run."""
    return "\n".join(json.dumps(row, sort_keys=True) for row in rows)


def training(r: dict) -> tuple:
    """The optimiser, batch, schedule and augmentation columns of a protocol row."""
    return (f"{r['lr']:g}/{r['momentum']:g}/{r['weight_decay']:g}", r["batch_size"],
            f"{r['cycles']}x{r['epochs_per_cycle']}",
            f"TrivialAugmentWide ({r['augment_mode']})" if r["augment"] else "off")


def protocol_table(rows: list[dict], max_rows: int = ROWS) -> str:
    """The protocol of every run under a heading; runs that differ only in
    their seed share a row (seeds as ranges), so the paper grid fits a screen;
    a last column of run options when any run carries some."""
    options = any(r.get("run_options") for r in rows)

    def size(s):
        aug = f"{s['augment']}->" if s["augment"] != s["train"] else ""
        return f"{aug}{s['train']}/{s['val']}/{s['test']}"

    merged: dict[tuple, list[int]] = {}
    for r in rows:
        key = (r["dataset"], r["backbone"], r["method"], size(r["sizes"]), r["backbone_impl"],
               r["weights"], r["drop_path"], r["loss"],
               " ".join(map(str, r["class_groups"] or [])) or "-", r["steps_per_epoch"],
               *training(r), params_text(r["method_params"]), code_text(r["code"]),
               *([params_text(r.get("run_options", {}))] if options else []))
        merged.setdefault(key, []).append(r["seed"])
    table = [[*k[:3], format_seeds(seeds), *k[3:]] for k, seeds in merged.items()]
    more = (f"\n... {len(table) - max_rows} more rows not listed"
            if len(table) > max_rows else "")
    return "protocol per run:\n" + tabulate(
        table[:max_rows], headers=["dataset", "backbone", "method", "seeds",
                                   "px train/val/test", "impl", "weights", "drop path",
                                   "loss", "class groups", "steps/epoch", "SGD lr/mom/wd",
                                   "batch", "cycles x epochs", "augment", "method params",
                                   "code", *(["run options"] if options else [])],
        tablefmt="github") + more
