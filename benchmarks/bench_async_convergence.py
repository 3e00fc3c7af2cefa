"""What asynchrony costs in model quality: held-out log-loss and AUC after the same samples,
synchronous training against the async schedule's stale gradients (D = 1, 2, 4 steps).

    python benchmarks/bench_async_convergence.py --rows 60000 --steps 200

tiny-ctr on a Criteo-format sample (examples/make_criteo_sample.py, drawn from the seed) with
its last tenth held out. One `heterps-exec run` step writes the run spec (data section resolved
as the engine reads it); the training curves then come from the engine's single-process
oracle (heterps_exec/runtime/reference.py), which every async layout equals to 1e-5 in the
tests, so they are what the engine trains, without the pipeline's wall time. Prints one row
per (optimizer, lr, D) and the difference to D = 0.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from heterps_exec.cli import main as exec_main  # noqa: E402
from heterps_exec.data.criteo_sample import write_criteo_sample  # noqa: E402
from heterps_exec.data.score import score_holdout  # noqa: E402
from heterps_exec.runtime.layout import RunSpec  # noqa: E402
from heterps_exec.runtime.reference import train_reference  # noqa: E402


def _spec(work: Path, rows: int, seed: int) -> RunSpec:
    data = work / "criteo.tsv"
    write_criteo_sample(data, rows=rows, seed=seed)
    scenario = (ROOT / "scenarios" / "exec-tiny-criteo.yaml").read_text().replace(
        "../runs/criteo-sample.tsv", str(data))
    (work / "scenario.yaml").write_text(scenario)
    plan = {"format_version": 1, "num_microbatches": 4, "schedule": "async", "stages": [
        {"layers": ["input"] + [f"emb_{i}" for i in range(8)] + ["concat", "fc_0"],
         "resource": "xeon-icelake-16vcpu", "num_replicas": 1},
        {"layers": ["fc_1", "fc_2", "loss"], "resource": "xeon-icelake-16vcpu",
         "num_replicas": 1}]}
    (work / "plan.json").write_text(json.dumps(plan))
    code = exec_main(["run", str(work / "plan.json"), "--scenario", str(work / "scenario.yaml"),
                      "--steps", "1", "--out", str(work / "run"), "--seed", str(seed)])
    if code != 0:
        raise SystemExit(f"the one-step run failed ({code})")
    return RunSpec.load(work / "run" / "spec.json")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=60_000)
    p.add_argument("--steps", type=int, default=200, help="steps of 256 samples")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--staleness", default="0,1,2,4")
    args = p.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base = _spec(work, args.rows, args.seed)
        print(f"tiny-ctr, {args.rows:,} Criteo-format rows (seed {args.seed}, last 10% held "
              f"out), {args.steps} steps x {base.batch_size} samples")
        print(f"{'optimizer':>9} {'lr':>6} {'D':>2} {'train loss (last 20)':>21} "
              f"{'held-out log-loss':>18} {'AUC':>7} {'d log-loss':>11} {'d AUC':>8}")
        for optimizer, lr in (("sgd", 0.5), ("adagrad", 0.05)):
            first = None
            for d in (int(x) for x in args.staleness.split(",")):
                spec = replace(base, steps=args.steps, optimizer=optimizer, lr=lr)
                losses, state = train_reference(spec, staleness_steps=d)
                torch.save(state, work / "state.pt")
                score = score_holdout(spec, work / "state.pt")
                train = sum(losses[-20:]) / (20 * spec.batch_size)
                first = first or score
                print(f"{optimizer:>9} {lr:>6} {d:>2} {train:>21.4f} {score['log_loss']:>18.4f} "
                      f"{score['auc']:>7.4f} {score['log_loss'] - first['log_loss']:>+11.4f} "
                      f"{score['auc'] - first['auc']:>+8.4f}")


if __name__ == "__main__":
    main()
