"""The code identity of a plugin covers its whole package (or the files its
distribution installs), normalised so that comments and docstrings do not
count: a change in an imported helper module gives a new config hash, a
comment-only edit keeps the old one (bench.core.codeid)."""
import sys
import textwrap

import pytest

from bench.core import codeid, plugins
from bench.core.config import TrainConfig
from bench.methods import create_method
from bench.train.experiment import make_experiment
from pluginutil import HELPER, METHOD, clean_plugins, lay_package  # noqa: F401  (fixture)

def chash(tiny, name: str) -> str:
    return make_experiment(tiny, "smallcnn", create_method(name), TrainConfig(),
                           dataset="digits").chash


def test_normalised_source_ignores_comments_docstrings_and_layout_only():
    n = codeid.normalised
    a = b'"""doc"""\ndef f(x):\n    """what f does"""\n    return x + 1  # add one\n'
    assert n(a) == n(b"def f(x):\n\n    return (x + 1)\n")
    assert n(a) == n(b'def f(x):\n    "other words"\n    return x+1\n')
    assert n(a) != n(b"def f(x):\n    return x + 2\n")
    assert n(b"class A:\n    'only a docstring'\n") == n(b"class A:\n    pass\n")
    assert n(b"def (:") == b"def (:"  # no parse: its bytes


def test_a_helper_module_change_retrains_a_comment_only_change_reuses(tmp_path, tiny,
                                                                     clean_plugins):
    pkg = lay_package(tmp_path, "helperplug")
    sys.path.append(str(tmp_path))
    plugins.load(["helperplug"])
    first = chash(tiny, "helperplug")
    ident = make_experiment(tiny, "smallcnn", create_method("helperplug"), TrainConfig(),
                            dataset="digits").code_dict()["method"]
    assert ident["files"] == ["helperplug/__init__.py", "helperplug/losses.py",
                              "helperplug/method.py"]

    helper = pkg / "losses.py"
    helper.write_text(helper.read_text().replace("# the weight of the penalty",
                                                 "# weight, tuned by hand")
                      .replace('"""The loss itself."""', '"""The loss, documented."""'))
    (pkg / "method.py").write_text("# a new comment\n" + (pkg / "method.py").read_text())
    assert chash(tiny, "helperplug") == first

    helper.write_text(helper.read_text().replace("0.1 * z", "0.2 * z"))
    assert chash(tiny, "helperplug") != first


def test_an_installed_distribution_counts_every_file_it_installs(tmp_path, tiny,
                                                                clean_plugins):
    """Two top-level modules of one pip-installed distribution (its RECORD
    lists both): the helper is not in the plugin's package folder, yet counts."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "flatplug.py").write_text(METHOD.format(helper="flathelper", name="flatplug"))
    (site / "flathelper.py").write_text(HELPER)
    info = site / "flatplug-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: flatplug\nVersion: 1.0\n")
    (info / "top_level.txt").write_text("flatplug\nflathelper\n")
    (info / "RECORD").write_text("flatplug.py,,\nflathelper.py,,\n"
                                 "flatplug-1.0.dist-info/RECORD,,\n")
    sys.path.append(str(site))
    codeid._distributions.cache_clear()
    try:
        plugins.load(["flatplug"])
        ident = make_experiment(tiny, "smallcnn", create_method("flatplug"), TrainConfig(),
                                dataset="digits").code_dict()["method"]
        assert ident["files"] == ["flathelper.py", "flatplug.py"]
        first = chash(tiny, "flatplug")
        (site / "flathelper.py").write_text(HELPER.replace("0.1 * z", "0.3 * z"))
        assert chash(tiny, "flatplug") != first
    finally:
        codeid._distributions.cache_clear()


@pytest.mark.parametrize("route", ["module", "file"])
def test_a_single_module_plugin_is_its_file(tmp_path, tiny, route, clean_plugins):
    (tmp_path / "oneplug.py").write_text(textwrap.dedent('''
        from bench.plugins import register_method
        from bench.methods.sl1h import CrossEntropy

        @register_method("oneplug", "CE")
        def factory():
            return CrossEntropy("oneplug")
        '''))
    sys.path.append(str(tmp_path))
    plugins.load(["oneplug" if route == "module" else str(tmp_path / "oneplug.py")])
    ident = make_experiment(tiny, "smallcnn", create_method("oneplug"), TrainConfig(),
                            dataset="digits").code_dict()["method"]
    # the built-in class it builds is named, but only the plugin's file is hashed
    assert ident["modules"] == ["oneplug", "bench.methods.sl1h"]
    assert ident["files"] == ["oneplug.py"]
