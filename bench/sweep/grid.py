"""Expand `bench run` options into a grid of runs, one per (dataset, backbone,
method, seed), each keyed by the hash of its effective config.

A RunSpec carries everything a fresh process needs to train one run (names,
the method's --set values converted to their types, the training config,
paths), and serialises to JSON so the same spec goes to a local worker
process or to a SLURM job. Derived rows
(deep ensembles, temperature scaling) are computed from records and never
appear here.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path

from bench.core import plugins, statefile, store
from bench.core.config import TrainConfig, load_kwargs
from bench.core.errors import BenchError
from bench.core.flags import Options, declared
from bench.core.sizes import resolve_sizes
from bench.datasets import load_dataset
from bench.datasets.cache import dry_run as no_writes, writes_allowed
from bench.sweep import runstate, specjson
from bench.train.backbone_checks import check_arch, check_builds, check_sizes
from bench.train.backbones import create_backbone, has_imagenet_weights, model_arch
from bench.train.experiment import make_experiment
from bench.train.weights import imagenet_tag, resolve_weights


# metadata of a RunSpec field copied from the run options' field of its name
FROM_OPTIONS = {"from_options": True}


@dataclass(frozen=True)
class RunSpec:
    """One run of the grid, self-contained so another process can train it."""

    dataset: str
    backbone: str
    method: str
    # sorted (key, value) pairs owned by this method, each value of its field's
    # type (bench.sweep.plan converts them once; JSON keeps int, float, bool, str)
    method_overrides: tuple
    train: TrainConfig  # before the dataset fixes image_size
    seed: int
    chash: str  # hash of the effective config, computed when the grid is built
    # FROM_OPTIONS: the grid takes these from the run options of the same name
    results: str = dataclasses.field(metadata=FROM_OPTIONS)
    data_root: str | None = dataclasses.field(default=None, metadata=FROM_OPTIONS)
    # None: the worker's default (cuda if visible)
    device: str | None = dataclasses.field(default=None, metadata=FROM_OPTIONS)
    force: bool = dataclasses.field(default=False, metadata=FROM_OPTIONS)
    load_options: tuple = ()  # sorted (key, value) pairs for the dataset adapter
    # explicit initial backbone weights file
    weights: str | None = dataclasses.field(default=None, metadata=FROM_OPTIONS)
    # (augment, train, test) px as the grid resolved them for this method:
    # --fuse methods groups by it (LS at 150 px never steps with CE at 224)
    sizes: tuple = ()
    # (module, sys.path folder) of each plugin the sweep loaded: the worker
    # loads them before resolving a name (bench.core.plugins)
    plugins: tuple = ()
    # output only, never in the hash (issue 33): keep the selected checkpoint,
    # and the --eval texts evaluated right after training (bench.sweep.evals)
    keep_weights: bool = False
    evals: tuple = ()
    # sorted (name, value) pairs of the run options declared `worker=True`
    # (bench.core.flags.Flag): a new one reaches the worker with no edit here;
    # the names of those declared `hashed=True` and set away from their default
    # (they enter the config hash)
    run_options: tuple = ()
    hashed_options: tuple = ()

    @property
    def key(self) -> store.RecordKey:
        return store.RecordKey(self.dataset, self.backbone, self.method, self.chash, self.seed)

    @property
    def record(self) -> Path:
        return self.key.path(self.results)

    @property
    def label(self) -> str:
        return self.key.label

    def option(self, name: str, default=None):
        """A run option declared `worker=True`, as the options held it."""
        return dict(self.run_options).get(name, default)

    @property
    def hashed(self) -> tuple:
        """(name, value) of the run options that enter the config hash."""
        return tuple((k, v) for k, v in self.run_options if k in self.hashed_options)

    def to_json(self) -> str:
        # generated from the fields (bench.sweep.specjson): a new field needs no edit here
        return specjson.dumps(self)

    @classmethod
    def from_json(cls, text: str) -> "RunSpec":
        return specjson.loads(cls, text)


def load_options(opts) -> tuple:
    """Adapter options of a RunOptions (data options, --download) as sorted pairs."""
    return tuple(sorted(load_kwargs(opts.download, not opts.no_progress,
                                    opts.data_opts).items()))


def bundle_for(dataset: str, backbone: str, cfg: TrainConfig, method, data_root: str | None,
               options: tuple = ()):
    """The dataset as one run sees it: each split loaded at the run's size
    (bench.core.sizes.resolve_sizes: per-method sizes, the backbone's
    minimum, explicit --set sizes). Loads are cached per size in this process."""
    base = load_bundle(dataset, 0, data_root, options)
    sizes = resolve_sizes(cfg, base.image_size, backbone, method)
    check_sizes(backbone, sizes.train, sizes.test, method.name)  # before loading other sizes
    at = {size: base if size == base.image_size else load_bundle(dataset, size, data_root, options)
          for size in {sizes.augment, sizes.train, sizes.test}}
    return dataclasses.replace(base, train=at[sizes.augment].train, val=at[sizes.train].val,
                               test=at[sizes.test].test)


def default_backbone(dataset: str, data_root: str | None, options: tuple = ()) -> str:
    return load_bundle(dataset, 0, data_root, options).default_backbone


def load_bundle(dataset: str, image_size: int, data_root: str | None, options: tuple):
    """A dataset's splits at `image_size` (0: its own), loaded once per process
    (the grid, the workers and `bench data shift` ask for the same bundle)."""
    bundle = _loaded(dataset, image_size, data_root, options)
    if writes_allowed() and _placeholder(bundle):  # a dry run's: never trained on
        _loaded.cache_clear()
        bundle = _loaded(dataset, image_size, data_root, options)
    return bundle



def native_test_size(dataset: str, data_root: str | None, options: tuple) -> int:
    """The dataset's own test size in px (what a run at its default size tests at)."""
    return int(load_bundle(dataset, 0, data_root, options).test.images.shape[1])

@functools.lru_cache(maxsize=8)
def _loaded(dataset: str, image_size: int, data_root: str | None, options: tuple):
    return load_dataset(dataset, data_root, image_size=image_size, **dict(options))


load_bundle.cache_clear = lambda: _loaded.cache_clear()  # as a new process would start


def _placeholder(bundle) -> bool:
    """A dry run's split pixels (bench.datasets.cache.dry_run): zeros, stride 0."""
    return any(bundle.split(s).images.strides[:1] == (0,) for s in ("train", "val", "test"))


def weights_for(spec: "RunSpec", heads: int, missing_ok: bool = False):
    """The initial weights of a run (None = random): --weights, else under
    --pretrained the ImageNet tag the protocol gives this backbone and head count
    (`missing_ok`: a placeholder when that file is not cached, for --dry-run)."""
    cfg = spec.train
    tag = imagenet_tag(spec.backbone, cfg.backbone_impl, cfg.imagenet_weights, heads)
    return resolve_weights(spec.backbone, cfg.pretrained, spec.weights,
                           dict(spec.load_options).get("download", False),
                           impl=cfg.backbone_impl, tag=tag, missing_ok=missing_ok)


def experiment_for(spec: "RunSpec", method, missing_ok: bool = False):
    """(Experiment, bundle) for a spec, computed the same way by the sweep and the worker."""
    bundle = bundle_for(spec.dataset, spec.backbone, spec.train, method, spec.data_root,
                        spec.load_options)
    return make_experiment(bundle, spec.backbone, method, spec.train,
                           weights=weights_for(spec, method.heads, missing_ok),
                           dataset=spec.dataset, options=spec.hashed), bundle


def check_validation(dataset: str, bundle) -> None:
    """An empty validation split stops the grid in one line: every run picks
    its checkpoint on it (validation AUC at each cycle end) and every
    calibrator is fitted on it."""
    if len(bundle.val) == 0:
        raise BenchError(f"dataset {dataset}: its validation split is empty; every run selects "
                         "its checkpoint and fits +TS on it: give the dataset validation "
                         f"images (its splits: {len(bundle.train)} train, 0 val, "
                         f"{len(bundle.test)} test)")


def check_weights_fit(backbone: str, cfg: TrainConfig, spec) -> None:
    """Build the backbone once and load a --weights file into it: a backbone
    without weights (smallcnn) or a state dict with other keys or shapes fails
    in one line before anything trains."""
    _fit(backbone, cfg.image_size, cfg.backbone_impl, spec)


@functools.lru_cache(maxsize=16)
def _fit(backbone: str, image_size: int, impl: str, spec) -> None:
    create_backbone(backbone, image_size, weights=spec, impl=impl)


def _profile_weights(cfg: TrainConfig, backbone: str, asked: bool) -> TrainConfig:
    """The profile's ImageNet default applies to backbones that have weights;
    one without (smallcnn) trains from scratch unless weights were asked for."""
    if cfg.pretrained and not asked and not has_imagenet_weights(backbone):
        return dataclasses.replace(cfg, pretrained=False)
    return cfg


def build_specs(datasets, backbones, methods, overrides: dict, seeds, cfg: TrainConfig, opts):
    """The grid in order dataset > backbone > method > seed (seeds innermost, so
    a method's seeds finish together). `backbones` None = each dataset's default;
    `methods` are Method objects with their overrides applied, `overrides` maps a
    method name to the typed --set values it owns (replayed by the worker).
    `opts` is the RunOptions (or any object with its fields): every RunSpec
    field of the same name is taken from it (`spec_options`). Under `dry_run`
    ImageNet weights missing from the cache do not stop the grid (their runs
    show as 'no weights'); without --pretrained or --weights a profile's
    ImageNet default is dropped for backbones without weights (smallcnn).
    Returns (specs, {hash: Experiment})."""
    args = (datasets, backbones, methods, overrides, seeds, cfg, opts)
    if not opts.dry_run:
        return _build(*args)

    with no_writes():  # a dry run writes nothing: no image cache, no download
        return _build(*args)


def spec_options(opts) -> dict:
    """The RunSpec fields a run takes from the options by name (those marked
    FROM_OPTIONS), and the adapter's load options."""
    out = {f.name: getattr(opts, f.name) for f in dataclasses.fields(RunSpec)
           if f.metadata.get("from_options")}
    out["results"] = str(out["results"])  # a Path from Python
    # a hashed option at its default leaves the hash alone: adding one to
    # RunOptions moves no existing record (as weights enter only when set)
    hashed = tuple(d.name for d in carried_fields(opts)
                   if d.flag.hashed and getattr(opts, d.name) != d.default)
    return {**out, "load_options": load_options(opts), "run_options": worker_options(opts),
            "hashed_options": hashed}


def worker_options(opts) -> tuple:
    """Sorted (name, value) pairs of the options' fields declared for the worker."""
    return tuple(sorted((d.name, getattr(opts, d.name)) for d in carried_fields(opts)))


def carried_fields(opts) -> list:
    """The options' fields declared `worker=True` or `hashed=True`."""
    if not isinstance(opts, Options):  # a plain object with the fields declares none
        return []
    return [d for d in declared(type(opts)) if d.flag.worker or d.flag.hashed]


def _build(datasets, backbones, methods, overrides: dict, seeds, cfg: TrainConfig, opts):
    given = spec_options(opts)
    data_root, options = given["data_root"], given["load_options"]
    pretrained_asked = bool(opts.pretrained or opts.weights)
    specs, experiments = [], {}
    for dataset in datasets:
        for backbone in backbones or [None]:
            if backbone is None:
                backbone = default_backbone(dataset, data_root, options)
            bcfg = _profile_weights(cfg, backbone, pretrained_asked)
            for method in methods:
                proto = RunSpec(**given, dataset=dataset, backbone=backbone, method=method.name,
                                method_overrides=tuple(sorted(overrides.get(method.name,
                                                                            {}).items())),
                                train=bcfg, seed=0, chash="")
                exp, bundle = experiment_for(proto, method, missing_ok=opts.dry_run)
                # Method/dataset mismatches (e.g. more heads than classes) stop
                # the sweep before anything trains.
                method.check(bundle.num_classes)
                check_arch(backbone, model_arch(method),
                           exp.train.pretrained or exp.weights is not None)
                check_builds(backbone, exp.train.image_size, exp.train.test_size,
                             exp.train.backbone_impl)
                check_validation(dataset, bundle)
                if opts.weights:  # a file that does not fit stops here, not once per run
                    check_weights_fit(backbone, exp.train, exp.weights)
                experiments[exp.chash] = exp
                t = exp.train
                sizes = (t.augment_size, t.image_size, t.test_size)
                carry = plugins.carried(m for c in exp.plugin_code().values()
                                        for m in c["modules"])
                specs += [dataclasses.replace(proto, seed=s, chash=exp.chash, sizes=sizes,
                                              plugins=carry) for s in seeds]
    return specs, experiments


# ------------------------------------------------------------------ status --
def run_status(spec: RunSpec) -> tuple[str, str]:
    """('done' | 'damaged' | 'running' | 'failed' | 'missing', detail) as seen on disk now."""
    damage = store.verify(spec.record) if spec.record.exists() else None
    if damage:
        return "damaged", f"{damage}; a real run moves it aside and retrains it"
    if store.is_complete(spec.record) and not spec.force:
        return "done", ""
    holder = runstate.live_holder(spec.record)
    if holder:
        return "running", holder
    saved = _resume_note(store.state_path(spec.record))
    failure = runstate.read_failure(spec.record)
    if failure:
        return "failed", "; ".join(filter(None, [
            f"{failure.get('reason', '?')} (last step {failure.get('last_step')})", saved]))
    return "missing", saved


def _resume_note(state) -> str:
    """What a rerun does with a killed run's state file (bench.train.resume),
    judged from its header and size alone (a dry run reads no tensors)."""
    if not state.exists():
        return ""
    why = statefile.damage(state)
    if why:
        return f"its resume state is damaged ({why}): a real run sets it aside, trains from step 0"
    return "resumes from its state saved at a cycle end"
