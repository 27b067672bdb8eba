"""`Record`: one run record as the rest of the harness reads it.

A record folder (bench.core.store) holds config.json, metrics.json and
predictions.npz, and may hold the kept weights (model.safetensors) and
evaluation sets beyond the test split (bench.core.evalfiles). A Record
parses each at most once, when first asked for (a report of 360 records
that finds every value in its cache never opens a predictions file), and is the only reader of them outside bench.core: the
report, the sweep's summaries, TensorBoard export and bench.results all go
through it. Arrays load with allow_pickle=False: a record is data, never code.
"""
from __future__ import annotations

import os
import zipfile
from functools import cached_property
from pathlib import Path

import numpy as np

from bench.core.errors import BenchError
from bench.core import evalfiles, files, store, weightsfile

# The run's cost as metrics.json stores it (tables' --cost columns, CSVs).
COSTS = ("n_params", "train_seconds", "train_images_per_s", "infer_ms_per_image")


class Record:
    """The record folder `path` (under the results root `root`)."""

    def __init__(self, path, root=None):
        self.path = Path(path)
        self.root = Path(root) if root is not None else store.RecordKey.root_of(self.path)
        self.key = store.RecordKey.parse(self.path, self.root)

    def __repr__(self) -> str:
        return f"Record({self.key.label})"

    # ------------------------------------------------------------ files --
    @cached_property
    def metrics(self) -> dict:
        """metrics.json (OSError / ValueError when missing or unreadable)."""
        obj = files.read_json(self.path / "metrics.json")
        if not isinstance(obj, dict):
            raise ValueError("metrics.json: not an object")
        return obj

    @cached_property
    def config(self) -> dict:
        """config.json, or {} where an older record has none or it is unreadable."""
        try:
            obj = files.read_json(self.path / "config.json")
        except (OSError, ValueError):
            return {}
        return obj if isinstance(obj, dict) else {}

    @cached_property
    def predictions(self) -> dict[str, np.ndarray]:
        """val/test logits [N, M, K] and labels [N], never unpickled."""
        with np.load(self.path / "predictions.npz", allow_pickle=False) as z:
            return {k: z[k] for k in z.files}

    @cached_property
    def damaged(self) -> str | None:
        """Why the record cannot be used (store.verify), or None when intact."""
        try:
            metrics = self.metrics
        except FileNotFoundError:
            return "metrics.json: missing"
        except (OSError, ValueError):
            return "metrics.json: unreadable"
        return store.check(self.path, metrics)

    # ----------------------------------------------------------- fields --
    @property
    def dataset(self) -> str:
        return self.config.get("dataset", self.key.dataset)

    @property
    def backbone(self) -> str:
        return self.config.get("backbone", self.key.backbone)

    @property
    def method(self) -> str:
        return self.config.get("method", self.key.method)

    @property
    def config_hash(self) -> str:
        return self.key.config_hash

    @property
    def seed(self) -> int:
        return int(self.config.get("seed", self.key.seed))

    @property
    def heads(self) -> int:
        return int(self.config.get("heads", 1))

    def stored(self, split: str = "test") -> dict[str, float]:
        """The measures the trainer stored for `split` (bench.calib.measures.stored)."""
        return {k: float(v) for k, v in (self.metrics.get(split) or {}).items()}

    @property
    def cost(self) -> dict[str, float]:
        return {k: float(self.metrics[k]) for k in COSTS if self.metrics.get(k) is not None}

    @property
    def history(self) -> dict:
        return self.metrics.get("history") or {}

    @property
    def provenance(self) -> dict:
        return self.config.get("provenance", {})

    @property
    def digest(self) -> str:
        """What identifies this state of the predictions, for caches: their
        recorded sha256, else (older records) size and modification time."""
        st = os.stat(self.path / "predictions.npz")
        sha = ((self.metrics.get("files") or {}).get("predictions.npz") or {}).get("sha256", "")
        return sha or f"{st.st_size}:{st.st_mtime_ns}"

    @cached_property
    def validation(self) -> tuple | None:
        """(labels [N], number of classes) of the validation split that
        predictions.npz holds, what every calibrator is fitted on; None where
        it holds none (an earlier record format kept the test split only) or
        an empty one."""
        try:
            with np.load(self.path / "predictions.npz", allow_pickle=False) as z:
                if not {"val_logits", "val_labels"} <= set(z.files):
                    return None
                labels, k = np.asarray(z["val_labels"]), int(z["val_logits"].shape[-1])
        except (OSError, ValueError, IndexError, zipfile.BadZipFile):
            return None
        return (labels, k) if labels.size else None

    @property
    def has_validation(self) -> bool:
        return self.validation is not None

    # ------------------------------------------------ weights and eval sets --
    @property
    def has_weights(self) -> bool:
        """Whether the record was written with its selected checkpoint (--keep-weights)."""
        return store.WEIGHTS in (self.metrics.get("files") or {})

    def load_weights(self) -> dict:
        """The kept state dict, after its checksum is checked (BenchError naming
        the file when it is missing, damaged or was never kept)."""
        if not self.has_weights:
            raise BenchError(f"{self.key.label}: no kept weights (train it with "
                             "--keep-weights, or evaluate at run time: bench run ... --eval)")
        expected = self.metrics["files"][store.WEIGHTS]
        return weightsfile.load(self.path / store.WEIGHTS, expected)

    @property
    def weights_digest(self) -> str:
        """The kept weights' recorded sha256 ('' without kept weights)."""
        return str(((self.metrics.get("files") or {}).get(store.WEIGHTS) or {})
                   .get("sha256", ""))

    @cached_property
    def evals(self) -> dict:
        """Evaluation set name -> its manifest entry ({} when none, or when the
        manifest is damaged: `eval_damage` says so)."""
        return evalfiles.read_manifest(self.path)[0]

    def eval_damage(self) -> list[tuple[str, str]]:
        """(set or manifest, why) of every damaged evaluation file."""
        return evalfiles.check(self.path)

    def eval_set(self, name: str) -> dict[str, np.ndarray]:
        """One evaluation set's arrays, checksum checked, never unpickled."""
        return evalfiles.load(self.path, name)

    def eval_digest(self, name: str) -> str:
        """What identifies a set's stored logits, for caches."""
        return str(self.evals.get(name, {}).get("sha256", ""))

    @property
    def mtime(self) -> float:
        """When metrics.json was written (the --config latest rule), 0 if unknown."""
        try:
            return (self.path / "metrics.json").stat().st_mtime
        except OSError:
            return 0.0


def records(root, paths=None) -> list[Record]:
    """Every complete record under `root` (store.iter_records), or the given paths."""
    root = Path(root)
    if paths is None:
        return [Record(k.path(root), root) for k in store.iter_records(root)]
    return [Record(p, root) for p in paths]


def failure_reports(root) -> list[tuple[Path, dict, str]]:
    """(file, its contents, kind) of every file that tells of a run that did
    not finish (store.failure_files): kind 'not-done' for a record whose
    metrics.json is not marked done, 'failed' for a failure file. An
    unreadable file is reported with the reason, never raised."""
    out = []
    for f in store.failure_files(root):
        try:
            obj = files.read_json(f)
            obj = obj if isinstance(obj, dict) else {}
        except (OSError, ValueError) as err:
            obj = {"reason": f"unreadable {f.name}: {err}"}
        is_record = f.name == "metrics.json"
        if not (is_record and obj.get("status") == store.DONE):
            out.append((f, obj, "not-done" if is_record else "failed"))
    return out


def has_metrics(record) -> bool:
    """Whether the record folder holds a metrics.json at all (done or not)."""
    return (Path(record) / "metrics.json").exists()


def read_side(record, suffix: str) -> dict | None:
    """A record's side file <config-hash>/_sweep/seed<k>.<suffix> (progress.json,
    failed.json, ...) as a dict, None when absent or unreadable."""
    obj = files.read_json(store.side_file(record, suffix), default=None)
    return obj if isinstance(obj, dict) else None
