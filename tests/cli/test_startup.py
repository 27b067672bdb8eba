"""`bench --help` and `bench list` start without torch or the report package:
only the command being run builds its options (bench.cli.main.COMMANDS), and
the registries (methods, datasets, backbones) import torch only when a model
or a loss runs. The start-up time itself is measured by benchmarks/startup.py,
not here (a timing on a shared machine is no test)."""
import json
import os
import subprocess
import sys

import pytest

from bench.cli.main import COMMANDS, build_parser

HEAVY = ("torch", "bench.report", "pandas", "matplotlib", "scipy")
PROBE = """
import json, sys
from bench.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(m for m in {heavy} if m in sys.modules)), file=sys.stderr)
"""


def loaded(*argv: str) -> list[str]:
    """The heavy modules a fresh `bench ARGV` process has imported when it ends."""
    env = {k: v for k, v in os.environ.items() if k != "BENCH_PLUGINS"}
    out = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), *argv], env=env,
                         capture_output=True, text=True, timeout=300)
    return json.loads(out.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize("argv", [["--help"], ["list"], ["list", "--keys"], ["run", "--help"]])
def test_help_and_list_load_neither_torch_nor_the_report_package(argv):
    assert loaded(*argv) == []


def test_the_command_table_says_what_each_module_registers():
    """`bench --help` lists COMMANDS' lines without importing the modules:
    they must be the help each module gives its command."""
    sub = build_parser()._subparsers._group_actions[0]
    helps = {a.dest: a.help for a in sub._choices_actions}
    assert helps == {name: text for name, (_, text) in COMMANDS.items()}
    for name in COMMANDS:  # its module is the one that defines it
        alone = build_parser([name])._subparsers._group_actions[0].choices[name]
        assert actions(alone) == actions(sub.choices[name]) != actions(stub())


def actions(parser) -> list:
    return [(a.dest, a.option_strings) for a in parser._actions]


def stub():
    """A command listed by name only (what the other commands get)."""
    return build_parser([])._subparsers._group_actions[0].choices["run"]


@pytest.mark.parametrize("argv", [["run", "--method", "ls", "--jobs", "0"], ["list", "--keys"],
                                  ["report", "--no-plots"], ["check"],
                                  ["data", "check", "--dataset", "digits"]])
def test_a_command_parses_the_same_with_only_its_module_loaded(argv):
    alone, full = (vars(p.parse_args(argv)) for p in (build_parser(argv), build_parser()))
    def name(func):  # a function, or the "module:function" naming a lazily loaded one
        return func if isinstance(func, str) else func.__qualname__

    assert name(alone.pop("func")) == name(full.pop("func"))
    assert alone == full


def test_an_unknown_command_names_every_command(capsys):
    with pytest.raises(SystemExit):
        build_parser(["lst"]).parse_args(["lst"])
    err = capsys.readouterr().err
    assert "invalid choice: 'lst'" in err and all(f"'{c}'" in err for c in COMMANDS)


def test_import_bench_api_loads_neither_torch_nor_matplotlib():
    """A notebook's `import bench.api` stays light: the planner and the sweep
    (torch) load when bench.api.run runs, matplotlib when a figure is drawn."""
    code = ("import json, sys, bench.api\n"
            "print(json.dumps(sorted(m for m in ('torch', 'torchvision', 'timm', 'matplotlib',"
            " 'scipy', 'bench.sweep.plan') if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
