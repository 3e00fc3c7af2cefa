"""`heterps-exec profile --as-type` and `validate` on a PyTorch module (`model: {module: ...}`).

The public-CTR-style DeepFM fixture is measured layer by layer (the chain heterps derived from
its torch.export capture, each layer run as a one-layer engine stage); attached to a type of
the scenario, every measured entry replaces that type's roofline entry exactly. Each layer's
measured forward is checked against its own work: a layer that does more FLOPs (a wider
Linear) takes longer than one that does almost none, so the rows are not mislabelled.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from heterps_sim.inputs.load import load_input
from tests.exec.helpers import run_exec

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ctr_models"
LAB_CPU = {"name": "lab-cpu", "kind": "cpu", "peak_fp32_tflops": 1.2, "memory_gb": 64,
           "memory_bandwidth_gb_per_s": 80, "network_gbit_per_s": 10, "price_per_hour_usd": 0.2}


def _scenario(tmp_path: Path, trace: str = "", name: str = "s.yaml") -> Path:
    data = yaml.safe_load((FIXTURES / "deepfm.yaml").read_text())
    data["model"]["kwargs"]["mlp_dims"] = [256, 32]  # one clearly heavier layer
    data["cluster"] = {"types": ["lab-cpu", "t4"],
                       "define": [{**LAB_CPU, **({"trace": trace} if trace else {})}]}
    data["workload"]["batch_size"] = 128
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.timeout(300)
def test_a_torch_model_profiled_as_a_type_replaces_its_roofline_entries(tmp_path):
    scenario = _scenario(tmp_path)
    code, out, err = run_exec("profile", "--scenario", str(scenario), "--as-type", "lab-cpu",
                              "--repeats", "5", "--no-links", "--out", str(tmp_path), "--json")
    assert code == 0, err
    trace = tmp_path / "lab-cpu-DeepFactorizationMachineModel.csv"
    assert json.loads(out)["profile"] == str(trace)
    rows = list(csv.DictReader(trace.open()))
    roofline = load_input(scenario).problem
    assert [r["layer"] for r in rows] == list(roofline.layer_names)
    assert {(r["model"], r["resource"], r["batch_size"]) for r in rows} == {
        ("DeepFactorizationMachineModel", "lab-cpu", "128")}
    by = {r["layer"]: r for r in rows}
    assert all(float(r["forward_s"]) > 0 and float(r["backward_s"]) >= 0 for r in rows)
    # the 64x256 Linear (+ ReLU) does ~16,000 multiply-adds per sample, the 32x1 one 32:
    # measured accordingly
    assert float(by["mlp.mlp.0"]["oct_s"]) > float(by["mlp.mlp.6"]["oct_s"])
    # the layers with parameters are updated, the parameterless ones are not
    assert float(by["mlp.mlp.0"]["optimizer_s"]) > 0 and float(by["fm"]["optimizer_s"]) == 0
    # a boundary after every layer but the loss
    assert float(by["loss"]["encode_s"]) == 0 and float(by["fm"]["encode_s"]) > 0

    traced = load_input(_scenario(tmp_path, trace.name, "t.yaml")).problem
    j = traced.type_names.index("lab-cpu")
    np.testing.assert_array_equal(traced.oct_s[:, j], [float(r["oct_s"]) for r in rows])
    others = [k for k in range(traced.num_types) if k != j]
    np.testing.assert_array_equal(traced.oct_s[:, others], roofline.oct_s[:, others])


def test_a_torch_model_refuses_table_scale(tmp_path):
    code, _, err = run_exec("profile", "--scenario", str(_scenario(tmp_path)), "--as-type",
                            "lab-cpu", "--table-scale", "0.5", "--no-links",
                            "--out", str(tmp_path / "p"))
    assert code == 2 and "--table-scale: applies to zoo and YAML models" in err
    assert err.strip().count("\n") == 0 and not (tmp_path / "p").exists()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_validate_runs_a_torch_model_and_predicts_it(tmp_path):
    scenario = _scenario(tmp_path)
    code, _, err = run_exec("profile", "--scenario", str(scenario), "--as-type", "lab-cpu",
                            "--batch", "8,64,128", "--repeats", "3", "--no-links",
                            "--out", str(tmp_path))
    assert code == 0, err
    links = Path(__file__).resolve().parents[3] / "traces" / "profiles" / "vm-links.json"
    shutil.copy(links, tmp_path / "links.json")
    code, out, err = run_exec("validate", "--plans", "2", "--scenario", str(scenario),
                              "--steps", "6", "--max-ranks", "2", "--out", str(tmp_path / "v"),
                              "--profile", str(tmp_path / "lab-cpu-DeepFactorizationMachineModel.csv"),
                              "--links", str(tmp_path / "links.json"), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["num_plans"] == 2
    layers = list(load_input(scenario).problem.layer_names)
    for row in report["plans"]:
        assert row["measured"] > 0 and row["des"] > 0 and row["analytic"] > 0
        assert row["stages"] >= 1
    assert json.loads((tmp_path / "v" / "report.json").read_text())["num_plans"] == 2
    assert (tmp_path / "v" / "scatter.png").stat().st_size > 0
    # the chain as a person draws it: activations and dropout join the layer they follow
    assert layers == ['embedding', 'linear', 'fm', 'mlp.mlp.0', 'mlp.mlp.3', 'mlp.mlp.6', 'loss']
