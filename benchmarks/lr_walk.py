"""How far an lr from `bench run --set lr=` travels before torch.optim.SGD gets it.

    .venv/bin/python benchmarks/lr_walk.py

Runs one tiny inline run (digits, smallcnn, 1 cycle of 1 epoch) with
`--set lr=0.0123` under a profiler hook and prints two counts of bench/
functions (each function once, whatever the number of calls):

- the walk: every bench function on the call stack at the three points
  where the value changes form: split from its KEY=VALUE text
  (bench.core.flags.split_pair, handed the text), converted to a float
  (bench.core.config.convert, handed the value's text; a later call handed
  the float returns it as it is) and handed to the optimiser
  (bench.train.loop.make_sgd). The program's entry (main, _main, and the
  parser's parse_known_args that refuses an unknown flag), which
  holds only the raw command line (argv, a list of texts), is printed apart
  and not counted: the lr is not a value of its own there (the issue's
  "timm: 2" counts neither timm's main nor its argparse call). A local pool run
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
# where the lr changes form: a call of one of these that is handed the value
# in the form it leaves (a call handed it already typed changes nothing)
FORMS = {
    "split_pair": lambda args: TEXT in args,  # KEY=VALUE text -> key, value text
    "convert": lambda args: any(isinstance(a, str) and a == TEXT[3:] for a in args),  # -> float
    "make_sgd": lambda args: True,  # -> the optimiser
}


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


def _raw_command_line(v) -> bool:
    """argv itself: the program's input, not yet the lr."""
    return isinstance(v, list) and TEXT in v and all(isinstance(x, str) for x in v)


class Tracer:
    """`walk`: {(file, function): True if the frame holds the lr only inside
    the raw command line (the entry: main, _main, parse_known_args)}; `saw`: every function
    handed it, in call order."""

    def __init__(self):
        self.saw, self.walk, self.done = {}, {}, False

    def __call__(self, frame, event, arg):
        if self.done or event != "call" or not _ours(frame):
            return
        if not any(holds(v) for v in _arguments(frame)):
            return
        self.saw.setdefault(_name(frame), None)
        form = FORMS.get(frame.f_code.co_name)
        if form is not None and form(_arguments(frame)):
            self.done = frame.f_code.co_name == "make_sgd"
            f = frame
            while f is not None:
                if _ours(f):
                    held = [v for v in _arguments(f) if holds(v)]
                    self.walk[_name(f)] = bool(held) and all(map(_raw_command_line, held))
                f = f.f_back


def trace(results: str) -> Tracer:
    """One tiny inline `bench run --set lr=...` into `results`, traced."""
    from bench.cli.main import main as bench

    argv = ["run", "--method", "sl1h", "--dataset", "digits", "--backbone", "smallcnn",
            "--seeds", "1", "--profile", "quick", "--executor", "inline", "--no-progress",
            "--results", results, "--set", TEXT, "cycles=1", "epochs_per_cycle=1",
            "image_size=16", "batch_size=64"]
    tracer = Tracer()
    sys.setprofile(tracer)
    try:
        status = bench(argv)
    finally:
        sys.setprofile(None)
    if status != 0 or not tracer.done:
        raise SystemExit(f"the traced run failed (status {status}) or built no optimiser")
    return tracer


def main() -> None:
    tracer = trace(tempfile.mkdtemp())
    walk = sorted(k for k, entry in tracer.walk.items() if not entry)
    entry = sorted(k for k, entry in tracer.walk.items() if entry)
    for title, names in (("the walk", walk), ("saw it", list(tracer.saw))):
        print(f"\n{title}: {len(names)} functions in {len({f for f, _ in names})} files")
        for f, q in names:
            print(f"  {f}: {q}")
    print(f"\nthe entry, holding only the raw command line (not in the walk): "
          f"{', '.join(q for _, q in entry)}; with it the walk is {len(tracer.walk)}")


if __name__ == "__main__":
    main()
