"""Every option of a grid of runs as one frozen dataclass, `RunOptions`:
what `bench run` parses and what `bench.api.run` takes as keyword arguments,
so both reach the same code (bench.sweep.plan) with the same checks.

Each field declares its flag beside it (bench.core.flags: help, spelling,
kind); the command line builds `bench run`'s flags from these declarations
(bench/cli/fields.py: argparse objects stay in bench/cli) and bench.api takes
the field names (`--jobs-per-gpu` -> `jobs_per_gpu`). Values are in one form
from the moment the object is built: `overrides` (--set) and `data_opts`
(--data-opt) are (key, value) pairs, parsed once from the command line's
KEY=VALUE texts or taken from a dict as given (a training key's --set value
is typed as the command line is parsed, bench.core.config.set_pair, a
method's by bench.sweep.plan; the worker never parses text). `EvalOptions`
is `bench eval`'s.
"""
from __future__ import annotations

from dataclasses import dataclass

from bench.core import plugins
from bench.core.config import set_pair
from bench.core.methodgroups import method_help
from bench.core.flags import PAIRS, REPEAT, SEEDS, Options, option
from bench.sweep.executor_options import ExecutorOptions

# The --data-opt keys of the built-in datasets, for --help without importing
# the adapters (numpy, PIL) at start-up; tests check them against each
# adapter's OPTIONS table.
DATA_OPTION_KEYS = {
    "csv": "train, test, val, path_col, label_col, classes, name, cache",
    "folder": "classes, name, cache",
    "chaoyang, kvasir": "train_csv, val_csv, test_csv, cache",
    "digits": "label_noise, train_per_class, test_per_class",
    "pathmnist and the other MedMNIST flags": "file",
}
_KEYS = "; ".join(f"{ds}: {k}" for ds, k in DATA_OPTION_KEYS.items())


@dataclass(frozen=True)
class RunOptions(ExecutorOptions):
    """The grid (names, seeds, profile, --set), data, weights and output; the
    executor's fields (and their defaults) are ExecutorOptions'."""

    method: str = option("sl1h", method_help)  # every group and what it holds
    dataset: str = option("digits", "dataset name(s), comma separated, or all")
    backbone: str | None = option(
        None, "backbone name(s), comma separated, or all / paper (the paper's resnet50, "
        "convnext_tiny, swin_tiny; default: the dataset's)")
    seeds: str = option("5", "N (seeds 0..N-1), A-B, or a comma list", kind=SEEDS)
    profile: str = option("paper", "paper (the released code's protocol) | paper-text | quick "
                          "| demo (`bench list` shows each)")
    # --set KEY=VALUE: (key, value) pairs; a training key's value is typed as
    # the command line is parsed (set_pair), a method's stays text until
    # bench.sweep.plan knows the run's methods
    overrides: tuple = option(
        (), "override a training or method hyper-parameter (repeatable, or several after one "
        "--set: --set cycles=1 epochs_per_cycle=1); `bench list --keys` lists every key, its "
        "default and range", flag="--set", kind=PAIRS, nargs="+", metavar="KEY=VALUE",
        parse=set_pair)
    results: str = option("results", "run-record root")
    data_root: str | None = option(None, "where dataset files live")
    # --data-opt KEY=VALUE: (key, text) pairs, the adapter's own to parse
    data_opts: tuple = option(
        (), f"adapter option (repeatable), keys by dataset: {_KEYS}; a plugin dataset's own (a "
        "bad key is an error listing the valid ones with their meaning)", flag="--data-opt",
        kind=PAIRS, metavar="KEY=VALUE", text_values=True)
    download: bool = option(False, "fetch missing MedMNIST files / pretrained weights when "
                                   "online")
    pretrained: bool | None = option(
        None, "ImageNet weights from the local torch hub / Hugging Face cache (default: on "
        "under --profile paper / paper-text for backbones that have them, off under quick / "
        "demo; --no-pretrained: from scratch)")
    weights: str | None = option(
        None, "initial backbone weights (.safetensors or torch state dict)", metavar="PATH")
    force: bool = option(False, "retrain finished seeds", in_grid=False)
    accept_code_change: bool = option(
        False, "the code edits since the existing records change no number: reuse them and "
        "count today's code as their version (bench/core/codepins.json; docs/architecture.md, "
        "\"Code identity\")", in_grid=False)
    # bench.api shows no progress bar unless asked (no_progress=False)
    no_progress: bool = option(False, api_default=True, in_grid=False)
    dry_run: bool = option(False, "list the runs, which are done and each run's protocol, "
                                  "then exit", in_grid=False)
    json: bool = option(False, "with --dry-run: one JSON object per run (protocol and status); "
                               "refused without --dry-run", in_grid=False)
    # output only: never part of a config hash
    tensorboard: bool = option(
        False, "also write TensorBoard event files beside each finished record "
        "(<record>/tensorboard/: train loss and lr per epoch, validation ACC/ECE/NLL/AUC per "
        "cycle); output only, the config hash is unchanged")
    # issue 33: output only (beside the record), never part of a config hash
    keep_weights: bool = option(
        False, "keep each run's selected checkpoint beside its record (model.safetensors, "
        "checksummed; the config hash is unchanged), so `bench eval` can evaluate further "
        "sets later without retraining")
    evals: tuple = option(
        (), "evaluate a further set with each run's selected checkpoint right after training, "
        "stored beside the record as eval-<set>.npz (repeatable; the config hash is unchanged): "
        "shift (the test split under MedMNIST-C's corruptions), ood:DATASET|PATH (out-of-"
        "distribution images), site:DATASET|PATH (a labelled test set of the same classes); "
        "on a finished record with kept weights only the missing sets are evaluated "
        "(docs/shift.md)", flag="--eval", kind=REPEAT, metavar="SPEC")
    # --plugin MODULE: every command takes it (bench.cli.main adds it to each)
    plugin: tuple = option(
        (), "import MODULE, a .py file or a package folder first (repeatable): it registers "
        "your own methods, datasets or backbones (docs/methods.md); also "
        f"{plugins.ENV}=a,b and entry points in group {plugins.GROUP}", kind=REPEAT,
        metavar="MODULE|PATH", common=True)


@dataclass(frozen=True)
class EvalOptions(Options):
    """Every option of `bench eval` and `bench.api.evaluate` (bench.sweep.evalrun
    does the work): declared here, beside RunOptions, so building the command's
    flags or `import bench.api` loads no evaluation code."""

    results: str = option("results", "run-record root")
    evals: tuple = option(
        (), "the set to evaluate (repeatable): shift, ood:DATASET|PATH, site:DATASET|PATH "
        "(docs/shift.md)", flag="--eval", kind=REPEAT, metavar="SPEC")
    dataset: tuple = option((), "only these datasets (comma list)", kind=REPEAT)
    method: tuple = option((), "only these methods (comma list)", kind=REPEAT)
    backbone: tuple = option((), "only these backbones (comma list)", kind=REPEAT)
    data_root: str | None = option(None, "where dataset files live")
    data_opts: tuple = option(
        (), "adapter option of the records' dataset (repeatable; as bench run's)",
        flag="--data-opt", kind=PAIRS, metavar="KEY=VALUE", text_values=True)
    device: str | None = option(None, "cpu | cuda | cuda:N (default: cuda if present)")
    no_progress: bool = option(False, api_default=True)
