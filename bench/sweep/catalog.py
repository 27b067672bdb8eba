"""What `bench list` prints: every registry (methods, datasets, backbones,
measures, variants, OOD scores, conformal scores) with where each entry
comes from, the profiles, and every --set key with its type, default, range
and meaning.

Here, in sweep, because it is the first package that may import every
registry it lists (backbones are train's). Nothing here imports torch or the
report package: `bench list` starts without them (tests/cli/test_startup.py).
The registries are imported at the top: `bench run --help`, whose module
(bench.cli.commands) also holds `bench list`, imports this one only when
`bench list` runs.
"""
from __future__ import annotations

import dataclasses
import fnmatch

from tabulate import tabulate

from bench.calib import conformal
from bench.calib.measures import MEASURES
from bench.calib.ood import SCORES
from bench.calib.variants import VARIANTS
from bench.core.config import PROFILE_METHOD_SETS, PROFILES, TrainConfig, field_types
from bench.core.errors import BenchError
from bench.core.settings import specs
from bench.datasets import DATASETS
from bench.methods import METHODS, every_method, method_params
from bench.train.backbones import BACKBONES, LIBRARY_BACKBONES


def registries() -> dict:
    """title -> registry, in the order `bench list` prints them."""
    return {"methods": METHODS, "datasets": DATASETS, "backbones": BACKBONES,
            "measures (bench report --metrics; every table, CSV and bench.results.load)":
                MEASURES,
            "variants (how bench report turns saved logits into probabilities; "
            "--variants picks the post-hoc calibrators)": VARIANTS,
            "OOD scores (bench report --ood: a column group of each table)": SCORES,
            "conformal scores (bench report --sets: prediction sets of each score)":
                conformal.SCORES}


def list_registries() -> str:
    """`bench list`: a block per registry, then the profiles."""
    blocks = []
    for title, reg in registries().items():
        # where each entry comes from: built-in or the plugin that registered it
        rows = [(name, reg.origin(name), desc) for name, desc in reg.describe()]
        blocks.append(f"{title}:\n" + tabulate(rows, tablefmt="plain"))
        if reg is BACKBONES:
            blocks.append("backbones by library (--backbone timm:NAME / tv:NAME):\n"
                          + tabulate(LIBRARY_BACKBONES, tablefmt="plain"))
    profiles = [(name, _profile_text(cfg)) for name, cfg in PROFILES.items()]
    blocks.append("profiles:\n" + tabulate(profiles, tablefmt="plain"))
    blocks.append("--set keys (type, default, range, meaning): bench list --keys")
    return "\n\n".join(blocks)


def keys_table() -> str:
    """Every --set key: training keys (paper profile defaults), then method keys,
    each as its dataclass field declares it (bench.core.settings)."""
    rows = [_key_row(PROFILES["paper"], f, "all") for f in dataclasses.fields(TrainConfig)]
    seen: dict = {}
    for name in every_method() + ["mhml"]:
        params = method_params(name)
        for f in dataclasses.fields(params):
            row = _key_row(params, f, "")
            seen.setdefault(tuple(row[:6]), []).append(name)
    rows += [[*row, ", ".join(names)] for row, names in seen.items()]
    return tabulate(rows, headers=["key", "type", "default", "range", "hash", "meaning",
                                   "methods"], tablefmt="simple")


def _key_row(obj, f, methods: str) -> list:
    """key, type, default, what it accepts, whether the config hash sees it, meaning."""
    spec = specs(obj)[f.name]
    kind = field_types(obj)[f.name].__name__
    hashed = "no" if not spec.in_hash else (
        f"not at {spec.legacy}" if spec.has_legacy else "yes")  # legacy: older records' value
    row = [f.name, kind, getattr(obj, f.name), spec.text(kind), hashed, spec.help]
    return row + [methods] if methods else row


def _profile_text(cfg: TrainConfig) -> str:
    """A profile's schedule, then every field it sets away from the paper profile."""
    base = PROFILES["paper"]
    diff = [f"{f.name}={getattr(cfg, f.name)}" for f in dataclasses.fields(cfg)
            if getattr(cfg, f.name) != getattr(base, f.name)]
    name = next(n for n, c in PROFILES.items() if c is cfg)
    diff += [f"{k}={v}" for k, v in PROFILE_METHOD_SETS.get(name, {}).items()]
    return (f"{cfg.cycles} cycles x {cfg.epochs_per_cycle} epochs, SGD lr {cfg.lr}, "
            f"momentum {cfg.momentum}, batch {cfg.batch_size}"
            + (f"; {', '.join(diff)}" if diff else ""))


def backbone_names(pattern: str) -> str:
    """`bench list --backbones PATTERN`: every backbone name matching a shell
    pattern, over the registered ones, timm's (timm:<model>) and torchvision's
    (tv:<model>); 'timm' and 'tv' alone mean every model of that library."""
    # timm and torchvision on demand: the plain `bench list` must start without them
    import timm
    import torchvision

    pattern = {"timm": "timm:*", "tv": "tv:*"}.get(pattern, pattern)
    names = (BACKBONES.names() + [f"timm:{n}" for n in timm.list_models()]
             + [f"tv:{n}" for n in torchvision.models.list_models(module=torchvision.models)])
    hits = fnmatch.filter(names, pattern)
    if not hits:
        raise BenchError(f"--backbones {pattern}: no backbone matches; try 'timm', 'tv' or a "
                         "pattern such as 'timm:*vit*'")
    return "\n".join(hits)

