"""Corrupted test sets (--eval shift): medmnistc's own corruptions, seeded per
image, resized as the run's test images, cached with a digest and rebuilt
when the digest differs."""
from __future__ import annotations

import os
import random

import numpy as np
import pytest
from PIL import Image

from bench.core.errors import BenchError
from bench.datasets import corruptions as C
from bench.datasets import shift
from bench.datasets.medmnist import resize

RNG = np.random.default_rng(0)


def image224(grey: bool = False) -> np.ndarray:
    img = RNG.integers(0, 256, (224, 224, 3), dtype=np.uint8)
    if grey:
        img[..., 1] = img[..., 2] = img[..., 0]
    return img


def medmnistc_apply(set_name: str, name: str, img: np.ndarray, severity: int, seed: int):
    """medmnistc's registry object, called as its DatasetManager calls it, every
    random source seeded with `seed` first."""
    from medmnistc.corruptions.registry import CORRUPTIONS_DS

    corruptor = CORRUPTIONS_DS[set_name][name]
    random.seed(seed)
    np.random.seed(seed)
    corruptor.rng = np.random.default_rng(seed)
    return np.asarray(corruptor.apply(Image.fromarray(img).convert("RGB"), severity - 1))


@pytest.mark.parametrize("dataset, names", [
    ("pathmnist", None),  # all 11 of MedMNIST-C's PathMNIST set
    ("kvasir", ("gaussian_noise", "impulse_noise", "shot_noise", "zoom_blur", "motion_blur")),
])
def test_our_corruption_is_medmnistc_apply(dataset, names):
    set_name, chosen = C.corruptions(dataset, names)
    assert set_name == ("pathmnist" if dataset == "pathmnist" else C.GENERAL)
    reference_set = "pathmnist" if dataset == "pathmnist" else C.GENERAL_FROM
    for k, (name, corruptor) in enumerate(chosen.items()):
        img = image224(grey=k % 2 == 1)
        severity = 1 + k % 5
        ours = C.corrupt(img, corruptor, name, severity, seed=0, index=7)
        ref = medmnistc_apply(reference_set, name, img, severity, C.image_seed(0, name, severity, 7))
        ref = np.repeat(ref[..., None], 3, -1) if ref.ndim == 2 else ref
        np.testing.assert_array_equal(ours, ref, err_msg=name)
        assert not np.array_equal(ours, img), name  # it did corrupt


def test_sets_per_dataset_and_bad_names():
    assert list(C.corruptions("chaoyang")[1]) == list(C.corruptions("pathmnist")[1])
    assert len(C.corruptions("pathmnist")[1]) == 11
    general = C.corruptions("digits")[1]
    assert len(general) == 13 and not set(C.GENERAL_LEFT_OUT) & set(general)
    assert C.corruptions("dermamnist")[0] == "dermamnist"
    with pytest.raises(BenchError, match="not in the pathmnist set"):
        C.corruptions("pathmnist", ("zoom_blur",))


def test_random_corruptions_depend_on_the_image_seed_only():
    _, chosen = C.corruptions("pathmnist", ("bubble",))
    img = image224()
    a = C.corrupt(img, chosen["bubble"], "bubble", 3, 0, 1)
    np.random.seed(123)  # whatever ran before does not matter
    random.seed(9)
    assert np.array_equal(a, C.corrupt(img, chosen["bubble"], "bubble", 3, 0, 1))
    assert not np.array_equal(a, C.corrupt(img, chosen["bubble"], "bubble", 3, 0, 2))


# ------------------------------------------------------------- the cache --
def write_pathmnist(root, n_test=5):
    arrays = {}
    for split, n in (("train", 4), ("val", 3), ("test", n_test)):
        arrays[f"{split}_images"] = RNG.integers(0, 255, (n, 28, 28, 3), dtype=np.uint8)
        arrays[f"{split}_labels"] = (np.arange(n) % 9).astype(np.uint8).reshape(n, 1)
    np.savez(root / "pathmnist.npz", **arrays)
    return arrays


@pytest.fixture()
def tiny_path(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))
    shift._get.cache_clear()
    arrays = write_pathmnist(tmp_path)
    yield tmp_path, arrays
    shift._get.cache_clear()


ONLY = ("pixelate", "bubble")  # cheap; bubble draws at random


def get(root, **kw):
    shift._get.cache_clear()
    return shift.get("pathmnist", 28, root, only=ONLY, progress=False, **kw)


def test_a_built_set_holds_each_corruption_resized_as_the_test_images(tiny_path):
    root, arrays = tiny_path
    s = get(root)
    assert s.blocks == (("clean", 0),) + tuple((c, v) for c in ONLY for v in C.SEVERITIES)
    assert s.images.shape == (11, 5, 28, 28, 3)
    np.testing.assert_array_equal(s.labels, arrays["test_labels"].ravel())
    src = resize(arrays["test_images"], 224)  # no 224 px file: upsampled, and said so
    assert "upsampled from 28" in s.meta["recipe"]["source"]
    np.testing.assert_array_equal(s.images[0], resize(src, 28))
    _, chosen = C.corruptions("pathmnist", ONLY)
    b = s.blocks.index(("bubble", 4))
    for i in (0, 4):
        one = C.corrupt(src[i], chosen["bubble"], "bubble", 4, shift.SEED, i)
        np.testing.assert_array_equal(s.images[b, i], resize(one[None], 28)[0])


def test_the_cache_is_reused_and_rebuilt_when_its_digest_differs(tiny_path, monkeypatch):
    root, _ = tiny_path
    first = get(root)
    built = []
    real = shift.build_set
    monkeypatch.setattr(shift, "build_set", lambda *a, **k: built.append(1) or real(*a, **k))
    again = get(root)
    assert built == [] and again.digest == first.digest  # whole: reused
    # the array edited (one byte): its sha256 differs from the manifest's
    with open(first.path, "r+b") as f:
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 1]))
    # an edit is later than the build; within one clock tick the mtime could
    # stay equal, and only a changed size or mtime makes the lookup re-hash
    st = first.path.stat()
    os.utime(first.path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    rebuilt = get(root)
    assert built == [1] and rebuilt.digest == first.digest  # the same seeded bytes again
    assert list(first.path.parent.glob(f"{first.path.name}.damaged-*"))  # kept aside, stamped
    # a manifest that names another recipe digest
    man = first.path.with_suffix(".json")
    man.write_text(man.read_text().replace(rebuilt.meta["recipe_digest"], "0" * 64))
    get(root)
    assert built == [1, 1]
    # another recipe (a changed source image) is another set, built beside it
    arrays = np.load(root / "pathmnist.npz")
    changed = {k: arrays[k] for k in arrays.files}
    changed["test_images"][0, 0, 0, 0] ^= 1
    np.savez(root / "pathmnist.npz", **changed)
    other = get(root)
    assert built == [1, 1, 1] and other.path != first.path and other.digest != first.digest


def test_an_unbuilt_set_is_one_line_when_building_is_not_allowed(tiny_path):
    root, _ = tiny_path
    with pytest.raises(BenchError, match="bench data shift --dataset pathmnist"):
        get(root, build=False)


def test_a_built_set_is_found_without_decoding_or_hashing_again(tiny_path, monkeypatch):
    """Each run's process looks its set up: for a MedMNIST file whose size and
    mtime are as when it was last decoded, and an array file as when built,
    the lookup decodes no image and reads no array byte to hash it."""
    root, _ = tiny_path
    first = get(root)
    real, real_sha = shift.source, shift.files.sha256

    def no(*a, **k):
        raise AssertionError("decoded or hashed again")

    monkeypatch.setattr(shift, "source", no)
    monkeypatch.setattr(shift.files, "sha256", no)
    again = get(root)
    assert again.path == first.path and again.digest == first.digest
    np.testing.assert_array_equal(again.labels, first.labels)
    # the source file rewritten: decoded again (its digest is not trusted)
    monkeypatch.setattr(shift.files, "sha256", real_sha)
    decoded = []
    monkeypatch.setattr(shift, "source", lambda *a: decoded.append(1) or real(*a))
    arrays = np.load(root / "pathmnist.npz")
    np.savez(root / "pathmnist.npz", **{k: arrays[k] for k in arrays.files})
    st = (root / "pathmnist.npz").stat()
    os.utime(root / "pathmnist.npz", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert get(root).path == first.path and decoded == [1]  # same bytes: same set


def test_build_sets_builds_each_size_once_and_tables_them(tiny_path, monkeypatch):
    """`bench data shift`'s loop: one row per size, built then found in the cache."""
    root, _ = tiny_path
    monkeypatch.chdir(root)  # the table names each file relative to here
    first = shift.build_sets("pathmnist", [28, 16], root, only=ONLY, progress=False)
    assert [(b.size, b.cached) for b in first] == [(28, False), (16, False)]
    shift._get.cache_clear()  # as a new process: found on disk
    again = shift.build_sets("pathmnist", [16], root, only=ONLY, progress=False)
    assert again[0].cached and again[0].set.path == first[1].set.path
    lines = shift.built_table(first + again).splitlines()
    assert [c.strip() for c in lines[0].split("|")[1:-1]] == [
        "dataset", "px", "corruption set", "blocks", "images", "MB", "seconds", "", "file"]
    for b, line in zip(first + again, lines[2:]):
        cells = [c.strip() for c in line.split("|")[1:-1]]
        assert cells[:5] == ["pathmnist", str(b.size), "pathmnist", "11", "5"]
        assert float(cells[5]) == round(b.set.path.stat().st_size / 2**20, 1)
        assert cells[7:] == ["cached" if b.cached else "built",
                             f"cache/shift/{b.set.path.name}"]
