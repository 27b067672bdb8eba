"""`bench run --dry-run` shows what will train: every method hyper-parameter
as resolved (defaults, profile presets, --set) and each plugin part's code
digest, in the protocol table and in the JSON."""
import json

from bench.cli.main import main
from pluginutil import clean_plugins, lay_package  # noqa: F401  (fixture)

BASE = ["--dataset", "digits", "--backbone", "smallcnn", "--seeds", "2", "--profile", "quick"]


def dry(capsys, tmp_path, *argv, as_json=True) -> list[dict] | str:
    assert main(["run", *BASE, *argv, "--results", str(tmp_path), "--dry-run",
                 *(["--json"] if as_json else [])]) == 0
    out = capsys.readouterr().out
    return [json.loads(line) for line in out.splitlines()] if as_json else out


def table_rows(out: str) -> dict[str, dict]:
    """method -> {column: cell} of the protocol table."""
    lines = out.split("protocol per run:")[1].strip().splitlines()
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [dict(zip(head, (c.strip() for c in ln.strip("|").split("|")))) for ln in lines[2:]]
    return {r["method"]: r for r in rows}


def test_method_parameters_with_defaults_presets_and_overrides(tmp_path, capsys):
    rows = dry(capsys, tmp_path, "--method", "sl1h,ls,mbls")
    params = {r["method"]: r["method_params"] for r in rows}
    assert params["sl1h"] == {}
    assert params["ls"] == {"epsilon": 0.05}
    assert params["mbls"] == {"margin": 6.0, "alpha": 0.1}
    assert all(r["code"] == {} for r in rows)  # built-ins: no plugin digest
    rows = dry(capsys, tmp_path, "--method", "ls,4hml", "--profile", "paper-text",
               "--set", "epsilon=0.2")
    params = {r["method"]: r["method_params"] for r in rows}
    assert params["ls"] == {"epsilon": 0.2}
    assert params["4hml"]["heads"] == 4 and params["4hml"]["mh_loss"] == "paper"
    text = table_rows(dry(capsys, tmp_path, "--method", "sl1h,ls", "--set", "epsilon=0.2",
                          as_json=False))
    assert text["ls"]["method params"] == "epsilon=0.2"
    assert text["sl1h"]["method params"] == "-" and text["sl1h"]["code"] == "built-in"


def test_a_plugins_parameters_and_code_digest(tmp_path, capsys, clean_plugins):
    pkg = lay_package(tmp_path / "src", "dryplug")
    argv = ["--plugin", str(pkg), "--method", "dryplug", "--set", "weight=0.3"]
    (row, _) = dry(capsys, tmp_path / "r", *argv)
    assert row["method_params"] == {"weight": 0.3}
    code = row["code"]
    assert set(code) == {"method"}  # the dataset and backbone are built-in
    assert code["method"]["files"] == ["dryplug/__init__.py", "dryplug/losses.py",
                                       "dryplug/method.py"]
    assert len(code["method"]["sha256"]) == 64
    text = table_rows(dry(capsys, tmp_path / "r", *argv, as_json=False))
    assert text["dryplug"]["method params"] == "weight=0.3"
    assert text["dryplug"]["code"] == f"method {code['method']['sha256'][:8]}"
