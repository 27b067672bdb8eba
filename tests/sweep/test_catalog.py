"""bench.sweep.catalog, the tables `bench list` prints: a block per registry
holding each registered name, the profiles as they differ from the paper's,
and one row per --set key as its dataclass field declares it."""
from __future__ import annotations

import dataclasses

from bench.core.config import PROFILES, TrainConfig
from bench.sweep.catalog import keys_table, list_registries, registries


def blocks() -> dict[str, list[str]]:
    """title -> the block's lines, from `bench list`'s text."""
    out = {}
    for block in list_registries().split("\n\n"):
        title, _, body = block.partition(":\n")
        out[title] = body.splitlines()
    return out


def test_every_registry_is_a_block_with_each_name_in_order():
    listed = blocks()
    for title, reg in registries().items():
        assert [line.split()[0] for line in listed[title]] == list(reg.names())
        assert all(line.split()[1] == "built-in" for line in listed[title])


def test_each_profile_says_its_schedule_and_what_differs_from_paper():
    listed = dict(line.split(None, 1) for line in blocks()["profiles"])
    assert list(listed) == list(PROFILES)
    paper = PROFILES["paper"]
    assert listed["paper"] == (f"{paper.cycles} cycles x {paper.epochs_per_cycle} epochs, "
                               f"SGD lr {paper.lr}, momentum {paper.momentum}, "
                               f"batch {paper.batch_size}")
    for name, cfg in PROFILES.items():
        for f in dataclasses.fields(TrainConfig):
            differs = getattr(cfg, f.name) != getattr(paper, f.name)
            assert (f"{f.name}={getattr(cfg, f.name)}" in listed[name]) == differs, (name, f.name)


def test_keys_table_has_each_training_key_then_the_method_keys():
    rows = keys_table().splitlines()[2:]
    training = [f.name for f in dataclasses.fields(TrainConfig)]
    assert [r.split()[0] for r in rows[:len(training)]] == training
    assert all(r.split()[-1] == "all" for r in rows[:len(training)])
    by_key = {r.split()[0]: r.split() for r in rows[len(training):]}
    # ls's own epsilon, as its registry line says ("label smoothing, epsilon 0.05")
    assert by_key["epsilon"][:3] == ["epsilon", "float", "0.05"] and by_key["epsilon"][-1] == "ls"


def test_the_conformal_scores_are_listed_as_their_registry_describes_them():
    from bench.calib import conformal

    listed = blocks()["conformal scores (bench report --sets: prediction sets of each score)"]
    assert [line.split()[0] for line in listed] == ["lac", "aps", "raps"]  # the three built-ins
    for line, (name, text) in zip(listed, conformal.SCORES.describe()):
        assert line.split(None, 2) == [name, "built-in", text]


def test_the_library_backbones_follow_the_registered_ones():
    """`bench list` shows timm:NAME and tv:NAME (issue 49's done-when), right
    after the registered backbones, each with its record folder's '+'."""
    titles = list(blocks())
    library = "backbones by library (--backbone timm:NAME / tv:NAME)"
    assert titles.index(library) == titles.index("backbones") + 1
    rows = [line.split(None, 2) for line in blocks()[library]]
    assert [(name, lib) for name, lib, _ in rows] == [("timm:NAME", "timm"),
                                                     ("tv:NAME", "torchvision")]
    assert "records in timm+NAME/" in rows[0][2] and "records in tv+NAME/" in rows[1][2]
