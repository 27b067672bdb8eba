"""tests/conftest.py's SLOW_FIRST names test modules that exist: a renamed or
moved module would silently drop back to its collection place under ./test.sh's
workers, and the suite would end with it running alone."""
from pathlib import Path

from tests.conftest import SLOW_FIRST

TESTS = Path(__file__).resolve().parent


def test_slow_first_names_existing_test_modules():
    missing = [name for name in SLOW_FIRST if not (TESTS / name).is_file()]
    assert missing == []
    assert len(set(SLOW_FIRST)) == len(SLOW_FIRST)


def test_no_two_test_modules_share_a_file_name():
    """The test folders are not packages (rootdir-relative basenames): two
    modules of one name in different folders collide on collection ('import
    file mismatch'), which a run of a single file never shows."""
    seen: dict[str, list[str]] = {}
    for path in TESTS.rglob("test_*.py"):
        seen.setdefault(path.name, []).append(str(path.relative_to(TESTS)))
    assert {n: p for n, p in seen.items() if len(p) > 1} == {}
