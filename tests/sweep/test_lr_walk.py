"""The lr's walk from `bench run --set lr=` to the optimiser, counted by
benchmarks/lr_walk.py's rule (its docstring), and the edge where it is typed."""
import importlib.util
from pathlib import Path

from bench.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def _lr_walk():
    spec = importlib.util.spec_from_file_location("lr_walk", ROOT / "benchmarks" / "lr_walk.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_lr_walks_at_most_12_functions_and_is_typed_before_the_sweep(tmp_path):
    tracer = _lr_walk().trace(str(tmp_path))
    walk = {name for name, entry in tracer.walk.items() if not entry}
    entry = {name for name, entry in tracer.walk.items() if entry}
    assert len(walk) <= 12, sorted(walk)
    assert entry == {("bench/cli/main.py", "main"), ("bench/cli/main.py", "_main"),
                     ("bench/cli/main.py", "OneLineParser.parse_known_args")}
    assert ("bench/train/loop.py", "make_sgd") in walk
    # split and converted as the command line is parsed: no planner frame is on
    # the stack where the text becomes a float
    assert ("bench/core/config.py", "set_pair") in walk
    assert not {f for f, _ in walk if f == "bench/sweep/plan.py"}


def test_a_bad_training_value_fails_as_the_command_line_is_parsed(capsys, tmp_path):
    # the method is unknown too, and the plugin missing: both are looked at
    # later, so the one line is the value's
    code = main(["run", "--results", str(tmp_path), "--method", "nope", "--plugin",
                 "no_such_plugin_module", "--set", "epochs_per_cycle=1", "lr=fast"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip() == "bench: error: --set lr=fast: expected float, got 'fast'"
    assert not any(tmp_path.iterdir())

