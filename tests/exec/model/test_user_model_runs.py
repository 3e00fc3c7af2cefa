"""A user's PyTorch model trained through `heterps-exec run` (torchrun, 2-5 ranks): pipelined
and replicated, with its tables on the parameter server, and resumed under another plan, it
ends with the weights and losses of single-process training of the eager module (1e-5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from heterps_sim.inputs.load import load_input
from tests.exec.helpers import assert_matches_reference, run_exec

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ctr_models"
CPU = "xeon-icelake-16vcpu"


def write_plan(path: Path, scenario: Path, cuts: list[int], replicas: list[int],
               schedule: str = "1f1b", m: int = 4) -> Path:
    names = list(load_input(scenario).problem.layer_names)
    bounds = [0, *cuts, len(names)]
    stages = [{"layers": names[a:b], "resource": CPU, "num_replicas": k}
              for a, b, k in zip(bounds[:-1], bounds[1:], replicas, strict=True)]
    path.write_text(json.dumps({"format_version": 1, "stages": stages, "num_microbatches": m,
                                "schedule": schedule}))
    return path


def run(tmp_path: Path, scenario: Path, plan: Path, *extra: str, name: str = "run") -> dict:
    code, out, err = run_exec("run", str(plan), "--scenario", str(scenario), "--out",
                              str(tmp_path / name), "--rank-timeout", "90", "--json", *extra)
    assert code == 0, err
    return json.loads(out)


def trains_exactly_on_parquet(tmp_path: Path, scenario: Path, columns: dict) -> None:
    """`scenario` reading tmp_path/clicks.parquet (label 'clicked', `columns`, 200 held-out
    rows), cut [2] on replicas [1, 2], 4 microbatches: the run equals the oracle."""
    import yaml
    doc = yaml.safe_load(scenario.read_text())
    doc["data"] = {"format": "parquet", "path": "clicks.parquet", "label": "clicked",
                   "columns": columns, "holdout": {"rows": 200}}
    path = tmp_path / f"{scenario.stem}-parquet.yaml"
    path.write_text(yaml.safe_dump(doc))
    plan = write_plan(tmp_path / "plan.json", path, [2], [1, 2], "1f1b")
    result = run(tmp_path, path, plan, "--steps", "3", "--lr", "0.1", "--save-state",
                 str(tmp_path / "state.pt"))
    assert result["extra"]["holdout"]["rows"] == 200
    assert_matches_reference(tmp_path / "run", tmp_path / "state.pt", result)


CASES = [("deepfm.yaml", [2, 4], [1, 2, 1], "1f1b", []),
         ("dcn.yaml", [3], [2, 1], "gpipe", []),
         ("deepfm.yaml", [3], [1, 1], "1f1b", ["--ps-shards", "1"])]


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("scenario,cuts,replicas,schedule,extra", CASES,
                         ids=["deepfm-1-2-1", "dcn-2-1-gpipe", "deepfm-ps"])
def test_user_model_trains_exactly_like_the_eager_module(tmp_path, scenario, cuts, replicas,
                                                         schedule, extra):
    scenario = FIXTURES / scenario
    plan = write_plan(tmp_path / "plan.json", scenario, cuts, replicas, schedule)
    result = run(tmp_path, scenario, plan, "--steps", "3", "--lr", "0.1", "--save-state",
                 str(tmp_path / "state.pt"), *extra)
    assert [s["num_replicas"] for s in result["stages"]] == replicas
    assert_matches_reference(tmp_path / "run", tmp_path / "state.pt", result)


@pytest.mark.slow
@pytest.mark.timeout(500)
def test_checkpoint_of_one_plan_resumes_under_another(tmp_path):
    """2 steps under a 2-stage plan, then 2 more under a 3-stage plan from its checkpoint:
    the parameter names are the module's own, so the second plan loads the first's state."""
    scenario = FIXTURES / "deepfm.yaml"
    first = write_plan(tmp_path / "a.json", scenario, [4], [1, 1])
    second = write_plan(tmp_path / "b.json", scenario, [1, 5], [1, 1, 1], "gpipe")
    ckpt = tmp_path / "ckpt"
    run(tmp_path, scenario, first, "--steps", "2", "--checkpoint-dir", str(ckpt),
        "--checkpoint-every", "2", name="a")
    run(tmp_path, scenario, second, "--steps", "4", "--checkpoint-dir", str(ckpt),
        "--save-state", str(tmp_path / "state.pt"), name="b")
    assert_matches_reference(tmp_path / "b", tmp_path / "state.pt")


@pytest.mark.slow
@pytest.mark.timeout(500)
def test_killed_rank_restarts_with_hps_options_to_the_same_weights(tmp_path):
    """A rank of the replicated stage is killed at step 3: torchrun restarts every rank from
    the step-2 checkpoint; with speed-aware sharing and overlapped all-reduce on (both keep
    the single-process update) the run still ends with the eager module's weights."""
    scenario = FIXTURES / "deepfm.yaml"
    plan = write_plan(tmp_path / "plan.json", scenario, [2, 4], [1, 2, 1])
    result = run(tmp_path, scenario, plan, "--steps", "4", "--lr", "0.1",
                 "--checkpoint-dir", str(tmp_path / "ckpt"), "--checkpoint-every", "2",
                 "--max-restarts", "1", "--inject-fault", "1:3", "--share", "speed",
                 "--overlap", "on", "--save-state", str(tmp_path / "state.pt"))
    assert result["extra"]["first_step"] == 2
    assert "exitcode: -9" in (tmp_path / "run" / "torchrun.log").read_text()
    assert_matches_reference(tmp_path / "run", tmp_path / "state.pt", result)
