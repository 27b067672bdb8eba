"""The public API for code outside this package: your own methods, datasets
and backbones, registered with the same decorators the built-ins use.

    from bench.plugins import Method, register_method

    @register_method("confpen", "CE - beta x entropy (Pereyra et al. 2017)")
    def confpen() -> Method: ...

A module doing this becomes a plugin through an entry point in the group
`mhml_bench.plugins` (its value: the module), the environment variable
`BENCH_PLUGINS` (comma list) or `bench run --plugin MODULE`; the `bench`
command and every worker process import it before resolving a name.
docs/methods.md ("Your own method") walks through one from an empty folder.
"""
# a Params field declared with its meaning and allowed values: setting(default,
# "meaning", range=ge(0)) (a `KEYS` table of (Range, meaning) is read too)
from bench.core.settings import Range, ge, gt, setting
from bench.core.errors import BenchError
from bench.core.plugins import ENV, GROUP, load
from bench.datasets.base import DATASETS, DatasetBundle, Split
from bench.methods.base import METHODS, Method
from bench.train.backbones import BACKBONES, Backbone

register_method = METHODS.register
register_dataset = DATASETS.register
register_backbone = BACKBONES.register

__all__ = ["register_method", "register_dataset", "register_backbone", "Method",
           "DatasetBundle", "Split", "Backbone", "BenchError", "load", "GROUP", "ENV",
           "Range", "ge", "gt", "setting"]
