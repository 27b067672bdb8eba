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


def _opts(results, **extra) -> ProbeOptions:
    return from_keywords(ProbeOptions, "test", dict(
        method="sl1h", dataset="digits", backbone="smallcnn", seeds=2, profile="quick",
        results=str(results), overrides={"cycles": 1, "epochs_per_cycle": 1, "image_size": 16},
        **extra))


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
    plain = plan(from_keywords(RunOptions, "test", dict(
        method="sl1h", dataset="digits", backbone="smallcnn", seeds=1, profile="quick",
        results=str(tmp_path), overrides={"cycles": 1, "epochs_per_cycle": 1,
                                          "image_size": 16}))).specs
    probed = plan(_opts(tmp_path, probe=5)).specs
    assert plain[0].run_options == () and plain[0].option("probe") is None
    assert probed[0].chash == plain[0].chash  # a worker option is not hashed
