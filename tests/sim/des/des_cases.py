"""What the simulator tests compare between runs (the hand-built problems and plans are
heterps_sim.testing.chain_problem / chain_plan)."""

from __future__ import annotations


def run_key(run) -> tuple:
    """Everything a run computed, apart from how (SimPy events, batched or not)."""
    r = run.result
    extra = {k: v for k, v in r.extra.items() if k not in ("events", "batched")}
    spans = sorted((s.group, s.track, s.name, s.start_s, s.end_s) for s in run.spans)
    return (r.throughput, r.step_time_s, r.cost_usd, r.stages, extra, spans)
