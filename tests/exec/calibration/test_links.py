"""The link profiler: in-situ one-way times travel with their own timestamp, all-reduce rows
cover every (ranks, bytes) asked, and the fixed compute is the same work every call."""

from __future__ import annotations

import pytest

from heterps_exec.calibration.gloo_cpu import profile_message_cpu
from heterps_exec.calibration.links import FixedWork, profile_allreduce, profile_p2p


def test_fixed_work_is_sized_once_and_repeated_exactly() -> None:
    assert FixedWork(0.0).repeats == 0
    work = FixedWork(0.002)
    assert work.repeats >= 1
    before = work.repeats
    work()
    work()
    assert work.repeats == before  # sized once: every round does the same products


@pytest.mark.parametrize("after_s", [0.0, 0.001])
def test_p2p_points_are_one_way_seconds(after_s: float) -> None:
    link = profile_p2p(sizes=(64, 65536), rounds=5, after_compute_s=after_s)
    points = link["points"]
    assert [p["bytes"] for p in points] == [64, 65536]
    # in situ, the one-way time is arrival minus the sender's stamp: a lost or garbled stamp
    # gives a negative time or the clock's whole reading (hours), not milliseconds
    assert all(0.0 < p["one_way_s"] < 1.0 for p in points)
    assert link["latency_s"] >= 0.0 and link["bytes_per_s"] > 0.0


@pytest.mark.parametrize("after_s", [0.0, 0.001])
def test_allreduce_rows_cover_ranks_and_sizes(after_s: float) -> None:
    rows = profile_allreduce(ranks=(2, 3), sizes=(4, 4096), rounds=4, after_compute_s=after_s)
    assert [(r["ranks"], r["bytes"]) for r in rows] == [(2, 4), (2, 4096), (3, 4), (3, 4096)]
    assert all(0.0 < r["seconds"] < 1.0 for r in rows)
    # each member's CPU in one: some (gloo moves the chunks), and no more than its main
    # thread and gloo's could spend in its wall time (1 ms for the clocks' granularity)
    assert all(0.0 < r["cpu_s"] <= 2 * r["seconds"] + 1e-3 for r in rows)


def test_message_cpu_is_measured_on_both_sides_and_fitted_through_them() -> None:
    sizes = (256, 65536)
    got = profile_message_cpu(sizes, messages=20, repeats=2, pace_s=0.0005)
    rows = got["points"]
    assert [r["bytes"] for r in rows] == list(sizes)
    for r in rows:  # some CPU on each side per message, far less than a millisecond's pause
        for side in ("send", "recv"):
            lo, hi = r[f"{side}_spread_s"]
            assert lo <= r[f"{side}_s"] <= hi and -1e-4 < r[f"{side}_s"] < 1e-2
    cpu = got["message_cpu"]
    for side in ("send", "recv"):
        a, b = cpu[f"{side}_s"], cpu[f"{side}_s_per_byte"]
        assert a >= 0 and b >= 0
        if a > 0 and b > 0:  # two sizes, not clipped: the line passes through both medians
            for r in rows:
                assert a + b * r["bytes"] == pytest.approx(r[f"{side}_s"], abs=1e-12)
