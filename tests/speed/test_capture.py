"""python -m bench.speed.capture: every case 0 breaks, 0 copies, 0 host ops, 0
reads, bit-equal; and the counters do see the per-step path's host work."""
import dataclasses

import pytest
import torch

from bench.core.config import PROFILES
from bench.speed import capture as C
from bench.speed.steptime import synthetic
from bench.train.loop import epoch_batches

pytestmark = pytest.mark.usefixtures("one_thread")
CFG = dataclasses.replace(PROFILES["paper"], pretrained=False)


EXPLAINED = "sl1h,mixup,4hml,mcdropout,fused 2hsl+2hml,cells 4hml x3"  # one of each kind of step


def test_every_case_is_capturable_and_bit_equal(capsys):
    """Every case's counts and bit-equality; the graph breaks (a dynamo trace
    of ~10 s a case on 2 cores) of one case of each kind here, of all of them
    in the command's default run (docs/speed.md)."""
    assert C.main(["--size", "16", "--steps", "3", "--no-explain"]) == 0
    out = capsys.readouterr().out
    names = list(C.cases())
    assert {"sl1h", "mixup", "4hml", "mdca", "mcdropout", "fused 2hsl+2hml",
            "cells 2hsl+2hml", "cells 4hml x3"} <= set(names)
    rows = [line.split() for line in out.splitlines() if line.split()[:1] and any(
        line.startswith(n + " ") for n in names)]
    assert len(rows) == len(names)
    for r in rows:  # breaks h2d host scalars reads device kernels varying equal ok: the last 10
        breaks, h2d, host, scalars, reads, device, kernels, varying, equal, ok = r[-10:]
        # host scalars are no failure: a vmapped loss's Python numbers (4hml's sum
        # of head losses) are 0-dim constants a kernel takes by value
        assert (breaks, h2d, host, reads, varying, equal, ok) == \
            ("-", "0", "0", "0", "0", "True", "True"), r
        assert scalars == "0" or r[0] in ("fused", "cells"), r
        assert int(device) > int(kernels) > 50  # a step has views, which launch nothing
    assert f"{len(names)} of {len(names)} cases capturable and bit-equal" in out


def test_one_step_of_each_kind_has_no_graph_break(capsys):
    assert C.main(["--size", "16", "--steps", "2", "--cases", EXPLAINED]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()
            if any(line.startswith(c + " ") for c in EXPLAINED.split(","))]
    assert len(rows) == len(EXPLAINED.split(",")) and all(r[-10] == "0" for r in rows), rows


def _per_step_counts(steps=3):
    """The counter around the per-step path (SingleStepper.step) on the meta device."""
    st = C.group_stepper(("mixup",), "smallcnn", 16, CFG, "meta")
    x = torch.zeros(32, 3, 16, 16, dtype=torch.uint8, device="meta")
    y = torch.zeros(32, dtype=torch.long, device="meta")
    orders = [epoch_batches(32, 8, g, True) for g in st.gens]
    out = []
    for i in range(steps):
        with C.OpCounter("meta") as c:
            try:
                st.step(x, y, tuple(o[i] for o in orders), 0.01 * (1 - 0.1 * i))
            except NotImplementedError:  # data-dependent ops have no meta kernel: counted so far
                pass
        out.append(c)
    return out


def test_the_counter_sees_the_per_step_paths_host_work():
    counts = _per_step_counts()
    assert counts[-1].counts["h2d"] >= 1  # the batch indices, at least
    assert counts[-1].counts["host ops"] >= 5  # the augmentation's draws and grouping


def test_a_host_scalar_is_counted_apart_and_its_value_watched():
    """A 0-dim host tensor fed to a device op is passed by value (no copy): not
    a host op, but a capture freezes it, so its value is part of the signature
    that `varying` compares; a longer host input is a host op, named. (A meta
    kernel refuses host tensors, so a stand-in operator plays the device op.)"""
    x = torch.zeros(4, device="meta")

    def device_op(*args):
        return torch.empty(4, device="meta")
    counters = []
    for value in (2.0, 3.0, 3.0):
        c = C.OpCounter("meta")
        c.__torch_dispatch__(device_op, (), (x, torch.tensor(value)))
        counters.append(c)
    assert counters[0].counts == {"host scalars": 1}
    assert counters[0].signature != counters[1].signature  # 2.0 then 3.0: varying
    assert counters[1].signature == counters[2].signature
    c = C.OpCounter("meta")
    c.__torch_dispatch__(device_op, (), (x, torch.tensor([1.0, 2.0])))
    assert c.counts == {"host ops": 1} and all("test_capture.py" in k for k in c.host_names)


def test_explain_sees_the_per_step_paths_breaks():
    st = C.group_stepper(("sl1h",), "smallcnn", 16, CFG, "cpu")
    x, y = synthetic(16, 16, C.NUM_CLASSES, "cpu")
    idx = tuple(o[0] for o in [epoch_batches(16, 8, g, True) for g in st.gens])
    torch._dynamo.reset()
    assert torch._dynamo.explain(st.step)(x, y, idx, 0.01).graph_break_count > 0


def test_bad_case_and_steps_are_one_line_errors(capsys):
    assert C.main(["--cases", "sl1h,nosuch"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nosuch" in err and "sl1h" in err
    assert C.main(["--steps", "1"]) == 2
    assert "--steps must be >= 2" in capsys.readouterr().err


def test_compile_step_adds_the_compiled_cases():
    assert C.choose(C.parse_args(["--cases", "sl1h"])) == ["sl1h"]
    assert C.choose(C.parse_args(["--cases", "sl1h", "--compile-step"])) == \
        ["sl1h", "compiled sl1h", f"compiled fused {len(C.PAPER_ONE_HEAD)} one-head"]
    assert "compiled sl1h" not in C.choose(C.parse_args([]))  # `all`: the eager cases


@pytest.mark.parametrize("case", list(C.compiled_cases()))
def test_a_compiled_steps_graph_is_one_and_asks_nothing_of_the_host(case):
    """The counts of the graph inductor lowers (the AOT graph replayed on the
    meta device; no inductor compile here, the whole case is in docs/speed.md's
    `--compile-step` run): 0 copies, host ops, reads, varying values, and ONE
    graph over three steps (lazy device constants traced missing made two)."""
    cfg = dataclasses.replace(CFG, graph="true", compile_step=True)
    row = C.count_ops(C.compiled_cases()[case], "smallcnn", 16, cfg, "cpu")
    assert row["graphs"] == 1, row
    assert [row[k] for k in ("h2d", "host ops", "host scalars", "reads", "varying")] == \
        [0, 0, 0, 0, 0], row
    assert row["device ops"] > 300  # the counter saw the graph's operators
