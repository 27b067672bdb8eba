"""The paper's vocabulary, in one place: which methods and backbones its
tables hold, in which order, how they are printed, and the row variants.

Names are the harness's registry keys (`sl1h`, `4hml`, `swin_tiny`, ...).
Display names of the paper's methods, backbones and datasets are here;
a method outside the paper declares its own (Method.display_name), and
`bench report --label` overrides either. docs/fidelity.md has the methods
and their hyper-parameters.
"""
from __future__ import annotations


# The paper's single-head rows and multi-head rows, in table order.
SINGLE_HEAD = ("sl1h", "ls", "mbls", "mixup", "dca")
MULTI_HEAD = ("2hsl", "2hml", "4hml")

# The trained rows of the paper's tables, in table order: what `--method paper`
# trains. D-Ens and +TS are derived from sl1h records, never trained.
PAPER_METHODS = SINGLE_HEAD + MULTI_HEAD

# The released code's extra baselines (not in the paper's tables): `--method
# all` trains them after the paper's methods.
EXTRA_BASELINES = ("focal", "flsd53")

# Where a method outside the paper comes from, printed under every report
# table that shows it (bench.report.render.footnotes.sources_note); the
# `--method recent` losses (issue 49, docs/methods.md). Methods not named
# here add no note, so reports of the paper's methods are unchanged.
METHOD_SOURCES = {
    "dualfocal": "Tao, Dong and Xu, Dual Focal Loss for Calibration, ICML 2023",
    "acls": "Park, Noh, Oh, Baek and Ham, ACLS: Adaptive and Conditional Label "
            "Smoothing for Network Calibration, ICCV 2023",
    "rankmixup": "Noh, Park, Lee and Ham, RankMixup: Ranking-Based Mixup Training for "
                 "Network Calibration, ICCV 2023",
    "mimo": "Havasi, Jenatton, Fort, Liu, Snoek, Lakshminarayanan, Dai and Tran, Training "
            "independent subnetworks for robust prediction, ICLR 2021",
    "adafocal": "Ghosh, Schaaf and Gormley, AdaFocal: Calibration-aware Adaptive Focal "
                "Loss, NeurIPS 2022",
    "cals": "Liu, Rony, Galdran, Dolz and Ben Ayed, Class Adaptive Network Calibration, "
            "CVPR 2023",
}

# The deep ensemble (D-Ens): a row of its own, built from the seeds of one
# trained method, never trained.
DENS = "dens"
ENSEMBLE_OF = "sl1h"

# The rows of the paper's main tables, in order: the trained methods with the
# deep ensemble between the single-head and the multi-head blocks.
TABLE_METHODS = SINGLE_HEAD + (DENS,) + MULTI_HEAD

# A report's default row order, as sections (a double rule between them):
# the paper's rows with the released code's extra baselines among the
# single-head ones. Methods not named here join the section their Method
# declares (bench.report.render.tables.ordered_methods).
TABLE_SECTIONS = (SINGLE_HEAD + EXTRA_BASELINES, (DENS,), MULTI_HEAD)

# The methods of its temperature-scaling tables (appendix); a report shows
# others there only when `--order` names them.
TS_METHODS = ("sl1h", "2hsl", "4hml")

# The paper's three backbones: what `--backbone all` (or `paper`) means.
PAPER_BACKBONES = ("resnet50", "convnext_tiny", "swin_tiny")

# Other names of the paper's backbones -> ours (torchvision calls Swin-T swin_t).
BACKBONE_ALIASES = {"swin_t": "swin_tiny"}

# How reports print the paper's rows and columns.
METHOD_NAMES = {"sl1h": "SL1H", "ls": "LS", "mbls": "MbLS", "mixup": "MixUp", "dca": "DCA",
                DENS: "D-Ens", "2hsl": "2HSL", "2hml": "2HML", "4hml": "4HML"}
BACKBONE_NAMES = {"resnet50": "ResNet50", "convnext_tiny": "ConvNeXt", "swin_tiny": "Swin-T"}
# ... and the harness's other built-in backbones. Each backbone is registered
# with its display name (bench.train.backbones), which config.json records as
# `backbone_name`; these spellings also name records written before that.
OTHER_BACKBONE_NAMES = {"smallcnn": "SmallCNN", "resnet18": "ResNet18"}
# ... and its datasets, with the offline demo's (no dataset registry entry
# carries a display name; `--data-opt name=` records one per run).
DATASET_NAMES = {"chaoyang": "Chaoyang", "kvasir": "Kvasir", "pathmnist": "PathMNIST",
                 "digits": "Digits"}

# How the paper's LaTeX source prints them (its first table calls SL1H OneH),
# read by bench.report.paper.published.
PRINTED_METHODS = {**{text: key for key, text in METHOD_NAMES.items()}, "OneH": "sl1h"}
PRINTED_BACKBONES = {"ResNet50": "resnet50", "ConvNeXt": "convnext_tiny",
                     "Swin-Transformer": "swin_tiny"}

CITATION = "Galdran et al., MICCAI 2023"
# Row keys METHOD@paper are the paper's published numbers, copied into a
# report (`bench report --published-rows`).
COPIED_SUFFIX = "@paper"
