"""`bench list` and `bench run`."""
from __future__ import annotations

import dataclasses

from tabulate import tabulate
from tqdm import tqdm

from .backbones import BACKBONES
from .config import PROFILES, TrainConfig, apply_overrides, field_types, get_profile, parse_set
from .data_cmd import add_data_options, load_for_run
from .errors import BenchError, choices_error
from .summary import summary_table
from .weights import resolve_weights


def add_parser(sub) -> None:
    sub.add_parser("list", help="list registered methods, datasets, backbones, profiles"
                   ).set_defaults(func=lambda args: print(list_registries()) or 0)
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
    add_data_options(p)  # --data-opt KEY=VALUE, --download
    p.add_argument("--pretrained", action="store_true",
                   help="ImageNet weights from the local timm/Hugging Face cache")
    p.add_argument("--weights", default=None, metavar="PATH",
                   help="initial backbone weights (.safetensors or torch state dict)")
    p.add_argument("--device", default=None, help="cpu | cuda | cuda:N (default: cuda if present)")
    p.add_argument("--force", action="store_true", help="retrain finished seeds")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


def registries():
    from bench.datasets import DATASETS
    from bench.methods import METHODS

    return {"methods": METHODS, "datasets": DATASETS, "backbones": BACKBONES}


def list_registries() -> str:
    blocks = []
    for title, reg in registries().items():
        rows = list(reg.describe())
        blocks.append(f"{title}:\n" + tabulate(rows, tablefmt="plain"))
    profiles = [(name, _profile_text(cfg)) for name, cfg in PROFILES.items()]
    blocks.append("profiles:\n" + tabulate(profiles, tablefmt="plain"))
    return "\n\n".join(blocks)


def _profile_text(cfg: TrainConfig) -> str:
    return (f"{cfg.cycles} cycles x {cfg.epochs_per_cycle} epochs, SGD lr {cfg.lr}, "
            f"momentum {cfg.momentum}, batch {cfg.batch_size}")


def parse_seeds(text: str) -> list[int]:
    """'5' -> 0..4, '2-4' -> 2,3,4, '0,3' -> 0,3."""
    text = str(text).strip()
    try:
        if "," in text:
            seeds = [int(s) for s in text.split(",") if s.strip()]
        elif "-" in text.lstrip("-"):
            lo, hi = text.split("-", 1)
            seeds = list(range(int(lo), int(hi) + 1))
        else:
            n = int(text)
            if n < 1:
                raise BenchError(f"--seeds {text}: need at least one seed (e.g. --seeds 5 or 0-4)")
            seeds = list(range(n))
    except ValueError:
        raise BenchError(f"--seeds {text}: expected N, A-B or a comma list of ints") from None
    if not seeds or min(seeds) < 0:
        raise BenchError(f"--seeds {text}: seeds must be non-negative and at least one")
    return seeds


def resolve_run(args):
    """Validate every name and override before any data is loaded."""
    from bench.datasets import DATASETS
    from bench.methods import create_method, method_params

    seeds = parse_seeds(args.seeds)
    base = get_profile(args.profile)
    DATASETS.get(args.dataset)
    if args.backbone is not None:
        BACKBONES.get(args.backbone)
    names = [m.strip() for m in args.method.split(",") if m.strip()]
    raw = parse_set(args.overrides)
    owned = {name: field_types(method_params(name)) for name in names}
    train_keys = field_types(base)
    valid = set(train_keys).union(*owned.values())
    for key in raw:
        if key not in valid:
            raise choices_error("--set key", key, sorted(valid))
    cfg = apply_overrides(base, {k: v for k, v in raw.items() if k in train_keys})
    methods = [create_method(n, {k: v for k, v in raw.items() if k in owned[n]}) for n in names]
    return seeds, methods, cfg


def run(args) -> int:
    from .runner import default_device, make_experiment, run_seed

    seeds, methods, cfg = resolve_run(args)
    if args.pretrained or args.weights:
        cfg = dataclasses.replace(cfg, pretrained=True)
    bundle, backbone = load_for_run(args, cfg)  # bad images stop here, before training
    for method in methods:  # e.g. more heads than classes: one line, before any training
        method.check(bundle.num_classes)
    weights = resolve_weights(backbone, cfg.pretrained, args.weights, args.download)
    device = args.device or default_device()
    groups, counts = [], {"done": 0, "skipped": 0}
    jobs = [(m, s) for m in methods for s in seeds]
    bar = tqdm(jobs, desc="runs", unit="run", disable=args.no_progress)
    for method, seed in bar:
        bar.set_postfix(method=method.name, seed=seed)
        exp = make_experiment(bundle, backbone, method, cfg, weights=weights)
        status, path = run_seed(exp, bundle, method, seed, args.results, device=device,
                                force=args.force, progress=not args.no_progress)
        counts[status] += 1
        groups.append((exp, path))
    bar.close()
    print(summary_table(groups))
    print(f"{counts['done']} trained, {counts['skipped']} already done; records in {args.results}/")
    return 0
