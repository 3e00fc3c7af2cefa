"""`heterps-exec run` on a Criteo-format file: every layout trains on the batches one process
would, the held-out scores equal a direct computation, and bad data stops the run before any
rank starts (one line, exit 2)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from heterps_exec.data.criteo_sample import write_criteo_sample
from heterps_exec.data.synthetic import raw_tensors
from heterps_exec.model.build import build_model
from heterps_exec.model.spec_graph import graph_for
from heterps_exec.runtime.layout import RunSpec
from heterps_exec.runtime.reference import train_reference
from tests.exec.data.oracle import (
    auc_pairs,
    criteo_tensors,
    log_loss_direct,
    read_criteo_pandas,
)
from tests.exec.helpers import SCENARIO, assert_matches_reference, run_exec, tiny_plan

ROWS, BAD = 2000, 6


def criteo_scenario(tmp_path: Path, **data) -> Path:
    scn = yaml.safe_load(Path(SCENARIO).read_text())
    scn["data"] = {"format": "criteo", "path": "sample.tsv", **data}
    path = tmp_path / "criteo.yaml"
    path.write_text(yaml.safe_dump(scn))
    return path


@pytest.fixture()
def sample(tmp_path):
    bad = write_criteo_sample(tmp_path / "sample.tsv", rows=ROWS, seed=5, bad_rows=BAD)
    return criteo_scenario(tmp_path, holdout={"fraction": 0.1}), bad


def _run(tmp_path, scenario, cuts, replicas, name, *extra) -> tuple[dict, Path]:
    plan = tiny_plan(tmp_path / f"{name}.json", cuts, replicas, m=4)
    code, out, err = run_exec("run", str(plan), "--scenario", str(scenario), "--steps", "4",
                              "--lr", "0.5", "--out", str(tmp_path / name), "--save-state",
                              str(tmp_path / f"{name}.pt"), "--rank-timeout", "60", *extra)
    assert code == 0, err
    return out, tmp_path / name


@pytest.mark.timeout(300)
def test_two_stages_of_two_replicas_train_on_the_single_process_batches(tmp_path, sample):
    scenario, bad = sample
    out, run = _run(tmp_path, scenario, [9], [2, 2], "pipe", "--json")
    result = json.loads(out)
    assert_matches_reference(run, tmp_path / "pipe.pt", result)  # same batches, same weights
    spec = RunSpec.load(run / "spec.json")
    assert spec.data["train_rows"] == 1800 and spec.data["holdout_rows"] == 200
    train_bad = [i for i in bad if i <= 1800]
    assert result["extra"]["data"]["bad_rows"] == len(train_bad) > 0
    assert result["extra"]["data"]["rows_read"] == 1800  # the whole file is one 4 MiB block
    # held-out scores = a direct computation on a pandas read of the last 200 lines
    df = read_criteo_pandas(run.parent / "sample.tsv", bad).iloc[1800 - len(train_bad):]
    want = criteo_tensors(df, raw_tensors(graph_for(spec)))
    model = build_model(graph_for(spec), seed=spec.seed)
    model.load_state_dict(torch.load(tmp_path / "pipe.pt"))
    batch = {k: torch.from_numpy(v.astype(np.int64 if k.startswith("ids") else np.float32))
             for k, v in want.items()}
    with torch.no_grad():
        env, _ = model(batch)
    loss = next(n for n in graph_for(spec).nodes if n.op == "loss")
    logits = env[loss.consumes[0]].reshape(-1).double().numpy()
    labels = want["label"].reshape(-1)
    h = result["extra"]["holdout"]
    assert h["rows"] == 200 - (len(bad) - len(train_bad)) == len(labels)
    assert h["positives"] == int(labels.sum())
    assert math.isclose(h["log_loss"], log_loss_direct(labels, logits), rel_tol=1e-5)
    assert math.isclose(h["auc"], auc_pairs(labels, logits), rel_tol=1e-5)
    assert json.loads((run / "result.json").read_text())["extra"]["holdout"] == h


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_single_rank_run_prints_the_scores_and_equals_the_reference(tmp_path, sample):
    scenario, _ = sample
    out, run = _run(tmp_path, scenario, [], [1], "one")
    assert_matches_reference(run, tmp_path / "one.pt")
    assert "held-out: " in out and "log-loss" in out and "AUC" in out
    assert "malformed rows skipped among the" in out and "(first: line " in out
    spec = RunSpec.load(run / "spec.json")
    losses, _ = train_reference(spec)
    assert len(losses) == 4


def _bad_run(tmp_path, scenario) -> str:
    plan = tiny_plan(tmp_path / "plan.json", [9], [2, 2])
    code, out, err = run_exec("run", str(plan), "--scenario", str(scenario), "--steps", "4",
                              "--out", str(tmp_path / "run"))
    assert code == 2 and out == "", err
    assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "run" / "torchrun.log").exists()  # no rank started
    return err.strip()


def test_bad_data_is_one_line_before_any_rank_starts(tmp_path):
    write_criteo_sample(tmp_path / "sample.tsv", rows=500, seed=1, bad_rows=50)
    (tmp_path / "boom.py").write_text("def clicks(split, **kw):\n    raise OSError('no disk')\n")
    cases = [
        ({"path": "missing.tsv"}, ["criteo.yaml", "data.path", "missing.tsv", "no such file"]),
        ({"columns": {"ids_0": "C27"}}, ["data.columns.ids_0", "unknown column 'C27'",
                                         "sample.tsv"]),
        ({}, ["sample.tsv", "of 450 rows malformed", "max_bad_fraction 0.01", "first: line "]),
        ({"max_bad_fraction": 0.2, "holdout": {"rows": 500}},
         ["data.holdout", "leaving none to train on"]),
    ]
    for data, needles in cases:
        err = _bad_run(tmp_path, criteo_scenario(tmp_path, **data))
        assert all(n in err for n in needles), err
    for factory, needles in [("nowhere:clicks", ["data.factory", "nowhere:clicks",
                                                 "ModuleNotFoundError"]),
                             ("boom:clicks", ["data.factory", "boom:clicks", "raised OSError",
                                              "no disk"])]:
        scn = yaml.safe_load(Path(SCENARIO).read_text())
        scn["data"] = {"format": "factory", "factory": factory}
        (tmp_path / "f.yaml").write_text(yaml.safe_dump(scn))
        err = _bad_run(tmp_path, tmp_path / "f.yaml")
        assert all(n in err for n in needles), err
    scn = yaml.safe_load(Path(SCENARIO).read_text())
    scn["data"] = {"format": "criteo", "path": "sample.tsv", "colums": {}}
    (tmp_path / "typo.yaml").write_text(yaml.safe_dump(scn))
    assert "data.criteo.colums" in _bad_run(tmp_path, tmp_path / "typo.yaml")
