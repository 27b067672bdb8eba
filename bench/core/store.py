"""Run records on disk, written atomically.

results/<dataset>/<backbone>/<method>/<config-hash>/seed<k>/   (':' in a name is '+')
    config.json       resolved config, seed, provenance
    metrics.json      val/test metrics, best cycle, timing, status
    predictions.npz   per-head val/test logits [N, M, K] and labels
    model.safetensors the selected checkpoint (only with --keep-weights)
    evals.json, eval-<set>.npz   logits of further evaluation sets (bench.core.evalfiles)
results/<dataset>/<backbone>/<method>/<config-hash>/_sweep/
    seed<k>.<kind>    side files of a run that is not (yet) a record: lock,
                      progress, failure, log, cycle-end state

This module is the one place that composes or parses these paths: a record
is named by its `RecordKey` (path, parse, label), its side files by
`side_file`; every other module goes through them.

A record is assembled in a hidden sibling directory and renamed into place
only when every file is written, so a killed run never looks finished, and
`--force` replaces an old record only once the new one is complete.
metrics.json, written last, holds the sha256 and size of the other files
and a digest of its own contents (`digest`, over everything but itself), so
`verify` can tell a record damaged or edited later from an intact one; a
damaged record is moved aside (`move_aside`), never deleted. Records of
earlier versions (no `files`, no `digest`) are checked by reading them.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.core.errors import BenchError
from bench.core import files
from bench.core.files import read_json, write_json
# No ':' in a folder (bench.core.pathnames): a name's ':' (timm:NAME) is '+' in its
# folder, read back as ':'; older ':' folders are still read and found
# (RecordKey.path); a name with '+' is refused (ambiguous).
from bench.core.pathnames import PATH_COLON, name_of_path, path_name

DONE = "done"
FILES = ("config.json", "predictions.npz")  # checksummed in metrics.json["files"]
# the selected checkpoint (bench run --keep-weights): a record file when
# present, checksummed beside FILES, never part of the config hash
WEIGHTS = "model.safetensors"
OPTIONAL_FILES = (WEIGHTS,)
DIGEST = "digest"  # metrics.json's own sha256, over its other keys
# a record's own name as the harness writes it (no leading zeros, so a key's
# path is the folder it was parsed from); moved-aside copies do not match
SEED_DIR = re.compile(r"seed(0|[1-9]\d*)")
SIDE_DIR = "_sweep"  # a config's side folder, beside its seed folders
LEVELS = ("dataset", "backbone", "method", "config_hash")  # the folders above seed<k>


def check_level_name(level: str, value: str) -> None:
    """One-line BenchError unless `value` can name a record folder level."""
    if "/" in value or os.sep in value or value in (".", ".."):
        raise BenchError(f"{level} {value!r}: not a folder name (a record is "
                         "<dataset>/<backbone>/<method>/<config-hash>/seed<k>)")
    if PATH_COLON in value:
        raise BenchError(f"{level} {value!r}: no '+' in a name (record folders write ':' "
                         f"as '+', so it would read back as {name_of_path(value)!r}); rename it")


def require_writable_dir(path, flag: str) -> Path:
    """One-line error unless `path` is a folder this process can write, or can be
    created as one; checked before anything is trained or written (creates nothing)."""
    if not str(path).strip():
        raise BenchError(f"{flag} '': empty path; give a folder name (an empty one would "
                         "write into the current directory)")
    path = Path(path)
    virtual = _virtual_root(path)
    if virtual:
        raise BenchError(f"{flag} {path}: is under {virtual}, a kernel filesystem that holds "
                         "no files; give a folder on a disk")
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent  # the nearest existing ancestor must take the new folder
    subject = "" if probe == path else f"cannot be created: {probe} "
    if not probe.is_dir():
        raise BenchError(f"{flag} {path}: {subject}is a file, not a folder; "
                         "give a writable folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise BenchError(f"{flag} {path}: {subject}is not writable; give a writable folder")
    return path


def require_results_dir(path, flag: str = "--results") -> Path:
    """One-line error unless `path` names an existing folder of run records."""
    if not str(path).strip():
        raise BenchError(f"{flag} '': empty path; give the folder `bench run` wrote its "
                         "records to")
    path = Path(path)
    if not path.is_dir():
        what = "is a file" if path.exists() else "does not exist"
        raise BenchError(f"{flag} {path}: {what}; give the folder `bench run` wrote its "
                         "records to")
    return path


VIRTUAL_ROOTS = ("/proc", "/sys", "/dev")  # kernel filesystems: mkdir there fails even as root


def _virtual_root(path: Path) -> str | None:
    resolved = path.expanduser().resolve()
    return next((root for root in VIRTUAL_ROOTS
                 if resolved == Path(root) or Path(root) in resolved.parents), None)


# ------------------------------------------------------------ record key --
@dataclass(frozen=True)
class RecordKey:
    """What names one run record: <dataset>/<backbone>/<method>/<config-hash>/seed<k>
    under a results root. Each name is one folder level, so none may hold a '/'
    (nor a '+', which stands for ':' in a folder: `path_name`)."""

    dataset: str
    backbone: str
    method: str
    config_hash: str
    seed: int
    # the folders a parsed key was read from (an older ':' one); () = path_name's
    parsed: tuple = field(default=(), compare=False, repr=False)

    def __post_init__(self):
        for level in LEVELS:
            check_level_name(level, getattr(self, level))

    @property
    def seed_name(self) -> str:
        return f"seed{self.seed}"

    @property
    def label(self) -> str:
        """'<dataset>/<backbone>/<method>/<config-hash>/seed<k>': the record's
        path under its results root, as the sweep and `bench check` print it."""
        return "/".join((*self._levels(), self.seed_name))

    @property
    def run_id(self) -> str:
        """'<config-hash>/seed<k>': the run within its config (a resume state's key)."""
        return f"{self.config_hash}/{self.seed_name}"

    def _levels(self) -> tuple[str, ...]:
        """The folder names above seed<k>."""
        return self.parsed or tuple(path_name(getattr(self, level)) for level in LEVELS)

    def path(self, root) -> Path:
        """The record folder under `root`; a record written in a ':' folder
        (before '+') is found there, so a rerun never trains it twice."""
        path = Path(root).joinpath(*self._levels(), self.seed_name)
        names = tuple(getattr(self, level) for level in LEVELS)
        # a name without ':' has one folder: no look on disk (path() is called
        # for every record of a grid, many times)
        if self.parsed or names == self._levels() or path.exists():
            return path
        older = Path(root).joinpath(*names, self.seed_name)
        return older if older.exists() else path

    @classmethod
    def parse(cls, path, root=None) -> "RecordKey":
        """The key of the record folder `path` (its last five levels, or the whole
        of it relative to `root`); one-line BenchError when it is not a record's path."""
        path = Path(path)
        try:
            parts = path.relative_to(root).parts if root is not None else path.parts[-5:]
        except ValueError:  # not under root
            parts = ()
        if len(parts) != 5 or not SEED_DIR.fullmatch(parts[4]):
            raise BenchError(f"{path}: not a run record folder (want <results>/<dataset>/"
                             "<backbone>/<method>/<config-hash>/seed<k>)")
        return cls(*map(name_of_path, parts[:4]), int(parts[4][4:]), parsed=tuple(parts[:4]))

    @staticmethod
    def root_of(path) -> Path:
        """The results root a record folder lies under."""
        return Path(path).parents[len(LEVELS)]


def record_dir(root, dataset: str, backbone: str, method: str, chash: str, seed: int) -> Path:
    return RecordKey(dataset, backbone, method, chash, seed).path(root)


def side_file(record, suffix: str) -> Path:
    """`<config-hash>/_sweep/seed<k>.<suffix>`: a side file of the record folder
    `record`, beside it and never inside it, so nothing that reads records sees it."""
    record = Path(record)
    return record.parent / SIDE_DIR / f"{record.name}.{suffix}"


def state_path(record, group: str | None = None) -> Path:
    """Where an unfinished run saves its state at each cycle end (bench.train.resume):
    `<config-hash>/_sweep/seed<k>.state.safetensors` beside the record (data only,
    bench.core.statefile); a fused group's state is named after its first member
    plus a digest of the whole group (`group`)."""
    return side_file(record, f"group-{group}.state.safetensors" if group
                     else "state.safetensors")


def iter_side_records(root, kinds) -> list[RecordKey]:
    """The keys of the records under `root` that have a side file of one of
    `kinds` (suffixes such as 'lock'), each once, ordered by side file."""
    root = Path(root)
    keys: dict[RecordKey, None] = {}
    for side in sorted(root.glob(f"*/*/*/*/{SIDE_DIR}/seed*")):
        seed, _, kind = side.name.partition(".")
        if kind in kinds and SEED_DIR.fullmatch(seed):
            keys.setdefault(RecordKey.parse(side.parent.with_name(seed), root))
    return list(keys)


def failure_files(root) -> list[Path]:
    """Files that may tell of a failed run: `*.failed.json` (and `failed.json`)
    anywhere, and every record's metrics.json; none under a hidden folder (a
    record still being written)."""
    root = Path(root)
    found = (set(root.rglob("*.failed.json")) | set(root.rglob("failed.json"))
             | set(root.glob("*/*/*/*/seed*/metrics.json")))
    return [f for f in sorted(found)
            if not any(part.startswith(".") for part in f.relative_to(root).parts)]


def key_fields(root, file) -> dict:
    """The record fields a file's path under `root` tells, as text ('' where it
    tells none): dataset, backbone and method from the top folders, the seed
    from a 'seed<k>...' part, the config hash from the fourth folder of a path
    at least five deep. Lenient: a failure file may lie anywhere."""
    parts = Path(file).relative_to(root).parts
    fields = dict(zip(LEVELS[:3], map(name_of_path, parts[:-1])))
    seed = next((p for p in parts if p.startswith("seed") and p[4:].split(".")[0].isdigit()), "")
    return {**{k: fields.get(k, "") for k in LEVELS[:3]}, "seed": seed[4:].split(".")[0],
            "config_hash": parts[3] if len(parts) >= 5 else ""}


def is_complete(path: Path) -> bool:
    try:
        return read_json(path / "metrics.json").get("status") == DONE
    except (OSError, ValueError):
        return False


def written_since(path: Path, t0: float) -> bool:
    """A complete record written at or after `t0` (epoch seconds): the one an
    attempt started at t0 made, not an older one a --force run is replacing."""
    return is_complete(path) and (path / "metrics.json").stat().st_mtime >= t0


def write_record(path: Path, config: dict, metrics: dict, arrays: dict[str, np.ndarray],
                 extras: dict[str, bytes] | None = None) -> Path:
    """Write config/metrics/predictions under a temporary name, then rename.
    `extras`: further record files (OPTIONAL_FILES: the kept weights) as bytes,
    checksummed in metrics.json with the others."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    extras = extras or {}
    unknown = sorted(set(extras) - set(OPTIONAL_FILES))
    if unknown:
        raise ValueError(f"not a record file: {unknown} (known: {OPTIONAL_FILES})")
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        np.savez(tmp / "predictions.npz", **arrays)
        write_json(tmp / "config.json", config, durable=True)
        for name, data in extras.items():
            _write_durable(tmp / name, data)
        sums = {name: file_sum(tmp / name) for name in (*FILES, *extras)}
        # last: marks the record complete and vouches for the files above and itself
        write_json(tmp / "metrics.json", with_digest({**metrics, "status": DONE, "files": sums}),
                   durable=True)
        _replace_dir(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def _write_durable(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _replace_dir(new: Path, target: Path) -> None:
    if not target.exists():
        os.rename(new, target)
        return
    old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
    os.rename(target, old)  # the old record is kept until the new one is in place
    os.rename(new, target)
    shutil.rmtree(old, ignore_errors=True)


def metrics_digest(metrics: dict) -> str:
    """sha256 of metrics.json's contents less the digest itself, in a canonical
    form (sorted keys, compact separators) that a JSON round trip keeps."""
    body = {k: v for k, v in metrics.items() if k != DIGEST}
    return files.json_sha256(body)


def with_digest(metrics: dict) -> dict:
    # the digest is of what a reader will load: values json stores as text
    # (default=str) are digested as that text
    plain = json.loads(json.dumps(metrics, default=str))
    return {**plain, DIGEST: metrics_digest(plain)}


def load_predictions(path: Path) -> dict[str, np.ndarray]:
    """The arrays of the record at `path` (the record folder, not the .npz)."""
    with np.load(Path(path) / "predictions.npz", allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def iter_records(root) -> list[RecordKey]:
    """The key of every complete record under `root` (temporaries and moved-aside
    copies are skipped), in the order of their paths."""
    return [k for k in iter_seed_dirs(root) if is_complete(k.path(root))]


def iter_seed_dirs(root) -> list[RecordKey]:
    """The key of every record folder under `root`, complete or damaged."""
    root = Path(root)
    if not root.is_dir():
        return []
    return [RecordKey.parse(p, root) for p in sorted(root.glob("*/*/*/*/seed*"))
            if p.is_dir() and SEED_DIR.fullmatch(p.name)]


def datasets_under(root) -> list[str]:
    """The datasets that have complete records under `root`, sorted."""
    return sorted({k.dataset for k in iter_records(root)})


# ---------------------------------------------------------------- verify --
def file_sum(path: Path) -> dict:
    return {"sha256": files.sha256(path), "size": os.path.getsize(path)}


def verify(path) -> str | None:
    """None if the record at `path` is intact, else a short reason such as
    'predictions.npz: checksum mismatch', 'config.json: missing'.

    Records written before checksums existed are checked by reading their files."""
    path = Path(path)
    try:
        metrics = read_json(path / "metrics.json")
    except FileNotFoundError:
        return "metrics.json: missing"
    except (OSError, ValueError):
        return "metrics.json: unreadable"
    return check(path, metrics)


def check(path, metrics) -> str | None:
    """verify's checks given metrics.json's contents, already read."""
    path = Path(path)
    if not isinstance(metrics, dict) or metrics.get("status") != DONE:
        return "metrics.json: not marked done"
    if DIGEST in metrics and metrics[DIGEST] != metrics_digest(metrics):
        return "metrics.json: contents changed since written (digest mismatch)"
    sums = metrics.get("files")
    if not isinstance(sums, dict):
        return _verify_by_reading(path)
    # the files every record has, then those it was written with (its kept weights)
    for name in (*FILES, *(n for n in OPTIONAL_FILES if n in sums)):
        reason = check_file(path, name, sums)
        if reason:
            return f"{name}: {reason}"
    return None


def check_file(path, name: str, sums) -> str | None:
    """Why the record file `name` does not match its recorded checksum, or None."""
    return _check_sum(Path(path) / name, (sums or {}).get(name))


def _check_sum(path: Path, expected) -> str | None:
    if not path.is_file():
        return "missing"
    if not isinstance(expected, dict):
        return "no checksum recorded"
    try:
        actual = file_sum(path)
    except OSError:
        return "unreadable"
    if actual["size"] != expected.get("size"):
        return f"size mismatch ({actual['size']} bytes, recorded {expected.get('size')})"
    return None if actual["sha256"] == expected.get("sha256") else "checksum mismatch"


def _verify_by_reading(path: Path) -> str | None:
    # load_predictions takes the record folder, read_json the file itself
    for name, read in (("config.json", read_json),
                       ("predictions.npz", lambda npz: load_predictions(npz.parent))):
        if not (path / name).is_file():
            return f"{name}: missing"
        try:
            read(path / name)
        except Exception:  # noqa: BLE001 - any failure to read means damaged (zip, json, OS)
            return f"{name}: unreadable"
    return None


def move_aside(path) -> Path:
    """Rename a damaged record to seed<k>.damaged-<UTC time> beside it (kept, never
    deleted) so its seed can be retrained; returns the new path."""
    return files.move_aside(path)
