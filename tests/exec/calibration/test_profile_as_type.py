"""`heterps-exec profile --scenario S --as-type NAME`: a trace the scenario's own type uses.

Measures the scenario's model (zoo or layers in YAML) on this CPU, labelled with a type the
scenario defines; attached to that type, every measured entry replaces the roofline's, exactly,
and no other type's entry moves.
"""

import csv
import json

import numpy as np
import pytest
import yaml

from heterps_sim.inputs.load import load_input
from tests.exec.helpers import run_exec
from tests.sim.inputs.test_yaml_model import TWO_EMB

LAB_CPU = {"name": "lab-cpu", "kind": "cpu", "peak_fp32_tflops": 1.2, "memory_gb": 64,
           "memory_bandwidth_gb_per_s": 80, "network_gbit_per_s": 10, "price_per_hour_usd": 0.2}


def _scenario(tmp_path, lab: dict, name="s.yaml"):
    layers = yaml.safe_load(TWO_EMB)
    for entry in layers:  # small tables and MLP: quick to build and time here
        if entry["type"] == "embedding":
            entry["rows"] = 1000
        if entry["type"] == "mlp":
            entry["widths"] = [32, 16, 1]
    path = tmp_path / name
    path.write_text(yaml.safe_dump({
        "name": "lab", "model": {"name": "my-2emb", "layers": layers},
        "cluster": {"types": ["lab-cpu", "t4"], "define": [lab]},
        "workload": {"batch_size": 64, "throughput_limit": 100, "num_samples": 1e6}},
        sort_keys=False))
    return path


@pytest.mark.timeout(200)
def test_a_profile_as_a_defined_type_replaces_its_roofline_entries(tmp_path):
    scenario = _scenario(tmp_path, LAB_CPU)
    code, out, err = run_exec("profile", "--scenario", str(scenario), "--as-type", "lab-cpu",
                              "--repeats", "3", "--no-links", "--out", str(tmp_path), "--json")
    assert code == 0, err
    trace = tmp_path / "lab-cpu-my-2emb.csv"
    assert json.loads(out)["profile"] == str(trace)
    rows = list(csv.DictReader(trace.open()))
    roofline = load_input(scenario).problem
    assert [r["layer"] for r in rows] == list(roofline.layer_names)
    assert {(r["model"], r["resource"], r["batch_size"]) for r in rows} == {("my-2emb", "lab-cpu", "64")}

    traced = load_input(_scenario(tmp_path, {**LAB_CPU, "trace": trace.name}, "t.yaml")).problem
    j = traced.type_names.index("lab-cpu")
    np.testing.assert_array_equal(traced.oct_s[:, j], [float(r["oct_s"]) for r in rows])
    others = [k for k in range(traced.num_types) if k != j]
    np.testing.assert_array_equal(traced.oct_s[:, others], roofline.oct_s[:, others])
    assert (traced.oct_s[:, j] != roofline.oct_s[:, j]).all()


@pytest.mark.parametrize("args, message", [
    (["--as-type", "a100-80gb-sxm"], "--as-type: 'a100-80gb-sxm' is not a resource type of"),
    ([], "--as-type: name the resource type these measurements describe, one of the "
         "scenario's: lab-cpu, t4"),
    (["--as-type", "lab-cpu", "--model", "tiny-ctr"], "give --scenario S.yaml (its model) or "
                                                      "--model NAME"),
])
def test_a_profile_target_the_scenario_cannot_use_is_refused(tmp_path, args, message):
    code, out, err = run_exec("profile", "--scenario", str(_scenario(tmp_path, LAB_CPU)),
                              "--no-links", "--out", str(tmp_path / "p"), *args)
    assert code == 2 and message in err and err.strip().count("\n") == 0
    assert not (tmp_path / "p").exists()  # nothing measured, nothing written
