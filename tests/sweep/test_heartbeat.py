"""The worker's on_step hook: progress files and loss log lines, one run or a group."""
import torch

from bench.sweep import runstate, worker


class FakeClock:
    """A clock the test moves by hand: no dependence on uptime or speed."""

    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_heartbeat_writes_every_members_progress_and_own_loss(tmp_path, monkeypatch):
    monkeypatch.setattr(worker, "HEARTBEAT_SECONDS", 0.0)
    monkeypatch.setattr(worker, "LOG_SECONDS", 0.0)
    records = [tmp_path / "a" / "seed_0", tmp_path / "b" / "seed_1"]
    for r in records:
        r.mkdir(parents=True)
    logs = [[], []]
    beat = worker.Heartbeat(records, 12, [log.append for log in logs], clock=FakeClock(5.0))
    beat(1, torch.tensor([0.5, 0.25]))
    beat(2, torch.tensor([0.125, 2.0]))
    assert beat.step == 2
    assert [runstate.read_progress(r)["step"] for r in records] == [2, 2]
    assert runstate.read_progress(records[0])["total"] == 12
    assert logs == [["step 1/12 loss 0.5000", "step 2/12 loss 0.1250"],
                    ["step 1/12 loss 0.2500", "step 2/12 loss 2.0000"]]


def test_heartbeat_is_rate_limited(tmp_path, monkeypatch):
    monkeypatch.setattr(worker, "HEARTBEAT_SECONDS", 10.0)
    monkeypatch.setattr(worker, "LOG_SECONDS", 30.0)
    record = tmp_path / "r"
    record.mkdir()
    said = []
    clock = FakeClock(100.0)
    beat = worker.Heartbeat([record], 5, [said.append], clock=clock)
    beat(1, torch.tensor(1.0))  # the first beat writes at once
    clock.now += 9.0
    beat(2, torch.tensor(1.0))  # inside the interval: nothing written
    assert runstate.read_progress(record)["step"] == 1 and beat.step == 2
    assert said == []  # the loss line waits LOG_SECONDS from the start
    clock.now += 1.0
    beat(3, torch.tensor(1.0))  # HEARTBEAT_SECONDS after the first beat
    assert runstate.read_progress(record)["step"] == 3 and said == []
    clock.now += 20.0
    beat(4, torch.tensor(0.5))
    assert said == ["step 4/5 loss 0.5000"]


def test_first_beat_written_at_once_on_a_just_booted_clock(tmp_path):
    """Green on any machine: a monotonic clock that reads 0.2 s
    (a machine booted moments ago) must not hold back the first progress file."""
    record = tmp_path / "r"
    record.mkdir()
    beat = worker.Heartbeat([record], 5, [lambda line: None], clock=FakeClock(0.2))
    beat(1, torch.tensor(1.0))
    assert runstate.read_progress(record)["step"] == 1
