"""Every heterps-sim input, fed the classic bad values (0, negative, NaN, infinity, huge, wrong
type, missing): one line naming the file or flag and the field, exit 2, no traceback, quickly.

Table-driven over the scenario's fields, a plan's, a problem's, a trace CSV's and each
command's flags, so a new field or flag joins the table instead of waiting for a user.
"""

from __future__ import annotations

import copy
import json
import time

import pytest
import yaml

from heterps_sim.cli import main
from heterps_sim.core.limits import MAX_MICROBATCHES, MAX_SIM_STEPS

SCENARIO = {
    "name": "t", "model": {"name": "tiny-ctr"},
    "cluster": {"types": ["t4", "xeon-icelake-16vcpu"], "available": {"t4": 2}},
    "workload": {"batch_size": 256, "throughput_limit": 1000, "num_samples": 1e6},
    "profile": {"latency_s": 1e-4}, "schedule": {"scheduler": "exact", "mode": "least"},
}
NAN, INF, HUGE = float("nan"), float("inf"), 1e30


def _with(path: str, value):
    """SCENARIO with the dotted `path` set to `value` (a value of DELETE removes it)."""
    data = copy.deepcopy(SCENARIO)
    *parents, last = path.split(".")
    d = data
    for key in parents:
        d = d.setdefault(key, {})
    if value is DELETE:
        del d[last]
    else:
        d[last] = value
    return data


class _Delete:
    """The field is removed (a repr with no address: xdist's workers must collect the same
    test ids)."""

    def __repr__(self) -> str:
        return "<deleted>"


DELETE = _Delete()

SCENARIO_CASES = [
    # (dotted field, bad value, what the message must name)
    *[(f"workload.{f}", v, f) for f in ("batch_size", "throughput_limit", "num_samples")
      for v in (0, -1, NAN, INF, "many", DELETE)],
    ("workload.batch_size", 10**30, "batch_size"),
    ("workload.batch_size", 2.5, "batch_size"),
    *[("cluster.available.t4", v, "available") for v in (-1, HUGE, 10**30, NAN, INF, "x")],
    *[("cluster.synthetic.count", v, "synthetic") for v in (-1, 10**9, NAN)],
    *[(f"cluster.overrides.t4.{f}", v, f) for f in ("price_per_hour", "network_gbps")
      for v in (0, -1, NAN, INF)],
    *[("profile.latency_s", v, "latency_s") for v in (-1, NAN, INF, "fast")],
    *[("profile.efficiency.gpu_fp32", v, "efficiency") for v in (0, -0.5, 2, NAN, INF)],
    *[("profile.alpha.dense", v, "alpha") for v in (-0.1, 1, 1.5, NAN, INF)],
    ("model.name", "no-such-model", "model.name"),
    ("model.name", DELETE, "model"),
    ("name", DELETE, "name"),
    ("schedule.scheduler", "no-such", "no-such"),
    ("schedule.mode", "fastest", "mode"),
    ("schedule.options", {"budget": -5}, "budget"),
    ("schedule.options", {"budget": NAN}, "budget"),
    ("schedule.options", {"budget": "lots"}, "budget"),
]


@pytest.mark.parametrize("field, value, needle", SCENARIO_CASES,
                         ids=[f"{f}={v!r}" for f, v, _ in SCENARIO_CASES])
def test_scenario_field_bad_values(field, value, needle, tmp_path, capsys):
    data = _with(field, value)
    if field == "schedule.options":  # a scheduler whose Config has a budget
        data["schedule"]["scheduler"] = "random"
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    if field.startswith("schedule."):  # check reads the file; schedule runs its settings
        _assert_refused(["schedule", str(path)], capsys, needle)
    else:
        _assert_refused(["check", str(path)], capsys, str(path), needle)


def _assert_refused(argv, capsys, *needles, seconds: float = 20.0):
    start = time.perf_counter()
    code = main(argv)
    wall = time.perf_counter() - start
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (argv, code, err[-2000:])
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert wall < seconds, (argv, wall)


def test_synthetic_layers_past_the_limit(tmp_path, capsys):
    data = _with("model", {"name": "synthetic", "params": {"num_layers": 10**9}})
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    _assert_refused(["check", str(tmp_path / "s.yaml")], capsys, "num_layers")


def test_alias_bomb_is_refused_in_milliseconds(tmp_path, capsys):
    levels = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 9):
        prev, cur = chr(96 + i), chr(97 + i)
        levels.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    text = yaml.safe_dump({k: v for k, v in SCENARIO.items() if k != "schedule"}) + (
        "schedule:\n  scheduler: random\n  options:\n" + "\n".join(
            "    " + line for line in levels) + "\n")
    assert len(text) < 1200
    (tmp_path / "bomb.yaml").write_text(text)
    _assert_refused(["check", str(tmp_path / "bomb.yaml")], capsys, "aliases", "limit",
                    seconds=2.0)


def test_set_flag_alias_bomb_is_refused(capsys):
    bomb = "budget=[&a [1,1,1,1,1,1,1,1,1,1], &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a], " + ", ".join(
        f"&{c} [" + ",".join([f"*{p}"] * 10) + "]" for p, c in zip("bcdefg", "cdefgh")) + "]"
    _assert_refused(["schedule", "scenarios/exec-tiny.yaml", "--set", bomb], capsys, "--set",
                    seconds=2.0)


# -- plan files -----------------------------------------------------------------------------

PLAN = {"format_version": 2, "num_microbatches": 2, "schedule": "gpipe",
        "stages": [{"layers": None, "resource": "t4", "num_replicas": 1}]}


def _plan(tmp_path, change: dict, stage_change: dict | None = None):
    from heterps_sim.inputs.load import load_input
    layers = list(load_input("scenarios/exec-tiny.yaml").problem.layer_names)
    plan = copy.deepcopy(PLAN)
    plan["stages"][0]["layers"] = layers
    plan["stages"][0].update(stage_change or {})
    plan.update(change)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    return path


PLAN_CASES = [
    ({"num_microbatches": 0}, None, "num_microbatches"),
    ({"num_microbatches": -2}, None, "num_microbatches"),
    ({"num_microbatches": MAX_MICROBATCHES + 1}, None, "num_microbatches"),
    ({"num_microbatches": 10**9}, None, "num_microbatches"),
    ({"num_microbatches": "many"}, None, "num_microbatches"),
    ({"schedule": "zigzag"}, None, "schedule"),
    ({"stages": []}, None, "stages"),
    ({}, {"num_replicas": 0}, "num_replicas"),
    ({}, {"num_replicas": -1}, "num_replicas"),
    ({}, {"num_replicas": 10**12}, "num_replicas"),
    ({}, {"resource": "no-such-type"}, "no-such-type"),
]


@pytest.mark.parametrize("change, stage_change, needle", PLAN_CASES,
                         ids=[str(c) + str(s) for c, s, _ in PLAN_CASES])
@pytest.mark.parametrize("engine", ["analytic", "des"])
def test_plan_bad_values(change, stage_change, needle, engine, tmp_path, capsys):
    path = _plan(tmp_path, change, stage_change)
    _assert_refused(["evaluate", "scenarios/exec-tiny.yaml", str(path), "--engine", engine],
                    capsys, str(path), needle)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_plan_json_non_finite_numbers(literal, tmp_path, capsys):
    path = _plan(tmp_path, {})
    path.write_text(path.read_text().replace('"num_microbatches": 2',
                                             f'"num_microbatches": {literal}'))
    _assert_refused(["evaluate", "scenarios/exec-tiny.yaml", str(path)], capsys, str(path))


# -- problem files --------------------------------------------------------------------------

def _problem(tmp_path, key: str, value, where=None):
    from heterps_sim.inputs.load import load_input
    data = load_input("scenarios/exec-tiny.yaml").problem.to_json_dict()
    if where is None:
        data[key] = value
    else:
        target = data[key]
        for k in where[:-1]:
            target = target[k]
        target[where[-1]] = value
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    return path


PROBLEM_CASES = [
    ("available", HUGE, (0,), "available"),
    ("available", 10**30, (0,), "available"),
    ("available", -1, (0,), "available"),
    ("alpha", 1.0, (0, 0), "alpha"),
    ("alpha", NAN, (0, 0), ""),
    ("oct_s", INF, (0, 0), ""),
    ("oct_s", -1.0, (0, 0), "oct_s"),
    ("batch_size", 0, None, "batch_size"),
    ("throughput_limit", INF, None, ""),
    ("latency_s", NAN, None, ""),
    ("price_per_hour", -1.0, (0,), "price_per_hour"),
    ("network_bytes_per_s", 0.0, (0,), "network_bytes_per_s"),
]


@pytest.mark.parametrize("key, value, where, needle", PROBLEM_CASES,
                         ids=[f"{k}{w or ''}={v!r}" for k, v, w, _ in PROBLEM_CASES])
def test_problem_bad_values(key, value, where, needle, tmp_path, capsys):
    path = _problem(tmp_path, key, value, where)
    _assert_refused(["schedule", str(path)], capsys, str(path), needle)


def test_amdahl_fraction_near_one_is_costed_not_a_crash(tmp_path, capsys):
    path = _problem(tmp_path, "alpha", 1 - 1e-12, (0, 0))
    code = main(["schedule", str(path), "--json"])
    out, err = capsys.readouterr()
    assert code in (0, 1) and "Traceback" not in err, err
    assert json.loads(out)["scheduler"] == "exact"


# -- trace CSVs -----------------------------------------------------------------------------

TRACE_HEADER = "model,layer,resource,batch_size,oct_s,odt_s\n"
TRACE_CASES = [
    ("tiny-ctr,emb0,t4,0,0.001,", "batch_size"),
    ("tiny-ctr,emb0,t4,-8,0.001,", "batch_size"),
    ("tiny-ctr,emb0,t4,256,-0.001,", "oct_s"),
    ("tiny-ctr,emb0,t4,256,nan,", "oct_s"),
    ("tiny-ctr,emb0,t4,256,inf,", "oct_s"),
    ("tiny-ctr,emb0,t4,256,0.001,-1", "odt_s"),
    ("tiny-ctr,emb0,t4,256,0.001,nan", "odt_s"),
    ("tiny-ctr,emb0,t4,many,0.001,", "line 2"),
]


@pytest.mark.parametrize("row, needle", TRACE_CASES, ids=[r for r, _ in TRACE_CASES])
def test_trace_csv_bad_values(row, needle, tmp_path, capsys):
    (tmp_path / "trace.csv").write_text(TRACE_HEADER + row + "\n")
    data = _with("profile.traces", ["trace.csv"])
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    _assert_refused(["check", str(tmp_path / "s.yaml")], capsys, "trace.csv", needle)


# -- command-line flags ---------------------------------------------------------------------

S = "scenarios/exec-tiny.yaml"
FLAG_CASES = [
    *[(["evaluate", S, "PLAN", "--engine", "des", "--microbatches", v], "microbatches")
      for v in ("0", "-1", str(MAX_MICROBATCHES + 1), "1000000000")],
    *[(["evaluate", S, "PLAN", "--engine", "des", "--steps", v], "steps")
      for v in ("0", "-3", str(MAX_SIM_STEPS + 1))],
    *[(["evaluate", S, "PLAN", "--engine", "des", "--effects", "ps", "--ps-policy", "lfu",
        flag, v], flag) for flag, v in (("--ps-hot-fraction", "nan"), ("--ps-hot-fraction", "2"),
                                        ("--ps-zipf", "nan"), ("--ps-zipf", "inf"),
                                        ("--ps-zipf", "0"), ("--ps-warm-fraction", "nan"),
                                        ("--ps-rows", "0"), ("--ps-rows", "1000000000000"),
                                        ("--ps-rows", "200000001"),
                                        ("--ps-ids", "0"), ("--ps-ids", "1000000000000"),
                                        ("--ps-batch", "0"), ("--ps-batch", "1000000000000"))],
    (["evaluate", S, "PLAN", "--engine", "des", "--slow-replica", "0:0:nan"], "--slow-replica"),
    *[(["tradeoff", S, "--points", v], "--points") for v in ("0", "-1", "100000000")],
    *[(["tradeoff", S, "--limits", v], "--limits")
      for v in ("nan:1000", "1000:inf", "5000:10", "0:100", "a:b", "100")],
    (["tradeoff", S, "--limits=-5:100"], "--limits"),
    *[(["tradeoff", S, "--budget", v], "--budget") for v in ("0", "-1")],
    *[(["tradeoff", S, "--jobs", v], "--jobs") for v in ("0", "-2", "100000")],
    *[(["compare", S, "--budget", v], "--budget") for v in ("0", "-1")],
    (["compare", S, "--schedulers", "no-such"], "no-such"),
    *[(["report", "--points", v, "--scenarios", "exec-tiny"], "--points")
      for v in ("0", "-1", "100000000")],
    (["report", "--jobs", "0", "--scenarios", "exec-tiny"], "--jobs"),
    *[(["schedule", S, "--set", v], "budget") for v in ("budget=nan", "budget=-1",
                                                        "budget=.inf")],
    (["schedule", S, "--set", "novalue"], "--set"),
    (["schedule", S, "--scheduler", "no-such"], "no-such"),
]


@pytest.mark.parametrize("argv, needle", FLAG_CASES, ids=[" ".join(a[3:] if a[0] == "evaluate"
                                                                   else a) for a, _ in FLAG_CASES])
def test_flag_bad_values(argv, needle, tmp_path, capsys):
    argv = [str(_plan(tmp_path, {})) if a == "PLAN" else a for a in argv]
    _assert_refused(argv + ["--out", str(tmp_path / "o")] if argv[0] in ("tradeoff", "report")
                    else argv, capsys, needle)


@pytest.mark.parametrize("ids, extra, needle", [
    ([0, 5, 10**13], [], "past the 200,000,000 rows"),   # it would size a 10^13-row table
    ([0, 5, 120], ["--ps-rows", "100"], "past --ps-rows 100"),
    ([0, -1], [], "ids must be >= 0"),
])
def test_a_ps_stream_is_bounded_before_the_replay(ids, extra, needle, tmp_path, capsys):
    import numpy as np
    stream = tmp_path / "ids.npy"
    np.save(stream, np.array(ids, dtype=np.int64))
    argv = ["evaluate", S, str(_plan(tmp_path, {})), "--engine", "des", "--effects", "ps",
            "--ps-policy", "lfu", "--ps-stream", str(stream), *extra]
    _assert_refused(argv, capsys, needle)
