"""A run option declared once reaches the worker: a test-only subclass of
RunOptions adds one field (declared `worker=True`, nothing else edited), and
the spec a worker process reads (RunSpec JSON, as the local pool and SLURM
send it) carries its value, as does the worker's own rebuild of the spec."""
from __future__ import annotations

from dataclasses import dataclass

from bench.core.flags import from_keywords, option
from bench.sweep.grid import RunSpec
from bench.sweep.options import RunOptions
from bench.sweep.plan import plan


@dataclass(frozen=True)
class ProbeOptions(RunOptions):
    """RunOptions with one more run option, declared for the worker."""

    probe: int = option(0, "a test-only run option", worker=True)


def _grid(cls, results, seeds: int = 1, **extra):
    """A tiny digits grid's options of class `cls`, as bench.api builds them."""
    return from_keywords(cls, "test", dict(
        method="sl1h", dataset="digits", backbone="smallcnn", seeds=seeds, profile="quick",
        results=str(results), overrides={"cycles": 1, "epochs_per_cycle": 1, "image_size": 16},
        **extra))


def _opts(results, **extra) -> ProbeOptions:
    return _grid(ProbeOptions, results, seeds=2, **extra)


def test_a_new_run_option_arrives_in_the_workers_spec(tmp_path):
    specs = plan(_opts(tmp_path, probe=7)).specs
    assert len(specs) == 2
    for spec in specs:
        back = RunSpec.from_json(spec.to_json())  # what a worker process reads
        assert back.option("probe") == 7 and back == spec


def test_the_worker_sees_it_when_it_rebuilds_the_run(tmp_path, monkeypatch):
    """bench.sweep.worker._prepare, on the spec as a worker process receives it."""
    from bench.sweep import worker

    (spec, _) = plan(_opts(tmp_path, probe=3)).specs
    seen = []
    real = worker.experiment_for

    def spy(s, method, missing_ok=False):
        seen.append(s.option("probe"))
        return real(s, method, missing_ok)

    monkeypatch.setattr(worker, "experiment_for", spy)
    worker._prepare(RunSpec.from_json(spec.to_json()))
    assert seen == [3]


def test_the_plain_options_carry_nothing_extra_and_keep_their_hash(tmp_path):
    plain = plan(_grid(RunOptions, tmp_path)).specs
    probed = plan(_opts(tmp_path, probe=5)).specs
    assert plain[0].run_options == () and plain[0].option("probe") is None
    assert probed[0].chash == plain[0].chash  # a worker option is not hashed


@dataclass(frozen=True)
class HashedOptions(RunOptions):
    """RunOptions with one more run option that changes the numbers."""

    tau: float = option(1.0, "a test-only option that changes results", hashed=True)


def _hashed(results, **extra) -> HashedOptions:
    return _grid(HashedOptions, results, **extra)


def test_a_hashed_option_moves_the_hash_only_away_from_its_default(tmp_path):
    plain = plan(_opts(tmp_path)).specs[0]
    default = plan(_hashed(tmp_path)).specs[0]
    two, three = (plan(_hashed(tmp_path, tau=t)).specs[0] for t in (2.0, 3.0))
    assert default.chash == plain.chash  # declared, at its default: no record moves
    assert len({plain.chash, two.chash, three.chash}) == 3
    assert two.option("tau") == 2.0 and two.hashed == (("tau", 2.0),)


def test_the_worker_rebuilds_the_same_hash_and_the_record_config_names_it(tmp_path):
    """The worker recomputes the hash from the spec it reads and refuses a
    mismatch (bench.sweep.worker._prepare): a hashed option must travel."""
    from bench.sweep import worker

    spec = plan(_hashed(tmp_path, tau=2.0)).specs[0]
    _, exp, *_ = worker._prepare(RunSpec.from_json(spec.to_json()))
    assert exp.chash == spec.chash
    assert exp.payload()["run_options"] == {"tau": 2.0}


def test_the_dry_run_shows_run_options_in_its_table_and_json(tmp_path):
    from bench.sweep.dryrun import protocol_json, protocol_table, protocols

    plain = plan(_grid(RunOptions, tmp_path))
    rows = protocols(plain.specs, plain.experiments)
    assert "run_options" not in rows[0] and "run options" not in protocol_table(rows)
    grid = plan(_hashed(tmp_path, tau=2.5))
    rows = protocols(grid.specs, grid.experiments)
    assert '"run_options": {"tau": 2.5}' in protocol_json(rows)
    header, _, first = protocol_table(rows).splitlines()[1:4]
    assert header.rstrip(" |").endswith("run options") and "tau=2.5" in first


def test_bench_api_takes_the_field_and_its_hash_follows(tmp_path, monkeypatch):
    """bench.api.run checks its keywords against the options class it builds:
    the new field is a keyword, and the run's config_hash column follows it."""
    import bench.api

    monkeypatch.setattr(bench.api, "RunOptions", HashedOptions)
    common = dict(method="sl1h", dataset="digits", backbone="smallcnn", seeds=1,
                  profile="quick", results=str(tmp_path), dry_run=True,
                  overrides={"cycles": 1, "epochs_per_cycle": 1, "image_size": 16})
    at = {t: bench.api.run(**common, tau=t)["config_hash"].iloc[0] for t in (1.0, 2.0)}
    assert at[2.0] == plan(_hashed(tmp_path, tau=2.0)).specs[0].chash != at[1.0]
