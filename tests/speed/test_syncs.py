"""bench.speed.syncs runs every method's real step (single and fused) on the CPU;
the counts themselves need CUDA."""
import pytest
import torch

from bench.speed import syncs

pytestmark = pytest.mark.usefixtures("one_thread")


def test_every_path_steps_and_reports_no_count_on_cpu():
    rows = syncs.check("cpu", backbone="smallcnn", size=16, steps=1, methods=["mixup", "4hml"])
    assert [r["method"] for r in rows] == ["mixup", "4hml"]
    assert all(r["single"] == r["fused x2"] == "n/a (cpu)" for r in rows)


def test_the_counted_steps_are_the_harness_steps(monkeypatch):
    """Every counted step is the training loop's own step (SingleStepper.step for
    one run, FusedStepper.step for a pair: both members' batches), warm-up
    included, and moves the weights."""
    from bench.train.fused import FusedStepper
    from bench.train.loop import SingleStepper

    calls = {"single": [], "fused": []}
    real_single, real_fused = SingleStepper.step, FusedStepper.step

    def single(self, x, y, idxs, lr):
        before = [p.detach().clone() for p in self.model.parameters()]
        out = real_single(self, x, y, idxs, lr)
        calls["single"].append(any(not torch.equal(b, p) for b, p in
                                   zip(before, self.model.parameters())))
        return out

    def fused(self, x, y, idxs, lr):
        before = [t.clone() for t in self.fm.params.values()]
        out = real_fused(self, x, y, idxs, lr)
        calls["fused"].append((len(self.methods), len(idxs), tuple(out.shape), any(
            not torch.equal(b, t) for b, t in zip(before, self.fm.params.values()))))
        return out

    monkeypatch.setattr(SingleStepper, "step", single)
    monkeypatch.setattr(FusedStepper, "step", fused)
    syncs.check("cpu", backbone="smallcnn", size=16, steps=2, methods=["sl1h"])
    assert calls == {"single": [True] * 3, "fused": [(2, 2, (2,), True)] * 3}


def test_unknown_method_is_one_line_before_any_step(capsys, monkeypatch):
    ran = []
    monkeypatch.setattr(syncs, "steps_of", lambda *a: ran.append(a))
    assert syncs.main(["--device", "cpu", "--methods", "sl1h,nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown method 'nope'" in err[0]
    assert ran == []  # checked before sl1h ran


def test_only_reported_synchronisations_count():
    """The debug mode's own one-time notice mentions synchronisation too; on an
    H100 it was counted as a sync of the first method's first steps."""
    notice = ("Synchronization debug mode is a prototype feature and does not yet detect "
              "all synchronizing operations")
    assert not syncs.is_sync(notice)
    assert syncs.is_sync("called a synchronizing CUDA operation")


def test_every_built_in_method_is_checked_each_with_its_own_model(monkeypatch, capsys):
    """'all' is every_method() (the method groups too, as bench.speed.capture),
    'extra' names the group, and each method's step runs its own model
    (MC-Dropout's passes, an efficient ensemble's members as heads)."""
    from bench.methods import EXTRA, every_method

    seen = []
    monkeypatch.setattr(syncs, "check", lambda *a, **k: seen.append(a[4]) or [])
    assert syncs.main(["--device", "cpu"]) == 0
    assert syncs.main(["--device", "cpu", "--methods", "extra"]) == 0
    assert seen == [every_method(), list(EXTRA)] and set(EXTRA) <= set(seen[0])
    from bench.train.ensembles import PackedNet
    from bench.train.loop import SingleStepper

    models = []
    real = SingleStepper.__init__
    monkeypatch.setattr(SingleStepper, "__init__",
                        lambda self, model, *a, **k: models.append(model) or real(self, model, *a,
                                                                                 **k))
    syncs.steps_of("packed", "smallcnn", 12, 1, torch.device("cpu"))(0)  # one step runs
    assert isinstance(models[0], PackedNet)
