"""The text `heterps-sim episodes` prints from a planner.episodes.RentalOutcome (no numbers are
computed here beyond formatting)."""

from __future__ import annotations

import numpy as np

from heterps_sim.planner.episodes import money

COLUMNS = (10, 34, 22, 9, 9, 11)
"""Widths of the jobs table: label, cost, floor held, run hours, reclaims, lost steps."""


def _share(o) -> str:
    return f"{100 * o.meet.mean:.0f}% ({100 * o.meet.low:.0f}% to {100 * o.meet.high:.0f}%)"


def _cells(*cells) -> str:
    first, *rest = cells
    return "  " + f"{first:<{COLUMNS[0]}}" + "".join(
        f" {c:>{w}}" for c, w in zip(rest, COLUMNS[1:]))


def _fit_on(terms) -> str:
    """Where a replayed type's rates are fitted, when not on the replayed part itself."""
    fit = terms.fit_on
    if fit is None:
        return ""
    return f"; rates and checkpoint interval fitted on {fit.source}, not on the replay"


def _row(label: str, o) -> str:
    return _cells(label, o.cost.text(), _share(o), f"{o.run_s.mean() / 3600:.3g}",
                  f"{o.reclaims.mean():.2f}", f"{o.lost_steps.mean():,.0f}")


def _units(plan) -> str:
    stages = " + ".join(f"{n} {name}" for s in plan.stages for name, n in s.groups)
    ps = f"; PS {plan.ps.num_shards} x {plan.ps.resource}" if plan.ps is not None else ""
    return f"{stages} in {len(plan.stages)} stage(s), {plan.schedule}{ps}"


def episode_lines(problem, plan, outcome) -> list[str]:
    m = outcome.market
    names = list(problem.type_names)
    spot = ", ".join(
        f"{name} x{n} at {m.spot[name].price_per_hour:,.2f} USD/h (on demand "
        f"{float(problem.price_per_hour[names.index(name)]):,.2f}), " + (f"{m.spot[name].reclaims_per_hour:g} reclaims per unit-hour"
           if m.spot[name].availability is None else "reclaims replayed")
        for name, n in outcome.spot_units.items()) or "none of the plan's types"
    young = " (Young's interval)" if m.checkpoint_every_s is None else ""
    every = ("none" if not outcome.checkpoint_every_steps else
             f"none: the job's {outcome.steps:,} steps are shorter than the interval{young}"
             if outcome.checkpoint_every_steps >= outcome.steps else
             f"every {outcome.checkpoint_every_steps:,} steps{young}")
    lines = [
        f"plan: {_units(plan)}",
        f"jobs: {outcome.seeds} of {problem.num_samples:,.0f} samples, one per seed "
        "(step times from the simulator with jitter and stragglers on)",
        f"spot: {spot}",
        *[f"reclaims of {name}: replayed from {m.spot[name].availability.source}, launched at a "
          f"point of its window drawn per job{_fit_on(m.spot[name])}"
          for name in outcome.spot_units if m.spot[name].availability is not None],
        *[f"spot price of {name}: {m.spot[name].price_source}" for name in outcome.spot_units],
        f"market {m.source}: zone outages {m.zone_outages_per_hour:g}/h, notice "
        f"{m.notice_s:g} s, checkpoint write {m.checkpoint_write_s:g} s, checkpoints {every}",
        "",
        f"floor: {problem.throughput_limit:,.0f} samples/s over each job's run",
        _cells("", "cost USD (95% interval)", "floor held", "run h", "reclaims", "lost steps"),
        _row("spot" if outcome.spot_units else "as given", outcome)]
    if outcome.reference is not None:
        lines.append(_row("on demand", outcome.reference))
    if outcome.predicted is not None:
        lines.append(_row("fitted", outcome.predicted))
    lines.append("")
    saved = outcome.savings()
    if saved is not None:
        lines.append(f"spot: {100 * abs(saved):.1f}% {'cheaper' if saved >= 0 else 'dearer'} "
                     "than on demand (mean cost)")
    if outcome.predicted is not None and outcome.cost.mean > 0:
        off = outcome.predicted.cost.mean / outcome.cost.mean - 1.0
        held = any(m.spot[n].fit_on is not None for n in outcome.spot_units)
        lines.append(f"fitted: the Poisson model fitted to the "
                     f"{'fit window' if held else 'trace'} predicts the replay's mean cost "
                     f"{100 * off:+.1f}% off (its rate per unit-hour and mean wait for capacity, "
                     "per type)")
    verdict = "meets" if outcome.meets_probability else "misses"
    lines.append(f"the floor holds in {100 * outcome.meet.mean:.0f}% of the jobs: {verdict} "
                 f"the {100 * m.probability:.0f}% the market asks")
    need = problem.batch_size / problem.throughput_limit
    lines.append(f"step time per job: median {1e3 * float(np.median(outcome.step_s)):.1f} ms "
                 f"({1e3 * need:.1f} ms meets the floor with no reclaim)")
    return lines


def sweep_lines(problem, market, sweep) -> list[str]:
    """The baselines on mean times and the plans grown from them in the simulator, each scored
    by the same jobs (planner/robust.py)."""
    where = (" on the part of each trace the planner knows (its fit window)"
             if market.holds_out else "")
    lines = [f"plans on mean times (and with units added in the simulator: +N units), scored by "
             f"the same jobs{where} (floor {problem.throughput_limit:,.0f} samples/s in "
             f"{100 * market.probability:.0f}% of them):",
             f"  {'':26} {'planned USD':>12} {'jobs: cost USD (95% interval)':>34} "
             f"{'floor held':>22}"]
    for c in sweep.candidates:
        if c.plan is None or c.outcome is None:
            lines.append(f"  {c.label:26} {'no plan':>12}")
            continue
        o = c.outcome
        lines.append(f"  {c.label:26} {money(c.planned_cost_usd):>12} {o.cost.text():>34} "
                     f"{_share(o):>22}")
    best = sweep.best
    lines.append(f"cheapest holding the floor: {best.label}, {money(best.outcome.cost.mean)} USD "
                 "per job on average" if best is not None else
                 "none of these plans holds the floor as often as the market asks")
    return lines


def held_out_lines(held) -> list[str]:
    """The sweep's plans replayed on the held-out part of their traces (planner/robust.HeldOut):
    the chosen one, and each other that rents a type held out."""
    lines = ["held out: plans chosen on the fit window, replayed on the part of the trace held "
             "out (the same seeds and step times):",
             f"  {'':26} {'fit window USD':>14} {'held out USD (95% interval)':>30} {'off':>7} "
             f"{'floor held':>11} {'on demand USD':>14} {'cheaper':>8} {'thr. lost':>9}"]
    for r in held.rows:
        o = r.replay
        label = r.candidate.label + (" (chosen)" if r is held.chosen else "")
        if o is None:
            lines.append(f"  {label:26} {money(r.candidate.outcome.cost.mean):>14} "
                         f"does not finish on the held-out part: {r.failure}")
            continue
        lines.append(f"  {label:26} {money(r.candidate.outcome.cost.mean):>14} "
                     f"{o.cost.text():>30} {100 * r.predicted_off:+6.1f}% "
                     f"{100 * o.meet.mean:10.0f}% {money(o.reference.cost.mean):>14} "
                     f"{r.cheaper:7.2f}x {100 * r.throughput_lost:8.1f}%")
    for r in held.rows:
        lines.append(f"  {r.candidate.label}: {_units(r.candidate.plan)}")
    fitted = [(r, r.replay.predicted) for r in held.rows
              if r.replay is not None and r.replay.predicted is not None]
    if fitted:
        lines.append("the Poisson rates fitted to the fit window predict the held-out replay: "
                     + ", ".join(f"{r.candidate.label} {100 * (p.cost.mean / r.replay.cost.mean - 1):+.1f}%"
                                 for r, p in fitted))
    if held.chosen is None:
        lines.append("no plan held the floor on the fit window: none is chosen")
    best = held.on_demand
    if held.chosen is not None and best is not None and held.chosen.replay is not None:
        lines.append(f"the chosen plan held out against the cheapest plan holding the floor all "
                     f"on demand ({best.label}, {_units(best.plan)}, "
                     f"{money(best.outcome.cost.mean)} USD): "
                     f"{best.outcome.cost.mean / held.chosen.replay.cost.mean:.2f}x cheaper")
    elif best is None:
        lines.append("none of these plans holds the floor rented all on demand")
    return lines


def checkpoint_lines(choices) -> list[str]:
    """The plan's jobs at each checkpoint interval (planner/robust.checkpoint_sweep)."""
    from heterps_sim.planner.robust import best_checkpoint
    lines = ["checkpoint interval, the same jobs at each (x the market's interval):",
             f"  {'scale':>6} {'every steps':>12} {'cost USD (95% interval)':>34} "
             f"{'floor held':>22} {'run h':>9} {'lost steps':>11}"]
    for c in choices:
        o = c.outcome
        every = f"{o.checkpoint_every_steps:,}" if o.checkpoint_every_steps else "none"
        lines.append(f"  {c.scale:6g} {every:>12} {o.cost.text():>34} {_share(o):>22} "
                     f"{o.run_s.mean() / 3600:9.3g} {o.lost_steps.mean():11.4g}")
    best = best_checkpoint(choices)
    lines.append(f"cheapest holding the floor: {best.scale:g}x the market's interval, "
                 f"{money(best.outcome.cost.mean)} USD per job on average" if best is not None
                 else "no interval holds the floor as often as the market asks")
    return lines


def learned_lines(problem, market, answer, source: str) -> list[str]:
    """The learned spot policy's decisions and their jobs (planner/learned/answer.py)."""
    from heterps_sim.planner.learned.answer import ALONE_QUANTILE
    lines = [f"learned spot policy ({source}): its decision alone (its most likely choices, "
             f"the headroom at its {100 * ALONE_QUANTILE:.0f}th percentile), then the cheapest "
             f"holding the floor of the {answer.tried} distinct decision(s) it proposed, each "
             f"scored by the same jobs (floor {problem.throughput_limit:,.0f} samples/s in "
             f"{100 * market.probability:.0f}% of them):"]
    for label, s in (("policy alone", answer.alone), ("policy + search", answer.searched)):
        lines.append(f"  {label:16} {s.decision.text()}")
        if s.outcome is None:
            lines.append(f"  {'':16} no jobs: {s.failure}")
            continue
        units = ", ".join(f"{n} x{k}" for n, k in sorted(s.plan.units_by_type().items()))
        lines.append(f"  {'':16} plan: {units} in {len(s.plan.stages)} stage(s); jobs: "
                     f"{s.outcome.cost.text()} USD, floor held {_share(s.outcome)}")
    r = answer.replay
    if r is not None:
        lost = 1.0 - float(r.reference.run_s.mean()) / float(r.run_s.mean()) \
            if r.reference is not None else 0.0
        ref = (f"; the same plan on demand {r.reference.cost.text()} USD "
               f"({r.reference.cost.mean / r.cost.mean:.2f}x), throughput lost "
               f"{100 * lost:.1f}%" if r.reference is not None else "")
        lines.append(f"  held out: the search's pick replayed on the part of each trace held "
                     f"out: {r.cost.text()} USD, floor held {_share(r)}{ref}; predicted "
                     f"{100 * (answer.searched.outcome.cost.mean / r.cost.mean - 1):+.1f}%")
    elif answer.replay_failure:
        lines.append(f"  held out: the search's pick does not finish there: "
                     f"{answer.replay_failure}")
    return lines
