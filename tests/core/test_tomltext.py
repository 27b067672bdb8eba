"""bench.core.tomltext writes what tomllib reads back as the same values:
every form a grid file holds (texts with TOML's escapes, ints, floats, bools,
arrays, one level of tables, keys that need quotes)."""
import math
import tomllib

import pytest

from bench.core.tomltext import dumps


def test_every_form_reads_back_equal():
    doc = {"method": "sl1h,2hml", "seeds": 5, "quote": 'a "b" \\ c', "lines": "x\ny\tz\x7f\x01",
           "unicode": "é—ü", "ok": True, "no": False, "lr": 0.1, "tiny": 1e-05, "big": 1e300,
           "neg": -3, "eval": ["shift", "ood:/p/a b"], "empty": [], "dotted.key": "q",
           "set": {"lr": 0.125, "augment": False, "mh_loss": "paper", "x y": 1},
           "data-opt": {"train_per_class": "10"}}
    text = dumps(doc, comment="two\nlines")
    assert text.startswith("# two\n# lines\n")
    back = tomllib.loads(text)
    assert back == doc
    assert all(type(back[k]) is type(v) for k, v in doc.items())  # 5 stays int, 0.1 float


def test_floats_keep_every_bit():
    values = [0.1, 1 / 3, 2.0 ** -1074, 1.7976931348623157e308, -0.0, 5.0]
    back = tomllib.loads(dumps({f"v{i}": v for i, v in enumerate(values)}))
    assert [back[f"v{i}"] for i in range(len(values))] == values
    assert math.copysign(1, back["v4"]) == -1


@pytest.mark.parametrize("bad", [math.inf, math.nan, None, object(), {"a": {"b": 1}}])
def test_what_it_has_no_form_for_is_refused(bad):
    with pytest.raises(ValueError):
        dumps({"t": {"k": bad}} if not isinstance(bad, dict) else {"t": bad})
