"""Registry, hyper-parameter overrides and the config hash."""
import dataclasses

import pytest

from bench.core.config import PROFILES, TrainConfig, apply_overrides, config_hash, parse_set, result_fields
from bench.core.errors import BenchError
from bench.core.registry import Registry


def test_registry_registers_and_rejects_duplicates():
    reg = Registry("widget")

    @reg.register("a", "first")
    def a():
        return 1

    assert reg.get("a")() == 1 and reg.names() == ["a"]
    assert dict(reg.describe()) == {"a": "first"}
    with pytest.raises(BenchError, match="duplicate widget name 'a'"):
        reg.register("a", "again")(lambda: 2)


def test_registry_describes_by_the_docstring_or_by_nothing():
    """The file indexes register functions without docstrings: '' describes them."""
    reg = Registry("widget")

    @reg.register("doc")
    def doc():
        """First line.

        More."""

    reg.register("bare")(lambda: 0)
    assert dict(reg.describe()) == {"doc": "First line.", "bare": ""}


def test_registry_unknown_name_lists_valid_ones():
    reg = Registry("widget")
    reg.register("x", "d")(lambda: 0)
    reg.register("y", "d")(lambda: 0)
    with pytest.raises(BenchError) as err:
        reg.get("z")
    assert str(err.value) == "unknown widget 'z'; choose from: x, y"


def test_registry_resolver_for_patterned_names():
    reg = Registry("widget")
    reg.register("n", "d")(lambda n=1: n)
    reg.add_resolver(lambda name: (reg.get("n"), {"n": int(name[1:])})
                     if name.startswith("n") and name[1:].isdigit() else None)
    assert reg.get("n7")() == 7 and "n7" in reg and "q" not in reg


def test_paper_profile_is_the_paper_protocol():
    cfg = PROFILES["paper"]
    assert (cfg.lr, cfg.momentum, cfg.weight_decay, cfg.batch_size) == (1e-2, 0.0, 0.0, 8)
    assert (cfg.cycles, cfg.epochs_per_cycle, cfg.epochs, cfg.eta_min) == (10, 5, 50, 0.0)
    assert cfg.augment is True


def test_overrides_are_type_checked():
    cfg = apply_overrides(TrainConfig(), parse_set(["lr=0.5", "cycles=2", "augment=false"]))
    assert (cfg.lr, cfg.cycles, cfg.augment) == (0.5, 2, False)
    with pytest.raises(BenchError, match=r"--set cycles=2.5: expected int"):
        apply_overrides(TrainConfig(), {"cycles": "2.5"})
    with pytest.raises(BenchError, match=r"--set augment=maybe: expected bool"):
        apply_overrides(TrainConfig(), {"augment": "maybe"})
    with pytest.raises(BenchError, match=r"unknown --set key 'lrr'; choose from: .*lr"):
        apply_overrides(TrainConfig(), {"lrr": "1"})
    with pytest.raises(BenchError, match="key=value"):
        parse_set(["lr"])


def test_hash_covers_results_not_speed_settings():
    base = TrainConfig()
    h = config_hash(result_fields(base))
    assert config_hash(result_fields(dataclasses.replace(base, eval_batch_size=7))) == h
    assert config_hash(result_fields(dataclasses.replace(base, lr=0.02))) != h
    assert config_hash(result_fields(base)) == h  # stable
