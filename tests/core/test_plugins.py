"""Plugins from outside the package: loading routes, one-line failures, no
silent override of a built-in, and the code identity each record carries
(a plugin's source digest enters the config hash; built-in hashes do not move)."""
import hashlib
import sys
import textwrap

import pytest

from bench.core import plugins
from bench.core.config import TrainConfig
from bench.core.errors import BenchError
from bench.methods import METHODS, create_method
from bench.train.experiment import make_experiment
from pluginutil import EXAMPLE, clean_plugins, confpen_site  # noqa: F401  (fixtures)


def write_module(folder, name: str, body: str):
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    return path


def test_entry_point_plugin_registers_with_its_distribution_as_origin(confpen_site):
    assert "mhml_confpen" in plugins.load()
    assert METHODS.origin("confpen") == "plugin mhml-confpen 0.1.0 (mhml_confpen)"
    assert METHODS.origin("sl1h") == "built-in"
    assert plugins.carried() == (("mhml_confpen", str(confpen_site)),)


def test_env_and_option_modules_load_from_the_path(tmp_path, monkeypatch, clean_plugins):
    write_module(tmp_path, "envplug", """
        from bench.plugins import register_method
        from bench.methods.sl1h import CrossEntropy

        @register_method("envce", "CE again")
        def envce():
            return CrossEntropy("envce")
        """)
    write_module(tmp_path, "optplug", """
        from bench.plugins import register_backbone
        from bench.train.backbones import smallcnn

        register_backbone("optcnn", "smallcnn again")(smallcnn)
        """)
    monkeypatch.chdir(tmp_path)  # not on sys.path: a module in the current folder loads
    monkeypatch.setenv("BENCH_PLUGINS", " envplug , ")
    plugins.load(["optplug"])
    assert "envce" in METHODS and METHODS.origin("envce") == "plugin module envplug"
    assert dict(plugins.carried()) == {"envplug": str(tmp_path), "optplug": str(tmp_path)}


@pytest.mark.parametrize("body, error", [
    ("raise RuntimeError('no GPU driver here')\n",
     "plugin 'broken' (--plugin) failed to import: RuntimeError: no GPU driver here"),
    ("import not_a_module_anywhere\n", "plugin 'broken' (--plugin) failed to import: "
     "ModuleNotFoundError: No module named 'not_a_module_anywhere'"),
])
def test_a_plugin_that_fails_to_import_is_named_with_its_error(tmp_path, body, error,
                                                               clean_plugins):
    write_module(tmp_path, "broken", body)
    sys.path.append(str(tmp_path))
    with pytest.raises(BenchError) as err:
        plugins.load(["broken"])
    assert str(err.value) == error


def test_a_missing_plugin_module_is_named(clean_plugins):
    with pytest.raises(BenchError, match=r"^plugin 'nowhere_xyz' \(--plugin\) failed to import: "
                                         r"ModuleNotFoundError: No module named 'nowhere_xyz'$"):
        plugins.load(["nowhere_xyz"])


@pytest.mark.parametrize("name, registry", [("sl1h", "method"), ("8hml", "method"),
                                            ("digits", "dataset"), ("smallcnn", "backbone")])
def test_a_name_clash_with_a_built_in_is_an_error_never_an_override(tmp_path, name, registry,
                                                                    clean_plugins):
    write_module(tmp_path, "clash", f"""
        from bench.plugins import register_{registry}

        @register_{registry}("{name}", "mine")
        def mine(*a, **kw):
            raise AssertionError("never used")
        """)
    sys.path.append(str(tmp_path))
    before = METHODS.resolve("sl1h")[0]
    with pytest.raises(BenchError) as err:
        plugins.load(["clash"])
    assert str(err.value) == (f"plugin 'clash' (--plugin): duplicate {registry} name '{name}': already registered "
                              f"(built-in); choose another name")
    assert METHODS.resolve("sl1h")[0] is before


def test_unknown_method_error_names_the_plugin_route():
    with pytest.raises(BenchError) as err:
        METHODS.get("mymethod")
    text = str(err.value)
    assert text.startswith("unknown method 'mymethod'; choose from: sl1h, ")
    assert "--plugin MODULE" in text and "BENCH_PLUGINS" in text
    assert "mhml_bench.plugins" in text and "docs/methods.md" in text


# ------------------------------------------------------- code identity --
def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_record_identity_of_built_ins_is_their_module_digest_and_leaves_the_hash(tiny):
    import bench.methods.sl1h as sl1h_module
    from pathlib import Path

    exp = make_experiment(tiny, "smallcnn", create_method("sl1h"), TrainConfig(),
                          dataset="digits")
    code = exp.code_dict()
    assert code["method"] == {"origin": "built-in", "modules": ["bench.methods.sl1h"],
                              "sha256": sha256(Path(sl1h_module.__file__))}
    assert code["dataset"]["origin"] == code["backbone"]["origin"] == "built-in"
    # the hash of a built-in config is the one it had before records carried code
    import dataclasses
    assert "plugin_code" not in exp.payload()
    assert exp.chash == dataclasses.replace(exp, code=()).chash


# Computed by the harness before records carried code identities (same
# bundle, default TrainConfig): existing records keep their hashes.
@pytest.mark.parametrize("method, chash", [("sl1h", "457078909d6c"), ("4hml", "fcbcd52ca1ec")])
def test_built_in_hashes_are_the_ones_records_had_before(tiny, method, chash):
    exp = make_experiment(tiny, "smallcnn", create_method(method), TrainConfig(),
                          dataset="digits")
    assert exp.code  # identities are recorded, and still the hash is unchanged
    assert exp.chash == chash


def test_editing_a_plugin_changes_its_digest_and_the_config_hash(confpen_site, tiny):
    plugins.load()
    method_file = confpen_site / "mhml_confpen" / "method.py"

    def exp():
        return make_experiment(tiny, "smallcnn", create_method("confpen"), TrainConfig(),
                               dataset="digits")

    before = exp()
    ident = before.code_dict()["method"]
    files = ["mhml_confpen/__init__.py", "mhml_confpen/backbone.py", "mhml_confpen/data.py",
             "mhml_confpen/method.py"]
    assert ident == {"origin": "plugin", "distribution": "mhml-confpen", "version": "0.1.0",
                     "module": "mhml_confpen", "modules": ["mhml_confpen.method"],
                     "files": files, "sha256": package_digest(confpen_site, files)}
    assert before.payload()["plugin_code"] == {
        "method": {"modules": ["mhml_confpen.method"], "sha256": ident["sha256"]}}
    method_file.write_text(method_file.read_text().replace("- self.params.beta",
                                                           "+ self.params.beta"))
    after = exp()
    assert after.code_dict()["method"]["sha256"] == package_digest(confpen_site, files) \
        != ident["sha256"]
    assert after.chash != before.chash


def package_digest(site, files) -> str:
    """bench.core.codeid's digest, spelled out: each file's name and its
    normalised source (ast.unparse without docstrings), in name order."""
    import ast

    h = hashlib.sha256()
    for name in files:
        tree = ast.parse((site / name).read_bytes())
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
                    and body and isinstance(body[0], ast.Expr)
                    and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                node.body = body[1:] or [ast.Pass()]
        h.update(name.encode() + b"\0" + ast.unparse(tree).encode() + b"\0")
    return h.hexdigest()
