"""bench.speed.gpuplan: projection arithmetic by hand, FLOP counting, peaks, budget
skipping, the JSON round trip and one-line errors. Tiny CPU runs only."""
import json
import math

import pytest
import torch
from torch import nn

from bench.speed import gpuplan as G
from bench.speed import projection as P
from bench.speed import steptime
from bench.methods import create_method

TINY = dict(device="cpu", datasets=("pathmnist",), backbones=("smallcnn",), heads=(4,),
            strategies=("single", "seeds"), seeds=2, steps=2, warmup=1, eval_images=16)


# ------------------------------------------------------------- arithmetic --
def test_group_seconds_hand_example():
    shape = P.DataShape("toy", 3, 28, train=100, val=20, test=30)
    # 100 images at batch 8 with the released loader's drop_last: 12 full
    # batches (the batch of 4 is dropped) -> 12 steps/epoch; 6 epochs
    assert P.train_steps(shape, 8, 6) == 72
    # 2 cycles: validation 3 times (each cycle + best checkpoint) + the test set
    assert P.eval_images(shape, 2) == 3 * 20 + 30
    assert P.group_seconds(shape, 8, 6, 2, ms_per_step=10.0, eval_ms_per_image=0.5) == \
        pytest.approx(72 * 0.010 + 90 * 0.0005)
    # 97 images: 12 full batches, the one left over dropped
    assert P.train_steps(P.DataShape("t", 3, 28, 97, 1, 1), 8, 1) == 12


def test_strategy_groups_cover_the_grid():
    assert P.groups("methods", 5) == [(1, "fused", 25), (2, "fused", 10), (4, "fused", 5)]
    assert sorted(P.groups("seeds", 5)) == sorted([(h, "fused", 5) for h in P.PAPER_HEADS.values()])
    for st in P.STRATEGIES:  # every strategy trains each of the 8 x 5 runs exactly once
        assert sum(m for _, _, m in P.groups(st, 5)) == 40
    assert len(P.groups("single", 5)) == 40


def test_job_sizes_shrink_with_group_size():
    assert P.job_sizes(1, 20, 1024, 256) == (20, 1024)
    assert P.job_sizes(5, 20, 1024, 256) == (20, 1024)
    assert P.job_sizes(10, 20, 1024, 256) == (10, 512)
    assert P.job_sizes(25, 20, 1024, 256) == (4, 256)  # 1024/5 < one eval batch
    assert P.job_sizes(40, 4, 1024, 256) == (3, 256)  # at least 3 steps
    assert P.job_sizes(10, 20, 16, 256) == (10, 16)  # never more images than asked


def test_pathmnist_counts_match_medmnist():
    from medmnist.info import INFO

    info = INFO["pathmnist"]
    assert P.PATHMNIST == (len(info["label"]), *(info["n_samples"][k]
                                                  for k in ("train", "val", "test")))


def _meas(datasets, backbone, table):
    """{key: {ms_step, eval_ms_image}} from {(heads, path, members): (ms, eval_ms)}."""
    return {P.key(d, backbone, h, path, n, "bf16"): {"ms_step": ms, "eval_ms_image": ev}
            for d in datasets for (h, path, n), (ms, ev) in table.items()}


def test_grid_sum_by_hand_for_each_strategy():
    # 80 train images at batch 8 = 10 steps/epoch, 1 epoch, 1 cycle:
    # a group costs 10 x ms + (2 x val + test) x eval_ms.
    shapes = {"a": P.DataShape("a", 9, 28, 80, 0, 0), "b": P.DataShape("b", 9, 28, 80, 5, 10)}
    table = {(1, "single", 1): (2.0, 1.0), (2, "single", 1): (3.0, 1.0),
             (4, "single", 1): (5.0, 1.0), (1, "fused", 2): (7.0, 2.0),
             (2, "fused", 2): (8.0, 2.0), (4, "fused", 2): (11.0, 2.0),
             (1, "fused", 10): (30.0, 4.0), (2, "fused", 4): (13.0, 3.0)}
    meas = _meas(shapes, "r50", table)
    ev = {"a": 0, "b": 2 * 5 + 10}  # images evaluated per run or group

    def cost(d, key):
        ms, e = table[key]
        return (10 * ms + ev[d] * e) / 1000

    # single: 5 one-head, 2 two-head, 1 four-head method, 2 seeds each
    want = {"single": sum(2 * (5 * cost(d, (1, "single", 1)) + 2 * cost(d, (2, "single", 1))
                               + cost(d, (4, "single", 1))) for d in shapes),
            "seeds": sum(5 * cost(d, (1, "fused", 2)) + 2 * cost(d, (2, "fused", 2))
                         + cost(d, (4, "fused", 2)) for d in shapes),
            "methods": sum(cost(d, (1, "fused", 10)) + cost(d, (2, "fused", 4))
                           + cost(d, (4, "fused", 2)) for d in shapes)}
    for st, seconds in want.items():
        g = P.grid_projection(meas, shapes, ["r50"], st, "bf16", seeds=2, batch_size=8, epochs=1,
                              cycles=1)
        assert g["complete"] and g["substituted"] == 0
        assert g["hours"] == pytest.approx(seconds / 3600)


def test_missing_groups_and_head_substitution():
    shapes = {"a": P.DataShape("a", 9, 28, 80, 0, 0)}
    meas = _meas(shapes, "r50", {(4, "single", 1): (5.0, 0.0)})
    g = P.grid_projection(meas, shapes, ["r50"], "single", "bf16", seeds=1, batch_size=8,
                          epochs=1, cycles=1)
    # 7 of the 8 methods borrow the 4-head time; the grid is still projected
    assert g["complete"] and g["substituted"] == 7
    assert g["hours"] == pytest.approx(8 * 10 * 0.005 / 3600)
    g = P.grid_projection(meas, shapes, ["r50"], "seeds", "bf16", seeds=5, batch_size=8,
                          epochs=1, cycles=1)
    assert not g["complete"] and g["measured"] == 0 and len(g["missing"]) == 3


# ------------------------------------------------------------------ FLOPs --
def test_flop_count_of_tiny_model_matches_hand_count():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, bias=False), nn.Flatten(),
                          nn.Linear(4 * 8 * 8, 10), nn.Unflatten(1, (2, 5)))
    method = create_method("2hsl")
    method.setup(5, 0)
    x, y = torch.randn(2, 3, 8, 8), torch.tensor([0, 3])
    conv = 2 * 2 * 4 * 8 * 8 * 3 * 3 * 3  # 2 x B x Cout x H x W x Cin x k x k
    linear = 2 * 2 * 256 * 10  # 2 x B x in x out
    # backward: the conv's weight gradient only (its input needs no gradient),
    # the linear's input and weight gradients
    want = (conv + linear) + conv + 2 * linear
    assert steptime.count_step_flops(model, x, y, method) == want == 86016


# ------------------------------------------------------------------ peaks --
@pytest.mark.parametrize("name,bf16,peak", [
    ("NVIDIA H100 80GB HBM3", True, 989.0), ("NVIDIA H100 80GB HBM3", False, 67.0),
    ("NVIDIA H100 SXM5 80GB", True, 989.0), ("NVIDIA H100 PCIe", True, 756.0),
    ("NVIDIA H100 PCIe", False, 51.0), ("NVIDIA H200", True, 989.0),
    ("NVIDIA H200 NVL", True, 835.0), ("NVIDIA H200 NVL", False, 60.0),
    ("NVIDIA H100 NVL", True, None), ("NVIDIA A100-SXM4-80GB", True, None)])
def test_peak_lookup(name, bf16, peak):
    assert P.peak_tflops(name, bf16) == peak


def test_peak_fraction_strings():
    assert P.peak_fraction(98.9, "NVIDIA H100 80GB HBM3", True, True) == "10.00%"
    assert P.peak_fraction(6.7, "NVIDIA H100 80GB HBM3", False, True) == "10.00%"
    assert P.peak_fraction(1.0, "NVIDIA A100-SXM4-80GB", True, True) == "peak unknown"
    assert P.peak_fraction(1.0, "cpu (x86_64, 1 threads)", True, False) == "n/a"


# ------------------------------------------------------------------- plan --
def test_plan_puts_the_headline_first_and_uses_real_shapes():
    jobs = G.plan(G.Settings(device="cpu"))
    keys = [G.job_key(j) for j in jobs]
    # the default step (captured on CUDA) in bf16 and fp32, then the per-step path
    assert keys[:6] == [f"pathmnist|resnet50|4h|{run}|{v}" for v in ("bf16", "fp32", "eager")
                        for run in ("single|x1", "fused|x5")]
    assert len(keys) == len(set(keys))  # methods' 4-head group == the 4hml seed group
    # next, bf16 single runs and seed groups of all 9 cells at 4 heads: with the
    # headline's they complete both projections before any method group starts
    nxt = jobs[6:22]
    assert {(j.heads, j.variant, j.members) for j in nxt} == {(4, "bf16", 1), (4, "bf16", 5)}
    cells = {(j.dataset, j.backbone, j.members) for j in jobs[:2] + nxt}
    assert len(cells) == 18
    sizes = {(j.dataset, j.backbone): j.size for j in jobs}
    assert sizes[("pathmnist", "convnext_tiny")] == 32 and sizes[("pathmnist", "swin_tiny")] == 28
    assert sizes[("kvasir", "swin_tiny")] == 224
    one_head = [j for j in jobs if j.heads == 1 and j.members == 25][0]
    assert sorted(set(one_head.methods)) == ["dca", "ls", "mbls", "mixup", "sl1h"]
    shapes = P.data_shapes()
    assert (shapes["pathmnist"].train, shapes["chaoyang"].val, shapes["kvasir"].test) == \
        (89996, 804, 2132)


def test_timed_step_is_the_trainers(monkeypatch, one_thread):
    """The timed step is the training loop's (SingleStepper.step), nothing else."""
    from bench.train.loop import SingleStepper

    calls = []
    real = SingleStepper.step
    monkeypatch.setattr(SingleStepper, "step", lambda *a: calls.append(1) or real(*a))
    job = G.plan(G.Settings(**{**TINY, "strategies": ("single",)}))[0]
    m = steptime.measure(job, "cpu", 3, 2, 16, float("inf"))  # no deadline: any speed
    assert (m["timed_steps"], m["eval_images"]) == (3, 16)
    assert len(calls) == 2 + 3 and m["ms_step"] > 0 and m["flops_step"] > 0
    with pytest.raises(steptime.OutOfBudget, match="budget ran out"):
        steptime.measure(job, "cpu", 3, 2, 16, float("-inf"))


# ----------------------------------------------------------------- budget --
class StepClock:
    """A clock the test moves by hand (budgets never depend on
    how fast this machine measures a job)."""

    def __init__(self, now: float = 0.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_budget_skips_and_reports(monkeypatch):
    clock = StepClock()

    def slow(*a, **k):
        clock.now += 0.3  # every job costs 0.3 s on the injected clock
        return {"ms_step": 1.0, "eval_ms_image": 1.0, "first_step_s": 0.0, "build_s": 0.0,
                "flops_step": None, "timed_steps": 1, "eval_images": 1}
    monkeypatch.setattr(G, "measure", slow)
    s = G.Settings(**{**TINY, "heads": (1, 2, 4), "budget_s": 1.0})
    jobs = G.plan(s)
    out = G.run_jobs(s, jobs, clock(), progress=False, clock=clock)
    assert 1 <= len(out["measurements"]) < len(jobs)
    assert len(out["measurements"]) + len(out["skipped"]) == len(jobs) and not out["failed"]
    assert all(x["reason"].startswith("not started") for x in out["skipped"])
    # 1.0 s budget less a 0.05 s reserve: 0.3 s jobs while their estimate fits
    assert clock.now <= 0.95 + 1e-9


def test_a_failing_job_is_reported_with_its_traceback_and_the_rest_go_on(monkeypatch, capsys):
    def flaky(job, *a, **k):
        if job.path == "fused":
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return {"ms_step": 1.0, "eval_ms_image": 1.0, "first_step_s": 0.0, "build_s": 0.0,
                "flops_step": None, "timed_steps": 1, "eval_images": 1}
    monkeypatch.setattr(G, "measure", flaky)
    s = G.Settings(**{**TINY, "heads": (1, 4)})
    jobs = G.plan(s)
    out = G.run_jobs(s, jobs, 0.0, progress=False, clock=StepClock())  # time never passes
    fused = [j for j in jobs if j.path == "fused"]
    assert len(out["failed"]) == len(fused) >= 2
    assert len(out["measurements"]) == len(jobs) - len(fused)
    assert all(f["reason"] == "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
               and "in flaky" in f["traceback"] for f in out["failed"])
    assert capsys.readouterr().err.count("Traceback") == 1  # printed once per error type


def test_tiny_budget_real_run_skips_everything(one_thread):
    """The budget is spent before the first job on the injected
    clock, so "skips everything" holds however fast this machine is."""
    reads = iter([0.0])  # the start; every later read is past the 0.05 s budget
    res = G.run(G.Settings(**{**TINY, "budget_s": 0.05}), progress=False,
                clock=lambda: next(reads, 1.0))
    assert res["measurements"] == [] and not res["failed"]
    assert len(res["skipped"]) == res["planned"] > 0
    text = G.render(res)
    assert f"Skipped ({res['planned']} of {res['planned']} jobs)" in text
    assert all(x["reason"] == "not started: budget spent" for x in res["skipped"])


# --------------------------------------------------------- run, JSON, CLI --
def test_cli_run_json_round_trip_and_headline(tmp_path, capsys, one_thread):
    out = tmp_path / "plan.json"
    argv = ["--device", "cpu", "--datasets", "pathmnist", "--backbones", "smallcnn",
            "--heads", "4", "--strategies", "single,seeds", "--seeds", "2", "--steps", "2",
            "--warmup", "1", "--eval-images", "16", "--no-progress", "--out", str(out)]
    assert G.main(argv) == 0
    printed = capsys.readouterr().out
    assert "SYNTHETIC" in printed and "Headline projection" in printed
    res = json.loads(out.read_text())
    assert res["settings"]["seeds"] == 2 and not res["skipped"] and not res["failed"]
    assert {m["key"] for m in res["measurements"]} >= {
        "pathmnist|smallcnn|4h|single|x1|fp32", "pathmnist|smallcnn|4h|fused|x2|bf16"}
    # the projection recomputed from the saved measurements equals the saved one
    again = G.project(res)
    assert again["grid"] == res["grid"] and again["headline"] == res["headline"]
    # headline by hand: 89,996 images -> 11,249 full batches of 8 (drop_last) x 50 epochs, and
    # 11 validation passes of 10,004 images + 7,180 test images
    m = {x["key"]: x for x in res["measurements"]}["pathmnist|smallcnn|4h|fused|x2|fp32"]
    assert m["timed_steps"] == 3 and m["eval_images"] == 16
    minutes = (11249 * 50 * m["ms_step"] + (11 * 10004 + 7180) * m["eval_ms_image"]) / 60000
    h = [x for x in res["headline"] if x["what"].endswith("x2 fused") and x["variant"] == "fp32"][0]
    assert math.isclose(h["group_min"], minutes) and math.isclose(h["per_run_min"], minutes / 2)
    assert math.isclose(h["eval_min"], (11 * 10004 + 7180) * m["eval_ms_image"] / 60000)
    assert h["peak"] == "n/a"
    # --show prints the same tables from the file
    assert G.main(["--show", str(out)]) == 0
    assert G.render(res) in capsys.readouterr().out


@pytest.mark.parametrize("flag,value,valid", [("--datasets", "pathmnist,mnist", "kvasir"),
                                              ("--backbones", "resnet50,rn50", "swin_tiny"),
                                              ("--strategies", "single,all", "methods"),
                                              ("--variants", "bf16,tf32", "graphs")])
def test_bad_names_are_one_line_errors(flag, value, valid, capsys):
    assert G.main(["--device", "cpu", flag, value, "--no-progress"]) == 2
    out = capsys.readouterr().out.strip()
    bad = value.split(",")[1]
    assert out.startswith("error:") and "\n" not in out and bad in out and valid in out


@pytest.mark.parametrize("args,needle", [
    (["--set", "compile_mode=fast"], "unknown compile_mode 'fast'; choose from: default"),
    (["--threads", "-1"], "--threads must be >= 0"),
])
def test_bad_settings_fail_before_any_job(args, needle, capsys):
    assert G.main(["--device", "cpu", *args, "--no-progress"]) == 2
    out = capsys.readouterr().out.strip()
    assert out.startswith("error:") and "\n" not in out and needle in out


def test_results_file_is_written_after_every_job(tmp_path, monkeypatch):
    out, seen = tmp_path / "partial.json", []

    def fake(job, *a, **k):
        if out.exists():  # what a run killed now would leave behind
            seen.append(len(json.loads(out.read_text())["measurements"]))
        return {"ms_step": 2.0, "eval_ms_image": 1.0, "first_step_s": 0.0, "build_s": 0.0,
                "flops_step": 10, "timed_steps": 1, "eval_images": 1}
    monkeypatch.setattr(G, "measure", fake)
    res = G.run(G.Settings(**{**TINY, "out": str(out)}), progress=False)
    assert seen == list(range(1, res["planned"]))
    assert res["measurements"][0]["tflops"] == pytest.approx(10 * 500 / 1e12)


def test_compile_times_the_headline_cell_compiled_and_graphed_right_after_the_headline():
    jobs = G.plan(G.Settings(device="cpu", compile=True))
    keys = [G.job_key(j) for j in jobs]
    assert keys[6:10] == [f"pathmnist|resnet50|4h|{run}|{v}" for v in ("compile", "graphs")
                         for run in ("single|x1", "fused|x5")]
    graphs = jobs[9].cfg
    assert graphs.compile and graphs.compile_mode == "reduce-overhead" and graphs.bf16
    plain = [G.job_key(j) for j in G.plan(G.Settings(device="cpu"))]
    assert not any("compile" in k or "graphs" in k for k in plain)


def test_variants_keep_only_the_named_variants_in_plan_order():
    """A session with a few device-minutes asks for what it needs (on the H100:
    the method groups in bf16, the headline with CUDA graphs)."""
    jobs = G.plan(G.Settings(device="cpu", datasets=("pathmnist",), backbones=("resnet50",),
                             strategies=("methods",), variants=("bf16",)))
    assert [(j.members, j.heads, j.variant) for j in jobs] == [(25, 1, "bf16"), (10, 2, "bf16"),
                                                               (5, 4, "bf16")]
    jobs = G.plan(G.Settings(device="cpu", compile=True, heads=(4,), datasets=("pathmnist",),
                             backbones=("resnet50",), strategies=("single", "seeds"),
                             variants=("graphs", "bf16")))
    assert [G.job_key(j) for j in jobs] == [f"pathmnist|resnet50|4h|{r}|{v}"
                                            for v in ("bf16", "graphs")
                                            for r in ("single|x1", "fused|x5")]
