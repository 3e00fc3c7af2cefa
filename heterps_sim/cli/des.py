"""The simulator's flags and commands: `evaluate --engine des` and `effects` (what the analytic
model misses, studies/effects.py).

The flags become one typed `DesOptions` here, in `des_options`; nothing below the CLI sees the
argparse Namespace. Kept apart from the analytic commands so they never import simpy.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from heterps_sim.cli.common import (
    EXIT_INFEASIBLE,
    add_input,
    dump,
    load,
    run_scheduler,
    schedule_settings,
    scheduler_flag,
)
from heterps_sim.core.files import UserFileError
from heterps_sim.core.flags import number
from heterps_sim.core.hps import parse_slow_replica
from heterps_sim.core.limits import MAX_BATCH, MAX_MICROBATCHES, MAX_SIM_STEPS
from heterps_sim.tiers import POLICIES

MAX_PS_ROWS = 200_000_000
"""Rows of the replayed table. The replay keeps per-row state for the table (a few bytes a
row) and a generated Zipf stream draws over every row (about 24 bytes a row while it is
drawn: ~5 GB here); a stream file's largest id sets its rows when --ps-rows is unset."""
MAX_PS_IDS = 100_000_000
"""Ids of a generated stream (8 bytes each in memory)."""
MAX_ZIPF = 100.0
"""Largest Zipf exponent of generated ids (at 100 every id is row 0 already)."""


class EffectsError(UserFileError):
    """A bad simulator flag (an unknown effect, a bad --ps-* or --slow-replica value)."""


def parse_effects(text: str | None) -> frozenset[str]:
    """"none" | "all" | a comma list of effect names (des.parse_effects), as CLI input."""
    from heterps_sim.des import parse_effects as parse
    try:
        return parse(text)
    except ValueError as exc:
        raise EffectsError(f"--effects: {exc}") from None


def _effects_flag(text: str) -> str:
    """argparse `type=` of --effects: the text, once its names are known ones (checked while
    the line is parsed, whichever engine then runs: the analytic one ignores the flag)."""
    from heterps_sim.des import parse_effects as parse
    try:
        parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _ps_stream_flag(path: str) -> str:
    """argparse `type=` of --ps-stream: a readable 1-D integer .npy array of at most
    MAX_PS_IDS ids (its header only: the ids' own bounds are checked when it is replayed)."""
    import numpy as np
    try:
        with open(path, "rb") as fh:
            magic = fh.read(len(np.lib.format.MAGIC_PREFIX))
        ids = (np.load(path, mmap_mode="r", allow_pickle=False)
               if magic == np.lib.format.MAGIC_PREFIX else None)
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise argparse.ArgumentTypeError(f"{path}: cannot read a .npy array ({why})") from None
    if ids is None:
        raise argparse.ArgumentTypeError(f"{path}: not a .npy file (numpy.save writes one)")
    if not isinstance(ids, np.ndarray) or ids.ndim != 1 or ids.dtype.kind not in "iu" or not ids.size:
        raise argparse.ArgumentTypeError(f"{path}: expected a non-empty 1-D integer array")
    if ids.size > MAX_PS_IDS:
        raise argparse.ArgumentTypeError(f"{path}: {ids.size:,} ids, more than the "
                                         f"{MAX_PS_IDS:,} a replay takes")
    return path


def add_des_arguments(p: argparse.ArgumentParser, *, effects: bool = True) -> None:
    p.add_argument("--schedule", choices=["gpipe", "1f1b", "async"],
                   help="des: microbatch schedule (default: the plan's)")
    p.add_argument("--microbatches", type=number(int, 1, MAX_MICROBATCHES), help="des: microbatches per step")
    p.add_argument("--steps", type=number(int, 1, MAX_SIM_STEPS), help="des: training steps to simulate")
    if effects:
        p.add_argument("--effects", type=_effects_flag,
                       help="des: none | all | comma list (e.g. bubbles,allreduce)")
    p.add_argument("--seed", type=int, default=0, help="des: seed of the variability effects")
    h = p.add_argument_group("H-PS features", "des: as the engine's flags of the same names")
    h.add_argument("--share", choices=["equal", "speed"],
                   help="split a stage's microbatches equally or by replica speed")
    h.add_argument("--slow-replica", action="append", default=[], metavar="STAGE:REPLICA:F",
                   help="a unit slower by factor F (repeatable)")
    h.add_argument("--overlap", choices=["on", "off"], help="all-reduce during the last backward")
    h.add_argument("--quantize", choices=["none", "fp16", "bf16", "int8"],
                   help="boundary activations and gradients on the wire")
    g = p.add_argument_group(
        "ps hit rates", "des, effect ps: take the tier hit rates from replaying an id stream "
        "through the PS's own policy code (heterps_sim.tiers.replay), e.g. --effects ps "
        "--ps-policy lfu --ps-hot-fraction 0.05 --ps-zipf 1.05")
    g.add_argument("--ps-policy", choices=POLICIES,
                   help="hot-tier policy to replay (default: keep the fixed hit rates)")
    g.add_argument("--ps-hot-fraction", type=number(float, 0, 1), default=0.05,
                   help="hot-tier rows as a share of the table (default 0.05)")
    g.add_argument("--ps-warm-fraction", type=number(float, 0, 1), default=0.20,
                   help="warm RAM tier rows as a share of the table (default 0.20)")
    g.add_argument("--ps-zipf", type=number(float, 0, MAX_ZIPF, above=True), default=1.05,
                   help="Zipf exponent of the generated ids (default 1.05)")
    g.add_argument("--ps-rows", type=number(int, 1, MAX_PS_ROWS), default=None,
                   help="table rows (default 1,000,000; with --ps-stream, its largest id + 1)")
    g.add_argument("--ps-ids", type=number(int, 1, MAX_PS_IDS), default=1_000_000,
                   help="length of the generated stream (default 1,000,000 ids)")
    g.add_argument("--ps-batch", type=number(int, 1, MAX_BATCH), default=4096,
                   help="ids per PS request: the replay de-duplicates per batch (default 4096)")
    g.add_argument("--ps-stream", metavar="FILE.npy", type=_ps_stream_flag,
                   help="replay these ids (a 1-D integer .npy array) instead of Zipf ones")


def des_options(args, effects: frozenset[str] | None = None):
    """The simulator flags -> `DesOptions` (the one conversion). `effects` replaces --effects
    (the effects command has no such flag). Bad flags raise EffectsError, values the options
    reject a UserFileError naming the fields."""
    from pydantic import ValidationError

    from heterps_sim.core.files import validation_message
    from heterps_sim.des import DesOptions
    fields: dict = {"effects": parse_effects(args.effects) if effects is None else effects}
    if args.schedule:
        fields["schedule"] = args.schedule
    if args.microbatches is not None:
        fields["num_microbatches"] = args.microbatches
    if args.steps is not None:
        fields["num_steps"] = args.steps
    if getattr(args, "ps_policy", None):
        fields["ps"] = replayed_ps_options(args)
    if args.share:
        fields["share"] = args.share
    if args.slow_replica:
        fields["slow_replicas"] = tuple(_slow_replica(text) for text in args.slow_replica)
    if args.overlap:
        fields["overlap"] = args.overlap == "on"
    if args.quantize:
        fields["quantize"] = args.quantize
    try:
        return DesOptions(**fields)
    except ValidationError as exc:
        raise UserFileError(validation_message("simulator options", exc)) from None


def _slow_replica(text: str) -> tuple[int, int, float]:
    """--slow-replica STAGE:REPLICA:F, read by the one parser the engine's flag uses too."""
    try:
        stage, replica, factor = parse_slow_replica(text)
    except ValueError as exc:
        raise EffectsError(f"--slow-replica: {exc}") from None
    if not math.isfinite(factor):
        raise EffectsError(f"--slow-replica {text}: the factor must be a finite number >= 1")
    return stage, replica, factor


def _ps_stream(path: str):
    import numpy as np
    try:
        ids = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise EffectsError(f"--ps-stream: {path}: cannot read a .npy array ({exc})") from None
    if ids.ndim != 1 or ids.dtype.kind not in "iu" or ids.size == 0:
        raise EffectsError(f"--ps-stream: {path}: expected a non-empty 1-D integer array, got "
                           f"{ids.dtype} of shape {ids.shape}")
    if ids.min() < 0:
        raise EffectsError(f"--ps-stream: {path}: ids must be >= 0, found {ids.min()}")
    if ids.size > MAX_PS_IDS:
        raise EffectsError(f"--ps-stream: {path}: {ids.size:,} ids, more than the "
                           f"{MAX_PS_IDS:,} a replay takes")
    # the replay sizes its tiers by the table's rows: an id past the bound would size an
    # array of that many rows (a stream's largest id + 1 is its rows when --ps-rows is unset)
    if int(ids.max()) >= MAX_PS_ROWS:
        raise EffectsError(f"--ps-stream: {path}: id {int(ids.max()):,} is past the "
                           f"{MAX_PS_ROWS:,} rows a replayed table may have")
    return ids.astype(np.int64)


def replayed_ps_options(args):
    """`PsOptions` whose hot/warm/cold hit rates come from replaying the id stream (a file, or
    Zipf ids) through the policy (`heterps_sim.tiers.replay.ps_options`: the server's code)."""
    from heterps_sim.des.options import PsOptions
    from heterps_sim.tiers.replay import ps_options, zipf_ids
    checks = [(0 <= args.ps_hot_fraction <= 1, "--ps-hot-fraction: must be in [0, 1]"),
              (0 <= args.ps_warm_fraction <= 1, "--ps-warm-fraction: must be in [0, 1]"),
              (math.isfinite(args.ps_zipf) and args.ps_zipf > 0,
               "--ps-zipf: must be a finite number > 0"),
              (args.ps_rows is None or 1 <= args.ps_rows <= MAX_PS_ROWS,
               f"--ps-rows: must be in 1..{MAX_PS_ROWS:,}"),
              (1 <= args.ps_ids <= MAX_PS_IDS, f"--ps-ids: must be in 1..{MAX_PS_IDS:,}"),
              (1 <= args.ps_batch <= MAX_BATCH, f"--ps-batch: must be in 1..{MAX_BATCH:,}")]
    for ok, message in checks:
        if not ok:
            raise EffectsError(message)
    if args.ps_stream:
        ids = _ps_stream(args.ps_stream)
        if args.ps_rows is not None and int(ids.max()) >= args.ps_rows:
            raise EffectsError(f"--ps-stream: {args.ps_stream}: id {int(ids.max()):,} is past "
                               f"--ps-rows {args.ps_rows:,} (ids count from 0)")
        rows = args.ps_rows or int(ids.max()) + 1
    else:
        rows = args.ps_rows or 1_000_000
        ids = zipf_ids(args.ps_ids, rows, args.ps_zipf, seed=args.seed)
    base = PsOptions()
    return ps_options(ids, args.ps_policy, int(rows * args.ps_hot_fraction),
                      warm_rows=int(rows * args.ps_warm_fraction), num_shards=base.num_shards,
                      batch_size=args.ps_batch, base=base)


def check_slow_replicas(args, plan) -> None:
    """Each --slow-replica is well formed and names a replica the plan has, whichever engine
    then runs (the analytic one ignores the flag: a typo there was exit 0)."""
    from pydantic import ValidationError

    from heterps_sim.core.files import validation_message
    from heterps_sim.core.hps import HpsOptions
    slow = tuple(_slow_replica(text) for text in args.slow_replica)
    try:
        options = HpsOptions(slow_replicas=slow)
    except ValidationError as exc:
        raise UserFileError(validation_message("simulator options", exc)) from None
    _check_slow_replicas(options, plan)


def _check_slow_replicas(options, plan) -> None:
    missing = options.missing_replica([s.num_replicas for s in plan.stages])
    if missing:
        g, r, f = missing
        raise EffectsError(f"--slow-replica {g}:{r}:{f:g}: the plan has no such replica "
                           "(stage and replica count from 0), or the factor is below 1")


def evaluate_des(problem, plan, args):
    """`evaluate --engine des`: simulate the plan with the flags' options, write --trace when
    asked. Returns the RunResult (with the replayed hit rates when --ps-policy set them)."""
    from heterps_sim.des import simulate
    from heterps_sim.studies.run_folder import write_trace
    options = des_options(args)
    _check_slow_replicas(options, plan)
    run = simulate(problem, plan, seed=args.seed, options=options, record_spans=bool(args.trace))
    if getattr(args, "ps_policy", None) and options.on("ps"):  # what the replay gave it
        run.result.extra["ps_hit_rates"] = {t: getattr(options.ps, t).hit_rate
                                           for t in ("hot", "warm", "cold")}
    if args.trace:
        write_trace(Path(args.trace), run, problem, plan, args.seed)
    return run.result


def add_effects(p) -> None:
    add_input(p)
    p.add_argument("plan", nargs="?", help="plan.json (default: the scenario's scheduler's plan)")
    p.add_argument("--scheduler", type=scheduler_flag,
                   help="scheduler of the plan when none is given (default: the scenario's, "
                        "else exact)")
    p.add_argument("--mode", choices=["least", "exact"], help="provisioning mode")
    add_des_arguments(p, effects=False)
    p.set_defaults(allow_same_type_cuts=False)


def cmd_effects(args) -> int:
    from heterps_sim.cost.reference import PlanError
    from heterps_sim.inputs.load import load_plan
    from heterps_sim.studies.effects import effects_rows
    loaded = load(args.input, args.model)
    if args.plan:
        plan = load_plan(args.plan)
    else:
        name, mode, seed, options = schedule_settings(args, loaded)
        plan = run_scheduler(loaded.problem, name, mode, seed, options).plan
        if plan is None:
            print("no feasible plan to simulate")
            return EXIT_INFEASIBLE
    try:
        options = des_options(args, frozenset())  # each row sets its own effects
        rows = effects_rows(loaded.problem, plan, options, args.mode or "least", seed=args.seed)
    except (PlanError, EffectsError) as exc:
        raise UserFileError(f"{args.plan or 'plan'}: {exc}") from None
    if args.json:
        print(dump(rows))
    else:
        import pandas as pd
        frame = pd.DataFrame(rows)
        print(frame.to_string(index=False, formatters={
            "throughput": "{:,.0f}".format, "vs analytic %": "{:+.2f}".format,
            "step ms": "{:.4g}".format, "cost USD": "{:,.6g}".format, "bubble": "{:.3f}".format}))
    return 0


HANDLERS = {"effects": (add_effects, cmd_effects)}
"""Command name -> (add its arguments to a parser, run it with the parsed args)."""
