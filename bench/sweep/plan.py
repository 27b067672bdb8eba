"""From options to a grid: the one planning path of `bench run` and
`bench.api.run`.

`plan(opts)` checks every flag, name and `--set` value (one BenchError line
each, before anything is written), resolves the profile and builds the specs;
bench.sweep.run.run_sweep(grid.specs, opts) trains what is missing. `opts` is a
bench.sweep.options.RunOptions (the command line builds one from its
arguments: no argparse object reaches this package).
"""
from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass

from bench.core import store
from bench.core.config import (PROFILE_METHOD_SETS, TrainConfig, apply_overrides, convert,
                               field_types, get_profile)
from bench.core.device import check_device
from bench.core.errors import BenchError, choices_error
from bench.core.evalfiles import parse_all
from bench.core.flags import check_needs
from bench.core.paper import DENS, ENSEMBLE_OF, PAPER_BACKBONES, PAPER_METHODS
from bench.core.registry import expand_names
from bench.core.seeds import parse_seeds
from bench.datasets import DATASETS
from bench.datasets.cache import check_data_paths
from bench.methods import (METHOD_GROUPS, METHODS, create_method, every_method, method_params,
                           training_methods)
from bench.sweep.evals import check, check_sizes, spec_test_size
from bench.sweep.executors import check_options
from bench.sweep.grid import build_specs
from bench.sweep.options import RunOptions
from bench.train.backbones import BACKBONES, canonical_backbone


@dataclass(frozen=True)
class Grid:
    """The runs of one `bench run`: specs in order, {config hash: Experiment}."""

    specs: list
    experiments: dict
    datasets: list


def plan(opts: RunOptions) -> Grid:
    """Every check, then the grid (nothing trained or written but --results)."""
    check_run_flags(opts)
    check_data_paths(opts.data_root, opts.data_opts)
    check_options(opts)
    store.require_writable_dir(opts.results, "--results")
    seeds, methods, cfg, datasets, backbones, per_method = resolve_run(opts)
    evals = parse_all(opts.evals)  # checked by check_run_flags; here against the grid
    own_dataset(evals, datasets)
    specs, experiments = build_specs(datasets, backbones, methods, per_method, seeds, cfg, opts)
    if evals:  # a MedMNIST source's file at each run's test size, before anything is built
        check_sizes(evals, {spec_test_size(s) for s in specs})
    if opts.keep_weights or evals:  # output only: the specs' hashes are unchanged
        texts = tuple(spec.text for spec in evals)
        specs = [dataclasses.replace(s, keep_weights=opts.keep_weights, evals=texts)
                 for s in specs]
    return Grid(specs, experiments, datasets)


def resolve_run(opts: RunOptions):
    """Validate every name and override before any data is loaded: (seeds,
    methods, training config, datasets, backbones, per-method --set values)."""
    seeds = parse_seeds(opts.seeds)
    base = get_profile(opts.profile)
    datasets = expand_names(opts.dataset, DATASETS.names(), "dataset", DATASETS)
    backbones = None
    if opts.backbone is not None:
        backbones = [canonical_backbone(b) for b in
                     expand_names(opts.backbone, BACKBONES.names(), "backbone", BACKBONES,
                                  aliases={"all": list(PAPER_BACKBONES),
                                           "paper": list(PAPER_BACKBONES)})]
    names = expand_names(opts.method, training_methods(), "method", METHODS,
                         aliases={"paper": list(PAPER_METHODS), DENS: [ENSEMBLE_OF],
                                  **{g: list(n) for g, n in METHOD_GROUPS.items()}})
    check_ensemble(opts.method, seeds)
    for level, values in (("dataset", datasets), ("backbone", backbones or ()), ("method", names)):
        for value in values:  # each a record folder level (no '/', no '+')
            store.check_level_name(level, value)
    given = dict(opts.overrides)  # (key, value): typed at the edge (set_pair), or text
    owned = {name: field_types(method_params(name)) for name in names}
    train_keys = field_types(base)
    valid = set(train_keys).union(*owned.values())
    for key in given:
        if key not in valid:
            raise unknown_key(key, names, sorted(valid))
    cfg = apply_overrides(base, {k: v for k, v in given.items() if k in train_keys})
    # checked once, by apply_overrides (the profile by get_profile); --pretrained
    # and --weights only set a bool that declares no range
    cfg = _initial_weights(cfg, opts)
    preset = PROFILE_METHOD_SETS.get(opts.profile, {})  # the profile's method presets
    # each value converted to its field's declared type here, once: the specs
    # carry typed values and no worker parses text again
    per_method = {n: {k: convert(k, v, owned[n][k]) for k, v in {**preset, **given}.items()
                      if k in owned[n]} for n in names}
    methods = [create_method(n, per_method[n]) for n in names]
    return seeds, methods, cfg, datasets, backbones, per_method


def check_ensemble(method_text: str, seeds) -> None:
    """`--method dens` (D-Ens, a derived row: bench report averages the sl1h
    seeds) trains sl1h; an ensemble needs two seeds at least."""
    asked = [t.strip() for t in str(method_text).split(",")]
    if DENS in asked and len(seeds) < 2:
        raise BenchError(f"--method {DENS}: D-Ens is the mean of the {ENSEMBLE_OF} seeds' "
                         f"predictions and needs at least 2 seeds (--seeds {len(seeds)} given); "
                         "give --seeds 2 or more")


def check_run_flags(opts: RunOptions) -> None:
    """Flags that need no data: refused before any grid is built or written."""
    if opts.json and not opts.dry_run:
        # a real run prints tables and a summary; JSON lines describe the plan only
        raise BenchError("--json describes the planned runs and needs --dry-run; add --dry-run "
                         "(nothing is trained) or drop --json")
    check_needs(opts)  # --partition without --executor slurm, ...
    check_packages(opts)
    check_evals(opts.evals)
    if opts.device is not None:
        check_device(opts.device, indexed=True)
    if opts.weights is not None and not opts.weights.strip():
        raise BenchError("--weights '': empty path; give a .safetensors file or a torch state "
                         "dict, or drop --weights")


def check_evals(texts) -> tuple:
    """Every --eval value parsed and its source found (bench.sweep.evals)."""
    return check(texts)


def own_dataset(specs, datasets) -> None:
    """ood:NAME / site:NAME of a dataset the grid trains on is no other set."""
    for spec in specs:
        if not spec.is_path and spec.source in datasets:
            raise BenchError(f"--eval {spec.text}: {spec.source} is a dataset this grid trains "
                             "on (its test split is each run's own); give another dataset "
                             "or a path")


def needed_packages(opts: RunOptions) -> list[tuple[str, tuple, str]]:
    """(flag, modules it imports, pip package) for every flag given whose work
    needs a package beyond the core dependencies (pyproject's `extra`)."""
    needs = []
    if opts.tensorboard:
        needs.append(("--tensorboard", ("tensorboard", "torch.utils.tensorboard"),
                      "tensorboard"))
    if opts.executor == "slurm":
        needs.append(("--executor slurm", ("submitit",), "submitit"))
    if opts.weights and opts.weights.endswith(".safetensors"):
        needs.append(("--weights FILE.safetensors", ("safetensors.torch",), "safetensors"))
    if opts.keep_weights:
        needs.append(("--keep-weights", ("safetensors.torch",), "safetensors"))
    return needs


def check_packages(opts: RunOptions) -> None:
    """Import what each flag will need now, before any run starts: a package
    missing (or one that is there but cannot be imported, such as tensorboard
    without protobuf) is one line, not a failure after hours of training."""
    for flag, modules, pip in needed_packages(opts):
        try:
            for module in modules:
                importlib.import_module(module)
        except ImportError as err:
            why = (str(err).splitlines() or [type(err).__name__])[0][:120]
            raise BenchError(f"{flag} needs the {pip} package, which cannot be imported here "
                             f"({why}); pip install {pip} (or mhml-bench[extra]), or drop "
                             f"{flag}") from None


def unknown_key(key: str, names: list[str], valid: list[str]) -> BenchError:
    """An unknown --set key; when other methods have it, name them."""
    owners = [m for m in every_method()
              if key in {f.name for f in dataclasses.fields(method_params(m))}]
    if owners:
        return BenchError(f"--set {key}: not a key of {', '.join(names)}; it belongs to "
                          f"{', '.join(owners)} (add one of them to --method, or drop it)")
    return choices_error("--set key", key, valid)


def _initial_weights(cfg: TrainConfig, opts: RunOptions) -> TrainConfig:
    """--pretrained / --no-pretrained over the profile's default; --weights
    implies weights. The grid drops a profile default for smallcnn."""
    pretrained, weights = opts.pretrained, opts.weights
    if pretrained is False and weights:
        raise BenchError(f"--weights {weights} and --no-pretrained contradict each "
                         "other; give one (--weights: that file, --no-pretrained: from scratch)")
    if pretrained is not None:
        cfg = dataclasses.replace(cfg, pretrained=pretrained)
    return dataclasses.replace(cfg, pretrained=True) if weights else cfg
