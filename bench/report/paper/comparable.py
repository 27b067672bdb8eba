"""Whether re-run rows may stand beside the paper's published ones
(`bench report --published-rows`): each re-run block's protocol against the
one that made the published numbers.

A copied row is ranked with the re-run rows of its block, so both must come
from one protocol. Each re-run config of a block that takes copied rows is
compared, from its record's config.json, with the paper's:

- training settings: every hashed TrainConfig field against `--profile
  paper` (the released code's protocol) or `paper-text` (the paper's text),
  whichever is closer: lr, momentum, batch size, augmentation, the
  backbone's implementation and ImageNet weight version, ...;
- pretrained: ImageNet weights (both paper profiles load them);
- epochs: 10 cycles of 5;
- image size: the pixels that profile gives this dataset, backbone and
  method (bench.core.sizes; LS/MbLS/MixUp/DCA train at 150 px under `paper`);
- split sizes: the dataset's published counts (as `bench data check`),
  from config.json's `split_sizes` (records before it: the validation and
  test sizes of its predictions; the training size is then not checked).

Any difference stops the report in one line naming each, unless
`--published-rows-anyway`; then the tables' footnote names them.
"""
from __future__ import annotations

import dataclasses

from bench.core.config import PROFILES, TrainConfig
from bench.core.errors import BenchError
from bench.core.settings import hashed
from bench.core.sizes import resolve_sizes
from bench.report.render.tables import (backbone_name, dataset_name, method_name, order_backbones,
                                        ordered_methods)

FLAG = "--published-rows-anyway"
PAPER_PROFILES = ("paper", "paper-text")  # the released code's protocol, the paper's text
SIZE_KEYS = ("augment_size", "image_size", "test_size")  # as Sizes: augment, train, test
# named on their own, not as settings of the profile
APART = SIZE_KEYS + ("pretrained", "cycles", "epochs_per_cycle")
SPLITS = ("train", "val", "test")


def paper_data(dataset: str) -> tuple[dict, int]:
    """(published split counts, image size in px) of one of the paper's datasets."""
    # start-up: `import bench.api` loads this module, and bench.datasets imports
    # every dataset module (and PIL): only when a copied row's sizes are checked
    from bench.datasets import chaoyang, kvasir, medmnist
    from bench.datasets.filelist import FileIndex

    return {"chaoyang": (chaoyang.PUBLISHED, FileIndex.default_size),
            "kvasir": (kvasir.PUBLISHED, FileIndex.default_size),
            "pathmnist": (medmnist.PATHMNIST_PUBLISHED, medmnist.OFFICIAL_SIZES[0])}[dataset]


def _text(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _closest(train: dict) -> tuple[str, dict, list[str]]:
    """(profile, its hashed fields, the keys that differ) of the paper
    profile with the fewest differences in the settings not named apart."""
    found = []
    for name in PAPER_PROFILES:
        ref = hashed(PROFILES[name])
        found.append((name, ref, [k for k in ref if k not in APART and train[k] != ref[k]]))
    return min(found, key=lambda f: len(f[2]))


def _method(name: str):
    """The trained method (its released_train_size), or a stand-in with none."""
    # start-up: `import bench.api` loads this module, and bench.methods imports
    # every method module: the registry only when a name is looked up
    from bench.methods import METHODS

    try:
        return METHODS.get(name)()
    except BenchError:
        return type("Unregistered", (), {"released_train_size": 0})()


def _splits(record) -> dict:
    """Split -> size the record trained / was tested on."""
    sizes = record.config.get("split_sizes")
    if isinstance(sizes, dict):
        return {s: int(sizes[s]) for s in SPLITS if s in sizes}
    preds = record.predictions  # an older record: its saved val / test labels
    return {s: len(preds[f"{s}_labels"]) for s in ("val", "test") if f"{s}_labels" in preds}


def differences(record, dataset: str, backbone: str) -> list[str]:
    """What in the protocol of `record` differs from the paper's, each in
    words ('epochs 1 = 1 x 1 (paper: 50 = 10 x 5)'); [] when nothing does."""
    config = record.config
    if not isinstance(config.get("train"), dict):
        return ["training settings not recorded (config.json has no 'train')"]
    defaults = hashed(TrainConfig())  # a field added since the record: its default
    train = {**defaults, **{k: v for k, v in config["train"].items() if k in defaults}}
    profile, ref, keys = _closest(train)
    out = [f"{k} {_text(train[k])} (paper: {_text(ref[k])})" for k in keys]
    if not train["pretrained"]:
        out.append("from scratch (paper: ImageNet weights)")
    cycles, per = train["cycles"], train["epochs_per_cycle"]
    if (cycles, per) != (ref["cycles"], ref["epochs_per_cycle"]):
        out.append(f"epochs {cycles * per} = {cycles} x {per} (paper: "
                   f"{ref['cycles'] * ref['epochs_per_cycle']} = {ref['cycles']} x "
                   f"{ref['epochs_per_cycle']})")
    counts, px = paper_data(dataset)
    used = tuple(int(train[k]) for k in SIZE_KEYS)
    if any(used):  # records older than the used sizes in config.json: not known
        cfg = dataclasses.replace(PROFILES[profile], backbone_impl=train["backbone_impl"])
        try:
            want = dataclasses.astuple(resolve_sizes(cfg, px, backbone,
                                                     _method(config.get("method", ""))))
        except BenchError:  # timm's Swin under `paper`: the implementation is named above
            want = used
        if used != want:
            out.append(f"image size {'/'.join(map(str, used))} px augment/train/test (paper: "
                       f"{'/'.join(map(str, want))})")
    sizes = _splits(record)
    if any(sizes[s] != counts[s] for s in sizes):
        out.append(f"split sizes {'/'.join(f'{sizes[s]:,}' for s in sizes)} "
                   f"{'/'.join(sizes)} (paper: {'/'.join(f'{counts[s]:,}' for s in sizes)})")
    return out


def block_differences(runs, blocks, labels=None) -> dict[tuple, list[str]]:
    """(dataset, backbone) -> one text per group of the block's re-run
    configs that differ alike: '(SL1H, LS): epochs ...; from scratch ...';
    blocks and rows in the tables' order."""
    out: dict[tuple, list[str]] = {}
    for ds in sorted({ds for ds, _ in blocks}):
        for bb in order_backbones({b for d, b in blocks if d == ds}):
            firsts: dict[tuple, object] = {}  # (row, config) -> one of its records
            for r in runs:
                if (r.dataset, r.backbone) == (ds, bb):
                    firsts.setdefault((r.method, r.chash), r)
            order = [m for sec in ordered_methods({m for m, _ in firsts}) for m in sec]
            seen: dict[tuple, list[str]] = {}  # differences -> the rows that have them
            for (method, _), r in sorted(firsts.items(), key=lambda i: order.index(i[0][0])):
                diff = tuple(differences(r.record, ds, bb))
                if diff:
                    seen.setdefault(diff, []).append(method_name(method, labels))
            if seen:
                out[(ds, bb)] = [f"({', '.join(dict.fromkeys(rows))}): {'; '.join(diff)}"
                                 for diff, rows in seen.items()]
    return out


def refusal(found: dict, labels=None) -> BenchError:
    """The one-line error naming every difference and the flag that places
    the copied rows anyway."""
    blocks = " | ".join(f"{dataset_name(ds, labels)} / {backbone_name(bb, labels)} {t}"
                        for (ds, bb), texts in found.items() for t in texts)
    return BenchError("--published-rows: the re-run rows beside the paper's published ones "
                      f"were not trained as those were, so a table would rank unlike runs "
                      f"together: {blocks}; add {FLAG} to place them anyway (each table's "
                      "footnote then names these differences)")
