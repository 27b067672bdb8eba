"""Each concept has one owner in bench/: a test per concept counts the places
that implement it and fails on a second one.

- the sha256 of sorted-key JSON: bench.core.files.json_sha256 (the config
  hash, metrics.json's and the eval manifest's digests, a corrupted set's
  recipe key all go through it);
- the normalising of code text before it is hashed:
  bench.core.codeid.normalised (a plugin's files, a built-in code unit);
- the measures: the package bench.calib.measures (the registry, every
  measure function and resampler);
- the text of a mean and its std: bench.report.render.tables.mean_pm (every
  table, LaTeX or Markdown or terminal, and the end-of-run summary);
- the names of a run's columns: runs.csv's, in bench.results.load too;
- a name -> entry registry: bench.core.registry.Registry (no decorator
  filling a module-level dict or list of its own).
"""
from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

import pandas as pd

from bench.core import files

ROOT = Path(__file__).resolve().parents[1]


def functions(source: str):
    """Every function definition of `source` (nested ones too)."""
    return [n for n in ast.walk(ast.parse(source))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def sorted_json_hashes(source: str) -> list[str]:
    """Functions that both hash (hashlib.*) and write sorted-key JSON."""
    found = []
    for fn in functions(source):
        calls = [c for c in ast.walk(fn) if isinstance(c, ast.Call)]
        hashes = any(ast.unparse(c.func).startswith("hashlib.") for c in calls)
        sorts = any(ast.unparse(c.func).endswith("json.dumps") and any(
            k.arg == "sort_keys" for k in c.keywords) for c in calls)
        if hashes and sorts:
            found.append(fn.name)
    return found


def sites(count) -> dict[str, list[str]]:
    out = {}
    for p in sorted((ROOT / "bench").rglob("*.py")):
        if found := count(p.read_text()):
            out[p.relative_to(ROOT).as_posix()] = found
    return out


def test_one_sorted_json_hash():
    assert sites(sorted_json_hashes) == {"bench/core/files.py": ["json_sha256"]}


def test_the_count_finds_a_second_sorted_json_hash():
    own = ("import hashlib, json\ndef key(rec):\n    text = json.dumps(rec, sort_keys=True)\n"
           "    return hashlib.sha256(text.encode()).hexdigest()\n"
           "def plain(rec):\n    return json.dumps(rec, sort_keys=True)\n")
    assert sorted_json_hashes(own) == ["key"]


def test_the_digest_is_each_former_owners_form():
    """The four digests it replaced, transcribed: compact separators with
    default=str (config hash, metrics.json), compact without (the eval
    manifest: its values are JSON already), json's own spacing (a corrupted
    set's recipe key). A record's hashes stay what they were."""
    value = {"b": [1, 2.5, True, None], "a": {"z": "x", "y": 3}}
    compact = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    spaced = json.dumps(value, sort_keys=True).encode()
    assert files.json_sha256(value) == hashlib.sha256(compact).hexdigest()
    assert files.json_sha256(value, files.SPACED) == hashlib.sha256(spaced).hexdigest()
    assert files.json_sha256({"p": Path("/x")}) == hashlib.sha256(b'{"p":"/x"}').hexdigest()


WRITES_CODE = ("ast.unparse", "ast.dump", "ast.iter_fields")


def code_normalisers(source: str) -> list[str]:
    """Functions that parse code (ast.parse) and write it back as text
    (ast.unparse, ast.dump, a walk over ast.iter_fields), themselves or
    through a function of the same module they call."""
    fns = {fn.name: fn for fn in functions(source)}
    called = {name: {ast.unparse(c.func) for c in ast.walk(fn) if isinstance(c, ast.Call)}
              for name, fn in fns.items()}

    def writes(name, seen=()):
        calls = called[name]
        return any(c in WRITES_CODE for c in calls) or any(
            c in fns and c not in seen and writes(c, (*seen, name)) for c in calls)

    return [n for n in fns if "ast.parse" in called[n] and writes(n)]


def test_one_code_normaliser():
    assert sites(code_normalisers) == {"bench/core/codeid.py": ["normalised"]}


def test_the_count_finds_both_former_normalisers():
    """The two it replaced, transcribed: ast.unparse without docstrings (a
    plugin's files), a dump of node fields through a helper (a code unit)."""
    unparse = "import ast\ndef normalised(src):\n    return ast.unparse(ast.parse(src))\n"
    dump = ("import ast\ndef digest(src):\n    return canon(ast.parse(src))\n"
            "def canon(node):\n    return [canon(v) for _, v in ast.iter_fields(node)]\n"
            "def names(src):\n    return [n.id for n in ast.walk(ast.parse(src))]\n")
    assert code_normalisers(unparse) == ["normalised"]
    assert code_normalisers(dump) == ["digest"]


# The measures one package owns; where a built-in measure's code may live
# outside it, and why: the checkpoint AUC is computed by training from
# bench.calib.metrics (bench.train.protocol), the prediction-set measures are
# the conformal sets' own (bench.calib.conformal).
MEASURES_PACKAGE = "bench.calib.measures"
MEASURED_ELSEWHERE = {"auc": "bench.calib.metrics"}


def test_the_measures_have_one_owner():
    from bench.calib import measures

    outside = {}
    for name in measures.MEASURES.names():
        m = measures.get(name)
        for role, fn in (("fn", m.fn), ("resample", m.resample)):
            module = getattr(fn, "__module__", None) or ""
            if fn is None or not module.startswith("bench."):
                continue  # no resampler; a plugin's own measure
            allowed = (module.startswith(MEASURES_PACKAGE)
                       or module == MEASURED_ELSEWHERE.get(name)
                       or (m.sets and module == "bench.calib.conformal"))
            if not allowed:
                outside[f"{name}.{role}"] = module
    assert outside == {}


def test_no_second_module_is_named_for_the_measures():
    """calibration.py, calibration_measures.py and measures.py named one
    concept three ways beside metrics.py; only the package is named so now."""
    calib = ROOT / "bench" / "calib"
    named = sorted(p.relative_to(calib).as_posix() for p in calib.glob("*.py")
                   if any(w in p.stem for w in ("measure", "calibration")))
    assert named == [] and (calib / "measures" / "__init__.py").is_file()


PM_SIGNS = ("±", r"$\pm$")


def pm_formatters(source: str) -> list[str]:
    """Functions that write 'mean ± std' themselves: one expression (an
    f-string or a chain of +) holding both a number formatted (a format
    spec, str.format, or a call of a same-module function that formats) and
    the sign between mean and std (a string that is the sign alone, or a
    variable named pm). Prose such as 'mean ± std over seeds' is no sign."""
    fns = {fn.name: fn for fn in functions(source)}

    def formats_here(node):
        return any((isinstance(n, ast.FormattedValue) and n.format_spec is not None)
                   or (isinstance(n, ast.Call) and ast.unparse(n.func).endswith(".format"))
                   for n in ast.walk(node))

    def formatter(name, seen=()):
        fn = fns[name]
        return formats_here(fn) or any(
            isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in fns
            and c.func.id not in seen and formatter(c.func.id, (*seen, name))
            for c in ast.walk(fn))

    def formats(node):
        return formats_here(node) or any(
            isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in fns
            and formatter(c.func.id) for c in ast.walk(node))

    def signs(node):
        return any((isinstance(n, ast.Constant) and isinstance(n.value, str)
                    and n.value.strip() in PM_SIGNS)
                   or (isinstance(n, ast.Name) and n.id == "pm") for n in ast.walk(node))

    def writes(fn):
        return any(isinstance(n, (ast.JoinedStr, ast.BinOp)) and signs(n) and formats(n)
                   for n in ast.walk(fn))

    return [name for name, fn in fns.items() if writes(fn)]


def test_one_mean_pm_std_formatter():
    assert sites(pm_formatters) == {"bench/report/render/tables.py": ["mean_pm"]}


def test_the_count_finds_the_former_formatters():
    """Three of those it replaced, transcribed: LaTeX's sign beside a
    same-module number formatter, the terminal's f-string, the summary's."""
    tex = ('def fmt(x):\n    return f"{x * 100:.2f}"\n'
           'def cell(m, s):\n    return fmt(m) + f"$\\\\pm${fmt(s)}"\n')
    text = 'def value(m, s):\n    return f"{m * 100:.2f} ± {s * 100:.2f}"\n'
    summary = ('def mean_pm_std(v, digits=2):\n'
               '    return f"{v.mean():.{digits}f} ± {v.std():.{digits}f}"\n'
               'def note(n):\n    return f"mean ± std over {n:d} seeds"\n')
    passed = ('def text(c, form="{:.2f}", pm=" ± "):\n'
              '    return form.format(c[0]) + ("" if c[1] is None else pm + form.format(c[1]))\n'
              'def caller(c):\n    return text(c, pm="$\\\\pm$")\n')
    assert pm_formatters(tex) == ["cell"]
    assert pm_formatters(text) == ["value"]
    assert pm_formatters(summary) == ["mean_pm_std"]
    assert pm_formatters(passed) == ["text"]


def test_the_per_run_frame_names_its_columns_as_runs_csv(tmp_path):
    """bench.results.load and runs.csv name one run's columns one way (its
    ECE is `ece` in both, never `test_ece`) and agree on the values they
    share: keys, cost and every measure computed from the saved logits with
    its bootstrap bounds. (The stored measures are metrics.json's in the
    frame and recomputed from the logits in runs.csv; report_records writes
    metrics.json values of its own, so those are compared by name only.)"""
    import bench.results
    import report_records
    from bench.calib import measures
    from bench.core.record import records
    from bench.report.numbers import aggregate
    from bench.report.numbers.cells import Run

    root = report_records.write_known(tmp_path / "results")
    loaded = bench.results.load(root)
    csv = aggregate.runs_frame([Run(r, r.method) for r in records(root)])
    assert [c for c in csv.columns if c not in loaded.columns] == []
    assert [c for c in loaded.columns if c.startswith("test_")] == []
    shared = [c for c in csv.columns if c not in measures.stored()]
    by_path = [f.assign(path=f["path"].map(str)).set_index("path").sort_index()
               for f in (loaded, csv)]
    shared.remove("path")
    pd.testing.assert_frame_equal(by_path[0][shared], by_path[1][shared], check_dtype=False)


STORES = ("append", "add", "setdefault", "update", "insert")
# bench/train is edited on the cell-group branch: its augmentation op list
# moves onto Registry there
LEFT_FOR_TRAIN = {"bench/train/augment.py": ["register"]}


def hand_rolled_registries(source: str) -> list[str]:
    """Top-level functions returning a decorator that puts the decorated
    object into a module-level container (NAME[key] = fn, NAME.append(...))."""
    tree = ast.parse(source)

    def is_registry(value) -> bool:  # NAME = Registry(...): the one owner itself
        return isinstance(value, ast.Call) and ast.unparse(value.func).endswith("Registry")

    module_names = {t.id for stmt in tree.body if isinstance(stmt, (ast.Assign, ast.AnnAssign))
                    and not is_registry(stmt.value)
                    for target in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])
                    for t in ast.walk(target) if isinstance(t, ast.Name)}

    def stores(inner) -> bool:
        params = {a.arg for a in inner.args.args}

        def holds_param(node):
            return any(isinstance(n, ast.Name) and n.id in params for n in ast.walk(node))

        for n in ast.walk(inner):
            if isinstance(n, ast.Assign) and holds_param(n.value) and any(
                    isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                    and t.value.id in module_names for t in n.targets):
                return True
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr in STORES and isinstance(n.func.value, ast.Name) \
                    and n.func.value.id in module_names and any(map(holds_param, n.args)):
                return True
        return False

    return [fn.name for fn in tree.body if isinstance(fn, ast.FunctionDef)
            and any(isinstance(inner, ast.FunctionDef) and stores(inner) for inner in fn.body)]


def test_registries_are_registry():
    assert sites(hand_rolled_registries) == LEFT_FOR_TRAIN


def test_the_count_finds_the_former_registries():
    """The three it names, transcribed: a dict of (text, fn) (the paper's
    claims), a dict of functions (the file indexes), a list of records (the
    augmentation ops)."""
    claims = ("CLAIMS = {}\ndef claim(key, text):\n    def deco(fn):\n"
              "        CLAIMS[key] = (text, fn)\n        return fn\n    return deco\n")
    indexes = ("FILE_INDEXES = {}\ndef file_index(name):\n    def deco(fn):\n"
               "        FILE_INDEXES[name] = fn\n        return fn\n    return deco\n")
    ops = ("OPS = []\ndef register(name):\n    def deco(kernel):\n"
           "        OPS.append(Op(name, kernel))\n        return kernel\n    return deco\n"
           "def cached(key):\n    def deco(fn):\n        local = {}\n"
           "        local[key] = fn\n        return fn\n    return deco\n")
    owned = ("from bench.core.registry import Registry\nVARIANTS = Registry('variant')\n"
             "def register_variant(name):\n    def deco(fn):\n"
             "        VARIANTS.add(name, fn, '')\n        return fn\n    return deco\n")
    assert hand_rolled_registries(claims) == ["claim"]
    assert hand_rolled_registries(indexes) == ["file_index"]
    assert hand_rolled_registries(ops) == ["register"]
    assert hand_rolled_registries(owned) == []
