"""`heterps-exec run`'s launch flags and output paths, checked before anything is loaded or
started: a bad value is one line naming the flag (exit 2), never a failure after launch.

The RunRequest (heterps_exec/request.py) checks what the ranks are asked to do (--steps,
--checkpoint-every, --lr, --table-scale, ...); this checks what only the launcher reads
(--nnodes, --node-rank, --timeout, --max-restarts, ...) and that every output path can be
written, so a typo costs nothing and a finished run is never lost to an unwritable --trace.
Both say it one way: "--flag: expected WHAT IT ACCEPTS, got VALUE".
"""

from __future__ import annotations

from heterps_sim.core.outputs import check_target

MAX_NODES = 1024
MAX_RESTARTS = 100
MAX_SAMPLES = 1_000_000_000
"""Samples of a generated dataset (each is a row of every input in memory while written)."""
MAX_TIMEOUT_S = 30 * 24 * 3600.0


def _seconds(value: float, flag: str, most: float) -> str | None:
    if 0 < value <= most:  # NaN fails too
        return None
    return f"{flag}: expected seconds in (0, {most:g}], got {value:g}"


def problems(args) -> list[str]:
    """Every bad launch flag of `args` (the parsed `heterps-exec run` line), as one line each."""
    found = [
        None if 1 <= args.nnodes <= MAX_NODES else
        f"--nnodes: expected 1..{MAX_NODES}, got {args.nnodes}",
        None if 0 <= args.node_rank < max(args.nnodes, 1) else
        f"--node-rank: expected 0..{args.nnodes - 1} (--nnodes {args.nnodes}), got {args.node_rank}",
        None if 0 <= args.max_restarts <= MAX_RESTARTS else
        f"--max-restarts: expected 0..{MAX_RESTARTS}, got {args.max_restarts}",
        None if 0 <= args.warmup_steps else f"--warmup-steps: expected >= 0, got {args.warmup_steps}",
        None if 0 <= args.num_samples <= MAX_SAMPLES else
        f"--num-samples: expected 0..{MAX_SAMPLES:,} (0: the default size), got {args.num_samples}",
        _seconds(args.timeout, "--timeout", MAX_TIMEOUT_S),
        _seconds(args.rank_timeout, "--rank-timeout", MAX_TIMEOUT_S),
    ]
    if args.rdzv_endpoint:
        host, sep, port = args.rdzv_endpoint.rpartition(":")
        if not (sep and host and port.isdigit() and 0 < int(port) < 65536):
            found.append(f"--rdzv-endpoint: expected HOST:PORT, got {args.rdzv_endpoint!r}")
    bind = getattr(args, "bind_addr", "")
    if bind:  # an address this machine has, so that nothing listens beyond it
        from heterps_exec.launch.bind_addr import bind_problem
        found.append(bind_problem(bind) if args.nnodes > 1 else
                     "--bind-addr: only with --nnodes > 1 (one machine listens on 127.0.0.1)")
    return [f for f in found if f]


def check_run_flags(args) -> None:
    """Raise ExecCliError (one line, exit 2) for the first bad launch flag or output path."""
    from heterps_exec.cli import ExecCliError
    bad = problems(args)
    if bad:
        raise ExecCliError(bad[0])
    from heterps_sim.core.outputs import OutputError
    targets = [("--out", args.out, True), ("--trace", args.trace, False),
               ("--save-state", args.save_state, False)]
    for flag, path, folder in targets:
        if path:
            try:
                check_target(path, folder=folder)
            except OutputError as exc:
                raise ExecCliError(f"{flag}: {exc}") from None
