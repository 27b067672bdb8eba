"""Config hashes pinned to the values an earlier release computed, so a change
in how configuration is declared, validated or serialised cannot silently
move records that are already on disk out of 'done'.

The reference values were printed by the harness at commit 9829e75 (before
each field's range, choices, meaning and hash membership moved beside the
field), through the same public calls: `config_hash(result_fields(profile))`
and `bench.api.run(..., dry_run=True)`. They are not recomputed by this code.
"""
import pytest

from bench import api
from bench.core.config import PROFILES, config_hash, result_fields

PROFILE_HASHES = {"paper": "c92b5b1a8bb9", "paper-text": "1d0573816600",
                  "quick": "f42ce356fdc4", "demo": "be9770a20ed5"}

# (bench.api.run arguments on digits, seed 0, {method: config hash})
RUNS = [
    (dict(method="all,mhml,3hml,3hsl", profile="quick"),
     {"sl1h": "9ec36022ab77", "ls": "818f98dff6e5", "mbls": "5ee0d4656b87",
      "mixup": "ed922ce1784f", "dca": "1c97019e4fac", "2hsl": "2232171de509",
      "2hml": "711b79efcdef", "4hml": "26a0ca7b9d14", "focal": "79ddb9244f1a",
      "flsd53": "38a2a425ce50", "mhml": "7f91979799a0", "3hml": "b6d87c38f8d1",
      "3hsl": "99c560719407"}),
    (dict(method="sl1h,2hsl,4hml", profile="paper-text"),
     {"sl1h": "9ba776a3b761", "2hsl": "aab110f6d9bd", "4hml": "89bff4c415f1"}),
    (dict(method="sl1h,4hml", profile="paper", pretrained=False),
     {"sl1h": "1519d0f7337b", "4hml": "c3d5f92e15a6"}),
    # speed-only switches (compile, eval_batch_size) set: they must stay out
    (dict(method="sl1h,mixup", profile="demo",
          overrides={"lr": "0.05", "drop_path": "0.1", "size_rule": "uniform",
                "augment_mode": "per_image", "compile": "true", "eval_batch_size": "64",
                "alpha": "0.4"}),
     {"sl1h": "d7dfded9acb5", "mixup": "946d28092892"}),
    (dict(method="focal,flsd53,mbls,ls,dca", profile="quick",
          overrides={"gamma": "2", "threshold": "0.3", "margin": "3", "epsilon": "0.1", "beta": "1",
                "weight_decay": "1e-4", "momentum": "0.5", "batch_size": "16",
                "eta_min": "1e-5", "augment": "false", "drop_last": "false",
                "checkpoint_score": "mean_prob", "imagenet_weights": "same", "bf16": "true",
                "deterministic": "true"}),
     {"focal": "2a3a36eab7bb", "flsd53": "219779906b8c", "mbls": "7653bb4298fd",
      "ls": "400c592290cb", "dca": "10b1949286c1"}),
    (dict(method="mhml", profile="quick",
          overrides={"heads": "3", "mh_loss": "paper", "class_groups": "numpy", "cycles": "2",
                "epochs_per_cycle": "7", "image_size": "16", "test_size": "24",
                "augment_size": "20", "channels_last": "true", "cudnn_benchmark": "false"}),
     {"mhml": "3d25ce55d558"}),
    # the extra baselines, printed at 2e1b7e5 (before a method's own code,
    # bench.core.codeunits, entered its identity: pinned, so these stay)
    (dict(method="extra", profile="quick"),
     {"mdca": "4e0f8272b392", "flmdca": "3661c047aa62", "lsmdca": "1f3b850273e4",
      "brier": "50afc550535b", "mmce": "d98ea319b6b6", "mcdropout": "4a138b10bb77",
      "batchensemble": "4b465890b210", "packed": "64f3e01aabfa"}),
]


def test_profile_hashes_are_unchanged():
    assert {name: config_hash(result_fields(cfg)) for name, cfg in PROFILES.items()} \
        == PROFILE_HASHES


@pytest.mark.parametrize("args, expected", RUNS)
def test_run_hashes_are_unchanged(args, expected, tmp_path):
    runs = api.run(dataset="digits", seeds=1, results=str(tmp_path), dry_run=True, **args)
    assert dict(zip(runs["method"], runs["config_hash"])) == expected
    assert set(runs["status"]) == {"missing"}


def _typed(text: str):
    """'true' -> True, '3' -> 3, '0.05' -> 0.05, 'paper' -> 'paper': the value
    a notebook would pass instead of the command line's text."""
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


@pytest.mark.parametrize("args, expected", [r for r in RUNS if "overrides" in r[0]])
def test_typed_set_values_give_the_same_hashes(args, expected, tmp_path):
    """--set values carried typed (bench.api's dict, the plan's conversion)
    hash as their text did: records on disk stay done."""
    typed = {**args, "overrides": {k: _typed(v) for k, v in args["overrides"].items()}}
    runs = api.run(dataset="digits", seeds=1, results=str(tmp_path), dry_run=True, **typed)
    assert dict(zip(runs["method"], runs["config_hash"])) == expected
