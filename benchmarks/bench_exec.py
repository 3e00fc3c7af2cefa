"""Execution engine benchmarks, all measured in this one run:

1. Overhead per microbatch per stage boundary on loopback gloo, heterps' runtime vs torch's
   stock pipelining runtime (hand-built PipelineStage + Schedule1F1B) on the same 2-stage
   tiny-ctr split, same microbatches (32 of 8 samples: compute is almost nothing):
       overhead = (step time - busiest stage's own compute) / (m + S - 1)
   where a stage's compute is timed in one process on the same microbatches (forward +
   backward, 1 thread): what remains is what the runtime adds per pipeline slot.
2. Pipeline efficiency: the most balanced 2-stage ctr-dnn plan (tables scaled to 1%, 16
   microbatches of 256 samples: ~10 ms of compute each) -> measured throughput / the bottleneck stage's bound
   (batch / that stage's measured compute per step).
3. The same 2-stage plan vs single-process training of the whole model (1 and 2 threads).
4. Speed-aware sharing: ctr-dnn on one stage of 2 replicas, one emulated 2x slower
   (--slow-replica), step time with the equal split / with --share speed, and the
   simulator's prediction of that ratio.

    python benchmarks/bench_exec.py [--steps N] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
from exec_cli import run_exec  # noqa: E402

from heterps_exec.data import BatchStream  # noqa: E402
from heterps_exec.model.build import build_model  # noqa: E402
from heterps_exec.model.partition import boundary_after, stage_model  # noqa: E402
from heterps_exec.model.spec_graph import graph_for  # noqa: E402
from heterps_exec.runtime.layout import RunSpec, microbatch_bounds  # noqa: E402
from heterps_exec.runtime.worker import make_optimizer  # noqa: E402

CPU = "xeon-icelake-16vcpu"


def _scenario(path: Path, model: str, batch: int) -> str:
    path.write_text(f"name: bench-{model}\nmodel: {{name: {model}}}\n"
                    f"cluster: {{types: [{CPU}]}}\n"
                    f"workload: {{batch_size: {batch}, throughput_limit: 1000, "
                    f"num_samples: 1.0e+6}}\n")
    return str(path)


def _plan(path: Path, layers: list[str], cut: int | None, m: int, schedule: str = "1f1b") -> str:
    parts = [layers] if cut is None else [layers[:cut], layers[cut:]]
    path.write_text(json.dumps({"stages": [{"layers": p, "resource": CPU, "num_replicas": 1}
                                           for p in parts],
                                "num_microbatches": m, "schedule": schedule}))
    return str(path)


def _engine(plan: str, scenario: str, out: Path, steps: int, *extra: str) -> dict:
    code, stdout, err = run_exec("run", plan, "--scenario", scenario, "--steps", str(steps),
                                 "--warmup-steps", str(max(1, steps // 5)), "--out", str(out),
                                 "--json", *extra)
    if code:
        raise SystemExit(f"engine run failed: {err}")
    return json.loads(stdout)


def _stage_compute(spec: RunSpec, repeats: int = 5) -> list[float]:
    """Seconds of forward + backward per step for each stage, one process, one thread."""
    torch.set_num_threads(1)
    graph = graph_for(spec)
    plan = spec.plan_obj()
    whole = build_model(graph, seed=spec.seed)
    batch = {k: torch.from_numpy(v) for k, v in
             BatchStream(spec.data_dir, batch_size=spec.batch_size).batch(0).items()}
    envs = [{k: v[lo:hi] for k, v in batch.items()}
            for lo, hi in microbatch_bounds(spec.batch_size, plan.num_microbatches)]
    out = []
    for g, stage in enumerate(plan.stages):
        part = stage_model(graph, stage.layers, seed=spec.seed)
        inputs = []
        with torch.no_grad():
            for env in envs:
                for layer in plan.layer_names[:plan.layer_names.index(stage.layers[0])]:
                    env = {**env, **getattr(whole, layer).run(env)}
                if g:
                    b = boundary_after(graph, plan.stages[g - 1].layers[-1])
                    env, _ = b.decode(b.encode(env)[0])
                inputs.append(env)
        last = g == len(plan.stages) - 1
        nxt = None if last else boundary_after(graph, stage.layers[-1])
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for env in inputs:
                res, loss = part(env)
                if last:
                    (loss / spec.batch_size).backward()
                else:
                    grad_out = nxt.encode(res)[1]
                    grad_out.backward(torch.ones_like(grad_out))
            times.append(time.perf_counter() - t0)
        out.append(statistics.median(times))
    return out


def _single_process(spec: RunSpec, threads: int, steps: int) -> float:
    """Samples/s of plain training of the whole model on the same batches."""
    torch.set_num_threads(threads)
    model = build_model(graph_for(spec), seed=spec.seed)
    opt = make_optimizer(spec, model)
    stream = BatchStream(spec.data_dir, batch_size=spec.batch_size, seed=spec.seed)
    times = []
    for step in range(steps):
        batch = {k: torch.from_numpy(v) for k, v in stream.batch(step).items()}
        t0 = time.perf_counter()
        _, loss = model(batch)
        (loss / spec.batch_size).backward()
        opt.step()
        opt.zero_grad()
        times.append(time.perf_counter() - t0)
    warm = max(1, steps // 5)
    return spec.batch_size / statistics.mean(times[warm:])


def _stock_step(spec_path: Path, steps: int) -> float:
    out = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
         str(ROOT / "benchmarks" / "exec_stock_pipeline.py"), str(spec_path), str(steps)],
        capture_output=True, text=True, timeout=600, cwd=ROOT)
    if out.returncode:
        raise SystemExit(f"stock pipelining baseline failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["step_s"]


def overhead(tmp: Path, steps: int) -> dict:
    from heterps_sim.inputs.zoo import get_model
    layers = [la.name for la in get_model("tiny-ctr").layers]
    m = 32
    scn = _scenario(tmp / "tiny.yaml", "tiny-ctr", 8 * m)
    res = {"microbatches": m, "microbatch_samples": 8}
    for schedule in ("gpipe", "1f1b"):
        plan = _plan(tmp / f"tiny-{schedule}.json", layers, layers.index("concat") + 1, m,
                     schedule)
        ours = _engine(plan, scn, tmp / schedule, steps)
        spec_path = tmp / schedule / "spec.json"
        compute = _stage_compute(RunSpec.load(spec_path))
        stock = _stock_step(spec_path, steps)
        slots = m + 2 - 1
        res[schedule] = {
            "stage_compute_ms": [c * 1e3 for c in compute],
            "ours_step_ms": ours["step_time_s"] * 1e3, "stock_step_ms": stock * 1e3,
            "ours_overhead_ms": (ours["step_time_s"] - max(compute)) / slots * 1e3,
            "stock_overhead_ms": (stock - max(compute)) / slots * 1e3}
    return res


def _balanced_cut(tmp: Path, layers: list[str], scn: str, m: int) -> tuple[int, list[float]]:
    """The 2-stage cut whose slower stage computes least (timed in one process)."""
    from heterps_exec.launch.prepare import prepare
    from heterps_exec.request import RunRequest
    best = None
    for name in ("concat", "fc_0", "fc_1", "fc_2"):
        cut = layers.index(name) + 1
        plan = _plan(tmp / f"cut-{name}.json", layers, cut, m)
        spec, _ = prepare(RunRequest(plan=plan, scenario=scn, out_dir=str(tmp / f"cut-{name}"),
                                     table_scale=0.01, steps=2))
        compute = _stage_compute(spec, repeats=2)
        if best is None or max(compute) < max(best[1]):
            best = (cut, compute)
    return best


def efficiency(tmp: Path, steps: int) -> dict:
    from heterps_sim.inputs.zoo import get_model
    layers = [la.name for la in get_model("ctr-dnn").layers]
    m, batch = 16, 4096
    scn = _scenario(tmp / "ctr.yaml", "ctr-dnn", batch)
    cut, _ = _balanced_cut(tmp, layers, scn, m)
    plan = _plan(tmp / "ctr2.json", layers, cut, m)
    res = _engine(plan, scn, tmp / "ctr2", steps, "--table-scale", "0.01")
    spec = RunSpec.load(tmp / "ctr2" / "spec.json")
    compute = [s["compute_s"] for s in res["extra"]["stages"]]
    bound = batch / max(compute)
    single = {t: _single_process(spec, t, steps) for t in (1, 2)}
    return {"cut_after": layers[cut - 1], "microbatch_samples": batch // m,
            "microbatch_compute_ms": [c / m * 1e3 for c in compute],
            "throughput": res["throughput"], "bottleneck_bound": bound,
            "efficiency": res["throughput"] / bound,
            "single_process_1_thread": single[1], "single_process_2_threads": single[2],
            "speedup_vs_1_thread": res["throughput"] / single[1],
            "speedup_vs_2_threads": res["throughput"] / single[2]}


def speed_sharing(tmp: Path, steps: int, rounds: int = 3) -> dict:
    """One stage of two replicas, one emulated 2x slower: equal split vs speed-aware (engine),
    and the simulator's prediction of the same ratio."""
    from heterps_sim.core.plan import Plan, Stage
    from heterps_sim.des import DesOptions, simulate
    from heterps_sim.inputs.zoo import get_model
    from heterps_sim.testing import chain_problem
    layers = [la.name for la in get_model("ctr-dnn").layers]
    m, batch = 12, 1536
    scn = _scenario(tmp / "share.yaml", "ctr-dnn", batch)
    path = tmp / "share.json"
    path.write_text(json.dumps({"stages": [{"layers": layers, "resource": CPU,
                                            "num_replicas": 2}],
                                "num_microbatches": m, "schedule": "gpipe"}))
    # This VM's speed drifts by 2x over seconds: interleave the variants, take medians.
    runs: dict[str, list[float]] = {"equal": [], "speed": [], "all": []}
    for rnd in range(rounds):
        for name, flags in (("equal", ["--share", "equal"]), ("speed", ["--share", "speed"]),
                            ("all", ["--share", "speed", "--overlap", "on"])):
            res = _engine(str(path), scn, tmp / f"share-{name}-{rnd}", steps, "--table-scale",
                          "0.01", "--slow-replica", "0:1:2", *flags)
            runs[name].append(res["step_time_s"])
    step = {name: statistics.median(v) for name, v in runs.items()}
    ratios = [e / s for e, s in zip(runs["equal"], runs["speed"], strict=True)]
    p = chain_problem([1.0], batch_size=batch)
    plan = Plan(stages=(Stage(layers=("l0",), resource="t", num_replicas=2),),
                num_microbatches=m, schedule="gpipe")
    des = {share: simulate(p, plan, options=DesOptions(
        effects="bubbles", share=share, slow_replicas=((0, 1, 2.0),), num_steps=6)).result
        .throughput for share in ("equal", "speed")}
    return {"equal_step_ms": step["equal"] * 1e3, "speed_step_ms": step["speed"] * 1e3,
            "speed_overlap_step_ms": step["all"] * 1e3,
            "rounds": rounds, "ratio_per_round": ratios,
            "ratio": step["equal"] / step["speed"], "ratio_with_overlap":
            step["equal"] / step["all"], "des_ratio": des["speed"] / des["equal"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        res = {"overhead": overhead(Path(d), args.steps),
               "efficiency": efficiency(Path(d), max(6, args.steps // 2)),
               "sharing": speed_sharing(Path(d), max(6, args.steps // 2))}
    if args.json:
        print(json.dumps(res, indent=1))
        return
    o, e = res["overhead"], res["efficiency"]
    print(f"boundary overhead per microbatch ({o['microbatches']} x {o['microbatch_samples']} "
          f"samples, 2 stages, gloo loopback):")
    for schedule in ("gpipe", "1f1b"):
        r = o[schedule]
        print(f"  {schedule:5s} heterps {r['ours_overhead_ms']:.3f} ms (step "
              f"{r['ours_step_ms']:.1f} ms)   stock pipelining {r['stock_overhead_ms']:.3f} ms "
              f"(step {r['stock_step_ms']:.1f} ms)   stock/heterps "
              f"{r['stock_overhead_ms'] / r['ours_overhead_ms']:.2f}x   stage compute "
              f"{', '.join(f'{c:.1f}' for c in r['stage_compute_ms'])} ms/step")
    print(f"pipeline efficiency (ctr-dnn cut after {e['cut_after']}, 2 stages, microbatch compute "
          f"{', '.join(f'{c:.1f}' for c in e['microbatch_compute_ms'])} ms): "
          f"{e['throughput']:,.0f} / {e['bottleneck_bound']:,.0f} samples/s = {e['efficiency']:.3f}")
    sh = res["sharing"]
    print(f"speed-aware sharing (2 replicas, one 2x slower, 12 microbatches): step "
          f"{sh['equal_step_ms']:.1f} ms equal / {sh['speed_step_ms']:.1f} ms by speed = "
          f"{sh['ratio']:.2f}x (simulator: {sh['des_ratio']:.2f}x); with --overlap on too "
          f"{sh['speed_overlap_step_ms']:.1f} ms = {sh['ratio_with_overlap']:.2f}x (medians of "
          f"{sh['rounds']} interleaved rounds; per round "
          f"{', '.join(f'{r:.2f}' for r in sh['ratio_per_round'])}x)")
    print(f"2-stage plan vs single process: {e['speedup_vs_1_thread']:.2f}x (1 thread, "
          f"{e['single_process_1_thread']:,.0f}/s), {e['speedup_vs_2_threads']:.2f}x "
          f"(2 threads, {e['single_process_2_threads']:,.0f}/s)")


if __name__ == "__main__":
    main()
