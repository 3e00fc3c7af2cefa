"""Trade-off sweep speed: 50 limits x every registered fast scheduler on a 64-type scenario.

Goal: <= 120 s on the 2-core development machine. Times the library call that
`heterps-sim tradeoff` makes (range search + sweep; figures and files excluded, reported
apart) and prints one line per scenario.
Usage: python benchmarks/bench_tradeoff.py [--points 50] [--jobs 2] [--mode exact|least]
       [--budget 2000] [scenario.yaml ...]   (default: scenarios/ctr-dnn-64types.yaml)
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from heterps_sim.inputs.load import load_input
from heterps_sim.studies.sweep import SweepSpec, choose_limits, fast_schedulers, run_sweep
from heterps_sim.studies.sweep_files import sweep_meta, write_sweep

ROOT = Path(__file__).resolve().parents[1]
GOAL_S = 120.0


def bench(path: Path, points: int, jobs: int, mode: str, budget: int) -> None:
    loaded = load_input(path)
    start = time.perf_counter()
    limits, how = choose_limits(loaded.problem, None, points, mode)
    ranged = time.perf_counter()
    spec = SweepSpec(schedulers=tuple(fast_schedulers()), limits=limits, mode=mode, budget=budget)
    result = run_sweep(loaded.problem, spec, jobs=jobs, progress=False)
    total = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        write_sweep(Path(tmp), loaded, result, sweep_meta(loaded, spec, result, how, Path(tmp), jobs))
        files_s = time.perf_counter() - t
    frame = result.frame
    print(f"{path.stem}: {len(limits)} limits x {len(spec.schedulers)} schedulers "
          f"({', '.join(spec.schedulers)}), {mode} provisioning, budget {budget}, {jobs} jobs: "
          f"{total:.1f} s (range search {ranged - start:.1f} s) "
          f"[goal <= {GOAL_S:.0f} s: {'met' if total <= GOAL_S else 'MISSED'}]; "
          f"{int(frame['feasible'].sum())}/{len(frame)} points feasible; "
          f"files + 6 figures {files_s:.1f} s")
    per = frame.groupby("scheduler", sort=False)["wall_s"].sum()
    print("  scheduler seconds (summed over points): "
          + ", ".join(f"{name} {s:.1f}" for name, s in per.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="*", type=Path,
                    default=[ROOT / "scenarios" / "ctr-dnn-64types.yaml"])
    ap.add_argument("--points", type=int, default=50)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--mode", choices=["least", "exact"], default="exact")
    ap.add_argument("--budget", type=int, default=2000)
    args = ap.parse_args()
    for path in args.scenarios:
        bench(path, args.points, args.jobs, args.mode, args.budget)


if __name__ == "__main__":
    main()
