"""`heterps-exec run` on a model written in YAML layers and a resource type of the user's own.

The shipped scenarios/yaml-model-onprem.yaml: an on-prem A10 defined in the scenario at an
amortised price and a cloud CPU from the catalog, both emulated on this machine's CPU through
the binding file. Oracle: the pipelined, replicated run ends with the weights and losses of
single-process training on the same batches; the emulation keeps the two types' peak ratio.
"""

import json
from pathlib import Path

import pytest

from heterps_sim.inputs.load import load_input
from heterps_sim.inputs.scenario import build_cluster
from tests.exec.helpers import assert_matches_reference, run_exec

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "yaml-model-onprem.yaml"


@pytest.mark.timeout(300)
def test_a_yaml_model_on_a_defined_type_trains_exactly_through_the_binding(tmp_path):
    code, out, err = run_exec(
        "run", str(ROOT / "scenarios/plans/yaml-model-onprem.json"), "--scenario", str(SCENARIO),
        "--binding", str(ROOT / "scenarios/bindings/onprem-emulated.yaml"), "--steps", "3",
        "--table-scale", "0.01", "--lr", "0.5", "--out", str(tmp_path / "run"),
        "--save-state", str(tmp_path / "state.pt"), "--rank-timeout", "60", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["source"] == "exec"
    assert result["units_per_type"] == {"xeon-icelake-16vcpu": 1, "onprem-a10": 2}
    loaded = load_input(SCENARIO)
    types = {t.name: t for t in build_cluster(loaded.scenario.cluster, str(SCENARIO)).types}
    a10, xeon = types["onprem-a10"], types["xeon-icelake-16vcpu"]
    assert result["cost_per_hour"] == pytest.approx(2 * 0.30 + xeon.price_per_hour, rel=1e-12)
    assert result["extra"]["emulated"] == ["onprem-a10", "xeon-icelake-16vcpu"]
    assert result["extra"]["slowdowns"] == [a10.peak_flops_fp32 / xeon.peak_flops_fp32, 1.0]
    spec = json.loads((tmp_path / "run" / "spec.json").read_text())
    assert spec["model"] == "my-ctr" and spec["model_layers"][3]["name"] == "emb_item"
    assert_matches_reference(tmp_path / "run", tmp_path / "state.pt", result)
