"""`--plugin PATH` (a .py file or a package folder) through `bench run`, a
missing path as one line, and the line `bench run` prints when a plugin's
code changed since records of the same parameters."""
import json

import pytest

from bench.cli.main import main
from pluginutil import clean_plugins, lay_package  # noqa: F401  (fixture)
from test_plugins_cli import DIGITS, TINY

CE_FILE = '''
from bench.plugins import register_method
from bench.methods.sl1h import CrossEntropy


@register_method("loosece", "CE from a file named by its path")
def factory():
    return CrossEntropy("loosece")
'''


def run_json(capsys, *argv) -> list[dict]:
    assert main(["run", *argv, "--dry-run", "--json"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]


def test_a_py_file_path_trains_on_the_pool(tmp_path, monkeypatch, capsys, clean_plugins):
    (tmp_path / "cpen_loose.py").write_text(CE_FILE)
    monkeypatch.chdir(tmp_path)
    argv = ["--plugin", "./cpen_loose.py", "--method", "loosece", *DIGITS, *TINY,
            "--results", str(tmp_path / "results")]
    assert main(["run", *argv]) == 0
    assert "1 trained, 0 already done, 0 failed" in capsys.readouterr().out
    (record,) = (tmp_path / "results").glob("digits/smallcnn/loosece/*/seed0")
    code = json.loads((record / "config.json").read_text())["code"]["method"]
    assert code["module"] == "cpen_loose" and code["files"] == ["cpen_loose.py"]


def test_a_package_folder_path_loads_the_package(tmp_path, capsys, clean_plugins):
    lay_package(tmp_path / "src", "folderplug")
    rows = run_json(capsys, "--plugin", str(tmp_path / "src" / "folderplug"),
                    "--method", "folderplug", *DIGITS, *TINY,
                    "--results", str(tmp_path / "results"))
    assert [r["method"] for r in rows] == ["folderplug"]


@pytest.mark.parametrize("path, why", [
    ("./nowhere_plugin.py", "no such file or folder"),
    ("notes.txt", "not a .py file"),
    ("emptydir/", "a folder without __init__.py"),
])
def test_a_bad_plugin_path_is_one_line_exit_2_and_writes_nothing(tmp_path, monkeypatch, capsys,
                                                                path, why, clean_plugins):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "emptydir").mkdir()
    assert main(["run", "--plugin", path, "--results", str(tmp_path / "results")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (f"bench: error: --plugin {path}: {why}; give a .py file, a package "
                    "folder (with __init__.py) or a module name")
    assert not (tmp_path / "results").exists()


def test_run_says_when_a_plugins_code_changed_since_its_records(tmp_path, capsys,
                                                               clean_plugins):
    pkg = lay_package(tmp_path / "src", "changeplug")
    results = tmp_path / "results"
    argv = ["--plugin", str(pkg), "--method", "changeplug", *DIGITS, *TINY,
            "--results", str(results)]
    assert main(["run", *argv]) == 0
    assert "code changed" not in capsys.readouterr().out
    (old,) = [p.parent.name for p in results.glob("digits/smallcnn/changeplug/*/seed0")]

    helper = pkg / "losses.py"
    helper.write_text(helper.read_text().replace("# the weight", "# only a comment"))
    assert main(["run", *argv, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "code changed" not in out and "a real run would train 0" in out

    helper.write_text(helper.read_text().replace("0.1 * z", "0.5 * z"))
    assert main(["run", *argv, "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    (row,) = run_json(capsys, *argv)
    assert lines[0] == (f"changeplug: method code changed since config {old} (1 record); "
                        f"training config {row['config']}")
    assert row["status"] == "missing" and row["config"] != old
