"""Ctrl-C of a real `bench run`: SIGINT to its whole process group, as a
terminal sends it, while two runs train side by side (--jobs 2). The sweep
says one line and exits 130; nothing else reaches stderr (the runs' processes
once left named semaphores behind, and the sweep's resource tracker printed a
two-line "leaked semaphore objects" warning after the sweep had exited)."""
from __future__ import annotations

import os
import signal

from bench.core import store
from bench.sweep import runstate
from sweeputil import TINY, popen_bench, run_args, specs_for, wait_for

# The warning came only when Ctrl-C landed while a run was training; each
# trial waits for that, and a few trials catch a race the first one missed.
TRIALS = 3
INTERRUPTED = "bench: interrupted; finished seeds are saved, rerun to continue"
LONG = ["--set", "epochs_per_cycle=40", "--set", "image_size=8"]  # hundreds of steps a run


def _interrupt_while_training(results) -> tuple[int, str]:
    """Start `bench run`, SIGINT its process group once a run is training;
    -> (exit status, stderr), read to its end (the resource tracker writes last)."""
    proc = popen_bench("run", "--dataset", "digits", "--backbone", "smallcnn", "--seeds", "2",
                       "--jobs", "2", "--results", str(results), "--no-progress", *TINY, *LONG,
                       start_new_session=True)  # its own process group, like a terminal job
    try:
        wait_for(lambda: list(results.rglob("seed*.progress.json")) or proc.poll() is not None,
                 timeout=600)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:  # the test failed above: leave nothing running
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, err


def test_ctrl_c_says_one_line_exits_130_and_leaves_no_resource_tracker_warning(tmp_path):
    for trial in range(TRIALS):
        results = tmp_path / f"trial{trial}"
        status, err = _interrupt_while_training(results)
        assert "resource_tracker" not in err and "leaked" not in err, f"trial {trial}: {err}"
        assert status == 130 and err.splitlines() == [INTERRUPTED], f"trial {trial}: {err}"
        specs = specs_for(run_args(results, "--seeds", "2", *LONG))
        # the runs in training were stopped, not finished, and none trains on
        wait_for(lambda: not any(runstate.live_holder(s.record) for s in specs), timeout=60)
        assert not any(store.is_complete(s.record) for s in specs)
        assert not list(results.rglob("*outcome-*.json*"))
        # each run unwound once, quietly (SystemExit), not through a
        # KeyboardInterrupt cut short by the sweep's SIGTERM
        for log in results.rglob("seed*.log"):
            assert "Traceback" not in log.read_text(), log.read_text()


def test_a_run_stopped_after_saving_its_record_is_done_not_failed(tmp_path):
    """Ctrl-C between a run's complete record and its report: the sweep counts
    it done and writes no failure file beside the record (a rerun would
    otherwise list a finished seed in failed_runs.csv). A --force retrain
    killed before it saved is failed, although the record it was replacing
    is complete."""
    import os

    from bench.core.config import TrainConfig
    from bench.core.files import write_json
    from bench.sweep import executors
    from bench.sweep.grid import RunSpec

    done, lost, forced = (RunSpec("digits", "smallcnn", "sl1h", (), TrainConfig(), seed, "abc",
                                  str(tmp_path)) for seed in (0, 1, 2))
    started = 1_000_000.0  # the attempt's launch time (epoch seconds)
    for spec, mtime in ((done, started + 5), (forced, started - 5)):
        write_json(spec.record / "metrics.json", {"status": store.DONE})
        os.utime(spec.record / "metrics.json", (mtime, mtime))
    for spec, status in ((done, "done"), (lost, "failed"), (forced, "failed")):
        out = executors.ended_unreported(spec, "interrupted (Ctrl-C); rerun to train it", 1,
                                         started)
        assert out["status"] == status, (spec.seed, out)
    assert runstate.read_failure(done.record) is None
    for spec in (lost, forced):
        assert runstate.read_failure(spec.record)["reason"].startswith("interrupted")
