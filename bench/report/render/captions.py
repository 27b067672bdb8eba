"""The one check a user's table caption gets before anything is written: its
LaTeX braces pair up. A caption keeps its braces as written (LaTeX markup is
allowed), so an unpaired one would reach the .tex file and stop pdflatex
("File ended while scanning use of \\@xdblarg") after the report was written.

The braces are counted as the renderer (bench.report.render.latex.fill_caption)
will print them: a caption that is a Python format string ({dataset}, {n},
doubled {{ }}) is read as one, any other keeps every brace. A backslash
escapes the next character, so \\{ and \\} are literal braces and \\\\ a line
break."""
from __future__ import annotations

from bench.core.errors import BenchError


def check_caption(flag: str, template: str | None) -> None:
    """One BenchError line naming the flag and the caption unless its braces pair up."""
    if template is None:
        return
    problem = brace_problem(_as_printed(template))
    if problem:
        raise BenchError(f"{flag} '{template}': unbalanced braces ({problem}); every {{ needs "
                         "its }, and a literal brace is written \\{ or \\}")


def _as_printed(template: str) -> str:
    try:
        return template.format(dataset="D", n=1)
    except (KeyError, IndexError, ValueError, AttributeError):
        return template


def brace_problem(text: str) -> str | None:
    """What is wrong with `text`'s LaTeX braces, or None when they pair up."""
    depth, i = 0, 0
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2  # an escaped character, or a control word's first letter
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth < 0:
                return f"the }} at character {i + 1} closes nothing"
        i += 1
    return f"{depth} {{ never closed" if depth else None
