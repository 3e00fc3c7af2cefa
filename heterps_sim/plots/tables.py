"""Readable tables of plans and results (pandas), for the CLI and the run folders."""

from __future__ import annotations

import math

import pandas as pd

from heterps_sim.core.result import RunResult


def _span(layers: tuple[str, ...]) -> str:
    return layers[0] if len(layers) == 1 else f"{layers[0]}..{layers[-1]} ({len(layers)})"


def _types(stage) -> str:
    """'t4', or for a mixed stage its units per type: '2xv100+1xt4'."""
    return stage.label if stage.replicas else stage.resource


def stages_frame(result: RunResult) -> pd.DataFrame:
    rows = []
    for g, s in enumerate(result.stages):
        rows.append({
            "stage": g, "layers": _span(s.layers), "type": _types(s), "units": s.num_replicas,
            "ET ms/batch": s.exec_time_s * 1e3, "stage samples/s": s.throughput,
            "utilisation": s.utilisation, "comm share": s.comm_share, "$/hour": s.cost_per_hour,
            "bottleneck": "<-" if g == result.bottleneck_stage else "",
        })
    return pd.DataFrame(rows)


def _fmt(x: float, unit: str = "") -> str:
    if not math.isfinite(x):
        return "n/a"
    return (f"{x:,.0f}" if abs(x) >= 1e4 else f"{x:,.6g}") + unit


def _ps_price(result: RunResult) -> float:
    """USD/h of the parameter-server hosts the result pays beside its stages (0: free PS)."""
    return float((result.extra.get("ps_hosts") or {}).get("price_per_hour", 0.0))


def _ps_line(result: RunResult) -> list[str]:
    ps = result.extra.get("ps_hosts")
    if not ps:
        return []
    return [f"parameter server {ps['num_shards']} x {ps['resource']}, "
            f"{_fmt(ps['price_per_hour'], ' USD/h')} (in the cost; stages "
            f"{_fmt(result.cost_per_hour, ' USD/h')})"]


def _cost_line(result: RunResult) -> str:
    """The cost as it adds up: USD/h x the hours billed, and what the billed hours are (the
    default model bills the slowest start and the run, rounded up to whole granules)."""
    rate = result.cost_per_hour + _ps_price(result)
    bill = result.extra.get("billing") if result.feasible else None
    if not bill:
        return (f"cost            {_fmt(result.cost_usd, ' USD')}  over {_fmt(result.hours, ' h')} "
                f"at {_fmt(rate, ' USD/h')}")
    granule = (f", rounded up to {_fmt(bill['granularity_s'], ' s')} granules"
               if bill["granularity_s"] > 0 else "")
    return (f"cost            {_fmt(result.cost_usd, ' USD')} = {_fmt(rate, ' USD/h')} x "
            f"{_fmt(bill['billed_hours'], ' h')} billed (startup {_fmt(bill['startup_s'], ' s')}"
            f" + run {_fmt(bill['run_s'], ' s')}{granule})")


def result_summary(result: RunResult) -> str:
    head = "FEASIBLE" if result.feasible else f"INFEASIBLE: {result.reason}"
    lines = [
        head,
        f"throughput      {_fmt(result.throughput, ' samples/s')} "
        f"(limit {_fmt(result.throughput_limit, ' samples/s')})",
        _cost_line(result),
        *_ps_line(result),
        f"provisioning    {result.provisioning}; units: "
        + (", ".join(f"{k} x{v}" for k, v in result.units_per_type.items()) or "none"),
    ]
    return "\n".join(lines)


def result_table(result: RunResult) -> str:
    frame = stages_frame(result)
    if frame.empty:
        return result_summary(result)
    body = frame.to_string(index=False, formatters={
        "ET ms/batch": "{:.4g}".format, "stage samples/s": _fmt,
        "utilisation": "{:.2f}".format, "comm share": "{:.2f}".format, "$/hour": "{:,.2f}".format})
    return body + "\n\n" + result_summary(result)
