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

Every flag but --json is a field of heterps_exec.request.RunRequest, generated from it (its
name, default and docstring): this module parses the line into a RunRequest, calls
heterps_exec.api.run_plan and prints the result.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

METAVARS = {"scenario": "INPUT", "binding": "FILE|cpu", "out_dir": "DIR", "data_dir": "DIR",
            "checkpoint_dir": "DIR", "checkpoint_every": "N", "share": "equal|speed",
            "slow_replicas": "STAGE:REPLICA:F", "quantize": "MODE", "ps_shards": "S",
            "trace": "trace.json", "save_state": "PATH", "rdzv_endpoint": "HOST:PORT",
            "bind_addr": "ADDR", "timeout_s": "S", "run_timeout_s": "S",
            "fault": "RANK:STEP[:hang]", "overlap": "on|off", "optimizer": "sgd|adagrad",
            "ps_policy": "lru|lfu|paddle", "rdzv_id": "NAME"}
"""How --help names a flag's value where its type does not say enough (KIND)."""
KIND = {int: "N", float: "X", str: "TEXT"}
CLI_ONLY = {"json"}
"""Flags that are no RunRequest field: they shape what this command prints."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """One flag per RunRequest field (request.flag_of spells it), its help the field's
    docstring. Values go to the request as typed: it converts and checks them (a bad one is
    its one-line error, exit 2); a flag not given leaves the field's default."""
    from heterps_exec.request import RunRequest, flag_of
    for name, field in RunRequest.model_fields.items():
        help_ = " ".join((field.description or "").split()).replace("%", "%%")
        default = None if field.is_required() else field.get_default(call_default_factory=True)
        if default not in (None, "", (), {}) and not isinstance(default, bool):
            help_ += f" (default: {default})"
        if name == "plan":
            p.add_argument(name, metavar=flag_of(name), help=help_)
        elif field.default is True:  # a check that is on unless switched off
            p.add_argument(flag_of(name), dest=name, action="store_false",
                           default=argparse.SUPPRESS, help=help_)
        else:
            p.add_argument(flag_of(name), dest=name, required=field.is_required(),
                           metavar=METAVARS.get(name, KIND.get(field.annotation)),
                           default=argparse.SUPPRESS, help=help_,
                           action="append" if name == "slow_replicas" else "store")
    p.add_argument("--json", action="store_true", help="print the RunResult as JSON")


def request_of(args: argparse.Namespace):
    """The RunRequest of a parsed run line (raises ExecError naming a bad flag)."""
    from heterps_exec.request import RunRequest
    return RunRequest(**{k: v for k, v in vars(args).items() if k in RunRequest.model_fields})


def run(args) -> int:
    from heterps_exec.api import RunFailed, run_plan
    from heterps_sim.core.result import result_from_dict
    request = request_of(args)
    try:
        data = run_plan(request)
    except RunFailed as exc:
        print(exc, file=sys.stderr)
        return 1
    if data is None:
        print(f"node {request.node_rank}: ranks finished; the node that ran rank 0 reports "
              "the result", file=sys.stderr)
        return 0
    if args.json:
        print(json.dumps(data, indent=1))
        return 0
    print(_report(result_from_dict(data), request.steps))
    return 0


def _report(result, steps: int) -> str:
    from heterps_exec.calibration.prediction import prediction_lines
    from heterps_exec.data.report import data_lines
    if not result.extra.get("measured", True):  # nothing timed: no table, no comparison
        return "\n".join(x for x in (result.reason, data_lines(result),
                                     f"run folder: {_where(result)}") if x)
    return "\n".join(x for x in (_table(result, steps), data_lines(result),
                                 "\n".join(prediction_lines(result))) if x)


def _where(result) -> str:
    folder = result.extra["run_folder"]
    where = os.path.relpath(folder)
    return where if not where.startswith("..") else folder


def _table(result, steps: int) -> str:
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
             f"   final loss {result.extra['final_loss']:.4f}   steps {steps} "
             f"({result.extra['measured_steps']} measured)   ranks {result.extra['world_size']}",
             f"{'stage':>5} {'type':{w}} {'k':>3} {'slowdown':>8} {'compute ms':>10} "
             f"{'comm ms':>8} {'idle ms':>8}  layers"]
    for g, (s, e) in enumerate(zip(result.stages, result.extra["stages"], strict=True)):
        lines.append(f"{g:>5} {names[g]:{w}} {s.num_replicas:>3} {slow[g]:>8} "
                     f"{e['compute_s'] * 1e3:>10.2f} {e['communication_s'] * 1e3:>8.2f} "
                     f"{e['idle_s'] * 1e3:>8.2f}  {s.layers[0]}..{s.layers[-1]}")
    lines.append(f"run folder: {_where(result)}")
    return "\n".join(lines)
