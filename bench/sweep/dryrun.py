"""What `bench run --dry-run` shows per run beyond done-ness: the protocol each
run would train under (sizes, backbone library and weights, drop path, loss,
class groups, steps), as a table or one JSON object per run."""
from __future__ import annotations

import json

from tabulate import tabulate

from bench.core.schedule import steps_per_epoch
from bench.sweep.grid import bundle_for, run_status
from bench.train.backbones import backbone_impl, drop_path_rate


def run_protocol(spec, exp) -> dict:
    """One run's resolved protocol (no model is built, no weights are read)."""
    from bench.methods import create_method

    method = create_method(spec.method, dict(spec.method_overrides))
    bundle = bundle_for(spec.dataset, spec.backbone, spec.train, method, spec.data_root,
                        spec.load_options)
    cfg, params = exp.train, method.params_dict()
    groups = getattr(method, "head_groups", lambda k, s: None)(bundle.num_classes, spec.seed)
    return {
        "dataset": spec.dataset, "backbone": spec.backbone, "method": spec.method,
        "seed": spec.seed, "config": spec.chash, "status": run_status(spec)[0],
        "sizes": {"augment": cfg.augment_size, "train": cfg.image_size,
                  "val": cfg.image_size, "test": cfg.test_size},
        "backbone_impl": backbone_impl(spec.backbone, cfg.backbone_impl),
        "weights": exp.weights.label.split(" sha256:")[0] if exp.weights else "random",
        "pretrained": exp.weights is not None,
        "drop_path": drop_path_rate(spec.backbone, cfg.backbone_impl, cfg.drop_path),
        "loss": params.get("mh_loss", method.name), "heads": method.heads,
        "class_groups": groups, "drop_last": cfg.drop_last,
        "steps_per_epoch": steps_per_epoch(len(bundle.train), cfg.batch_size, cfg.drop_last),
        "checkpoint_score": cfg.checkpoint_score,
    }


def protocols(specs, experiments) -> list[dict]:
    return [run_protocol(spec, experiments[spec.chash]) for spec in specs]


def protocol_json(rows: list[dict]) -> str:
    """One JSON object per line, one line per run."""
    return "\n".join(json.dumps(row, sort_keys=True) for row in rows)


def protocol_table(rows: list[dict]) -> str:
    def size(s):
        aug = f"{s['augment']}->" if s["augment"] != s["train"] else ""
        return f"{aug}{s['train']}/{s['val']}/{s['test']}"

    table = [[r["dataset"], r["backbone"], r["method"], r["seed"], size(r["sizes"]),
              r["backbone_impl"], r["weights"], r["drop_path"], r["loss"],
              " ".join(map(str, r["class_groups"] or [])) or "-", r["steps_per_epoch"]]
             for r in rows]
    return tabulate(table, headers=["dataset", "backbone", "method", "seed",
                                    "px train/val/test", "impl", "weights", "drop path",
                                    "loss", "class groups", "steps/epoch"],
                    tablefmt="github")
