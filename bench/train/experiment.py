"""Train one seed of one (dataset, backbone, method, config) and store it."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from bench.core import codeunits, store, weightsfile
from bench.core.plugins import BUILTIN
from bench.datasets import DATASETS
from bench.methods import METHODS
from bench.train.backbones import (BACKBONES, backbone_impl, build_model, drop_path_rate,
                                   model_arch)
from bench.core.config import TrainConfig, config_hash, result_fields
from bench.core.device import default_device
from bench.calib import measures
from bench.calib.metrics import head_probs
from bench.core.provenance import provenance
from bench.train.evaluate import store_sets
from bench.train.loop import train
from bench.train.resume import CycleState
from bench.train.weights import WeightsSpec


@dataclass(frozen=True)
class Experiment:
    """Everything that defines a group of seeds (and nothing that doesn't)."""

    dataset: str
    backbone: str
    method: str
    method_params: tuple  # sorted (key, value) pairs of the method's dataclass
    heads: int
    train: TrainConfig
    data_identity: tuple  # sorted (key, value) pairs from the adapter
    weights: Optional[WeightsSpec] = None  # initial backbone weights (None = random)
    # (role, identity) for method, dataset, backbone: origin and source sha256
    # (bench.core.plugins.code_identity); a plugin's code enters the hash
    code: tuple = ()
    # sorted (name, value) of the run options declared hashed=True (bench.core.flags)
    options: tuple = ()
    # the method's own code (bench.core.codeunits.own_code) as sorted pairs,
    # () while it is the pinned version: then the hash is as before
    method_code: tuple = ()
    # sorted (unit, digest) of the method's own and the shared code: config.json
    # `code_units`, what `bench run` and `bench report` compare
    code_units: tuple = ()

    def payload(self) -> dict:
        return {
            "dataset": self.dataset, "data": dict(self.data_identity),
            "backbone": self.backbone, "method": self.method,
            "method_params": dict(self.method_params), "heads": self.heads,
            "train": result_fields(self.train),
            # Only when set, so random-init hashes are unchanged.
            **({"weights": self.weights.label} if self.weights else {}),
            # Only for plugin code, so built-in hashes are unchanged (the
            # harness version and git commit in provenance identify that code).
            **({"plugin_code": self.plugin_code()} if self.plugin_code() else {}),
            # Only when declared, so every existing hash is unchanged.
            **({"run_options": dict(self.options)} if self.options else {}),
            # Only once the method's own code moves off its pinned version.
            **({"method_code": dict(self.method_code)} if self.method_code else {}),
        }

    def plugin_code(self) -> dict:
        """role -> {modules, sha256} of each plugin part: what the hash sees
        (not the route it was loaded by, so --plugin and an entry point agree)."""
        return {role: {"modules": ident["modules"], "sha256": ident["sha256"]}
                for role, ident in self.code_dict().items() if ident["origin"] != BUILTIN}

    def code_dict(self) -> dict:
        """role -> identity as plain JSON (what config.json's "code" holds)."""
        return {role: {k: list(v) if isinstance(v, tuple) else v for k, v in ident}
                for role, ident in self.code}

    @property
    def chash(self) -> str:
        return config_hash(self.payload())

    def key(self, seed: int) -> store.RecordKey:
        return store.RecordKey(self.dataset, self.backbone, self.method, self.chash, seed)

    def record_dir(self, root, seed: int) -> Path:
        return self.key(seed).path(root)


def make_experiment(bundle, backbone: str, method, cfg: TrainConfig,
                    weights: Optional[WeightsSpec] = None, dataset: str | None = None,
                    options: tuple = ()) -> Experiment:
    """`dataset`: the adapter's registered name (default: the bundle's name);
    `options`: the hashed run options' (name, value) pairs."""
    cfg = dataclasses.replace(cfg, **used_sizes(bundle))
    return Experiment(
        dataset=bundle.name, backbone=backbone, method=method.name,
        method_params=tuple(sorted(method.params_dict().items())), heads=method.heads,
        train=cfg, data_identity=tuple(sorted(bundle.identity.items())), weights=weights,
        code=code_identities(method, dataset or bundle.name, backbone),
        options=tuple(sorted(options)), **method_code(method),
    )


def method_code(method) -> dict:
    """The Experiment fields of the method's code identity (bench.core.codeunits)."""
    own = codeunits.own_code(method)
    return {"method_code": _frozen(own) if own else (),
            "code_units": tuple(sorted(codeunits.record_units(method).items()))}


def code_identities(method, dataset: str, backbone: str) -> tuple:
    """(role, identity) of the code behind each part; a name no registry
    knows (a test double) has none."""
    parts = (("method", METHODS, method.name, (type(method),)),
             ("dataset", DATASETS, dataset, ()), ("backbone", BACKBONES, backbone, ()))
    return tuple((role, _frozen(reg.code_identity(name, *more)))
                 for role, reg, name, more in parts if name in reg)


def _frozen(identity: dict) -> tuple:
    """Hashable (the Experiment is a dict key of the summary table)."""
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v)
                        for k, v in identity.items()))


def used_sizes(bundle) -> dict:
    """The pixels a run actually uses, read from its splits (grid.bundle_for
    loads each split at its size): what the record and the hash carry."""
    px = {s: int(bundle.split(s).images.shape[1]) for s in ("train", "val", "test")}
    return {"augment_size": px["train"], "image_size": px["val"], "test_size": px["test"]}


def init_model(exp: Experiment, bundle, method, seed: int):
    """Method draws (class weights), then initial weights, both from the seed:
    the one order every training path uses, so fused and single runs agree."""
    method.setup(bundle.num_classes, seed)
    torch.manual_seed(seed)
    return build_model(exp.backbone, exp.train.image_size, method.heads, bundle.num_classes,
                       pretrained=exp.train.pretrained, weights=exp.weights,
                       impl=exp.train.backbone_impl, drop_path=exp.train.drop_path,
                       arch=model_arch(method))


def save_run(path: Path, exp: Experiment, bundle, seed: int, result, n_params: int,
             weights_label: str, device: str, *, keep_weights: bool = False, **extra) -> None:
    """Write one seed's record (config with provenance, metrics, predictions;
    `keep_weights`: the selected checkpoint too, bench.core.weightsfile)."""
    config = {**exp.payload(), "seed": seed, "config_hash": exp.chash,
              "train_full": dataclasses.asdict(exp.train), "classes": bundle.classes,
              "backbone_weights": weights_label, **backbone_fields(exp), **extra,
              **({"dataset_name": bundle.display_name}
                 if getattr(bundle, "display_name", "") else {}),
              # how reports print the backbone (its registration's display_name)
              **({"backbone_name": BACKBONES.display_name(exp.backbone)}
                 if BACKBONES.display_name(exp.backbone) else {}),
              # what `bench report --published-rows` compares with the published counts
              "split_sizes": {s: len(bundle.split(s)) for s in ("train", "val", "test")},
              # the --data-opt values that load these splits again (bench eval)
              "data_options": dict(getattr(bundle, "options", {})),
              "code": exp.code_dict(),
              **({"code_units": dict(exp.code_units)} if exp.code_units else {}),
              "provenance": provenance(device)}
    store.write_record(path, config, record_metrics(result, bundle, n_params), {
        "val_logits": result.val_logits, "val_labels": bundle.val.labels,
        "test_logits": result.test_logits, "test_labels": bundle.test.labels,
    }, {store.WEIGHTS: weightsfile.dumps(result.state)} if keep_weights else None)


def backbone_fields(exp: Experiment) -> dict:
    """The library that built the backbone and its stochastic-depth rate (docs/fidelity.md)."""
    impl, rate = exp.train.backbone_impl, exp.train.drop_path
    return {"backbone_impl": backbone_impl(exp.backbone, impl),
            "drop_path_rate": drop_path_rate(exp.backbone, impl, rate)}


def run_seed(exp: Experiment, bundle, method, seed: int, results, *, device: str | None = None,
             force: bool = False, progress: bool = True, on_step=None,
             keep_weights: bool = False, evals: tuple = ()) -> tuple[str, Path]:
    """Train and store one seed; returns ('skipped'|'done', record path).
    `on_step(step, loss)`: bench.train.loop.run_loop's progress hook. A run
    killed earlier resumes from its last cycle end (bench.train.resume).
    `keep_weights`: the record keeps its selected checkpoint; `evals`: sets
    (bench.datasets.evalsets.EvalData) evaluated with it right after training."""
    path = exp.record_dir(results, seed)
    if store.is_complete(path) and not force:
        return "skipped", path
    device = device or default_device()
    model, bb = init_model(exp, bundle, method, seed)
    state = CycleState(store.state_path(path), exp.key(seed).run_id)
    result = train(model, method, exp.train, bundle, seed, device=device, progress=progress,
                   on_step=on_step, state=state)
    save_run(path, exp, bundle, seed, result, n_params(model), bb.weights, device,
             keep_weights=keep_weights)
    state.clear()  # only once the record is complete
    evaluate_trained(path, model, result, exp.train, evals, device)
    return "done", path


def evaluate_trained(path: Path, model, result, cfg: TrainConfig, evals, device) -> None:
    """Store each evaluation set of a run just trained, with its selected
    checkpoint (still in memory) loaded into `model`."""
    if not evals:
        return

    model.load_state_dict(result.state)
    store_sets(path, model.to(device), list(evals), cfg, device, "trained")


def n_params(model) -> int:
    return sum(p.numel() for p in model.parameters())


def record_metrics(result, bundle, n_params: int) -> dict:
    return {
        "val": measures.stored_values(head_probs(result.val_logits), bundle.val.labels),
        "test": measures.stored_values(head_probs(result.test_logits), bundle.test.labels),
        # which definition of each made them: a report recomputes a value
        # whose measure has a newer version (bench.report.numbers.cells)
        "measure_versions": {m: measures.get(m).version for m in measures.stored()},
        "best_cycle": result.best_cycle,
        "cycle_val_auc": result.cycle_val_auc,
        "train_seconds": result.train_seconds,
        "train_images_per_s": result.train_images_per_s,
        "steps": result.steps,
        "infer_ms_per_image": result.infer_ms_per_image,
        "n_params": n_params,
        # per epoch: mean training loss, lr; per cycle: validation metrics
        "history": result.history,
    }
