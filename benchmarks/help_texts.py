"""Re-check the help-text mutants: every string literal of the given modules that
`bench list` or `bench list --keys` prints is wrapped in "XX...XX" (mutmut's string
mutation) in a throw-away copy of the tree, one at a time, and
tests/cli/test_reference_doc.py must fail. Not part of CI (about 8 s a literal on 2 cores).

    .venv/bin/python benchmarks/help_texts.py bench/core/config.py bench/methods/mhml.py ...
"""
import ast
import io
import os
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TEST = "tests/cli/test_reference_doc.py"


def shown_texts() -> str:
    run = [sys.executable, "-m", "bench.cli", "list"]
    return "".join(subprocess.run(run + extra, cwd=REPO, check=True, capture_output=True,
                                  text=True).stdout for extra in ([], ["--keys"]))


def help_literals(src: str, shown: str):
    """(start, end) character offsets of the string tokens (each part of an implicit
    concatenation, as mutmut mutates them) of the literals the listings print
    verbatim; error messages (literals inside a `raise`) are not help texts."""
    tree = ast.parse(src)
    in_raise = {id(n) for r in ast.walk(tree) if isinstance(r, ast.Raise) for n in ast.walk(r)}
    starts = [0]
    for line in src.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    tokens = [(starts[t.start[0] - 1] + t.start[1], starts[t.end[0] - 1] + t.end[1])
              for t in tokenize.generate_tokens(io.StringIO(src).readline)
              if t.type == tokenize.STRING]
    for node in ast.walk(tree):
        text = node.value if isinstance(node, ast.Constant) else None
        if (isinstance(text, str) and " " in text.strip() and text in shown
                and id(node) not in in_raise):
            segment = ast.get_source_segment(src, node)
            a = src.index(segment, starts[node.lineno - 1])
            yield from [(x, y) for x, y in tokens if a <= x and y <= a + len(segment)]


def main(modules: list[str]) -> int:
    shown = shown_texts()
    work = Path(subprocess.run([REPO / "benchmarks/tree_copy.sh", "help-texts"], check=True,
                               capture_output=True, text=True).stdout.strip())
    env = {**os.environ, "PYTHONPATH": str(work)}
    missed = 0
    for module in modules:
        path, src = work / module, (REPO / module).read_text()
        spans = list(help_literals(src, shown))
        caught = 0
        for a, b in spans:
            seg = src[a:b]
            path.write_text(src[:a] + seg[0] + "XX" + seg[1:-1] + "XX" + seg[-1] + src[b:])
            rc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p",
                                 "no:cacheprovider", TEST], cwd=work, env=env,
                                capture_output=True).returncode
            caught += rc != 0
            if rc == 0:
                print(f"   NOT CAUGHT {module}: {seg}")
        path.write_text(src)
        missed += len(spans) - caught
        print(f"{module}: {len(spans)} help texts, {caught} caught by {TEST}")
    shutil.rmtree(work)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
