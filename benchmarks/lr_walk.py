"""How far an lr from `bench run --set lr=` travels before torch.optim.SGD gets it.

    .venv/bin/python benchmarks/lr_walk.py

Runs one tiny inline run (digits, smallcnn, 1 cycle of 1 epoch) with
`--set lr=0.0123` under a profiler hook and prints two counts of bench/
functions (each function once, whatever the number of calls):

- the walk: every bench function on the call stack at the three points
  where the value changes form: split from its KEY=VALUE text
  (bench.core.flags.pairs), converted to a float (bench.core.config.convert)
  and handed to the optimiser (bench.train.loop.make_sgd). A local pool run
  adds the worker's entry (child_main) and the RunSpec JSON read on the
  other side of the process boundary; --executor inline has neither.
- everything that saw it: every bench function called, before the SGD is
  built, with an argument (self excluded) that is or holds the lr: the text,
  the number, or a tuple, list, dict, argparse namespace or dataclass
  holding it (3 levels deep). This includes side branches (the config hash,
  outcomes, status checks) that read the config but do not pass it on.
"""
from __future__ import annotations

import dataclasses
import sys
import tempfile
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])
LR, TEXT = 0.0123, "lr=0.0123"
FORMS = ("pairs", "convert", "make_sgd")  # where the lr changes form


def holds(v, depth: int = 3) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, float):
        return v == LR
    if isinstance(v, str):
        return TEXT in v or v == TEXT[3:]
    if depth == 0:
        return False
    if isinstance(v, (tuple, list)):
        return any(holds(x, depth - 1) for x in v[:50])
    if isinstance(v, dict):
        return any(holds(x, depth - 1) for x in list(v.values())[:50])
    if type(v).__name__ == "Namespace":  # argparse's, before the options are built
        return holds(vars(v), depth - 1)
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return any(holds(getattr(v, f.name, None), depth - 1) for f in dataclasses.fields(v))
    return False


def _arguments(frame) -> list:
    code = frame.f_code
    n = code.co_argcount + code.co_kwonlyargcount
    names = list(code.co_varnames[:n + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)])
    return [frame.f_locals.get(a) for a in names if a not in ("self", "cls")]


def _ours(frame) -> bool:
    return frame.f_code.co_filename.startswith(ROOT + "/bench/")


def _name(frame) -> tuple:
    return frame.f_code.co_filename[len(ROOT) + 1:], frame.f_code.co_qualname


class Tracer:
    def __init__(self):
        self.saw, self.walk, self.done = {}, set(), False

    def __call__(self, frame, event, arg):
        if self.done or event != "call" or not _ours(frame):
            return
        if not any(holds(v) for v in _arguments(frame)):
            return
        self.saw.setdefault(_name(frame), None)
        if frame.f_code.co_name in FORMS:
            self.done = frame.f_code.co_name == "make_sgd"
            f = frame
            while f is not None:
                if _ours(f):
                    self.walk.add(_name(f))
                f = f.f_back


def main() -> None:
    from bench.cli.main import main as bench

    argv = ["run", "--method", "sl1h", "--dataset", "digits", "--backbone", "smallcnn",
            "--seeds", "1", "--profile", "quick", "--executor", "inline", "--no-progress",
            "--results", tempfile.mkdtemp(), "--set", TEXT, "cycles=1", "epochs_per_cycle=1",
            "image_size=16", "batch_size=64"]
    tracer = Tracer()
    sys.setprofile(tracer)
    try:
        bench(argv)
    finally:
        sys.setprofile(None)
    for title, names in (("the walk", sorted(tracer.walk)), ("saw it", list(tracer.saw))):
        print(f"\n{title}: {len(names)} functions in {len({f for f, _ in names})} files")
        for f, q in names:
            print(f"  {f}: {q}")


if __name__ == "__main__":
    main()
