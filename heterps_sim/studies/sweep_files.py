"""A sweep folder on disk: what `heterps-sim tradeoff` (and the report) write.

    tradeoff.csv            one row per scheduler x limit (sweep.COLUMNS)
    sweep.json              the settings, the limits and how they were chosen
    problem.json            the resolved numeric problem (+ scenario.yaml for a scenario)
    plans/<scheduler>/<index>.json   every feasible plan, units fixed (`heterps-sim evaluate
                            DIR/problem.json PLAN` gives its throughput and $/hour)
Re-run any point (same row, wall time aside): `heterps-sim tradeoff DIR/problem.json
--schedulers NAME --limits L:L --points 1` with the sweep's --mode, --budget and --seed
(sweep.json's "rerun" spells it out).
    figures/{tradeoff,composition,ratios}.{png,svg}   drawn from the files (plot_files.redraw)
    done.json               the completion marker, written last; a folder without it is an
                            interrupted sweep's
Every file is written atomically and fsynced (core.outputs). An existing --out folder is
cleared of these names before the sweep starts and refused if it holds anything else.
"""

from __future__ import annotations

import json
from pathlib import Path

from heterps_sim.core.outputs import atomic_write as _write
from heterps_sim.core.outputs import mark_complete, prepare_folder
from heterps_sim.studies.sweep import SweepResult

OWNED = ("tradeoff.csv", "sweep.json", "problem.json", "scenario.yaml", "plans", "figures")
"""The names a sweep folder holds (core.outputs.prepare_folder clears them, keeps the rest)."""


def prepare_sweep_folder(out: Path) -> Path:
    """Ready `out` before the sweep: created, or cleared of an earlier sweep's files (marker
    first, so it never looks complete meanwhile); a folder with other files is refused."""
    return prepare_folder(out, OWNED)


def _dump(data) -> str:
    return json.dumps(data, indent=1, default=str) + "\n"


def write_sweep(out: Path, loaded, result: SweepResult, meta: dict,
                formats: tuple[str, ...] = ("png", "svg")) -> list[Path]:
    """Write the folder for `result` (`loaded`: inputs.LoadedInput); returns the figure paths."""
    import yaml

    from heterps_sim.plots.redraw import redraw
    if loaded.scenario is not None:
        _write(out / "scenario.yaml", yaml.safe_dump(loaded.scenario.model_dump(), sort_keys=False))
    _write(out / "problem.json", _dump(loaded.problem.to_json_dict()))
    for plan_file, plan in zip(result.frame["plan_file"], result.plans):
        if plan is not None:
            _write(out / plan_file, _dump(plan))
    _write(out / "tradeoff.csv", result.frame.to_csv(index=False))
    _write(out / "sweep.json", _dump(meta))
    figures = redraw(out, formats)
    mark_complete(out, "tradeoff")
    return figures


def sweep_meta(loaded, spec, result: SweepResult, limits_how: dict, out: Path, jobs: int) -> dict:
    """sweep.json: enough to know what was run and to run it again."""
    return {"scenario": loaded.problem.name or "problem",
            "input": str(loaded.path or "built-in default"),
            "schedulers": list(spec.schedulers), "limits": list(spec.limits),
            "limits_chosen": limits_how, "mode": spec.mode, "engine": spec.engine,
            "model": loaded.problem.cost_model,
            "effects": list(spec.effects),
            "budget": spec.budget, "seed": spec.seed, "jobs": jobs, "wall_s": result.wall_s,
            "rerun": f"heterps-sim tradeoff {out}/problem.json --schedulers SCHEDULER --limits "
                     f"LIMIT:LIMIT --points 1 --mode {spec.mode} --engine {spec.engine} "
                     + (f"--effects {','.join(spec.effects)} " if spec.effects else "")
                     + (f"--budget {spec.budget} " if spec.budget is not None else "")
                     + f"--seed {spec.seed}"}
