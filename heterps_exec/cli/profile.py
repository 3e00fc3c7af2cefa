"""Measure per-layer forward/backward time and gloo link speed on the devices at hand.

examples:
  heterps-exec profile --scenario S.yaml --as-type onprem-a10 --device cuda:0 --out traces
  heterps-exec profile --model tiny-ctr --device cpu
  heterps-exec profile --model ctr-dnn --table-scale 0.01 --batch 64,256,1024 --out traces/profiles

Writes OUT/<host>-<device>-<model>.csv, one row per layer x batch size, in the trace format
heterps-sim reads (model, layer, resource, batch_size, oct_s, odt_s; oct_s = forward +
backward on one unit) plus forward_s, backward_s, optimizer_s (one SGD update of the layer's
parameters), encode_s / decode_s (the boundary after
the layer, packed into and unpacked from the engine's wire format), device, threads, host,
torch version and date; and OUT/<host>-links.json: gloo loopback latency and bandwidth
between two ranks and all-reduce times for 2-6 ranks, timed in situ after compute (and back
to back, under "hot"; calibration/links.py; two or three minutes; skip with --no-links).
`--scenario S.yaml --as-type NAME` measures the scenario's own model (zoo, layers in YAML, or
a PyTorch module: each layer of the chain heterps derived, run as the engine runs it)
as resource type NAME, one of the scenario's types (calibration/target.py), into
OUT/<NAME>-<model>.csv: the scenario then uses those rows in place of the roofline (attach the
file to the type with `trace:` under cluster.define, or list it under profile.traces).
`--model NAME` measures a zoo model, labelled `--as-type` or `local-<device>`.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import time
from pathlib import Path

COLUMNS = ("model", "layer", "resource", "batch_size", "oct_s", "odt_s", "forward_s",
           "backward_s", "optimizer_s", "encode_s", "decode_s", "device", "threads", "host", "torch",
           "measured_at")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", default="", metavar="S.yaml",
                   help="measure this scenario's model (zoo, layers in YAML or a PyTorch module)")
    p.add_argument("--model", default="", help="a zoo model name (instead of --scenario)")
    p.add_argument("--device", default="cpu", help='"cpu" or "cuda:N"')
    p.add_argument("--batch", default="", help="comma-separated batch sizes (default: the "
                   "scenario's batch size, or 8,32,128,256 for --model)")
    p.add_argument("--table-scale", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=1, help="torch threads while timing")
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--as-type", "--resource", dest="as_type", default="", metavar="NAME",
                   help="the resource type the rows describe (with --scenario: one of its types)")
    p.add_argument("--out", default="traces/profiles", metavar="DIR")
    p.add_argument("--no-links", action="store_true", help="skip the gloo link measurement")
    p.add_argument("--json", action="store_true")


def _batches(text: str) -> list[int]:
    from heterps_exec.cli import ExecCliError
    try:
        out = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        out = []
    if not out or min(out) < 1:
        raise ExecCliError(f"--batch: expected positive integers like 8,64,256, got {text!r}")
    return out


def run(args) -> int:
    from heterps_exec.cli import ExecCliError
    if not (args.device == "cpu" or args.device.startswith("cuda:")):
        raise ExecCliError(f'--device: expected "cpu" or "cuda:N", got {args.device!r}')
    checks = [(1 <= args.repeats <= 10_000, f"--repeats: expected 1..10000, got {args.repeats}"),
              (1 <= args.threads <= 1024, f"--threads: expected 1..1024, got {args.threads}"),
              (math.isfinite(args.table_scale) and 0 < args.table_scale <= 1,
               f"--table-scale: expected a share in (0, 1], got {args.table_scale}")]
    for ok, message in checks:
        if not ok:
            raise ExecCliError(message)
    from heterps_sim.core.outputs import OutputError, check_target
    try:  # before minutes of measuring
        check_target(args.out, folder=True)
    except OutputError as exc:
        raise ExecCliError(f"--out: {exc}") from None
    import torch

    from heterps_exec.calibration.links import profile_links
    from heterps_exec.calibration.profiler import profile_layers
    from heterps_exec.calibration.target import profile_target
    from heterps_exec.calibration.user_profiler import UserTarget, profile_user_layers
    from heterps_exec.model.build import scale_tables
    from heterps_sim.core.outputs import atomic_write
    if args.device.startswith("cuda") and int(args.device[5:]) >= torch.cuda.device_count():
        raise ExecCliError(f"--device: {args.device} but this machine has "
                           f"{torch.cuda.device_count()} CUDA device(s)")
    graph, resource, batch = profile_target(scenario=args.scenario, model=args.model,
                                            as_type=args.as_type, device=args.device)
    batches = _batches(args.batch or (str(batch) if batch else "8,32,128,256"))
    user = isinstance(graph, UserTarget)  # a PyTorch module: its captured chain's layers
    if user and args.table_scale != 1:
        raise ExecCliError("--table-scale: applies to zoo and YAML models; a PyTorch "
                           "module's table sizes come from its model.kwargs")
    try:
        graph = graph if user else scale_tables(graph, args.table_scale)
    except ValueError as exc:
        raise ExecCliError(f"--table-scale: {exc}") from None
    from heterps_exec.cli.sizes import profile_problem
    too_big = profile_problem(graph.spec if user else graph.to_spec(), batches)  # before
    if too_big:                                                         # anything is allocated
        raise ExecCliError(too_big)
    torch.set_num_threads(args.threads)
    measure = profile_user_layers if user else profile_layers
    try:
        rows = measure(graph, batches=batches, device=args.device, repeats=args.repeats)
    except (MemoryError, RuntimeError) as exc:  # the estimate above is a planning figure
        if not isinstance(exc, MemoryError) and "allocate" not in str(exc):
            raise
        raise ExecCliError(f"{args.model or args.scenario}: ran out of memory while measuring "
                           "(nothing was written); pass a smaller --table-scale or --batch") \
            from None
    host = os.uname().nodename
    device_tag = args.device.replace(":", "")
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / (f"{resource}-{graph.name}.csv" if args.as_type else
                  f"{host}-{device_tag}-{graph.name}.csv")
    text = io.StringIO()
    w = csv.DictWriter(text, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({**r, "resource": resource, "oct_s": r["forward_s"] + r["backward_s"],
                    "odt_s": "", "host": host, "torch": torch.__version__, "measured_at": stamp})
    atomic_write(path, text.getvalue())  # core.outputs: whole or absent, fsynced
    links = None
    if not args.no_links:
        links = profile_links()
        atomic_write(out / f"{host}-links.json",
                     json.dumps({**links, "measured_at": stamp}, indent=1) + "\n")
    if args.json:
        print(json.dumps({"profile": str(path), "rows": len(rows), "links": links}, indent=1))
    else:
        print(f"{len(rows)} rows -> {path}")
        if links:
            hot = links["hot"]
            print(f"gloo loopback after {links['after_compute_s'] * 1e3:g} ms of compute: "
                  f"latency {links['latency_s'] * 1e6:.0f} us, "
                  f"{links['bytes_per_s'] / 1e9:.2f} GB/s (back to back: "
                  f"{hot['latency_s'] * 1e6:.0f} us, {hot['bytes_per_s'] / 1e9:.2f} GB/s) "
                  f"-> {out / f'{host}-links.json'}")
    return 0
