"""core/hps.py: the one STAGE:REPLICA:FACTOR parser and the H-PS options both packages share."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from heterps_sim.core.hps import ENCODINGS, HpsOptions, parse_slow_replica


@pytest.mark.parametrize("text, expected", [
    ("1:0:2.5", (1, 0, 2.5)), ("0:3:40", (0, 3, 40.0)), (" 2: 1:1e1", (2, 1, 10.0)),
    ("0:0:0.5", (0, 0, 0.5)), ("-1:0:2", (-1, 0, 2.0))])  # range and factor: missing_replica's
def test_the_parser_reads_stage_replica_factor(text, expected):
    assert parse_slow_replica(text) == expected


@pytest.mark.parametrize("text", ["", "x", "1", "1:0", "1:0:2:3", "1.5:0:2", "1:a:2", "1:0:f",
                                  "1:0:", ":0:2", "1::2"])
def test_the_parser_rejects_anything_else_naming_the_text(text):
    with pytest.raises(ValueError) as exc:
        parse_slow_replica(text)
    assert str(exc.value) == f"expected STAGE:REPLICA:FACTOR, got {text!r}"


def test_the_defaults_switch_everything_off():
    options = HpsOptions()
    assert (options.share, options.slow_replicas, options.overlap, options.quantize) == \
        ("equal", (), False, "none")
    assert ENCODINGS == ("none", "fp16", "bf16", "int8")


@pytest.mark.parametrize("fields, where", [
    ({"share": "fast"}, "expected equal or speed, got 'fast'"),
    ({"quantize": "int4"}, "quantize"), ({"quantize": "auto"}, "quantize"),
    ({"slow_replicas": ((0, 1),)}, "slow_replicas"), ({"slow_replicas": "0:1:2"}, "slow_replicas"),
    ({"overlap": "maybe"}, "overlap"), ({"typo": 1}, "typo")])
def test_bad_options_are_rejected_naming_the_field(fields, where):
    with pytest.raises(ValidationError, match=where):
        HpsOptions(**fields)


def test_options_are_frozen_and_documented():
    options = HpsOptions(share="speed", slow_replicas=[[1, 0, 2]], overlap=True, quantize="int8")
    assert options.slow_replicas == ((1, 0, 2.0),)
    with pytest.raises(ValidationError):
        options.share = "equal"
    assert all(field.description for field in HpsOptions.model_fields.values())


@pytest.mark.parametrize("slow, replicas, missing", [
    (((1, 1, 2.0),), [1, 2], None),
    (((0, 0, 1.0), (1, 2, 2.0)), [1, 2], (1, 2, 2.0)),   # replica 2 of 2
    (((2, 0, 2.0),), [1, 2], (2, 0, 2.0)),                # stage 2 of 2
    (((-1, 0, 2.0),), [1, 2], (-1, 0, 2.0)),
    (((0, -1, 2.0),), [1, 2], (0, -1, 2.0)),
    (((0, 0, 0.5),), [1, 2], (0, 0, 0.5)),                # faster, not slower
    (((0, 7, 2.0),), [None, 2], None)])                   # stage 0 not provisioned yet
def test_missing_replica_names_the_first_one_the_plan_lacks(slow, replicas, missing):
    assert HpsOptions(slow_replicas=slow).missing_replica(replicas) == missing


@pytest.mark.parametrize("factor", [math.nan, math.inf])
def test_a_non_finite_factor_is_never_a_valid_slowdown(factor):
    with pytest.raises(ValueError, match="finite"):
        HpsOptions(slow_replicas=((0, 0, factor),))


def test_the_shared_options_import_neither_simpy_nor_torch():
    import subprocess
    import sys
    code = ("import sys, heterps_sim.core.hps; "
            "print(','.join(m for m in ('torch', 'simpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
