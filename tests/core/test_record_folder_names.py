"""Record folders hold no ':' (rsync and scp read 'host:path', Windows refuses
it): timm:NAME and tv:NAME are stored under 'timm+NAME', read back as the
names; folders an older version wrote with ':' are still read and found; a
name with a '+' is refused (it would read back as another); every other name
keeps its folder exactly."""
from __future__ import annotations

import numpy as np
import pytest

from bench.cli.main import main
from bench.core import store
from bench.core.errors import BenchError
from bench.datasets import DATASETS
from bench.methods import every_method
from bench.train.backbones import BACKBONES


def write(path) -> None:
    store.write_record(path, {}, {}, {"v": np.zeros(1)})


def test_names_without_a_colon_keep_their_folders(tmp_path):
    names = [(d, b, m) for d in DATASETS.names() for b in BACKBONES.names()
             for m in every_method()]
    assert len(names) > 100
    for dataset, backbone, method in names:
        key = store.RecordKey(dataset, backbone, method, "0123abcd", 3)
        text = f"{dataset}/{backbone}/{method}/0123abcd/seed3"
        assert key.label == text and key.path(tmp_path) == tmp_path / text
        assert store.RecordKey.parse(tmp_path / text, tmp_path) == key


def test_a_colon_is_a_plus_in_the_folder_and_reads_back(tmp_path):
    key = store.RecordKey("digits", "tv:densenet121", "sl1h", "h1", 0)
    path = tmp_path / "digits" / "tv+densenet121" / "sl1h" / "h1" / "seed0"
    assert key.path(tmp_path) == path and key.label == "digits/tv+densenet121/sl1h/h1/seed0"
    write(path)
    (found,) = store.iter_records(tmp_path)
    assert found == key and found.backbone == "tv:densenet121" and found.path(tmp_path) == path
    assert store.key_fields(tmp_path, path / "metrics.json")["backbone"] == "tv:densenet121"


def test_an_older_colon_folder_is_read_and_found_but_new_seeds_go_to_plus(tmp_path):
    old = tmp_path / "digits" / "timm:test_vit" / "sl1h" / "h1"
    write(old / "seed0")
    (found,) = store.iter_records(tmp_path)
    assert found == store.RecordKey("digits", "timm:test_vit", "sl1h", "h1", 0)
    assert found.path(tmp_path) == old / "seed0"  # parsed: the folder it was read from
    # a key built from the names (a rerun's) finds the older record, so it is done
    fresh = store.RecordKey("digits", "timm:test_vit", "sl1h", "h1", 0)
    assert fresh.path(tmp_path) == old / "seed0" and store.is_complete(fresh.path(tmp_path))
    new = tmp_path / "digits" / "timm+test_vit" / "sl1h" / "h1" / "seed1"
    assert store.RecordKey("digits", "timm:test_vit", "sl1h", "h1", 1).path(tmp_path) == new
    write(new)
    assert {(k.seed, k.path(tmp_path)) for k in store.iter_records(tmp_path)} == {
        (0, old / "seed0"), (1, new)}
    # once both folders hold the seed, the '+' one is the record
    write(new.with_name("seed0"))
    assert fresh.path(tmp_path) == new.with_name("seed0")


@pytest.mark.parametrize("level", ["dataset", "backbone", "method"])
def test_a_plus_in_a_name_is_refused_in_one_line(level):
    names = {"dataset": "digits", "backbone": "smallcnn", "method": "sl1h",
             level: "my+net"}
    with pytest.raises(BenchError, match=rf"{level} 'my\+net': no '\+' in a name .*'my:net'") \
            as err:
        store.RecordKey(**names, config_hash="h", seed=0)
    assert "\n" not in str(err.value)


def test_bench_run_refuses_a_plugin_backbone_with_a_plus_before_writing(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(BACKBONES._entries, "my+net", BACKBONES._entries["smallcnn"])
    results = tmp_path / "results"
    assert main(["run", "--method", "sl1h", "--dataset", "digits", "--backbone", "my+net",
                 "--profile", "quick", "--results", str(results)]) == 2
    err = capsys.readouterr().err.strip()
    assert "backbone 'my+net': no '+' in a name" in err and "\n" not in err
    assert not results.exists()
