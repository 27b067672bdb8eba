"""bench.core.files: a rewrite is whole or absent, and read_json's two error rules.

Every writer of a file the harness rewrites in place goes through
files.write_atomic; the interrupted-write test runs each of them with the
rename, or the write itself, failing, and checks the old file is untouched
and no temporary is left in its folder.
"""
import json
import os
from pathlib import Path

import pytest

from bench.core import files


def _only(folder):
    return sorted(p.name for p in folder.iterdir())


def _runstate(path):
    from bench.sweep import runstate

    record = path.parent.parent / path.name.split(".")[0]  # side_file's record
    return (runstate.side_file(record, "progress.json"),
            lambda: runstate.write_progress(record, 7, 9))


def _measures(path):
    from bench.report.numbers.cells import Cache

    cache = Cache(path)
    cache.used["run"] = {"key": "k", "value": {"values": {}}}
    return path, cache.save


def _gpuplan(path):
    from bench.speed.gpuplan import save

    return path, lambda: save({"new": 1}, str(path))


def _resume(path):
    from bench.train.resume import CycleState

    return path, lambda: CycleState(path, "key").save({"loop": {"cycle": 1}})


def _helper(path):
    return path, lambda: files.write_json(path, {"new": 1})


WRITERS = {"write_json": _helper, "runstate": _runstate, "measures": _measures,
           "gpuplan": _gpuplan, "resume": _resume}


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("failing", ["rename", "write"])
def test_an_interrupted_write_keeps_the_old_file_and_leaves_no_temporary(
        tmp_path, monkeypatch, writer, failing):
    target, write = WRITERS[writer](tmp_path / "_sweep" / "seed0.progress.json")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"OLD CONTENTS")
    before = _only(target.parent)

    class Interrupted(Exception):
        pass

    def boom(*a, **k):
        raise Interrupted

    if failing == "rename":
        monkeypatch.setattr(os, "replace", boom)
        monkeypatch.setattr(os, "rename", boom)
    else:  # the first bytes are out, then the process is interrupted
        real_open = open

        class Half:
            def __init__(self, f):
                self.f = f

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.f.close()

            def write(self, data):
                self.f.write(data[:3])
                raise Interrupted

            def __getattr__(self, name):
                return getattr(self.f, name)

        def half_open(path, mode="r", *a, **k):
            f = real_open(path, mode, *a, **k)
            return Half(f) if ("w" in mode and os.fspath(path) != os.fspath(target)) else f

        monkeypatch.setattr("builtins.open", half_open)
    with pytest.raises(Interrupted):
        write()
    monkeypatch.undo()
    assert target.read_bytes() == b"OLD CONTENTS"
    assert _only(target.parent) == before  # no temporary behind


@pytest.mark.parametrize("writer", WRITERS)
def test_an_uninterrupted_write_replaces_the_file_and_leaves_nothing_else(tmp_path, writer):
    target, write = WRITERS[writer](tmp_path / "_sweep" / "seed0.progress.json")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"OLD CONTENTS")
    write()
    assert target.read_bytes() != b"OLD CONTENTS"
    assert _only(target.parent) == [target.name]


def test_write_json_formats_as_asked_and_fsyncs_when_durable(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    path = tmp_path / "deep" / "a.json"  # the folder is created
    files.write_json(path, {"b": 1, "a": Path("x")})  # default=str: a path as its text
    assert path.read_text() == '{\n  "a": "x",\n  "b": 1\n}' and not synced
    files.write_json(path, {"b": 1, "a": 2}, indent=None, sort_keys=False, durable=True)
    assert path.read_text() == json.dumps({"b": 1, "a": 2}) and len(synced) == 1


def test_read_json_raises_by_default_and_returns_the_default_when_given(tmp_path):
    good, bad, missing = tmp_path / "good.json", tmp_path / "bad.json", tmp_path / "no.json"
    good.write_text('{"a": [1, 2]}')
    bad.write_text('{"a": ')  # half-written
    assert files.read_json(good) == {"a": [1, 2]}
    with pytest.raises(FileNotFoundError):
        files.read_json(missing)
    with pytest.raises(ValueError):
        files.read_json(bad)
    assert files.read_json(missing, default=None) is None
    assert files.read_json(bad, default={}) == {}
    assert files.read_json(good, default=None) == {"a": [1, 2]}
