"""Evaluation sets beyond the test split: a model's logits on them, stored
beside its record (bench.core.evalfiles).

Two ways to have the model: right after training, the selected checkpoint
still in memory (`bench run ... --eval`, bench.train.experiment.run_seed), or
later from the weights a record kept (`bench eval`, `model_for`: the
architecture rebuilt from config.json, the state dict from
model.safetensors, checksum checked first). Both predict with the training
loop's own `predict_logits`, in the run's evaluation batches, so a set's
logits do not depend on the route (tested: the reloaded model gives the
record's test logits bit for bit on the CPU).
"""
from __future__ import annotations

import dataclasses
import time

import numpy as np
import torch

from bench.core import evalfiles
from bench.core.config import TrainConfig, load_kwargs
from bench.core.errors import BenchError
from bench.core.settings import recorded
from bench.datasets import digits
from bench.datasets.evalsets import load_eval
from bench.methods import METHODS
from bench.train.backbones import build_model, model_arch
from bench.train.loop import predict, to_device_images

CHUNK_BATCHES = 16  # evaluation batches copied to the device at once


def train_config(record) -> TrainConfig:
    """The record's full training config (speed switches included), as trained."""
    full = record.config.get("train_full")
    if not isinstance(full, dict):
        raise BenchError(f"{record.key.label}: config.json has no train_full; it cannot be "
                         "rebuilt for evaluation")
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    return TrainConfig(**{k: v for k, v in full.items() if k in known})


def model_for(record, device="cpu"):
    """The record's model with its kept weights, in eval mode on `device`."""
    state = record.load_weights()  # checksum first: a damaged file is never loaded
    cfg = train_config(record)
    classes = record.config.get("classes") or []
    torch.manual_seed(0)  # the weights are replaced: any start will do, the same each time
    model, _ = build_model(record.backbone, cfg.image_size, record.heads, len(classes),
                           pretrained=False, impl=cfg.backbone_impl, drop_path=cfg.drop_path,
                           arch=arch_of(record.config))
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        first = str(err).splitlines()[0]
        raise BenchError(f"{record.key.label}: kept weights do not fit the rebuilt "
                         f"{record.backbone} ({first})") from None
    return model.to(device).eval()


def arch_of(config: dict) -> tuple:
    """The model arch (Method.arch) a record's model was built with: its
    method rebuilt with the recorded hyper-parameters (a key the record lacks
    reads as its legacy value, bench.core.settings.recorded; a method that is not
    registered here, e.g. a plugin not loaded, builds the plain model: ())."""
    name = config.get("method")
    if name not in METHODS:
        return ()
    method = METHODS.get(name)()
    params = recorded(method.params, config.get("method_params") or {})
    return model_arch(type(method)(method.name, params))


def mc_dropout_of(config: dict) -> float:
    """The MC-Dropout rate a record's model was built with (0: none)."""
    arch = arch_of(config)
    return float(arch[1]) if arch and arch[0] == "mcdropout" else 0.0


def predict_array(model, images: np.ndarray, cfg: TrainConfig, device) -> np.ndarray:
    """Per-head logits [N, M, K] of uint8 images [N, H, W, 3] (a memory map is
    fine): copied to the device CHUNK_BATCHES evaluation batches at a time,
    each chunk a whole number of batches, so the batches are the loop's."""
    device = torch.device(device)
    step = cfg.eval_batch_size * CHUNK_BATCHES
    # np.array copies: a read-only memory map (a cached shift set) would reach
    # torch as a non-writable tensor
    out = [predict(model, to_device_images(np.array(images[i:i + step]), device), cfg)
           for i in range(0, len(images), step)]
    if not out:
        raise BenchError("an evaluation set without images")
    return np.concatenate(out)


def evaluate_set(model, data, cfg: TrainConfig, device) -> dict[str, np.ndarray]:
    """The arrays of one set (bench.core.evalfiles' layout) from its images:
    `data` is a bench.datasets.evalsets.EvalData."""
    lead = data.images.shape[:-3]  # (N,) for ood / site, (B, N) for shift
    # every block in one pass of evaluation batches (a shift set's 56 blocks of a
    # small test split are then a few batches, not 56 calls: on a busy CPU each
    # call's thread start-up cost more than its images); a memory map is read
    # a chunk at a time by predict_array
    logits = predict_array(model, data.images.reshape(-1, *data.images.shape[-3:]), cfg, device)
    arrays = {"logits": logits.reshape(*lead, *logits.shape[1:])}
    if data.labels is not None:
        arrays["labels"] = np.asarray(data.labels, np.int64)
    arrays.update(data.extra_arrays)
    return arrays


def store_sets(record_dir, model, sets: list, cfg: TrainConfig, device, how: str) -> list:
    """Evaluate every set (EvalData) and store it in the record folder; `how`
    says where the model came from ('trained' or the weights' sha256).
    Returns (name, images, seconds) per set."""
    done = []
    for data in sets:
        t0 = time.perf_counter()
        arrays = evaluate_set(model, data, cfg, device)
        seconds = time.perf_counter() - t0
        n = int(np.prod(data.images.shape[:-3]))
        evalfiles.write(record_dir, data.spec.name, arrays,
                        {**data.meta, "spec": data.spec.text, "kind": data.spec.kind,
                         "model": how, "images": n, "seconds": round(seconds, 3),
                         "device": str(device), "made": time.strftime("%Y-%m-%dT%H:%M:%S")})
        done.append((data.spec.name, n, seconds))
    return done


def evaluate_record(record, sets: list, device="cpu") -> list:
    """`bench eval` for one record: rebuild its model from the kept weights and
    store every set."""
    model = model_for(record, device)
    return store_sets(record.path, model, sets, train_config(record), device,
                      f"weights sha256:{record.weights_digest[:16]}")


# ------------------------------------------------ which sets a record needs --
_LOADED: dict = {}  # (spec, dataset, size, classes, data root, options) -> EvalData


def eval_data(spec, dataset: str, size: int, classes, data_root=None, options: tuple = (),
              progress: bool = False):
    """The images of `spec` (an EvalSpec) for runs of `dataset` tested at `size`
    px, loaded once per process (a sweep's records share them)."""
    key = (spec, dataset, int(size), tuple(classes), data_root, tuple(options))
    if key not in _LOADED:
        _LOADED[key] = load_eval(spec, dataset, int(size), list(classes), data_root=data_root,
                                 options=options, build=True, progress=progress)
    return _LOADED[key]


def missing_sets(record, sets: list) -> list:
    """The sets (EvalData) a record has not stored on the same images: a set
    stored with another digest (a rebuilt corruption set, an edited folder)
    is evaluated again; a damaged set file is too."""
    damaged = {name for name, _ in record.eval_damage()}
    return [d for d in sets if d.spec.name in damaged or d.spec.name not in record.evals
            or evalfiles.images_digest(record.evals[d.spec.name])
            != evalfiles.images_digest(d.meta)]


def record_options(record, given: tuple = (), progress: bool = False) -> tuple:
    """The adapter options that load the record's own splits: config.json's
    `data_options` (an older record: the options its data identity names),
    then `given` (--data-opt) for the keys the record leaves open (paths, a
    cache folder); a given value that contradicts the record's is refused."""
    recorded = record.config.get("data_options")
    if not isinstance(recorded, dict):
        recorded = _options_in_identity(record.key.dataset, record.config.get("data") or {})
    recorded = {k: str(v) for k, v in recorded.items()}
    extra = {k: str(v) for k, v in given if k not in ("download", "progress")}
    clash = sorted(k for k in extra if k in recorded and extra[k] != recorded[k])
    if clash:
        k = clash[0]
        raise BenchError(f"--data-opt {k}={extra[k]}: {record.key.label} was trained and "
                         f"tested with {k}={recorded[k]} (config.json); its evaluation sets "
                         "are built from its own splits, so drop the --data-opt")
    return tuple(sorted({**load_kwargs(False, progress, ()), **extra, **recorded}.items()))


def _options_in_identity(dataset: str, identity: dict) -> dict:
    """A record written before config.json kept `data_options`: digits keeps
    each of its options in its data identity under the option's own name
    (the other adapters' options are file paths, which --data-opt gives)."""
    if dataset != "digits":
        return {}

    return {k: v for k, v in identity.items() if k in digits.OPTIONS}


def check_split(record, data) -> None:
    """A shift set is the record's own test split corrupted: its labels must be
    the record's test labels, or the set belongs to other images."""
    if data.spec.kind != "shift":
        return
    mine = np.asarray(record.predictions["test_labels"])
    theirs = np.asarray(data.labels)
    if mine.shape != theirs.shape or not np.array_equal(mine, theirs):
        raise BenchError(f"{record.key.label}: its shift set would be built from {len(theirs)} "
                         f"test images, but the record was tested on {len(mine)} other ones "
                         "(its data options do not rebuild its test split)")


def record_sets(record, specs, data_root=None, given: tuple = (), progress: bool = False):
    """The EvalData of every spec at the record's own test size and classes,
    from its own data options (`record_options`); a shift set is checked to
    be its test split."""
    cfg = train_config(record)
    size = cfg.test_size or cfg.image_size
    classes = record.config.get("classes") or []
    options = record_options(record, given, progress)
    sets = [eval_data(s, record.key.dataset, size, classes, data_root, options, progress)
            for s in specs]
    for data in sets:
        check_split(record, data)
    return sets
