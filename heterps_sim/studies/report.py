"""`heterps-sim report`: a Markdown reproduction report, with figures, for the shipped scenarios.

For each scenario, at its own throughput limit:
  1. the paper-style headline: the exact optimum ("ours") against the best single-type plan
     and Paddle's heuristic (embedding/IO on CPUs, dense on GPUs): cost, cost ratio "x" and
     the paper's "% less" = 100 (x - 1); our throughput against the best single type bought
     with the same money per hour (studies/headline.py);
  2. where our plan comes from: each of its stages (which layers, on which type, how many
     units) next to where the single-type plan and Paddle's heuristic put those layers;
  3. the simulator's check of our plan and the single-type plan (studies/report_check.py):
     the analytic numbers the headline compares beside what the simulator finds;
  4. a small trade-off sweep (REPORT_SCHEDULERS x `points` limits) and its figures.
Every scenario runs under its own costs.model, or under `model` (`--model`) when given; the
report names the model of each.
Everything is written under OUT: report.md, and one sweep folder per scenario (studies/sweep_files.py),
then done.json (core.outputs: the marker, written last). An existing OUT is cleared of an earlier
report's files first; one holding other files is refused.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from heterps_sim.core.files import UserFileError
from heterps_sim.inputs.shipped import SHIPPED, resolve
from heterps_sim.studies.report_check import check_plans, check_table, headline_cells, verdict

SCENARIO_DIR = SHIPPED / "scenarios"
"""The shipped scenarios (the repository's scenarios/ in a checkout, the wheel's copy else)."""
REPORT_SCHEDULERS = ("exact", "homogeneous", "paddle-heuristic", "greedy")


class ReportError(UserFileError):
    """An unknown scenario name or an unreadable scenario file (one line)."""


def resolve_scenarios(text: str | None) -> list[Path]:
    """A comma list of scenario files or shipped names (none: every shipped scenario); a
    shipped one as a path from the working directory where it lies below it (sweep.json
    records the path: a report written in the repository names no machine's folders)."""
    if not text:
        return [_shown(p) for p in sorted(SCENARIO_DIR.glob("*.yaml"))]
    paths = []
    for item in (x.strip() for x in text.split(",") if x.strip()):
        path = resolve(item)
        if not path.exists():
            known = ", ".join(p.stem for p in sorted(SCENARIO_DIR.glob("*.yaml")))
            raise ReportError(f"--scenarios: unknown scenario {item!r} (shipped: {known})")
        paths.append(_shown(path))
    return paths


def _shown(path: Path) -> Path:
    try:
        return path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return path


def _usd(x: float) -> str:
    return "none" if not math.isfinite(x) else f"{x:,.4g}"


def _outcomes(problem):
    """Ours is the planner's answer (what `simulate` answers with); "homogeneous" is the best
    one-type plan under the same pricing (planner/baseline.py, pipelines of one type
    allowed), and Paddle's heuristic keeps its own plan, priced as it runs."""
    from heterps_sim.planner import Planner
    from heterps_sim.planner.answer import Answer
    from heterps_sim.planner.baseline import one_type_baselines
    ours = Planner().plan(problem)
    one = one_type_baselines(ours.problem, ours.pricing).one_type
    if one is None:
        one = Answer(scheduler="homogeneous", plan=None, result=None, pricing=ours.pricing,
                     problem=ours.problem, notes={"reason": "no single type meets the limit"})
    return {"exact": ours, "homogeneous": one,
            "paddle-heuristic": Planner(search="paddle-heuristic").plan(problem)}


def headline_row(name: str, problem, outcomes, checks: dict | None = None) -> dict:
    """One row of the headline table (costs inf where a scheduler found no feasible plan)."""
    from heterps_sim.studies.headline import compare_to_single_type, single_type_throughput_at

    def cost(o):
        return o.result.cost_usd if o.result is not None and o.result.feasible else math.inf
    ours = outcomes["exact"].result
    row = {"scenario": name, "model": problem.cost_model, "limit": problem.throughput_limit,
           "ours_usd": cost(outcomes["exact"]), "single_usd": cost(outcomes["homogeneous"]),
           "paddle_usd": cost(outcomes["paddle-heuristic"]), **headline_cells(checks or {})}
    if ours is None or not ours.feasible:
        return {**row, "single_x": math.nan, "paddle_x": math.nan, "thr_x": math.nan, "bought": ""}
    head = compare_to_single_type(problem, ours, outcomes["homogeneous"].result)
    return {**row, "single_x": head["cost_ratio"], "paddle_x": row["paddle_usd"] / ours.cost_usd,
            "thr_x": head["throughput_ratio"],
            "bought": single_type_throughput_at(problem, ours.cost_per_hour)[1]}


def _times(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:.2f}x"


def _ratio(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:.2f}x ({100 * (x - 1):+.1f}%)"


def headline_table(rows: list[dict]) -> str:
    lines = ["| scenario | model | limit (samples/s) | ours USD | best single type USD | "
             "single type pays (% less) | Paddle heuristic USD | Paddle pays (% less) | "
             "throughput at equal $/h | single type bought | simulator: ours USD | simulator: "
             "single type USD | simulator: single type pays |", "|---" * 13 + "|"]
    for r in rows:
        lines.append(f"| {r['scenario']} | {r['model']} | {r['limit']:,.0f} | "
                     f"{_usd(r['ours_usd'])} | "
                     f"{_usd(r['single_usd'])} | {_ratio(r['single_x'])} | {_usd(r['paddle_usd'])} "
                     f"| {_ratio(r['paddle_x'])} | "
                     f"{_times(r['thr_x'])} | {r['bought']} | {r['sim_ours']} | "
                     f"{r['sim_single']} | {r['sim_x']} |")
    return "\n".join(lines)


def moves_table(problem, outcomes) -> str:
    """Our stages, with where the single-type plan and Paddle's heuristic put those layers."""
    ours = outcomes["exact"].result
    if ours is None or not ours.feasible:
        return f"No feasible plan at this limit: {outcomes['exact'].notes.get('reason', '')}\n"
    where = {n: _layer_types(outcomes[n].plan) for n in ("homogeneous", "paddle-heuristic")}
    lines = ["| stage | layers | ours: type x units | $/h | best single type | Paddle heuristic |",
             "|---|---|---|---|---|---|"]
    for g, s in enumerate(ours.stages):
        span = s.layers[0] if len(s.layers) == 1 else f"{s.layers[0]} .. {s.layers[-1]} ({len(s.layers)})"
        others = [", ".join(dict.fromkeys(where[n].get(layer, "-") for layer in s.layers)) or "-"
                  for n in ("homogeneous", "paddle-heuristic")]
        lines.append(f"| {g} | {span} | {_units(s)} | {s.cost_per_hour:,.2f} | "
                     f"{others[0]} | {others[1]} |")
    return "\n".join(lines) + "\n"


def _units(s) -> str:
    """'t4 x3', or a mixed stage's '2xv100+1xt4'."""
    return s.label if s.replicas else f"{s.resource} x{s.num_replicas}"


def _layer_types(plan) -> dict[str, str]:
    if plan is None:
        return {}
    return {layer: s.label if s.is_mixed else s.resource for s in plan.stages for layer in s.layers}


def scenario_sweep(loaded, out: Path, points: int, jobs: int, progress: bool) -> Path:
    """A REPORT_SCHEDULERS sweep over the default limits into `out`; returns the folder."""
    from heterps_sim.studies.sweep import SweepSpec, choose_limits, run_sweep
    from heterps_sim.studies.sweep_files import prepare_sweep_folder, sweep_meta, write_sweep
    prepare_sweep_folder(out)
    limits, how = choose_limits(loaded.problem, None, points)
    spec = SweepSpec(schedulers=REPORT_SCHEDULERS, limits=limits)
    result = run_sweep(loaded.problem, spec, jobs=jobs, progress=progress)
    # PNG only (what the report embeds; `heterps-sim plot` on the folder adds the SVGs)
    write_sweep(out, loaded, result, sweep_meta(loaded, spec, result, how, out, jobs), ("png",))
    return out


def write_report(out: Path, *, scenarios: str | None = None, points: int = 10, jobs: int = 1,
                 progress: bool = True, model: str | None = None) -> Path:
    """report.md under `out` (see the module doc); returns its path."""
    from heterps_sim.core.outputs import atomic_write, mark_complete, prepare_folder
    from heterps_sim.inputs.load import InputError, load_input
    from heterps_sim.studies.sweep import SweepError
    from heterps_sim.util import progress as shown
    start = time.perf_counter()
    rows, sections = [], []
    paths = resolve_scenarios(scenarios)
    # before the work: the folder is made, or cleared of an earlier report's files (its
    # report.md and sweep folders); a folder holding anything else is refused
    earlier = [d.name for d in out.glob("*/") if (d / "sweep.json").is_file()] \
        if out.is_dir() else []
    prepare_folder(out, ["report.md", *(p.stem for p in paths), *earlier])
    for number, path in enumerate(paths, 1):
        if progress:
            shown.phase(f"report: {path.stem} ({number}/{len(paths)}): the optimum, the best "
                        "single type and Paddle's heuristic, then a trade-off sweep")
        try:
            loaded = load_input(path, model)
        except InputError as exc:
            raise ReportError(str(exc)) from None
        problem, name = loaded.problem, path.stem
        outcomes = _outcomes(problem)
        checks = check_plans(problem, outcomes)
        rows.append(headline_row(name, problem, outcomes, checks))
        body = [f"## {name}\n", f"{problem.num_layers} layers x {problem.num_types} types, "
                f"limit {problem.throughput_limit:,.0f} samples/s, {problem.cost_model} cost "
                "model.\n", "Where our plan comes from:\n", moves_table(problem, outcomes)]
        if checks:
            body += [CHECK_INTRO, check_table(checks, problem.throughput_limit) + "\n",
                     verdict(checks, problem.throughput_limit) + "\n"]
        try:
            scenario_sweep(loaded, out / name, points, jobs, progress)
            body += [f"Trade-off ({', '.join(REPORT_SCHEDULERS)}; {points} limits; the analytic "
                     f"model, not simulated; data and plans in `{name}/`):\n", f"![cost vs throughput]({name}/figures/tradeoff.png)\n",
                     f"![composition]({name}/figures/composition.png)\n",
                     f"![ratios]({name}/figures/ratios.png)\n"]
        except SweepError as exc:
            body.append(f"No trade-off sweep: {exc}\n")
        sections.append("\n".join(body))
    text = "\n".join([_preamble(), headline_table(rows), "", *sections,
                      f"\n_Generated by `{_command(out, scenarios, points, jobs, model)}` in "
                      f"{time.perf_counter() - start:.0f} s._\n"])
    atomic_write(out / "report.md", text)
    mark_complete(out, "report")
    return out / "report.md"


def _command(out: Path, scenarios: str | None, points: int, jobs: int, model: str | None) -> str:
    """The command line that writes this report again."""
    words = ["heterps-sim report"] + ([f"--scenarios {scenarios}"] if scenarios else []) \
        + [f"--points {points}"] + ([f"--jobs {jobs}"] if jobs != 1 else []) \
        + ([f"--model {model}"] if model else []) + [f"--out {out}"]
    return " ".join(words)


def _preamble() -> str:
    return ("# heterps: heterogeneous vs single-type plans\n\n"
            "Ours = the exact optimum (least provisioning). \"Pays\" = that plan's cost / ours; "
            "the paper's \"% less\" form is 100 (x - 1) (HeterPS reported 312.3%, i.e. 4.12x). "
            "Throughput at equal $/h = our throughput / the best single type's with as many units "
            "as our $/hour buys. none: no feasible plan at the scenario's limit; n/a: no ratio "
            "without both plans; -: that scheduler found none. Model: the analytic cost model "
            "every cost and ratio comes from (default: all-reduce, per-unit fixed costs, memory, "
            "the parameter server's bandwidth, startup and billing; paper: HeterPS's Amdahl "
            "model). Simulator: our plan and the best single-type plan run in the simulator as "
            "`heterps-sim simulate` runs a plan (deterministic effects on, seed 0; a plan that "
            "misses the limit is re-planned and re-provisioned): the cost of the plan it ends "
            "with where that meets the limit, else how far the best it found misses; the costs "
            "and ratios before these columns are the model's alone. The trade-off sweeps use exact provisioning (cost never falls as the limit "
            "rises).\n")


CHECK_INTRO = ("The simulator's check (bubbles, all-reduce, transfers, contention and the "
               "parameter server on, seed 0, each plan's own schedule and microbatches; a plan "
               "that misses the limit re-planned and re-provisioned as `heterps-sim simulate` "
               "does):\n")
