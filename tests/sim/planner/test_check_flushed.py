"""The check prints the analytic step time of the plan's flushed schedule (cost/flush.py)
beside the stage model and the simulator, and keeps it in verify.json."""

from heterps_sim.cost import evaluate_plan
from heterps_sim.cost.flush import flushed_throughput
from heterps_sim.planner.check import VerifySettings, check_lines, verify_plan
from heterps_sim.testing import chain_plan, chain_problem


def check(effects):
    p = chain_problem([0.02, 0.05, 0.01], alpha=0.95, batch_size=64, limit=500,
                      boundary_bytes=1e6, latency_s=1e-3, network=1e8)
    plan = chain_plan(p, [1, 2, 1], microbatches=4)
    analytic = evaluate_plan(p, plan, "least")
    return p, plan, verify_plan(p, plan, analytic, lambda q: evaluate_plan(p, q, "least"),
                                VerifySettings(effects=effects))


def test_flushed_row_and_json():
    p, plan, c = check(("bubbles", "transfers"))
    want = flushed_throughput(p, plan, 4, allreduce=False, transfers=True)
    assert c.extra["flushed_throughput"] == want < c.analytic.throughput
    assert abs(want / c.simulated.throughput - 1) < 1e-9  # exact here: gpipe, even microbatches
    text = "\n".join(check_lines(c))
    assert "  flushed" in text and f"{want:,.0f}" in text
    assert c.to_json_dict()["flushed"]["throughput"] == want


def test_no_flushed_row_without_a_flush():
    _, _, c = check(("transfers",))
    assert "flushed_throughput" not in c.extra and c.to_json_dict()["flushed"] is None
    assert "flushed" not in "\n".join(check_lines(c))
