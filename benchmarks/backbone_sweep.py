"""Does every timm architecture family and every torchvision classifier train
or get refused in one line at plan time?

For timm, the models are grouped by the module that defines them (the
entrypoint's __module__) and the smallest of each group by parameter count
(built on the meta device: no memory, no weights) stands for it; for
torchvision, every classifier torchvision.models lists. Each goes through
what `bench run` does: the plan-time checks (bench.train.backbone_checks,
bench.train.backbones.check_arch) at the smallest size the probe accepts
(PROBE_SIZES, smallest first), then build_model and one training step
(method.batch, forward, method.loss, backward) for `sl1h` and for a
multi-head method. Offline, random weights.

    PYTHONPATH=. .venv/bin/python benchmarks/backbone_sweep.py [--jobs 2] [--only PATTERN]

Prints one line per model (trained / refused: the line / crashed: the error)
and the counts; exit 1 if any crashed.
"""
from __future__ import annotations

import argparse
import fnmatch
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context

METHODS = ("sl1h", "2hml")
CLASSES = 10
BATCH = 4  # a multiple of every member count a batch is split by


def timm_families(pattern: str = "*") -> dict[str, str]:
    """timm module -> its smallest model by parameter count (meta device)."""
    import timm
    import torch

    groups: dict[str, list[str]] = {}
    for name in timm.list_models():
        groups.setdefault(timm.models.model_entrypoint(name).__module__, []).append(name)
    out = {}
    for module, names in sorted(groups.items()):
        names = [n for n in names if fnmatch.fnmatch(f"timm:{n}", pattern)]
        counts = {n: meta_params(n) for n in names}
        counts = {n: c for n, c in counts.items() if c is not None}
        if counts:
            out[module] = min(counts, key=lambda n: (counts[n], n))
    return out


def meta_params(name: str) -> int | None:
    import timm
    import torch

    try:
        with torch.device("meta"):
            model = timm.create_model(name, pretrained=False)
    except Exception:  # noqa: BLE001 (a model meta cannot build: measured when trained)
        return None
    return sum(p.numel() for p in model.parameters())


def tv_classifiers(pattern: str = "*") -> list[str]:
    import torchvision

    return [n for n in torchvision.models.list_models(module=torchvision.models)
            if fnmatch.fnmatch(f"tv:{n}", pattern)]


def smallest_size(backbone: str) -> tuple[int, str]:
    """(the smallest PROBE_SIZES size the plan-time probe accepts, '') or
    (0, the refusal at the largest)."""
    from bench.core.errors import BenchError
    from bench.train.backbone_checks import PROBE_SIZES, check_builds

    why = ""
    for size in PROBE_SIZES:
        try:
            check_builds(backbone, size, size)
            return size, ""
        except BenchError as err:
            why = str(err)
            hint = why.rpartition("--set image_size=")[2]
            if hint.isdigit() and int(hint) > size:  # skip the sizes it said it cannot take
                try:
                    check_builds(backbone, int(hint), int(hint))
                    return int(hint), ""
                except BenchError as again:
                    why = str(again)
    return 0, why


def one_step(backbone: str, method_name: str, size: int) -> None:
    """Build the run's model and take one training step; raises on failure."""
    import torch

    from bench.methods import create_method
    from bench.train.backbone_checks import check_arch
    from bench.train.backbones import build_model, model_arch

    method = create_method(method_name)
    method.check(CLASSES)
    check_arch(backbone, model_arch(method), False)
    method.setup(CLASSES, 0)
    torch.manual_seed(0)
    model, _ = build_model(backbone, size, method.heads, CLASSES, arch=model_arch(method))
    model.train()
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(BATCH, 3, size, size), torch.arange(BATCH) % CLASSES
    inputs, target = method.batch(x, y, gen)
    logits = model(inputs)
    if tuple(logits.shape) != (BATCH, method.heads, CLASSES):
        raise RuntimeError(f"logits {tuple(logits.shape)}, expected "
                           f"{(BATCH, method.heads, CLASSES)}")
    loss = method.loss(logits, target)
    loss.backward()
    if not torch.isfinite(loss):
        raise RuntimeError(f"loss {loss.item()}")


def check(backbone: str) -> tuple[str, str, str]:
    """(backbone, 'trained' | 'refused' | 'crashed', detail)."""
    import torch
    import warnings

    from bench.core.errors import BenchError

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    t0 = time.perf_counter()
    try:
        size, why = smallest_size(backbone)
    except Exception as err:  # noqa: BLE001 (the probe itself must never crash)
        return backbone, "crashed", f"plan: {type(err).__name__}: {first_line(err)}"
    if not size:
        return backbone, "refused", why
    for name in METHODS:
        try:
            one_step(backbone, name, size)
        except BenchError as err:  # a refusal after the plan passed is a crash too
            return backbone, "crashed", f"{name} at {size} px: BenchError: {first_line(err)}"
        except Exception as err:  # noqa: BLE001 (counted and shown, not raised)
            return backbone, "crashed", f"{name} at {size} px: {type(err).__name__}: " \
                                        f"{first_line(err)}"
    return backbone, "trained", f"{size} px, {time.perf_counter() - t0:.1f} s"


def first_line(err: Exception) -> str:
    return (str(err).splitlines() or [""])[0][:160]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (one thread each)")
    ap.add_argument("--only", default="*", help="backbone name pattern, e.g. 'timm:*mobile*'")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    families = timm_families(args.only)
    names = [f"timm:{n}" for n in families.values()] + [f"tv:{n}" for n in
                                                       tv_classifiers(args.only)]
    print(f"{len(families)} timm families, {len(names) - len(families)} torchvision "
          f"classifiers (chosen in {time.perf_counter() - t0:.0f} s)", flush=True)
    counts = {"trained": 0, "refused": 0, "crashed": 0}
    with ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn")) as pool:
        for fut in as_completed([pool.submit(check, n) for n in names]):
            name, outcome, detail = fut.result()
            counts[outcome] += 1
            print(f"{outcome:8s} {name}: {detail}", flush=True)
    print(", ".join(f"{v} {k}" for k, v in counts.items())
          + f" of {len(names)} in {time.perf_counter() - t0:.0f} s", flush=True)
    return 1 if counts["crashed"] else 0


if __name__ == "__main__":
    sys.exit(main())
