"""No function of bench/ takes more than MAX_POSITIONAL positional parameters:
past that a call is a row of values whose meaning hangs on their order. The
options go after `*` (keyword-only, named at every call) or into an object
that says what they are together (bench.report.render.tables.TableSpec)."""
from __future__ import annotations

import ast

from tests.test_layout import MODULES, ROOT

MAX_POSITIONAL = 8


def long_signatures(source: str) -> list[tuple[str, int, int]]:
    """(name, line, positional parameters) of each function in `source` over
    MAX_POSITIONAL; a method's self or cls does not count."""
    out = []
    for parent in ast.walk(ast.parse(source)):
        for node in ast.iter_child_nodes(parent):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            args = node.args.posonlyargs + node.args.args
            n = len(args)
            if isinstance(parent, ast.ClassDef) and args and args[0].arg in ("self", "cls"):
                n -= 1
            if n > MAX_POSITIONAL:
                out.append((node.name, node.lineno, n))
    return out


def test_no_function_takes_more_than_eight_positional_parameters():
    assert len(MODULES) > 100  # the whole package was read
    long = [f"{path.relative_to(ROOT)}:{line}: {name} takes {n}"
            for path in MODULES.values() for name, line, n in long_signatures(path.read_text())]
    assert long == [], (f"over {MAX_POSITIONAL} positional parameters (make the options "
                        "keyword-only after `*`, or pass one object that holds them): "
                        + "; ".join(long))


def test_the_signature_check_counts_what_a_call_can_pass_by_position():
    source = '''
def nine(a, b, c, d, e, f, g, h, i): pass
def eight_and_options(a, b, c, d, e, f, g, h, *, i=1, j=2, **kw): pass
def only(a, b, c, d, e, f, g, h, i, /): pass
def star(*args, **kwargs): pass
class C:
    def method(self, a, b, c, d, e, f, g, h): pass
    def over(self, a, b, c, d, e, f, g, h, i): pass
    @staticmethod
    def self_less(a, b, c, d, e, f, g, h, i): pass
def outer():
    async def inner(a, b, c, d, e, f, g, h, i): pass
'''
    assert long_signatures(source) == [("nine", 2, 9), ("only", 4, 9), ("over", 8, 9),
                                       ("self_less", 10, 9), ("inner", 12, 9)]
