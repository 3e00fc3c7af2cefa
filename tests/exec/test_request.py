"""The run request checks itself: every bad option is one line naming its flag, exit 2,
and its H-PS fields are the simulator's own (one HpsOptions)."""

from __future__ import annotations

import pytest

from heterps_exec.request import ExecError, RunRequest
from heterps_sim.core.hps import HpsOptions
from heterps_sim.des.options import DesOptions
from tests.exec.helpers import SCENARIO, run_exec, tiny_plan

BAD = [  # (RunRequest fields, the same as flags, the one line expected)
    ({"steps": 0}, ["--steps", "0"], "--steps: expected 1..10,000,000, got 0"),
    ({"steps": 10_000_001}, ["--steps", "10000001"],
     "--steps: expected 1..10,000,000, got 10000001"),
    ({"table_scale": 0.0}, ["--table-scale", "0"], "--table-scale: expected a share in [1e-06, 1], got 0.0"),
    ({"table_scale": 1.5}, ["--table-scale", "1.5"],
     "--table-scale: expected a share in [1e-06, 1], got 1.5"),
    ({"table_scale": float("nan")}, ["--table-scale", "nan"],
     "--table-scale: expected a share in [1e-06, 1], got nan"),
    ({"lr": -0.1}, ["--lr", "-0.1"], "--lr: expected a finite rate in (0, 100], got -0.1"),
    ({"lr": float("inf")}, ["--lr", "inf"], "--lr: expected a finite rate in (0, 100], got inf"),
    ({"checkpoint_every": -1}, ["--checkpoint-every", "-1"],
     "--checkpoint-every: expected 0..10,000,000 (0: none), got -1"),
    ({"checkpoint_every": 2}, ["--checkpoint-every", "2"],
     "--checkpoint-every needs --checkpoint-dir"),
    ({"share": "fast"}, ["--share", "fast"], "--share: expected equal or speed, got 'fast'"),
    ({"quantize": "int4"}, ["--quantize", "int4"], "--quantize: expected one of none, fp16, "
     "bf16, int8, auto (auto:BOUND sets auto's error bound), got 'int4'"),
    ({"quantize": "auto:1"}, ["--quantize", "auto:1"],
     "--quantize: auto's error bound must be a number in [0, 1), got '1'"),
    ({"ps_shards": 17}, ["--ps-shards", "17"], "--ps-shards: expected 0..16, got 17"),
    ({"ps_shards": -1}, ["--ps-shards", "-1"], "--ps-shards: expected 0..16, got -1"),
    ({"ps_policy": "fifo"}, ["--ps-policy", "fifo"],
     "--ps-policy: expected one of lru, lfu, paddle, got 'fifo'"),
    ({"ps_hot_fraction": 1.5}, ["--ps-hot-fraction", "1.5"],
     "--ps-hot-fraction: expected a share in [0, 1], got 1.5"),
    ({"ps_hot_fraction": float("nan")}, ["--ps-hot-fraction", "nan"],
     "--ps-hot-fraction: expected a share in [0, 1], got nan"),
]


@pytest.mark.parametrize("fields, flags, line", BAD, ids=[" ".join(c[1]) for c in BAD])
def test_the_request_refuses_a_bad_option_naming_its_flag(fields, flags, line):
    with pytest.raises(ExecError) as exc:
        RunRequest(plan="plan.json", scenario=SCENARIO, **fields)
    assert str(exc.value) == line


@pytest.mark.parametrize("fields, flags, line", BAD, ids=[" ".join(c[1]) for c in BAD])
def test_the_cli_prints_that_line_and_exits_2(tmp_path, fields, flags, line):
    plan = tiny_plan(tmp_path / "plan.json", [10], [1, 1])
    code, _, err = run_exec("run", str(plan), "--scenario", SCENARIO,
                            "--out", str(tmp_path / "run"), *flags)
    assert (code, err) == (2, f"heterps-exec run: {line}\n")
    assert not (tmp_path / "run").exists()  # refused before anything was loaded or written


def test_fields_the_cli_does_not_type_are_refused_naming_the_flag_too():
    for fields, flag in (({"steps": "many"}, "--steps: "), ({"typo": 1}, "--typo: "),
                         ({"out_dir": 3}, "--out: "), ({"timeout_s": "x"}, "--rank-timeout: "),
                         ({"slow_replicas": "1:0:2"}, "--slow-replica: ")):
        with pytest.raises(ExecError) as exc:
            RunRequest(plan="plan.json", scenario=SCENARIO, **fields)
        assert str(exc.value).startswith(flag) and "\n" not in str(exc.value)


def test_the_request_takes_what_the_engine_takes():
    req = RunRequest(plan="p.json", scenario=SCENARIO, share="speed", overlap=True,
                     slow_replicas=[(1, 0, 2)], quantize="auto:0.02", ps_shards=16,
                     checkpoint_every=2, checkpoint_dir="ckpt")
    assert (req.share, req.overlap, req.slow_replicas, req.quantize) == \
        ("speed", True, ((1, 0, 2.0),), "auto:0.02")


def test_one_hps_options_for_the_simulator_and_the_engine():
    assert issubclass(DesOptions, HpsOptions) and issubclass(RunRequest, HpsOptions)
    shared = set(HpsOptions.model_fields)
    assert shared == {"share", "slow_replicas", "overlap", "quantize"}
    assert shared <= set(DesOptions.model_fields) and shared <= set(RunRequest.model_fields)
    def spelled(model, name):
        field = model.model_fields[name]
        return field.annotation, field.default, field.description

    for name in shared - {"quantize"}:  # the engine widens quantize with auto[:BOUND]
        assert spelled(DesOptions, name) == spelled(RunRequest, name) == spelled(HpsOptions, name)
    with pytest.raises(ValueError):
        DesOptions(quantize="auto")  # the simulator models fixed encodings only
