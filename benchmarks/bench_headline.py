"""The paper's headline, honestly, on the shipped scenarios: heterogeneous vs single-type.

HeterPS reported 312.3% lower cost (the baseline pays ~4.1x) and 14.5x higher throughput than
state-of-the-art placements. Here, per scenario with a feasible optimum (heterps_sim/studies/headline.py):
  cost ratio        = best single-type plan's cost / exact optimum's cost (same limit);
  throughput ratio  = our throughput / the best single-type throughput bought with the same
                      money per hour (for each type, as many units as our $/hour pays for).
Usage: python benchmarks/bench_headline.py [--mode least|exact] [--model default|paper] [--json]
       [input ...]   (scenario YAMLs or problem JSONs; default: every shipped scenario)
(--model: the analytic model for every scenario; default: each scenario's costs.model)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from heterps_sim.inputs.load import load_input
from heterps_sim.studies.headline import headline as problem_headline

SCENARIOS = sorted(Path(__file__).resolve().parents[1].joinpath("scenarios").glob("*.yaml"))


def headline(path, mode: str, model: str | None) -> dict | None:
    row = problem_headline(load_input(path, model).problem, mode)
    return None if row is None else {"scenario": path.stem, **row}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["least", "exact"], default="least")
    ap.add_argument("inputs", nargs="*", type=Path, default=SCENARIOS)
    ap.add_argument("--model", choices=["default", "paper"], default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results = [(p.stem, headline(p, args.mode, args.model)) for p in args.inputs]
    rows = [r for _, r in results if r is not None]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'scenario':24s} {'ours $':>10s} {'1-type $':>10s} {'cost x':>8s} {'% less':>8s} "
          f"{'thr x @ same $/h':>17s}  single type bought")
    for name, r in results:
        if r is None:
            print(f"{name:24s} no feasible plan at the scenario's limit")
            continue
        print(f"{r['scenario']:24s} {r['ours_usd']:10.4g} {r['single_type_usd']:10.4g} "
              f"{r['cost_ratio']:8.2f} {r['pct_less']:8.1f} {r['throughput_ratio']:17.2f}  "
              f"{r['same_money_single_type']}")


if __name__ == "__main__":
    main()
