"""One exception type for every user-facing failure.

The CLI turns a BenchError into a single line on stderr and a non-zero exit,
so the message must name the bad value and what is allowed.
"""


class BenchError(Exception):
    """A user-facing error: the message is shown as one line, no traceback."""


# Registries a plugin can extend: their unknown-name errors say how.
PLUGIN_KINDS = ("method", "dataset", "backbone")
PLUGIN_HINT = ("; or add your own in a plugin module (bench run --plugin MODULE, "
               "BENCH_PLUGINS=MODULE or an entry point in group mhml_bench.plugins: "
               "see docs/methods.md)")


def choices_error(kind: str, value, valid) -> BenchError:
    listed = ", ".join(str(v) for v in valid)
    hint = PLUGIN_HINT if kind in PLUGIN_KINDS else ""
    return BenchError(f"unknown {kind} '{value}'; choose from: {listed}{hint}")
