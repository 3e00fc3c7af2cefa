"""The text `heterps-sim episodes` prints from a planner.episodes.RentalOutcome (no numbers are
computed here beyond formatting)."""

from __future__ import annotations

import numpy as np


def _row(label: str, o) -> str:
    return (f"  {label:10} {o.cost.text():>30}   {100 * o.meet.mean:4.0f}% "
            f"({100 * o.meet.low:.0f}% to {100 * o.meet.high:.0f}%)   "
            f"{o.run_s.mean() / 3600:7.3g}   {o.reclaims.mean():8.2f}   "
            f"{o.lost_steps.mean():10,.0f}")


def _units(plan) -> str:
    stages = " + ".join(f"{n} {name}" for s in plan.stages for name, n in s.groups)
    ps = f"; PS {plan.ps.num_shards} x {plan.ps.resource}" if plan.ps is not None else ""
    return f"{stages} in {len(plan.stages)} stage(s), {plan.schedule}{ps}"


def episode_lines(problem, plan, outcome) -> list[str]:
    m = outcome.market
    names = list(problem.type_names)
    spot = ", ".join(
        f"{name} x{n} at {m.spot[name].price_per_hour:,.2f} USD/h (on demand "
        f"{float(problem.price_per_hour[names.index(name)]):,.2f}), "
        f"{m.spot[name].reclaims_per_hour:g} reclaims per unit-hour"
        for name, n in outcome.spot_units.items()) or "none of the plan's types"
    every = (f"every {outcome.checkpoint_every_steps:,} steps"
             + (" (Young's interval)" if m.checkpoint_every_s is None else "")
             if outcome.checkpoint_every_steps else "none")
    lines = [
        f"plan: {_units(plan)}",
        f"jobs: {outcome.seeds} of {problem.num_samples:,.0f} samples, one per seed "
        "(step times from the simulator with jitter and stragglers on)",
        f"spot: {spot}",
        f"market {m.source}: zone outages {m.zone_outages_per_hour:g}/h, notice "
        f"{m.notice_s:g} s, checkpoint write {m.checkpoint_write_s:g} s, {every}",
        "",
        f"  {'':10} {'cost USD (95% interval)':>30}   meets {problem.throughput_limit:,.0f} "
        "samples/s   run h   reclaims   lost steps",
        _row("spot" if outcome.spot_units else "as given", outcome)]
    if outcome.reference is not None:
        lines.append(_row("on demand", outcome.reference))
    lines.append("")
    saved = outcome.savings()
    if saved is not None:
        lines.append(f"spot: {100 * abs(saved):.1f}% {'cheaper' if saved >= 0 else 'dearer'} "
                     "than on demand (mean cost)")
    verdict = "meets" if outcome.meets_probability else "misses"
    lines.append(f"the floor holds in {100 * outcome.meet.mean:.0f}% of the jobs: {verdict} "
                 f"the {100 * m.probability:.0f}% the market asks")
    need = problem.batch_size / problem.throughput_limit
    lines.append(f"step time per job: median {1e3 * float(np.median(outcome.step_s)):.1f} ms "
                 f"({1e3 * need:.1f} ms meets the floor with no reclaim)")
    return lines
