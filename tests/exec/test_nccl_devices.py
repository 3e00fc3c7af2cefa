"""Ranks that would share a GPU under NCCL are refused before any rank starts (NCCL itself
fails only after every rank is up, with "duplicate GPU")."""

from __future__ import annotations

import pytest

from heterps_exec.launch.binding import nccl_device_clash
from heterps_exec.runtime.layout import StageBinding
from heterps_sim.core.plan import Plan, Stage


def _plan(*units: int) -> Plan:
    return Plan(stages=tuple(Stage(layers=(f"l{g}",), resource=f"t{g}", num_replicas=k)
                             for g, k in enumerate(units)))


def _bind(*devices: str) -> list[StageBinding]:
    return [StageBinding(device=d) for d in devices]


@pytest.mark.parametrize("units, devices, clash", [
    ((1, 1), ("cuda:0", "cuda:1"), ""),                      # one rank per GPU
    ((1, 1), ("cuda:0", "cuda:0"), "2 ranks (stage 0, stage 1) would share cuda:0"),
    ((2, 1), ("cuda:0", "cuda:1"), "2 ranks (stage 0 x2) would share cuda:0"),
    ((2, 3), ("cpu", "cuda:0"), ""),                         # not every stage on a GPU: gloo
    ((3,), ("cpu",), ""),
])
def test_one_rank_per_gpu_under_nccl(units, devices, clash):
    got = nccl_device_clash(_bind(*devices), _plan(*units), "b.yaml")
    assert (got == "") == (clash == "")
    if clash:
        assert got.startswith("b.yaml: ") and clash in got and "one rank per GPU" in got
