"""bench.syncs runs every method's real step (single and fused) on the CPU;
bench.transfer.h2d is a plain copy there. The counts themselves need CUDA."""
import pytest
import torch

from bench import syncs
from bench.transfer import h2d

pytestmark = pytest.mark.usefixtures("one_thread")


def test_every_path_steps_and_reports_no_count_on_cpu():
    rows = syncs.check("cpu", backbone="smallcnn", size=16, steps=1, methods=["mixup", "4hml"])
    assert [r["method"] for r in rows] == ["mixup", "4hml"]
    assert all(r["single"] == r["fused x2"] == "n/a (cpu)" for r in rows)


def test_steps_change_the_weights(monkeypatch):
    """The checked step is a real training step: the parameters move."""
    method, model = syncs._setup("sl1h", "smallcnn", 16, 0, torch.device("cpu"))
    before = [p.detach().clone() for p in model.parameters()]
    monkeypatch.setattr(syncs, "_setup", lambda *a: (method, model))
    data = (torch.randint(0, 256, (16, 3, 16, 16), dtype=torch.uint8),
            torch.randint(0, syncs.NUM_CLASSES, (16,)))
    step, batches = syncs.single_steps("sl1h", "smallcnn", 16, 2, torch.device("cpu"), data)
    assert syncs.count(step, batches, torch.device("cpu")) is None
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_h2d_on_cpu_is_a_copy_of_the_same_values():
    t = torch.arange(5)
    out = h2d(t, "cpu")
    assert torch.equal(out, t) and out.device.type == "cpu"


def test_unknown_method_is_one_line(capsys):
    assert syncs.main(["--device", "cpu", "--methods", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown method 'nope'" in err[0]
