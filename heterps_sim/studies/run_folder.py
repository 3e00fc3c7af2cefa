"""The run folder `heterps-sim simulate` writes: one scheduled plan, file by file.

    scenario.yaml   the scenario as validated (only when the input was a scenario)
    problem.json    the numeric problem the scheduler saw
    schedule.json   the scheduler's outcome: plan, analytic result, evaluations, wall time, notes
                    (and "verify": the simulator's check, studies/verify.py)
    plan.json       the plan (`heterps-exec run` takes it); re-provisioned }
                    when the simulator's check grew it                   }
    result.json     the analytic model's RunResult of plan.json, with   } only when a
                    extra["simulated"]: the simulator's numbers         } plan was found
    verify.json     the whole check: analytic and simulated results,    }
                    the re-provisioning steps (unless --verify none)    }
    stages.csv      one row per stage (plots.tables.stages_frame)       }
    trace.json      the plan simulated with every effect off, as a      }
                    Chrome/Perfetto trace (`heterps-sim plot` draws it)

    done.json       the completion marker, written last (core.outputs): a folder without it
                    is an interrupted run's
(`heterps-sim plot` adds timeline.{png,svg} and utilisation.{png,svg}.)

Every file is written atomically and fsynced (core.outputs): a crash never leaves half a file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from heterps_sim.core.outputs import atomic_write, mark_complete, prepare_folder
from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem

Write = Callable[[Path, str], None]

OWNED = ("scenario.yaml", "problem.json", "schedule.json", "plan.json", "result.json",
         "verify.json", "stages.csv", "trace.json", "timeline.png", "timeline.svg", "utilisation.png",
         "utilisation.svg")
"""The names a run folder's writers use: an existing --out folder is cleared of these and
refused when it holds anything else (core.outputs.prepare_folder)."""


def prepare_run_folder(out: Path) -> Path:
    """Ready `out` for a run before the long work: created, or cleared of an earlier run's
    files (its marker first); a folder holding other files is refused (OutputError)."""
    return prepare_folder(out, OWNED)


def _json(data) -> str:
    return json.dumps(data, indent=1, default=str) + "\n"


def write_run_folder(out: Path, problem: Problem, outcome, *, scenario=None, seed: int = 0,
                     write: Write = atomic_write, verification=None) -> None:
    """Write the folder of one `schedulers.base.ScheduleOutcome` (see the module docstring);
    `scenario`: the validated ScenarioModel the problem came from, if any; `seed` seeds the
    trace's simulation; `verification`: the simulator's check (studies.verify), if any."""
    import yaml

    from heterps_sim.plots.tables import stages_frame
    out = Path(out)
    if scenario is not None:
        write(out / "scenario.yaml", yaml.safe_dump(scenario.model_dump(), sort_keys=False))
    write(out / "problem.json", _json(problem.to_json_dict()))
    check = verification.to_json_dict() if verification is not None else None
    write(out / "schedule.json", _json({**outcome.to_json_dict(), "verify": check}))
    if outcome.plan is not None:
        plan, result = outcome.plan, outcome.result
        if verification is not None:
            from dataclasses import replace

            from heterps_sim.planner.check import summary
            plan, result = verification.final_plan, verification.final_analytic
            result = replace(result, extra={**result.extra, "simulated": {
                **summary(verification.final_simulated,
                          verification.extra.get("final_simulated_cost_usd")),
                "status": verification.status}})
            write(out / "verify.json", _json(check))
        write(out / "plan.json", _json(plan.to_json_dict()))
        write(out / "result.json", _json(result.to_json_dict()))
        write(out / "stages.csv", stages_frame(result).to_csv(index=False))
        write_run_trace(problem, plan, out / "trace.json", seed, write)
    if out.is_dir():  # written to disk (a test's writer may keep it in memory): last, the
        mark_complete(out, "run")  # marker that says every file above is there


def write_trace(path: Path, run, problem: Problem, plan: Plan, seed: int,
                write: Write = atomic_write, **meta) -> None:
    """A simulation's spans (`des.simulate(..., record_spans=True)`) as a Chrome/Perfetto
    trace JSON; its metadata names the scenario, the plan, the seed and `meta`."""
    from heterps_sim.core.trace import chrome_trace
    meta = {"scenario": problem.name, "plan": plan.to_json_dict(), "seed": seed, **meta}
    write(Path(path), json.dumps(chrome_trace(run.spans, meta)) + "\n")


def write_run_trace(problem: Problem, plan: Plan, path: Path, seed: int,
                    write: Write = atomic_write) -> None:
    """A run folder's trace.json: the plan simulated with the effects off (des defaults)."""
    from heterps_sim.des import simulate
    run = simulate(problem, plan, seed=seed)
    write_trace(path, run, problem, plan, seed, write,
                effects="none (heterps-sim evaluate --engine des --effects ... --trace for more)")
