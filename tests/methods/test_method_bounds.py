"""Every method hyper-parameter's allowed values, against the bounds written here.

The table below is the expectation, written from the methods' definitions (not read
from the code's declared ranges): a weight, margin or exponent is any value >= 0 (0 turns the
term off), a kernel width any value > 0, a smoothing epsilon or a probability threshold is in [0, 1], a head count
is a whole number >= 1. Each bound is probed just inside, on it and just outside,
so a bound moved by one (ge(0) -> ge(1)) or opened fails here.
"""
import dataclasses

import pytest

from bench.core.errors import BenchError
from bench.core.settings import specs
from bench.methods import METHODS, create_method

AT_LEAST_0, UNIT, POSITIVE = ("ge", 0.0), ("unit", None), ("gt", 0.0)
BOUNDS = {
    ("ls", "epsilon"): UNIT,
    ("mbls", "margin"): AT_LEAST_0,
    ("mbls", "alpha"): AT_LEAST_0,
    ("mixup", "alpha"): AT_LEAST_0,
    ("dca", "beta"): AT_LEAST_0,
    ("focal", "gamma"): AT_LEAST_0,
    ("flsd53", "gamma_low"): AT_LEAST_0,
    ("flsd53", "gamma_high"): AT_LEAST_0,
    ("flsd53", "threshold"): UNIT,
    # --method extra: a kernel width is any value > 0 (0 would divide by it)
    ("mdca", "mdca_beta"): AT_LEAST_0,
    ("flmdca", "mdca_beta"): AT_LEAST_0,
    ("flmdca", "mdca_gamma"): AT_LEAST_0,
    ("lsmdca", "mdca_beta"): AT_LEAST_0,
    ("lsmdca", "mdca_epsilon"): UNIT,
    ("mmce", "mmce_lambda"): AT_LEAST_0,
    ("mmce", "mmce_width"): POSITIVE,
    ("mcdropout", "mc_p"): ("open", None),  # a dropout rate: 0 < p < 1
    # --method recent: weights, margins, exponents; a Beta parameter (0 = no mixing)
    ("dualfocal", "dfl_gamma"): AT_LEAST_0,
    ("acls", "acls_alpha"): AT_LEAST_0,
    ("acls", "acls_pos_lambda"): AT_LEAST_0,
    ("acls", "acls_neg_lambda"): AT_LEAST_0,
    ("acls", "acls_margin"): AT_LEAST_0,
    ("rankmixup", "rm_alpha"): AT_LEAST_0,
    ("rankmixup", "rm_margin"): AT_LEAST_0,
    ("rankmixup", "rm_mix_alpha"): AT_LEAST_0,
    ("mimo", "mimo_rho"): UNIT,  # a fraction of a step's rows
    # the adaptive losses: a step, a switch point, a margin; bounds that must
    # stay ordered (min <= start <= max, checked together) probed by hand
    ("adafocal", "adafocal_lambda"): AT_LEAST_0,
    ("adafocal", "adafocal_switch"): POSITIVE,
    ("adafocal", "adafocal_gamma_init"): ("probe", ([-2.0, -0.5, 0.0, 20.0], [-2.5, 20.5])),
    ("adafocal", "adafocal_gamma_min"): ("probe", ([-30.0, 0.0, 1.0], [1.5, 7.0])),
    ("adafocal", "adafocal_gamma_max"): ("probe", ([1.0, 3.0, 100.0], [0.5, -1.0])),
    ("cals", "cals_margin"): POSITIVE,
    ("cals", "cals_tau"): AT_LEAST_0,
    ("cals", "cals_lambda_min"): ("probe", ([0.0, 1e-3, 1e6], [-1e-9, 2e6])),
    ("cals", "cals_lambda_max"): ("probe", ([1e-6, 1.0, 1e9], [0.0, 1e-7, -1.0])),
    ("cals", "cals_rho_min"): ("probe", ([1e-6, 0.5, 10.0], [0.0, -1.0, 10.5])),
    ("cals", "cals_rho_max"): ("probe", ([1.0, 2.0, 1e3], [0.5, 0.0, -1.0])),
    ("cals", "cals_gamma"): ("probe", ([1.0, 1.2, 4.0], [0.999, 0.0, -1.0])),
}


def float_fields(name):
    params = create_method(name).params
    return {f.name for f in dataclasses.fields(params)
            if isinstance(getattr(params, f.name), float)}


def test_the_table_covers_every_float_hyper_parameter():
    listed = {(n, k) for n in METHODS.names() for k in float_fields(n)}
    assert listed == set(BOUNDS)


@pytest.mark.parametrize("name", sorted({n for n, _ in BOUNDS}))
def test_every_parameter_field_declares_a_meaning_and_range(name):
    params = create_method(name).params
    # a numeric field declares its range, a named choice (mmce_form) its choices
    declared = {k for k, spec in specs(params).items()
                if spec.help and (spec.range or spec.choices)}
    assert declared == {f.name for f in dataclasses.fields(params)}


def accepted(name, key, value):
    try:
        method = create_method(name, {key: repr(value)})
    except BenchError as err:
        assert repr(value) in str(err) and "\n" not in str(err)
        return False
    assert getattr(method.params, key) == pytest.approx(value)  # the override landed
    return True


@pytest.mark.parametrize("name, key", sorted(BOUNDS))
def test_each_bound_probed_inside_on_and_outside(name, key):
    kind, probes = BOUNDS[(name, key)]
    if kind == "probe":
        inside, outside = probes
    elif kind == "ge":
        inside, outside = [0.0, 0.5, 0.999, 1.0, 7.5], [-0.5, -1e-9, -3.0]
    elif kind == "open":
        inside, outside = [1e-6, 0.5, 0.999], [0.0, 1.0, -0.1, 1.5]
    elif kind == "gt":
        inside, outside = [1e-6, 0.4, 1.0, 7.5], [0.0, -1e-9, -3.0]
    else:
        inside, outside = [0.0, 1e-6, 0.5, 0.999, 1.0], [-0.01, 1.0001, 1.5]
    assert [accepted(name, key, v) for v in inside] == [True] * len(inside)
    assert [accepted(name, key, v) for v in outside] == [False] * len(outside)
