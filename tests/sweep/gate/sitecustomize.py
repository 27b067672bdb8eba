"""Test-only: with BENCH_TEST_GATE=<folder> set (and this folder on PYTHONPATH),
every run's process stops right after saving its state at a cycle end, touches
<folder>/<state file name>.cycle<c>, and waits for <folder>/open. A test can so
kill, cancel or signal a SLURM task at a known point (after its first saved
cycle, before its second) on a machine of any speed."""
import os

if os.environ.get("BENCH_TEST_GATE"):
    import pathlib
    import time

    import bench.train.resume as _resume

    _save = _resume.CycleState.save

    def _gated_save(self, state):
        _save(self, state)
        gate = pathlib.Path(os.environ["BENCH_TEST_GATE"])
        (gate / f"{self.path.name}.cycle{state['loop']['cycle']}").touch()
        while not (gate / "open").exists():
            time.sleep(0.05)

    _resume.CycleState.save = _gated_save
