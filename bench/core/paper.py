"""The paper's vocabulary, in one place: which methods and backbones its
tables hold, in which order, and the names other libraries give them.

Names are the harness's registry keys (`sl1h`, `4hml`, `swin_tiny`, ...);
how a table prints them is the report's business. docs/fidelity.md has the
methods and their hyper-parameters.
"""
from __future__ import annotations

# The trained rows of the paper's tables, in table order: what `--method paper`
# trains. D-Ens and +TS are derived from sl1h records, never trained.
PAPER_METHODS = ("sl1h", "ls", "mbls", "mixup", "dca", "2hsl", "2hml", "4hml")

# The released code's extra baselines (not in the paper's tables): `--method
# all` trains them after the paper's methods.
EXTRA_BASELINES = ("focal", "flsd53")

# The rows of the paper's main tables, in order: the trained methods with the
# deep ensemble between the single-head and the multi-head blocks.
TABLE_METHODS = PAPER_METHODS[:5] + ("dens",) + PAPER_METHODS[5:]

# The rows of its temperature-scaling tables: (method, variant), `ts-base`
# the model before scaling, `ts` after.
TS_ROWS = tuple((m, v) for m in ("sl1h", "2hsl", "4hml") for v in ("ts-base", "ts"))

# The paper's three backbones: what `--backbone all` (or `paper`) means.
PAPER_BACKBONES = ("resnet50", "convnext_tiny", "swin_tiny")

# Other names of the paper's backbones -> ours (torchvision calls Swin-T swin_t).
BACKBONE_ALIASES = {"swin_t": "swin_tiny"}
