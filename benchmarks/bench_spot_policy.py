"""The learned spot policy against the exact solver's baselines on held-out random cases.

    .venv/bin/python benchmarks/bench_spot_policy.py [--policy PATH] [--cases 20] [--seeds 20]
        [--fresh 40] [--samples 16] [--workers 2] [--grid [--split]] [--hindsight]

For each held-out case (planner/learned/family.py: a random problem whose floor binds, a random
spot market, seeds the training never draws) it prints the plan each method chooses, scored by
`fresh` jobs on seeds no choice saw: the best of the exact solver's baselines (robust.market_sweep:
(a) its answer repaired in the simulator, (b) its answers at raised floors on demand and on spot
prices, and those grown unit by unit; chosen by `seeds` jobs), the policy alone (its most likely
decision, no simulation) and the policy with a small search (its most likely decision and
`samples` sampled ones, chosen by the same `seeds` jobs). Then the summary: on the cases where
both hold the floor on the fresh jobs, the geometric mean of cost / baseline's cost with a 95%
bootstrap interval over cases, and how often each method holds the floor. --grid adds the
search over the policy's own choices, --split that search's plans with some units of each spot
type kept on demand, --hindsight every method against the sweep's cheapest plan that holds on
the fresh jobs themselves (the most any rule choosing among the sweep's plans could reach).
"""

from __future__ import annotations

import argparse
import math
import pickle
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np


def _policy(name: str):
    import torch
    if name == "untrained":  # the same network before training, for the ablation
        from heterps_sim.planner.learned.policy import SpotPolicy
        torch.manual_seed(0)
        return SpotPolicy().eval()
    from heterps_sim.planner.learned.train import SHIPPED, load_policy
    return load_policy(SHIPPED if name == "shipped" else name)


def one_pick(job):
    """(index, evaluate.<kind>_pick(index)) for kind baseline, grid or hindsight: one held-out
    case in a worker."""
    import torch
    torch.set_num_threads(1)
    from heterps_sim.planner.learned import evaluate
    args, kind, index = job
    return index, getattr(evaluate, f"{kind}_pick")(index, seeds=args.seeds, fresh=args.fresh)


def picks(job):
    import torch
    torch.set_num_threads(1)
    from heterps_sim.planner.learned.evaluate import policy_picks
    args, name, index = job
    return policy_picks(_policy(name), index, seeds=args.seeds, fresh=args.fresh,
                        samples=args.samples)


def _cached(path: str, key, make):
    """make() unless `path` holds a pickle written with the same key (then its value)."""
    if path and Path(path).exists():
        with open(path, "rb") as fh:
            stored = pickle.load(fh)
        if stored["key"] == key:
            return stored["value"]
    value = make()
    if path:
        with open(path, "wb") as fh:
            pickle.dump({"key": key, "value": value}, fh)
    return value


def policy_cases(args, name: str, pool) -> dict:
    """{case index: (alone, searched)} for the first `cases` held-out cases with a plan (the
    same cases the baselines take: both need the planner's answer on demand)."""
    def make():
        found, index = {}, 0
        while len(found) < args.cases:
            batch = list(range(index, index + args.cases - len(found)))
            index += len(batch)
            for i, pp in zip(batch, pool.map(picks, [(args, name, i) for i in batch])):
                if pp is not None:
                    found[i] = pp
        return found
    safe = "".join(c if c.isalnum() else "_" for c in name)
    path = f"{args.cache}.{safe}" if args.cache else ""
    return _cached(path, (args.cases, args.seeds, args.fresh, args.samples), make)


def baselines(args, pool) -> dict:
    """{case index: baseline Pick} for the first `cases` held-out cases with a plan, cached
    (they do not depend on the policy, and they are most of the benchmark's time)."""
    def make():
        found, index = {}, 0
        while len(found) < args.cases:
            batch = list(range(index, index + args.cases - len(found)))
            index += len(batch)
            for i, pick in pool.map(one_pick, [(args, "baseline", i) for i in batch]):
                if pick is not None:
                    found[i] = pick
        return found
    return _cached(args.cache, (args.cases, args.seeds, args.fresh), make)


def grid_picks(args, cases, pool) -> dict:
    """{case index: the grid search's Pick} for the baselines' cases, cached beside them."""
    def make():
        return dict(pool.map(one_pick, [(args, "grid", i) for i in cases]))
    path = f"{args.cache}.grid" if args.cache else ""
    return _cached(path, (tuple(cases), args.seeds, args.fresh), make)


def hindsight_picks(args, cases, pool) -> dict:
    """{case index: the sweep's cheapest plan holding on the fresh jobs}, cached beside the
    baselines."""
    def make():
        return dict(pool.map(one_pick, [(args, "hindsight", i) for i in cases]))
    path = f"{args.cache}.hindsight" if args.cache else ""
    return _cached(path, (tuple(cases), args.seeds, args.fresh), make)


SPLIT_SHARES = (0.0, 0.25, 0.5, 0.75)


def split(job):
    """One case's grid pick rented with a share of each spot type's units on demand, for each
    of SPLIT_SHARES, on the fresh jobs: [(share, USD, holds)]. The split is modelled as each
    spot type's reclaim rate times (1 - share) and its price blended (share x on demand +
    (1 - share) x spot): the same total rate as that many units kept on demand, by Poisson
    superposition, with fractional units and replacements billed at the blend."""
    import torch
    torch.set_num_threads(1)
    from dataclasses import replace

    from heterps_sim.planner.episodes import rental_episodes
    from heterps_sim.planner.learned.decide import sub_market
    from heterps_sim.planner.learned.evaluate import FRESH_SEED
    from heterps_sim.planner.learned.family import HELD_OUT_SEEDS, case
    args, index, pick = job
    problem, market = case(HELD_OUT_SEEDS + index)
    names = list(problem.type_names)
    on = sub_market(market, pick.decision.spot)
    rows, step = [], None
    for share in SPLIT_SHARES:
        spot = {n: replace(t, price_per_hour=share * float(problem.price_per_hour[names.index(n)])
                           + (1 - share) * t.price_per_hour,
                           reclaims_per_hour=(1 - share) * t.reclaims_per_hour)
                for n, t in on.spot.items()}
        out = rental_episodes(problem, pick.plan, replace(on, spot=spot), seeds=args.fresh,
                              reference=False, first_seed=FRESH_SEED, step_s=step,
                              checkpoint_scale=pick.decision.checkpoint_scale)
        step = out.step_s
        rows.append((share, out.cost.mean, out.meets_probability))
    return index, rows


def split_report(args, grid: dict, pool) -> None:
    """Would keeping some units of each spot type on demand pay? The grid search's picks
    (those with spot types) rented with SPLIT_SHARES on demand, on the fresh jobs."""
    jobs = [(args, i, g) for i, g in sorted(grid.items())
            if g is not None and g.plan is not None and g.decision.spot]
    got = dict(pool.map(split, jobs))
    ratios = []
    for i, rows in got.items():
        print(f"case {i}: " + ", ".join(f"{100 * sh:.0f}% on demand {c:.4g} USD"
                                        f"{' holds' if h else ''}" for sh, c, h in rows))
        held = [c for _, c, h in rows if h]
        if rows[0][2]:
            ratios.append(min(held) / rows[0][1])
    r = np.array(ratios)
    print(f"where the pick holds all on spot ({len(r)} cases): the cheapest split that holds / "
          f"all on spot: geometric mean {np.exp(np.log(r).mean()):.4f}, least {r.min():.4f}; "
          f"holds only with some units on demand in "
          f"{sum(not rows[0][2] and any(h for _, _, h in rows) for rows in got.values())}")


def grid_report(base: dict, got: dict) -> None:
    """The grid search against the sweep's best, as report's summary lines."""
    rng = np.random.default_rng(0)
    rows = [(got[i], base[i]) for i in base if got.get(i) is not None]
    held = sum(g.holds for g, _ in rows)
    print(f"grid search (the policy's choices searched in full): holds the floor on fresh "
          f"jobs in {held}/{len(rows)} cases (baseline {sum(b.holds for _, b in rows)})"
          + both_hold(rows, rng))
    print(f"median wall time to choose: grid search "
          f"{np.median([g.wall_s for g, _ in rows]):.1f} s")


def hindsight_report(label: str, got: dict, hind: dict) -> None:
    """A method's picks against the sweep in hindsight (hindsight_pick): where both hold, and
    where only one does."""
    rng = np.random.default_rng(0)
    pairs = [(got[i], hind[i]) for i in hind if got.get(i) is not None]
    only = sum(a.holds and not h.holds for a, h in pairs)
    lost = sum(h.holds and not a.holds for a, h in pairs)
    print(f"{label} against the sweep in hindsight: only it holds in {only}, only the sweep "
          f"in {lost}" + both_hold(pairs, rng))


def both_hold(pairs: list, rng: np.random.Generator) -> str:
    """"; where both hold ...": a method's picks against the baseline's, [(pick, baseline)],
    on the cases where both hold the floor on the fresh jobs ("" when none do)."""
    both = [(a.cost, b.cost) for a, b in pairs if a.holds and b.holds]
    if not both:
        return ""
    ratios = np.array([a / b for a, b in both])
    g, lo, hi = geo_ci(ratios, rng)
    return (f"; where both hold ({len(both)}): cost / baseline geometric mean {g:.3f} "
            f"(95% bootstrap {lo:.3f} to {hi:.3f}), median {np.median(ratios):.3f}, "
            f"cheaper by >= 5% in {(ratios <= 0.95).sum()}, dearer by >= 5% in "
            f"{(ratios >= 1.05).sum()}")


def geo_ci(ratios: np.ndarray, rng: np.random.Generator) -> tuple[float, float, float]:
    logs = np.log(ratios)
    boots = [np.exp(rng.choice(logs, len(logs)).mean()) for _ in range(4000)]
    return float(np.exp(logs.mean())), float(np.quantile(boots, 0.025)), \
        float(np.quantile(boots, 0.975))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--policy", default="shipped",
                    help="comma list of checkpoints ('shipped'; 'untrained': the network "
                         "before training)")
    ap.add_argument("--cases", type=int, default=20)
    ap.add_argument("--seeds", type=int, default=20, help="jobs each choice is made on")
    ap.add_argument("--fresh", type=int, default=40, help="jobs each chosen plan is scored on")
    ap.add_argument("--samples", type=int, default=16, help="sampled decisions of the search")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cache", default="", help="pickle of the baselines (reused when it "
                                                "matches --cases, --seeds and --fresh), and "
                                                "beside it each policy's picks")
    ap.add_argument("--grid", action="store_true",
                    help="also the search in the simulator over the policy's choices (what it "
                         "imitates, in full): the reference a policy over them could reach")
    ap.add_argument("--split", action="store_true",
                    help="with --grid: the grid's picks with a share of each spot type's "
                         "units kept on demand (does a split pay?)")
    ap.add_argument("--hindsight", action="store_true",
                    help="also hold each method to the sweep's cheapest plan that holds the "
                         "floor on the fresh jobs themselves (a bound no rule choosing among "
                         "the sweep's plans can beat)")
    ap.add_argument("--picks-only", action="store_true",
                    help="compute and cache the policies' picks only (needs --cache)")
    args = ap.parse_args()
    start = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        if args.picks_only:  # the policies' picks alone, cached for a later run's report
            for name in args.policy.split(","):
                got = policy_cases(args, name, pool)
                print(f"policy {name}: picks of {len(got)} cases cached")
            return
        base = baselines(args, pool)
        print(f"baselines of {len(base)} held-out cases (indices {min(base)} to {max(base)}), "
              f"{args.seeds} jobs per choice, {args.fresh} fresh jobs per score: "
              f"{time.perf_counter() - start:.0f} s")
        grid = hind = None
        if args.grid:
            t0 = time.perf_counter()
            grid = grid_picks(args, sorted(base), pool)
            print(f"\n## grid search, {time.perf_counter() - t0:.0f} s\n")
            grid_report(base, grid)
            if args.split:
                print("\n## a share of each spot type on demand\n")
                split_report(args, grid, pool)
        if args.hindsight:
            t0 = time.perf_counter()
            hind = hindsight_picks(args, sorted(base), pool)
            print(f"\n## the sweep in hindsight, {time.perf_counter() - t0:.0f} s\n")
            print(f"the sweep's cheapest plan holding on the fresh jobs exists in "
                  f"{sum(h.holds for h in hind.values())}/{len(hind)} cases (its pick holds "
                  f"in {sum(base[i].holds for i in hind)})")
            if grid is not None:
                hindsight_report("grid search", {i: grid[i] for i in grid}, hind)
        for name in args.policy.split(","):
            t0 = time.perf_counter()
            got = policy_cases(args, name, pool)
            from heterps_sim.planner.learned.evaluate import CaseRow
            from heterps_sim.planner.learned.family import HELD_OUT_SEEDS, case
            rows = []
            for i in base:
                pp = got[i]
                problem, market = case(HELD_OUT_SEEDS + i)
                rows.append(CaseRow(index=i, layers=len(problem.layer_names),
                                    types=len(problem.type_names),
                                    probability=market.probability, baseline=base[i],
                                    alone=pp[0], searched=pp[1]))
            print(f"\n## policy {name}: {args.samples} sampled decisions, "
                  f"{time.perf_counter() - t0:.0f} s\n")
            report(rows)
            if hind is not None:
                hindsight_report(f"policy {name} alone", {i: got[i][0] for i in base}, hind)
                hindsight_report(f"policy {name} + search", {i: got[i][1] for i in base}, hind)


def report(rows) -> None:
    print("| case | L x M | p | baseline: plan | USD | holds | policy alone | USD | holds | "
          "policy + search | USD | holds | search / baseline |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ratio = r.searched.cost / r.baseline.cost if r.baseline.fresh is not None \
            and r.searched.fresh is not None else math.nan
        print(f"| {r.index} | {r.layers} x {r.types} | {r.probability:g} | {r.baseline.label} | "
              f"{r.baseline.cost:.4g} | {'yes' if r.baseline.holds else 'no'} | "
              f"{r.alone.decision.text()} | {r.alone.cost:.4g} | "
              f"{'yes' if r.alone.holds else 'no'} | {r.searched.decision.text()} | "
              f"{r.searched.cost:.4g} | {'yes' if r.searched.holds else 'no'} | {ratio:.3f} |")
    rng = np.random.default_rng(0)
    print()
    for key in ("alone", "searched"):
        held = sum(getattr(r, key).holds for r in rows)
        print(f"{key}: holds the floor on fresh jobs in {held}/{len(rows)} cases "
              f"(baseline {sum(r.baseline.holds for r in rows)}/{len(rows)})"
              + both_hold([(getattr(r, key), r.baseline) for r in rows], rng))
    walls = {k: np.median([getattr(r, k).wall_s for r in rows])
             for k in ("baseline", "alone", "searched")}
    print(f"median wall time to choose: baseline {walls['baseline']:.1f} s, policy alone "
          f"{walls['alone']:.2f} s, policy + search {walls['searched']:.1f} s")


if __name__ == "__main__":
    main()
