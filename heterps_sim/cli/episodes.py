"""`heterps-sim episodes`: a plan over whole jobs with spot units (planner/episodes.py): its
expected cost with a confidence interval, how often it meets the throughput floor, beside the
same plan on demand.

Exit 0 when the floor holds in at least the market's `probability` of the jobs, 1 when it does
not (or no plan meets the limit), 2 on bad input.
"""

from __future__ import annotations

from heterps_sim.cli.common import (
    EXIT_INFEASIBLE,
    add_input,
    dump,
    load,
    pipeline_setting,
    run_scheduler,
    schedule_settings,
)
from heterps_sim.core.files import UserFileError
from heterps_sim.core.flags import number

MAX_SEEDS = 10_000
"""Jobs per run: each runs the step-level simulator once (about 0.1 s on a 64-type plan)."""


def add_episodes(p) -> None:
    add_input(p, required=True)
    p.add_argument("--market", required=True, metavar="MARKET.yaml",
                   help="how units are rented: spot types, prices, reclaims, checkpoints "
                        "(docs: the spot capacity guide)")
    p.add_argument("--plan", help="plan.json (default: the planner's answer for the scenario)")
    p.add_argument("--pipeline", choices=["gpipe", "1f1b", "async"],
                   help="the schedule the planner plans under, for the answer and the sweep "
                        "(default: the scenario's schedule.pipeline, else gpipe; a --plan "
                        "keeps its own)")
    p.add_argument("--seeds", type=number(int, 2, MAX_SEEDS), default=50,
                   help="jobs simulated, one per seed (default 50)")
    p.add_argument("--sweep", type=_headrooms, metavar="H1,H2,...",
                   help="also plan at floors raised by each headroom (e.g. 0,0.1,0.2: +0%%, "
                        "+10%%, +20%%) and by the planner's repair, on on-demand and on spot "
                        "prices, then add units where the jobs say they pay; score each by the "
                        "same jobs and keep the cheapest that holds the floor often enough")
    p.add_argument("--checkpoints", action="store_true",
                   help="also run the plan's jobs with checkpoints every 0.25x to 4x the "
                        "market's interval (the same seeds) and print the cheapest that holds "
                        "the floor often enough")
    p.add_argument("--policy", metavar="CHECKPOINT",
                   help="also plan with the learned spot policy ('shipped', or a checkpoint of "
                        "python -m heterps_sim.planner.learned.train): which types go on spot, "
                        "the headroom, units per stage and the checkpoint interval; prints its "
                        "most likely decision and the cheapest holding the floor among that and "
                        "--policy-samples sampled ones, scored by the same jobs")
    p.add_argument("--policy-samples", type=number(int, 0, 1000), default=16,
                   help="decisions sampled from the policy for its search (default 16)")


def _headrooms(text: str) -> tuple[float, ...]:
    """argparse `type=` of --sweep: a comma list of headrooms in [0, 10]."""
    import argparse
    import math
    try:
        values = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected numbers like 0,0.1,0.2") from None
    if not values or any(not math.isfinite(v) or not 0 <= v <= 10 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: each headroom must be in [0, 10]")
    return values


def _plan(args, loaded):
    """The plan to rent and its problem: the given plan.json priced as `evaluate` prices it,
    else the planner's answer."""
    if args.plan:
        from heterps_sim.inputs.load import load_plan
        from heterps_sim.planner import Pricing
        try:
            plan = load_plan(args.plan)
            pricing = Pricing.of(loaded.problem, schedule=plan.schedule)
            plan, result = pricing.price(loaded.problem, plan)
        except UserFileError as exc:
            msg = str(exc)
            raise UserFileError(msg if msg.startswith(str(args.plan))
                                else f"{args.plan}: {msg}") from None
        from heterps_sim.planner.episodes import rentable
        return rentable(plan, result), result
    from argparse import Namespace
    name, mode, seed, options = schedule_settings(
        Namespace(scheduler=None, mode=None, seed=None, set=None), loaded)
    answer = run_scheduler(loaded.problem, name, mode, seed, options,
                           pipeline=pipeline_setting(args, loaded))
    from heterps_sim.planner.episodes import rentable
    return (rentable(answer.plan, answer.result) if answer.plan is not None else None,
            answer.result)


def cmd_episodes(args) -> int:
    from heterps_sim.inputs.market import load_market
    from heterps_sim.planner.episodes import rental_episodes
    loaded = load(args.input, args.model)
    market = load_market(args.market, list(loaded.problem.type_names))
    policy = None
    if args.policy:  # a bad checkpoint is refused before anything runs
        from heterps_sim.planner.learned.train import SHIPPED, load_policy
        policy = load_policy(SHIPPED if args.policy == "shipped" else args.policy)
    plan, result = _plan(args, loaded)
    if plan is None or result is None or not result.feasible:
        why = result.reason if result is not None else "no plan"
        print(f"no plan meets the limit to rent: {why}")
        return EXIT_INFEASIBLE
    try:
        outcome = rental_episodes(loaded.problem, plan, market, seeds=args.seeds)
    except ValueError as exc:
        raise UserFileError(f"{args.market}: {exc}") from None
    sweep, held = _sweep(args, loaded, market) if args.sweep else (None, None)
    learned = _learned(args, loaded, market, policy) if policy is not None else None
    checkpoints = None
    if args.checkpoints:
        from heterps_sim.planner.robust import checkpoint_sweep
        try:
            checkpoints = checkpoint_sweep(loaded.problem, plan, market, seeds=args.seeds)
        except ValueError as exc:
            raise UserFileError(f"{args.market}: {exc}") from None
    if args.json:
        print(dump({"plan": plan.to_json_dict(), **outcome.to_json_dict(),
                    **({"sweep": sweep_json(sweep)} if sweep is not None else {}),
                    **({"held_out": held_out_json(held)} if held is not None else {}),
                    **({"checkpoints": [{"scale": c.scale, "jobs": c.outcome.to_json_dict()}
                                        for c in checkpoints]}
                       if checkpoints is not None else {}),
                    **({"policy": learned_json(learned)} if learned is not None else {})}))
    else:
        from heterps_sim.plots.episodes import episode_lines, sweep_lines
        print("\n".join(episode_lines(loaded.problem, plan, outcome)))
        if sweep is not None:
            print("\n" + "\n".join(sweep_lines(loaded.problem, market, sweep)))
        if held is not None:
            from heterps_sim.plots.episodes import held_out_lines
            print("\n" + "\n".join(held_out_lines(held)))
        if checkpoints is not None:
            from heterps_sim.plots.episodes import checkpoint_lines
            print("\n" + "\n".join(checkpoint_lines(checkpoints)))
        if learned is not None:
            from heterps_sim.plots.episodes import learned_lines
            print("\n" + "\n".join(learned_lines(loaded.problem, market, learned,
                                                   args.policy)))
    from heterps_sim.planner.robust import best_checkpoint
    holds = (outcome.meets_probability or (sweep is not None and sweep.best is not None)
            or (checkpoints is not None and best_checkpoint(checkpoints) is not None)
            or (learned is not None and learned.searched.holds))
    return 0 if holds else EXIT_INFEASIBLE


def _sweep(args, loaded, market):
    """planner/robust.market_sweep under the scenario's scheduler and the schedule asked for:
    (the sweep, its held-out replay or None)."""
    from argparse import Namespace

    from heterps_sim.cli.common import make_planner
    from heterps_sim.planner.robust import market_sweep
    name, mode, seed, options = schedule_settings(
        Namespace(scheduler=None, mode=None, seed=None, set=None), loaded)
    planner = make_planner(name, mode, seed, options, pipeline_setting(args, loaded))
    try:
        return market_sweep(loaded.problem, market, planner, headrooms=args.sweep,
                            seeds=args.seeds)
    except ValueError as exc:
        raise UserFileError(f"{args.market}: {exc}") from None


def _learned(args, loaded, market, policy):
    """planner/learned/answer.learned_answer with the policy asked for, under the
    scenario's scheduler and schedule; a market the policy's jobs cannot finish is bad input,
    as for the plan's."""
    from argparse import Namespace

    from heterps_sim.cli.common import make_planner
    from heterps_sim.planner.learned.answer import learned_answer
    name, mode, seed, options = schedule_settings(
        Namespace(scheduler=None, mode=None, seed=None, set=None), loaded)
    planner = make_planner(name, mode, seed, options, pipeline_setting(args, loaded))
    answer = learned_answer(loaded.problem, market, policy, seeds=args.seeds,
                            samples=args.policy_samples, planner=planner)
    if answer is None:
        raise UserFileError(f"{args.input}: no plan meets the limit on demand: the policy has "
                            "nothing to decide")
    return answer


def learned_json(answer) -> dict:
    def one(s) -> dict:
        return {"decision": {"spot": sorted(s.decision.spot), "headroom": s.decision.headroom,
                             "units_added": list(s.decision.extra),
                             "checkpoint_scale": s.decision.checkpoint_scale},
                "plan": s.plan.to_json_dict() if s.plan is not None else None,
                "jobs": s.outcome.to_json_dict() if s.outcome is not None else None,
                "failure": s.failure or None}
    return {"alone": one(answer.alone), "searched": one(answer.searched),
            "decisions_tried": answer.tried, "alone_s": answer.alone_s,
            "searched_s": answer.searched_s,
            **({"held_out": answer.replay.to_json_dict()} if answer.replay is not None else {}),
            **({"held_out_failure": answer.replay_failure} if answer.replay_failure else {})}


def held_out_json(held) -> dict:
    def row(r) -> dict:
        out = {"label": r.candidate.label, "plan": r.candidate.plan.to_json_dict(),
               "chosen": r is held.chosen, "fit_window_cost_usd": r.candidate.outcome.cost.mean}
        if r.replay is None:
            return {**out, "replay": None, "failure": r.failure}
        return {**out, "replay": r.replay.to_json_dict(), "predicted_off": r.predicted_off,
                "throughput_lost": r.throughput_lost, "cheaper_than_on_demand": r.cheaper}
    best = held.on_demand
    return {"rows": [row(r) for r in held.rows],
            "on_demand_best": (None if best is None else
                               {"label": best.label, "plan": best.plan.to_json_dict(),
                                "jobs": best.outcome.to_json_dict()})}


def sweep_json(sweep) -> dict:
    best = sweep.best
    return {"best": best.label if best is not None else None,
            "candidates": [{"label": c.label, "headroom": c.headroom,
                            "planned_cost_usd": c.planned_cost_usd if c.plan is not None else None,
                            "plan": c.plan.to_json_dict() if c.plan is not None else None,
                            "jobs": c.outcome.to_json_dict() if c.outcome is not None else None}
                           for c in sweep.candidates]}


HANDLERS = {"episodes": (add_episodes, cmd_episodes)}
