"""A dependency that is not installed (`pip install --no-deps`, an image that
lacks one) is one line naming the pip package, exit 2, nothing written; a
missing module of bench itself is a bug and keeps its traceback."""
import sys

import pytest
from report_records import write_known

from bench.cli.main import main
from bench.core.errors import missing_package_message


@pytest.mark.parametrize("module, pip", [("calibration", "uncertainty-calibration"),
                                         ("relplot", "relplot")])
def test_report_without_a_measure_package_is_one_line(module, pip, tmp_path, monkeypatch, capsys):
    results, out = tmp_path / "runs", tmp_path / "report"
    write_known(results)
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now fails as if absent
    code = main(["report", "--results", str(results), "--out", str(out), "--no-plots",
                 "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().splitlines() == [err.strip()]
    assert f"the Python package '{pip}' is not installed (import {module} failed)" in err
    assert f"pip install {pip}" in err
    assert not out.exists()  # checked before the report folder is made


def test_a_missing_bench_module_is_not_hidden():
    assert missing_package_message(ModuleNotFoundError("x", name="bench.nope")) is None
    assert missing_package_message(ModuleNotFoundError("x", name="bench")) is None
    assert missing_package_message(ModuleNotFoundError("x")) is None
    assert "'scikit-learn'" in missing_package_message(ModuleNotFoundError("x", name="sklearn.metrics"))
