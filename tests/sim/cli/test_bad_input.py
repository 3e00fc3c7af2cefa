"""Bad input: one clear line naming the file, the field and the problem; exit 2; no traceback.

Property tests feed random malformed scenarios, problems and plans to the CLI in-process.
"""

import copy
import json

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from heterps_sim.cli import main
from heterps_sim.testing import random_problem

VALID = {
    "name": "t", "model": {"name": "tiny-ctr"},
    "cluster": {"types": ["t4", "xeon-icelake-16vcpu"], "available": {"t4": 2}},
    "workload": {"batch_size": 256, "throughput_limit": 1000, "num_samples": 1e6},
    "profile": {"latency_s": 1e-4}, "schedule": {"scheduler": "exact", "mode": "least"},
}
POSITIVE = [("workload", "batch_size"), ("workload", "throughput_limit"), ("workload", "num_samples")]
REQUIRED = [("name",), ("model",), ("workload",), ("workload", "batch_size"), ("model", "name")]
SECTIONS = [(), ("model",), ("cluster",), ("workload",), ("profile",), ("schedule",)]


def run_cli(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_clear_line(code, err, *needles):
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def _set(d, path, value):
    for key in path[:-1]:
        d = d[key]
    d[path[-1]] = value


def _delete(d, path):
    for key in path[:-1]:
        d = d[key]
    del d[path[-1]]


mutation = st.one_of(
    st.tuples(st.just("extra"), st.sampled_from(SECTIONS), st.text("abcxyz_", min_size=3, max_size=8)),
    st.tuples(st.just("negative"), st.sampled_from(POSITIVE), st.floats(-1e9, 0)),
    st.tuples(st.just("string"), st.sampled_from(POSITIVE), st.text("qwerty", min_size=1, max_size=5)),
    st.tuples(st.just("missing"), st.sampled_from(REQUIRED), st.none()),
    st.tuples(st.just("type"), st.just(("cluster", "types")), st.text("qwz", min_size=2, max_size=6)),
    st.tuples(st.just("cap"), st.just(("cluster", "available")), st.integers(-50, -1)),
    st.tuples(st.just("model"), st.just(("model", "name")), st.text("qwz", min_size=2, max_size=6)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=mutation)
def test_random_malformed_scenarios(m, tmp_path, capsys):
    kind, path, value = m
    data = copy.deepcopy(VALID)
    field = ".".join(path)
    if kind == "extra":
        target = data
        for key in path:
            target = target[key]
        target["zz_" + value] = 1
        field = "zz_" + value
    elif kind in ("negative", "string"):
        _set(data, path, value)
    elif kind == "missing":
        _delete(data, path)
        field = path[-1]
    elif kind == "type":
        data["cluster"]["types"] = ["t4", "zz-" + value]
        field = "cluster.types"
    elif kind == "cap":
        data["cluster"]["available"] = {"t4": value}
        field = "cluster.available.t4"
    elif kind == "model":
        data["model"]["name"] = "zz-" + value
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(data))
    code, _, err = run_cli(["problem", str(f), "--json"], capsys)
    assert_one_clear_line(code, err, str(f), field)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=60))
def test_random_text_is_never_a_traceback(text, tmp_path, capsys):
    for suffix in (".yaml", ".json"):
        f = tmp_path / f"junk{suffix}"
        f.write_text(text)
        code, _, err = run_cli(["problem", str(f)], capsys)
        assert_one_clear_line(code, err, str(f))


problem_mutation = st.one_of(
    st.tuples(st.sampled_from(["price_per_hour", "network_bytes_per_s"]), st.floats(-10, 0)),
    st.tuples(st.sampled_from(["batch_size", "throughput_limit", "num_samples"]), st.floats(-10, 0)),
    st.tuples(st.just("oct_s"), st.just("short")),
    st.tuples(st.just("alpha"), st.floats(1.01, 5)),
    st.tuples(st.just("unknown_key"), st.integers()),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=problem_mutation, seed=st.integers(0, 1000))
def test_random_malformed_problems(m, seed, tmp_path, capsys):
    key, value = m
    p = random_problem(np.random.default_rng(seed), 3, 2)
    data = p.to_json_dict()
    if key in ("price_per_hour", "network_bytes_per_s"):
        data[key][0] = value
    elif key == "oct_s":
        data[key] = data[key][:-1]
    elif key == "alpha":
        data[key][0][0] = value
    elif key == "unknown_key":
        data[key] = value
    else:
        data[key] = value
    f = tmp_path / "problem.json"
    f.write_text(json.dumps(data))
    code, _, err = run_cli(["problem", str(f)], capsys)
    assert_one_clear_line(code, err, str(f), key)


def test_missing_file(capsys, tmp_path):
    code, _, err = run_cli(["problem", str(tmp_path / "nope.yaml")], capsys)
    assert_one_clear_line(code, err, "nope.yaml", "no such file")


def test_malformed_yaml_names_the_line(capsys, tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("name: x\nmodel: [unclosed\n")
    code, _, err = run_cli(["check", str(f)], capsys)
    assert code == 2 and "malformed YAML at line" in err and str(f) in err


def test_unknown_scheduler(capsys):
    code, _, err = run_cli(["schedule", "--scheduler", "oracle-of-delphi"], capsys)
    assert_one_clear_line(code, err, "--scheduler", "unknown scheduler 'oracle-of-delphi'")


@pytest.mark.parametrize("stages, needle", [
    ([{"layers": ["input"], "resource": "t4"}], "stops before layer"),
    ([{"layers": ["zz"], "resource": "t4"}], "layer #0 is 'zz'"),
    ([{"layers": [], "resource": "t4"}], "stages.0.layers"),
])
def test_broken_plans(stages, needle, capsys, tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(VALID))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"stages": stages}))
    code, _, err = run_cli(["evaluate", str(scenario), str(plan)], capsys)
    assert_one_clear_line(code, err, str(plan), needle)


TINY_LAYERS = ["input", *(f"emb_{i}" for i in range(8)), "concat", "fc_0", "fc_1", "fc_2", "loss"]


@pytest.mark.parametrize("stage, needle", [
    ({"replicas": [{"resource": "t4", "count": 1}, {"resource": "h100", "count": 1}]},
     "stages[0].replicas[1].resource: unknown resource type 'h100'"),
    ({"replicas": [{"resource": "t4", "count": 1}, {"resource": "t4", "count": 2}]},
     "type 't4' is listed twice"),
    ({"replicas": [{"resource": "t4", "count": 0}]}, "stages.0.replicas.0.count"),
    ({"resource": "t4", "replicas": [{"resource": "t4", "count": 1}]}, "not both"),
    ({"replicas": [{"resource": "t4"}]}, "stages.0.replicas.0.count: Field required"),
])
def test_broken_mixed_stages(stage, needle, capsys, tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(VALID))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"format_version": 2, "stages": [{"layers": TINY_LAYERS, **stage}]}))
    code, _, err = run_cli(["evaluate", str(scenario), str(plan)], capsys)
    assert_one_clear_line(code, err, str(plan), needle)


def test_mixed_stage_in_a_version_1_plan(capsys, tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(VALID))
    plan = tmp_path / "plan.json"
    stage = {"layers": TINY_LAYERS, "replicas": [{"resource": "t4", "count": 1},
                                                 {"resource": "xeon-icelake-16vcpu", "count": 1}]}
    plan.write_text(json.dumps({"format_version": 1, "stages": [stage]}))
    code, _, err = run_cli(["evaluate", str(scenario), str(plan)], capsys)
    assert_one_clear_line(code, err, str(plan), "stages[0].replicas: mixed-type stages need format_version 2")


def test_existing_output_survives_bad_input(capsys, tmp_path):
    out = tmp_path / "plan.json"
    out.write_text("precious")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\n")
    code, _, _ = run_cli(["schedule", str(bad), "--out", str(out)], capsys)
    assert code == 2 and out.read_text() == "precious"
