"""`heterps-sim schedule` on a 20-layer user model, cold and warm capture cache (goal: warm <= 5 s).

    python benchmarks/bench_capture_cache.py [--repeats 3] [--scenario PATH]

Each repeat runs the command as a user does (a fresh process, `--quiet`), under its own
capture cache (HETERPS_CACHE_DIR in a temporary folder): cold, the folder empty (import
torch, build, torch.export, measure each layer, write the entry); then warm, the same folder
(read the entry, torch never imported). Beside them: "before", what every run cost before
grouping and the cache (the same model with `layers: leaf`, 57 layers, and
HETERPS_CAPTURE_CACHE=0), and `schedule` on a zoo scenario (scenarios/exec-tiny.yaml): the
command with no user model at all. The numba kernels are compiled by a first run before the
repeats, so no row pays for that. Prints, per row, the median and every run's wall time, and
the median CPU time of the process (user + system: what other jobs on a shared machine
inflate least).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = "tests/fixtures/ctr_models/deep20.yaml"
ZOO = "scenarios/exec-tiny.yaml"
GOAL_S = 5.0


def timed(scenario: str, cache: str, off: bool = False) -> tuple[float, float]:
    """(wall s, CPU s) of one `heterps-sim schedule` process (a failure stops the benchmark)."""
    env = {**os.environ, "HETERPS_CACHE_DIR": cache}
    env.pop("HETERPS_CAPTURE_CACHE", None)
    if off:
        env["HETERPS_CAPTURE_CACHE"] = "0"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "heterps_sim.cli", "schedule", scenario, "--quiet"],
                   cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def leaf_copy(scenario: str, folder: str) -> str:
    """The scenario with `model.layers: leaf` (one layer per leaf module, as before)."""
    doc = yaml.safe_load((ROOT / scenario).read_text())
    doc["model"]["layers"] = "leaf"
    path = Path(folder) / "leaf.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def layers_of(scenario: str) -> int:
    from heterps_sim.inputs.load import load_input
    return load_input(ROOT / scenario).problem.num_layers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--scenario", default=SCENARIO)
    args = ap.parse_args()
    rows: dict[str, list[tuple[float, float]]] = {"before": [], "cold": [], "warm": [], "zoo": []}
    with tempfile.TemporaryDirectory() as scratch:
        timed(ZOO, scratch)  # numba's kernels compiled (or loaded) once, for every row
        leaf = leaf_copy(args.scenario, scratch)
        for k in range(args.repeats):
            cache = str(Path(scratch) / f"cache-{k}")
            rows["before"].append(timed(leaf, cache, off=True))
            rows["cold"].append(timed(args.scenario, cache))
            rows["warm"].append(timed(args.scenario, cache))
            rows["zoo"].append(timed(ZOO, cache))
        layers = layers_of(args.scenario), layers_of(leaf)
    print(f"heterps-sim schedule {args.scenario} --quiet: {layers[0]} layers, {layers[1]} "
          f"with layers: leaf ({platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()})")
    labels = {"before": "before (leaf, no cache)", "cold": "cold (empty cache)",
              "warm": "warm (cache hit)", "zoo": f"zoo ({Path(ZOO).name})"}
    for key, label in labels.items():
        wall = [w for w, _ in rows[key]]
        cpu = statistics.median(c for _, c in rows[key])
        runs = ", ".join(f"{t:.2f}" for t in wall)
        print(f"  {label:24s} median {statistics.median(wall):6.2f} s  CPU {cpu:6.2f} s"
              f"   runs: {runs}")
    warm = statistics.median(w for w, _ in rows["warm"])
    cold = statistics.median(w for w, _ in rows["cold"])
    print(f"goal: warm <= {GOAL_S:g} s -> {'met' if warm <= GOAL_S else 'NOT met'} "
          f"(cold / warm {cold / warm:.1f}x)")


if __name__ == "__main__":
    main()
