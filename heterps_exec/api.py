"""Train a plan from Python: the `heterps-exec run` path, as a function.

    from heterps_exec import run_plan
    result = run_plan("plan.json", scenario="scenario.yaml", steps=20, ps_shards=1)
    result["throughput"], result["extra"]["predicted"], result["extra"].get("holdout")

`run_plan` takes the command's flags as keyword arguments (their long names with `_` for
`-`: `lr=0.5`, `binding="b.yaml"`, `table_scale=0.01`, `checkpoint_dir="ckpt"`), builds the
same parsed command line the CLI builds, and runs the same steps: every flag and output
path checked, the scenario, plan, binding, model and data checked by `launch.prepare`, all
before any rank starts (a bad value raises a one-line `UserFileError`, the CLI's exit 2),
then torchrun, then the same result the CLI writes to the run folder's result.json and
prints with `--json`. So a Python run and a command-line run of the same inputs train the
same weights on the same batches and get the same predictions.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from heterps_sim.core.files import UserFileError


class RunFailed(RuntimeError):
    """The ranks ran and failed (or timed out); the message holds the log's last lines."""


def _parser() -> argparse.ArgumentParser:
    from heterps_exec.cli.run import add_arguments
    parser = argparse.ArgumentParser(prog="run_plan", add_help=False)
    add_arguments(parser)
    return parser


_NOT_OPTIONS = {"plan", "scenario", "json"}
"""Run flags that are run_plan's own parameters or mean nothing without a terminal."""


def run_options() -> list[str]:
    """The keyword arguments run_plan accepts besides plan, scenario, steps and ps_shards."""
    return sorted(a.dest for a in _parser()._actions
                  if a.dest not in _NOT_OPTIONS and a.dest != "help")


def _as_flag_value(name: str, value):
    """Python values where the CLI takes words: overlap=True is --overlap on."""
    if name == "overlap" and isinstance(value, bool):
        return "on" if value else "off"
    if name == "slow_replica" and isinstance(value, str):
        return [value]
    if isinstance(value, Path):
        return str(value)
    return value


def _args(plan: str, scenario: str, options: dict) -> argparse.Namespace:
    args = _parser().parse_args([plan, "--scenario", scenario])
    known = set(run_options())
    for name, value in options.items():
        if name not in known:
            raise UserFileError(f"run_plan: unknown option {name!r} (the options are "
                                f"heterps-exec run's flags: {', '.join(sorted(known))})")
        setattr(args, name, _as_flag_value(name, value))
    return args


def run_plan(plan, *, scenario, steps: int = 20, ps_shards: int = 0, **options) -> dict | None:
    """Train `plan` (a PLAN.json path, a heterps Plan or its dict) on the scenario's model and
    data, as `heterps-exec run PLAN --scenario SCENARIO --steps STEPS --ps-shards S ...`
    does; returns the RunResult dict the CLI prints with `--json` (throughput, stages,
    extra: measured per stage, final_loss, predicted, data, holdout), also in the run
    folder's result.json. `options` are the command's other flags by name (run_options()).

    Raises UserFileError (one line) for bad input before any rank starts, RunFailed when the
    ranks fail. Returns None on a node other than the one that ran rank 0 (`nnodes` > 1)."""
    from heterps_exec.cli.run import failure_text, finish, start
    with tempfile.TemporaryDirectory(prefix="heterps-plan-") as tmp:
        if not isinstance(plan, (str, Path)):
            path = Path(tmp) / "plan.json"
            data = plan if isinstance(plan, dict) else plan.to_json_dict()
            path.write_text(json.dumps(data, indent=1) + "\n")
            plan = path
        args = _args(str(plan), str(scenario),
                     {"steps": steps, "ps_shards": ps_shards, **options})
        spec, problem, outcome = start(args)
    if outcome.returncode != 0:
        raise RunFailed(failure_text(outcome))
    if not (Path(spec.out_dir) / "ranks.json").exists():
        return None
    # as JSON holds it (lists, not tuples): equal to the run folder's result.json
    return json.loads(json.dumps(finish(args, spec, problem).to_json_dict()))
