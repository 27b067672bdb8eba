"""docs/reference.md is the committed copy of `bench list` and `bench list --keys`:
a key, default, range, meaning or registry description changed in the code
without the doc (or the other way round) fails here."""
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "reference.md"


def fenced_blocks(text: str) -> list[str]:
    parts = text.split("```text\n")[1:]
    return [p.split("\n```")[0] for p in parts]


def test_reference_doc_matches_what_bench_list_prints():
    listed = [subprocess.run([sys.executable, "-m", "bench.cli", "list", *extra], check=True,
                             capture_output=True, text=True).stdout.rstrip("\n")
              for extra in ([], ["--keys"])]
    assert fenced_blocks(DOC.read_text()) == listed, (
        "docs/reference.md is stale: run `python -m bench.cli.reference`")


def test_reference_doc_lists_every_declared_flag():
    """Each declared option of bench run / eval / report has a row naming its
    flag; the flag spellings are read from the parser itself, not from the
    declarations the generator reads."""
    import argparse

    from bench.cli.main import build_parser

    text = DOC.read_text()
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = []
    for command in ("run", "eval", "report"):
        section = text.split(f"## `bench {command}` flags")[1].split("\n## ")[0]
        for action in sub.choices[command]._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and flag not in ("--help", "--plugin", "--results", "--out"):
                    if f"`{flag}`" not in section:
                        missing.append(f"bench {command} {flag}")
    assert missing == []


def test_reference_doc_names_every_method_dataset_backbone_and_key():
    import dataclasses

    from bench.core.config import TrainConfig
    from bench.datasets import DATASETS
    from bench.methods import METHODS
    from bench.train.backbones import BACKBONES

    text = DOC.read_text()
    names = [*METHODS.names(), *DATASETS.names(), *BACKBONES.names(),
             *(f.name for f in dataclasses.fields(TrainConfig))]
    assert [n for n in names if f"\n{n} " not in text] == []
