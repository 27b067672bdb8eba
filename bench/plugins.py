"""The public API for code outside this package: your own methods, datasets,
backbones, calibration measures and post-hoc calibrators, registered with the
same decorators the built-ins use.

    from bench.plugins import Method, register_method, register_measure

    @register_method("confpen", "CE - beta x entropy (Pereyra et al. 2017)")
    def confpen() -> Method: ...

    @register_measure("mce", head="MCE", help="maximum calibration error")
    def mce(probs, labels) -> float: ...

    register_calibrator("temp2", fit, apply, "my calibrator")  # fit on validation logits

    register_ood_score("energy", energy, "Energy", "minus the free energy")  # [N, M, K] -> [N]

    register_conformal_score("thr2", fn, "THR2", "my score")  # probs [N, K] -> scores [N, K]

A measure is then a `bench report --metrics` column and in every CSV; a
calibrator a `--variants` choice (docs/reports.md); an OOD score a column
group of every `bench report --ood` table (docs/shift.md); a conformal score
a column group of every `bench report --sets` table (lower = more conforming).

A module doing this becomes a plugin through an entry point in the group
`mhml_bench.plugins` (its value: the module), the environment variable
`BENCH_PLUGINS` (comma list) or `bench run --plugin MODULE`; the `bench`
command and every worker process import it before resolving a name.
docs/methods.md ("Your own method") walks through one from an empty folder.
"""
# a Params field declared with its meaning and allowed values: setting(default,
# "meaning", range=ge(0))
from bench.core.settings import Range, ge, gt, setting
from bench.core.errors import BenchError
from bench.core.plugins import ENV, GROUP, load
from bench.datasets.base import DATASETS, DatasetBundle, Split
from bench.methods.base import METHODS, Method
from bench.train.backbones import BACKBONES, Backbone

from bench.calib.conformal import register_score as register_conformal_score
from bench.calib.measures import register_measure
from bench.calib.ood import register_score as register_ood_score
from bench.calib.variants import posthoc_variant as register_calibrator
from bench.calib.variants import register_variant

register_method = METHODS.register
register_dataset = DATASETS.register
register_backbone = BACKBONES.register

__all__ = ["register_method", "register_dataset", "register_backbone", "register_measure",
           "register_variant", "register_calibrator", "register_ood_score",
           "register_conformal_score", "Method",
           "DatasetBundle", "Split", "Backbone", "BenchError", "load", "GROUP", "ENV",
           "Range", "ge", "gt", "setting"]
