"""The worker's on_step hook: progress files and loss log lines, one run or a group."""
import torch

from bench.sweep import runstate, worker


def test_heartbeat_writes_every_members_progress_and_own_loss(tmp_path, monkeypatch):
    monkeypatch.setattr(worker, "HEARTBEAT_SECONDS", 0.0)
    monkeypatch.setattr(worker, "LOG_SECONDS", 0.0)
    records = [tmp_path / "a" / "seed_0", tmp_path / "b" / "seed_1"]
    for r in records:
        r.mkdir(parents=True)
    logs = [[], []]
    beat = worker.Heartbeat(records, 12, [log.append for log in logs])
    beat(1, torch.tensor([0.5, 0.25]))
    beat(2, torch.tensor([0.125, 2.0]))
    assert beat.step == 2
    assert [runstate.read_progress(r)["step"] for r in records] == [2, 2]
    assert runstate.read_progress(records[0])["total"] == 12
    assert logs == [["step 1/12 loss 0.5000", "step 2/12 loss 0.1250"],
                    ["step 1/12 loss 0.2500", "step 2/12 loss 2.0000"]]


def test_heartbeat_is_rate_limited(tmp_path, monkeypatch):
    monkeypatch.setattr(worker, "HEARTBEAT_SECONDS", 3600.0)
    monkeypatch.setattr(worker, "LOG_SECONDS", 3600.0)
    record = tmp_path / "r"
    record.mkdir()
    said = []
    beat = worker.Heartbeat([record], 5, [said.append])
    beat(1, torch.tensor(1.0))  # the first beat writes at once
    beat(2, torch.tensor(1.0))
    assert runstate.read_progress(record)["step"] == 1 and beat.step == 2
    assert said == []  # the loss line waits LOG_SECONDS from the start
