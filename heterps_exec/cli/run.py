"""Run a plan for real: pipeline stages x data-parallel replicas, one torchrun rank each.

examples:
  heterps-exec run scenarios/plans/exec-tiny-pipeline.json --scenario scenarios/exec-tiny.yaml \
      --steps 30 --json
  heterps-exec run scenarios/plans/exec-tiny-pipeline.json --scenario scenarios/exec-tiny.yaml \
      --binding scenarios/bindings/emulated.yaml --trace trace.json
  heterps-exec run scenarios/plans/exec-tiny-pipeline.json --scenario scenarios/exec-tiny.yaml \
      --checkpoint-dir ckpt --checkpoint-every 5 --max-restarts 2
  # two machines (run on each, node rank 0 and 1; PLAN.json and SCENARIO.yaml are yours):
  heterps-exec run PLAN.json --scenario SCENARIO.yaml --nnodes 2 --node-rank 0 \
      --rdzv-endpoint host0:29400

The run folder (--out, default runs/exec-<time>) keeps the plan, the spec every rank read,
the generated data, torchrun's log, ranks.json (raw measurements), result.json and the trace.
Resuming: with --checkpoint-dir, a run starts from the directory's latest checkpoint, also
under a different plan (elastic re-planning). Exit 2: bad input (nothing started); 1: the run
failed (the log's tail is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("plan", metavar="PLAN.json")
    p.add_argument("--scenario", required=True, metavar="INPUT",
                   help="scenario YAML naming a zoo model (the plan's layers)")
    p.add_argument("--binding", default="cpu", metavar="FILE|cpu",
                   help="resource type -> device YAML, or 'cpu' (default: everything on the CPU)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="", metavar="DIR", help="run folder")
    p.add_argument("--data", default="", metavar="DIR",
                   help="an existing dataset folder (default: generate one in the run folder)")
    p.add_argument("--num-samples", type=int, default=0, help="size of a generated dataset")
    p.add_argument("--table-scale", type=float, default=1.0,
                   help="multiply every embedding table's rows (big zoo models on small hosts)")
    p.add_argument("--optimizer", choices=("sgd", "adagrad"), default="sgd")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--warmup-steps", type=int, default=1,
                   help="steps left out of the measured throughput")
    p.add_argument("--save-state", metavar="PATH", help="write the whole model's state dict")
    p.add_argument("--checkpoint-dir", default="", metavar="DIR")
    p.add_argument("--checkpoint-every", type=int, default=0, metavar="N")
    p.add_argument("--max-restarts", type=int, default=0)
    p.add_argument("--overlap", choices=("on", "off"), default="off",
                   help="all-reduce gradient buckets while the last backward still computes")
    p.add_argument("--share", default="equal", metavar="equal|speed",
                   help="split a stage's microbatches equally or by measured replica speed")
    p.add_argument("--slow-replica", action="append", default=[], metavar="STAGE:REPLICA:F",
                   help="emulate a slow unit: dilate that replica's compute by F (repeatable)")
    p.add_argument("--quantize", default="none", metavar="MODE",
                   help="boundary activations/gradients on the wire: none, fp16, bf16, int8, "
                   "or auto[:BOUND] (per link and step, the narrowest encoding whose relative "
                   "error stays within BOUND, default 0.01)")
    p.add_argument("--ps-shards", type=int, default=0, metavar="S",
                   help="serve the embedding tables from S parameter-server ranks (0: local)")
    p.add_argument("--ps-policy", default="lfu", help="PS hot-tier policy: lru, lfu, paddle")
    p.add_argument("--ps-hot-fraction", type=float, default=0.05,
                   help="PS hot-tier rows as a share of each table")
    p.add_argument("--trace", metavar="trace.json", help="Chrome/Perfetto trace of real spans")
    p.add_argument("--json", action="store_true", help="print the RunResult as JSON")
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--rdzv-endpoint", default="", metavar="HOST:PORT")
    p.add_argument("--rdzv-id", default="heterps")
    p.add_argument("--bind-addr", default="", metavar="ADDR",
                   help="several nodes: the address of this machine that the run listens on "
                   "(default: the --rdzv-endpoint host if it is this machine's)")
    p.add_argument("--rank-timeout", type=float, default=120.0, metavar="S",
                   help="a rank waiting longer than this on a peer fails the run")
    p.add_argument("--timeout", type=float, default=1800.0, metavar="S",
                   help="wall-clock limit of the whole run")
    p.add_argument("--no-capacity-check", dest="capacity_check", action="store_false",
                   help="launch even when the ranks' estimated memory exceeds what this "
                   "machine has available or there are more than 3 ranks per core")
    p.add_argument("--inject-fault", default="", metavar="RANK:STEP[:hang]",
                   help="testing: kill (or hang) that rank at the start of that step, on the "
                   "first attempt only")


def _fault(text: str) -> dict:
    from heterps_exec.cli import ExecCliError
    if not text:
        return {}
    parts = text.split(":")
    try:
        if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in ("kill", "hang")):
            raise ValueError
        return {"rank": int(parts[0]), "step": int(parts[1]),
                "mode": parts[2] if len(parts) == 3 else "kill"}
    except ValueError:
        raise ExecCliError(f"--inject-fault: expected RANK:STEP[:kill|hang], got {text!r}") from None


def _slow(text: str) -> tuple[int, int, float]:
    from heterps_exec.cli import ExecCliError
    from heterps_sim.core.hps import parse_slow_replica
    try:
        return parse_slow_replica(text)
    except ValueError as exc:
        raise ExecCliError(f"--slow-replica: {exc}") from None


def run(args) -> int:
    spec, problem, outcome = start(args)
    if outcome.returncode != 0:
        print(failure_text(outcome), file=sys.stderr)
        return 1
    if not (Path(spec.out_dir) / "ranks.json").exists():
        print(f"node {args.node_rank}: ranks finished; the node that ran rank 0 reports the "
              "result", file=sys.stderr)
        return 0
    return _report(args, spec, problem)


def failure_text(outcome) -> str:
    """What a failed run prints: why, and the last lines of torchrun's log."""
    why = "timed out" if outcome.timed_out else f"failed (exit {outcome.returncode})"
    return (f"heterps-exec run: {why} after {outcome.wall_s:.1f} s; last lines of "
            f"{outcome.log}:\n{outcome.tail()}")


def start(args):
    """Check `args` (the parsed run line), prepare the run folder and run torchrun to the end:
    (spec, problem, LaunchOutcome). Bad input raises a UserFileError before any rank starts.
    heterps_exec.api.run_plan calls this too, so Python runs are checked as the CLI's are."""
    from heterps_exec.cli import ExecCliError
    from heterps_exec.cli.run_flags import check_run_flags
    from heterps_exec.launch.bind_addr import chosen_bind_addr
    from heterps_exec.launch.dir_lock import hold
    from heterps_exec.launch.prepare import prepare
    from heterps_exec.launch.torchrun import LaunchOptions, launch
    from heterps_exec.request import RunRequest
    check_run_flags(args)  # launch flags and output paths: bad ones exit 2 before any work
    if args.nnodes > 1 and not args.rdzv_endpoint:
        raise ExecCliError("--nnodes > 1 needs --rdzv-endpoint HOST:PORT")
    slow = tuple(_slow(x) for x in args.slow_replica)
    # RunRequest and prepare raise UserFileError (bad input), which `main` reports
    req = RunRequest(plan=args.plan, scenario=args.scenario, binding=args.binding,
                     steps=args.steps, seed=args.seed, out_dir=args.out, data_dir=args.data,
                     num_samples=args.num_samples, table_scale=args.table_scale,
                     optimizer=args.optimizer, lr=args.lr, warmup_steps=args.warmup_steps,
                     timeout_s=args.rank_timeout, checkpoint_dir=args.checkpoint_dir,
                     checkpoint_every=args.checkpoint_every,
                     save_state=bool(args.save_state), trace=bool(args.trace),
                     overlap=args.overlap == "on", share=args.share, slow_replicas=slow,
                     quantize=args.quantize, ps_shards=args.ps_shards,
                     ps_policy=args.ps_policy, ps_hot_fraction=args.ps_hot_fraction,
                     fault=_fault(args.inject_fault),
                     capacity_check=args.capacity_check)
    opts = LaunchOptions(nnodes=args.nnodes, node_rank=args.node_rank,
                         rdzv_endpoint=args.rdzv_endpoint, rdzv_id=args.rdzv_id,
                         bind_addr=chosen_bind_addr(getattr(args, "bind_addr", ""), args.nnodes,
                                                    args.rdzv_endpoint),
                         max_restarts=args.max_restarts, timeout_s=args.timeout)
    # one run per checkpoint directory (node 0 holds it for all the run's nodes)
    with hold(args.checkpoint_dir if args.node_rank == 0 else "") as lock:
        spec, problem = prepare(req, nnodes=args.nnodes)
        outcome = launch(spec, opts, keep_fds=lock.fds if lock else ())
    return spec, problem, outcome


def _report(args, spec, problem) -> int:
    from heterps_exec.calibration.prediction import prediction_lines
    from heterps_exec.data.report import data_lines
    result = finish(args, spec, problem)
    if args.json:
        print(json.dumps(result.to_json_dict(), indent=1))
    elif not result.extra.get("measured", True):  # nothing timed: no table, no comparison
        where = os.path.relpath(spec.out_dir)
        print("\n".join(x for x in (result.reason, data_lines(result),
                                     f"run folder: {where if not where.startswith('..') else spec.out_dir}") if x))
    else:
        print("\n".join(x for x in (_table(result, spec), data_lines(result),
                                     "\n".join(prediction_lines(result))) if x))
    return 0


def finish(args, spec, problem):
    """The finished run's RunResult (measured, data counts and held-out scores, both
    predictions), written to the run folder with its trace and state as `args` asks."""
    from heterps_exec.calibration.prediction import predict, with_prediction
    from heterps_exec.data.report import data_report
    from heterps_exec.runtime.measure import exec_result, exec_spans, load_ranks
    from heterps_sim.core.outputs import mark_complete, write_via
    from heterps_sim.core.result import save_result
    from heterps_sim.core.trace import save_trace
    parts = load_ranks(spec)
    result = exec_result(spec, problem, parts)
    data_report(spec, parts, result)  # reader counts, held-out log-loss and AUC
    result = with_prediction(result, predict(spec, problem))  # analytic and simulator, beside
    out = Path(spec.out_dir)
    save_result(result, out / "result.json")
    if args.trace:
        save_trace(exec_spans(spec, parts), args.trace,
                   {"source": "exec", "plan": spec.plan, "emulated": result.extra["emulated"]})
    if args.save_state:
        write_via(args.save_state, lambda tmp: shutil.copyfile(out / "state.pt", tmp))
    mark_complete(out, "exec-run")  # last: the folder holds every file of the run
    return result


def _table(result, spec) -> str:
    emulated = result.extra["emulated"]
    slow = result.extra["slowdowns"]
    names = [(s.label if s.replicas else s.resource)
             + (" (emulated)" if any(t in emulated for t, _ in s.replicas or [(s.resource, 0)])
                else "") for s in result.stages]
    per_replica = result.extra.get("replica_slowdowns") or [[x] for x in slow]
    slow = ["/".join(f"{x:.2f}" for x in dict.fromkeys(r)) if s.replicas else f"{x:.2f}"
            for s, r, x in zip(result.stages, per_replica, slow, strict=True)]
    w = max(len(n) for n in [*names, "type"])
    lines = [f"throughput {result.throughput:,.0f} samples/s   step {result.step_time_s * 1e3:.1f} ms"
             f"   final loss {result.extra['final_loss']:.4f}   steps {spec.steps} "
             f"({result.extra['measured_steps']} measured)   ranks {result.extra['world_size']}",
             f"{'stage':>5} {'type':{w}} {'k':>3} {'slowdown':>8} {'compute ms':>10} "
             f"{'comm ms':>8} {'idle ms':>8}  layers"]
    for g, (s, e) in enumerate(zip(result.stages, result.extra["stages"], strict=True)):
        lines.append(f"{g:>5} {names[g]:{w}} {s.num_replicas:>3} {slow[g]:>8} "
                     f"{e['compute_s'] * 1e3:>10.2f} {e['communication_s'] * 1e3:>8.2f} "
                     f"{e['idle_s'] * 1e3:>8.2f}  {s.layers[0]}..{s.layers[-1]}")
    where = os.path.relpath(spec.out_dir)
    lines.append(f"run folder: {where if not where.startswith('..') else spec.out_dir}")
    return "\n".join(lines)
