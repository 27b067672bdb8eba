"""Lay a plugin on sys.path as an installed distribution, without pip: the
package plus NAME-VERSION.dist-info/ (METADATA, entry_points.txt), which
importlib.metadata finds as pip would have left it; and undo it afterwards.
`lay_package`: a plugin package whose loss lives in a helper module."""
from __future__ import annotations

import shutil
import sys
import tomllib
from pathlib import Path

import pytest

from bench.core import plugins
from bench.calib.measures import MEASURES
from bench.calib.ood import SCORES as OOD_SCORES
from bench.calib.variants import VARIANTS
from bench.datasets import DATASETS
from bench.methods import METHODS
from bench.train.backbones import BACKBONES

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "mhml-confpen"
REGISTRIES = (METHODS, DATASETS, BACKBONES, MEASURES, VARIANTS, OOD_SCORES)


def lay_distribution(site: Path, project: Path = EXAMPLE) -> Path:
    """Copy `project`'s packages into `site` with a dist-info whose entry
    points are the ones its pyproject.toml declares; -> the site folder."""
    meta = tomllib.loads((project / "pyproject.toml").read_text())
    name, version = meta["project"]["name"], meta["project"]["version"]
    for package in meta["tool"]["setuptools"]["packages"]:
        shutil.copytree(project / package, site / package)
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    groups = meta["project"].get("entry-points", {})
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n"
        for group, eps in groups.items()))
    return site


@pytest.fixture
def clean_plugins(monkeypatch):
    """Registries, loaded plugins, sys.modules and sys.path as they were:
    a plugin registered by one test is gone for the next."""
    entries = [dict(r._entries) for r in REGISTRIES]
    loaded = dict(plugins._LOADED)
    modules = set(sys.modules)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delenv(plugins.ENV, raising=False)
    yield
    for reg, before in zip(REGISTRIES, entries):
        reg._entries.clear()
        reg._entries.update(before)
    plugins._LOADED.clear()
    plugins._LOADED.update(loaded)
    for name in set(sys.modules) - modules:
        if _plugin_module(sys.modules[name]):
            del sys.modules[name]


def _plugin_module(module) -> bool:
    """A module a test laid down (not torch's or any installed library's lazy
    imports: those cannot be imported twice)."""
    file = getattr(module, "__file__", None)
    if not file:
        return False
    path = Path(file).resolve()
    # an installed library may live outside sys.prefix (a venv reading
    # another's site-packages through a .pth file, as a git worktree's may)
    installed = {"site-packages", "dist-packages"} & set(path.parts)
    return not installed and not any(path.is_relative_to(Path(root).resolve())
                                     for root in (sys.prefix, sys.base_prefix, ROOT))


@pytest.fixture
def confpen_site(tmp_path, clean_plugins):
    """The example plugin laid on sys.path as an installed distribution."""
    site = lay_distribution(tmp_path / "site")
    sys.path.append(str(site))
    return site


METHOD = '''
"""A plugin method whose loss lives in a helper module."""
from dataclasses import dataclass

from bench.plugins import Method, ge, register_method, setting

from {helper} import penalised_ce


@dataclass(frozen=True)
class Params:
    weight: float = setting(1.0, "{name}: weight of the helper's penalty", range=ge(0))


class Penalised(Method):
    Params = Params
    display_name = "Penalised"

    def loss(self, logits, target):
        return penalised_ce(logits[:, 0], target, self.params.weight)


@register_method("{name}", "CE plus a helper's penalty")
def factory():
    return Penalised("{name}")
'''
HELPER = '''
"""The loss itself."""
import torch.nn.functional as F


def penalised_ce(z, y, weight):
    # the weight of the penalty
    return F.cross_entropy(z, y) + weight * 0.1 * z.pow(2).mean()
'''


def lay_package(folder, name: str):
    """A plugin package `name` (method module + helper module) under `folder`."""
    pkg = folder / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import method  # noqa: F401\n")
    (pkg / "method.py").write_text(METHOD.format(helper=f"{name}.losses", name=name))
    (pkg / "losses.py").write_text(HELPER)
    return pkg
