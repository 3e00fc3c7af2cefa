"""A checkpoint directory is data, never code: DCP's pickled `.metadata` is read by an
unpickler that admits DCP's own classes only; a crafted one is refused before any rank runs."""

from __future__ import annotations

import os
import pickle
import warnings

import pytest
import torch
import torch.distributed.checkpoint as dcp

from heterps_exec.checkpoint.trust import (
    CheckpointTrustError,
    TrustedLoadPlanner,
    TrustedReader,
    read_metadata,
)
from tests.exec.helpers import SCENARIO, run_exec, tiny_plan


class _RunsCode:
    """Unpickling this calls os.system: what a crafted `.metadata` can do to plain pickle."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _crafted(step_dir, marker) -> None:
    step_dir.mkdir(parents=True)
    (step_dir / ".metadata").write_bytes(pickle.dumps({"state": _RunsCode(marker)}))


def _save(path, state) -> None:
    with warnings.catch_warnings():  # "no process group: saving in a single process"
        warnings.simplefilter("ignore")
        dcp.save(state, checkpoint_id=path)


def test_crafted_metadata_is_refused_and_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    _crafted(tmp_path / "ckpt", marker)
    with pytest.raises(CheckpointTrustError, match=r"refers to posix\.system.*data only"):
        read_metadata(tmp_path / "ckpt" / ".metadata")
    assert not marker.exists()
    with open(tmp_path / "ckpt" / ".metadata", "rb") as fh:  # what DCP's own reader does
        pickle.load(fh)  # noqa: S301 - the point: plain pickle runs the file's code
    assert marker.exists()


@pytest.mark.parametrize("name", ["os.system", "builtins.eval", "subprocess.Popen",
                                  "torch.distributed.checkpoint.metadata.os",
                                  "torch.load", "torch.serialization.load"])
def test_only_dcp_classes_are_admitted(tmp_path, name):
    module, _, attr = name.rpartition(".")
    data = b"\x80\x04\x8c" + bytes([len(module)]) + module.encode() + b"\x8c" + \
        bytes([len(attr)]) + attr.encode() + b"\x93."  # protocol 4: STACK_GLOBAL, STOP
    (tmp_path / ".metadata").write_bytes(data)
    with pytest.raises(CheckpointTrustError, match=f"refers to {name}"):
        read_metadata(tmp_path / ".metadata")


def test_a_real_checkpoint_reads_the_same_and_loads_exactly(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adagrad(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    state = {"model": model.state_dict(), "optim": {k: dict(v) for k, v in
                                                    zip(["w", "b"], opt.state.values())},
             "extra": {"none": None, "count": 3, "name": "x"}}  # non-tensors: BYTE_IO items
    _save(tmp_path / "ckpt", state)
    ours = read_metadata(tmp_path / "ckpt" / ".metadata")
    with open(tmp_path / "ckpt" / ".metadata", "rb") as fh:
        theirs = pickle.load(fh)  # noqa: S301 - our own file, for comparison
    assert ours.state_dict_metadata == theirs.state_dict_metadata
    target = {"model": {k: torch.zeros_like(v) for k, v in state["model"].items()},
              "optim": {k: {n: torch.zeros_like(t) for n, t in v.items()}
                        for k, v in state["optim"].items()},
              "extra": {"none": 1, "count": 0, "name": ""}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.load(target, storage_reader=TrustedReader(tmp_path / "ckpt"),
                 planner=TrustedLoadPlanner())
    for k, v in state["model"].items():
        assert torch.equal(target["model"][k], v)
    for k, v in state["optim"].items():
        assert all(torch.equal(target["optim"][k][n], t) for n, t in v.items())
    assert target["extra"] == {"none": None, "count": 3, "name": "x"}


def test_run_refuses_a_crafted_checkpoint_dir_before_any_rank_starts(tmp_path):
    ckpt, marker = tmp_path / "ckpt", tmp_path / "ran"
    _crafted(ckpt / "step_00000002", marker)
    (ckpt / "latest").write_text("step_00000002\n")
    plan = tiny_plan(tmp_path / "plan.json", [10], [1, 1])
    code, out, err = run_exec("run", str(plan), "--scenario", SCENARIO, "--steps", "4",
                              "--checkpoint-dir", str(ckpt), "--out", str(tmp_path / "run"))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--checkpoint-dir:" in err and "refers to posix.system" in err
    assert not marker.exists()
    assert not (tmp_path / "run" / "torchrun.log").exists()  # nothing was launched
