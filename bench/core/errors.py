"""One exception type for every user-facing failure.

The CLI turns a BenchError into a single line on stderr and a non-zero exit,
so the message must name the bad value and what is allowed.
"""


class BenchError(Exception):
    """A user-facing error: the message is shown as one line, no traceback."""


def choices_error(kind: str, value, valid) -> BenchError:
    listed = ", ".join(str(v) for v in valid)
    return BenchError(f"unknown {kind} '{value}'; choose from: {listed}")
