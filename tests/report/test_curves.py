"""Training curves from the history in each record: the tidy frames, the
mean over seeds (checked by hand), and the figure files `bench report` writes."""
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.report.plotting.curves import history_frames, mean_curves, write_curves


@dataclass
class FakeRun:
    dataset: str
    backbone: str
    method: str
    seed: int
    path: Path

    @property
    def record(self):  # what curves read of a bench.core.record.Record
        from types import SimpleNamespace

        return SimpleNamespace(history=json.loads((self.path / "metrics.json").read_text())
                               .get("history") or {})


def _record(root: Path, method: str, seed: int, losses, val_nll) -> FakeRun:
    path = root / method / f"seed{seed}"
    path.mkdir(parents=True)
    history = {"epochs": [{"cycle": 1 + i // 2, "epoch": 1 + i % 2, "train_loss": v,
                           "lr": 0.01} for i, v in enumerate(losses)],
               "cycles": [{"cycle": i + 1, "val_acc": 0.5, "val_ece": 0.1, "val_nll": v,
                           "val_auc": 0.9} for i, v in enumerate(val_nll)]}
    (path / "metrics.json").write_text(json.dumps({"history": history}))
    return FakeRun("digits", "smallcnn", method, seed, path)


def test_mean_curves_average_the_seeds_of_each_method(tmp_path):
    runs = [_record(tmp_path, "sl1h", 0, [2.0, 1.0, 0.8, 0.6], [1.5, 1.1]),
            _record(tmp_path, "sl1h", 1, [3.0, 2.0, 1.0, 0.4], [1.7, 0.9]),
            _record(tmp_path, "confpen", 0, [2.5, 1.5, 1.2, 0.9], [1.4, 1.2])]
    old = tmp_path / "old" / "seed0"  # a record from before the history: left out
    old.mkdir(parents=True)
    (old / "metrics.json").write_text(json.dumps({"test": {}}))
    runs.append(FakeRun("digits", "smallcnn", "ls", 0, old))
    epochs, cycles = history_frames(runs)
    assert len(epochs) == 12 and len(cycles) == 6 and "ls" not in set(epochs["method"])
    mean = mean_curves(epochs, "step_epoch", ["train_loss"])
    sl1h = mean[mean["method"] == "sl1h"].sort_values("step_epoch")["train_loss"].tolist()
    assert sl1h == pytest.approx([2.5, 1.5, 0.9, 0.5])
    val = mean_curves(cycles, "cycle", ["val_nll"])
    assert val[val["method"] == "sl1h"]["val_nll"].tolist() == pytest.approx([1.6, 1.0])
    files = write_curves(runs, tmp_path / "figures")
    assert sorted(p.name for p in files) == ["curves_digits_smallcnn.pdf",
                                             "curves_digits_smallcnn.png"]
    assert all(p.stat().st_size > 1000 for p in files)


def test_no_history_no_figure(tmp_path):
    path = tmp_path / "seed0"
    path.mkdir()
    (path / "metrics.json").write_text("{}")
    assert write_curves([FakeRun("d", "b", "m", 0, path)], tmp_path / "figures") == []


def test_legend_in_table_order_and_whole_epoch_and_cycle_ticks(tmp_path):
    """One epoch and one cycle per run (a smoke test's records): the ticks are
    whole numbers, and the legend lists the methods as the tables do (the
    paper's order, a plugin's method after them), not alphabetically."""
    from bench.report.plotting.curves import curves_figure

    runs = [_record(tmp_path, m, 0, [1.0], [0.9]) for m in ("4hml", "confpen", "ls", "sl1h")]
    epochs, cycles = history_frames(runs)
    epochs = mean_curves(epochs, "step_epoch", ["train_loss"])
    cycles = mean_curves(cycles, "cycle", ["val_nll", "val_ece", "val_auc"])
    fig = curves_figure(epochs, cycles, "t", names=str.upper)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == ["SL1H", "LS", "4HML", "CONFPEN"]
    for ax in fig.axes:
        lines = [ln for ln in ax.lines if len(ln.get_xdata())]
        assert [ln.get_label() for ln in lines] == legend
        lo, hi = ax.get_xlim()
        shown = [t for t in ax.get_xticks() if lo <= t <= hi]
        assert shown and all(float(t).is_integer() for t in shown), ax.get_xticks()
    sections = (("confpen", "sl1h"), ("4hml",))  # --order: its own order
    fig = curves_figure(epochs, cycles, "t", names=str.upper, sections=sections)
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == [
        "CONFPEN", "SL1H", "4HML"]
