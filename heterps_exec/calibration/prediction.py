"""What heterps predicted for a run, beside what the run measured.

    prediction = predict(spec, problem)              # before or after the run: no torch needed
    result = with_prediction(measured, prediction)   # extra["predicted"]: both, with errors
    print("\\n".join(prediction_lines(result)))

Two predictors, the analytic model and the simulator, from one of two sources:

    profile    this host's measured profile: `traces/profiles/<host>-<device>-<model>.csv` and
               `<host>-links.json` (written by `heterps-exec profile`), found in the current
               folder's traces/profiles/ or the source checkout's. The problem is calibrated to
               this machine for this plan (calibration/calibrate.py: per-layer fits, the binding's
               slowdowns, gloo latency and bandwidth; under the paper model, whose terms the
               measurements fill without double counting); the simulator runs what the engine does
               on one host (calibration/validate.simulator_options: bubbles, transfers,
               all-reduce with the measured times, every rank and each message's measured CPU
               on this host's cores) plus the run's H-PS options. The runtime's own per-step work outside the layers is not in
               a profile (`heterps-exec validate` measures it), so both predict a little high.
    roofline   no profile of this host and model: the scenario's problem (the catalog types'
               roofline) and the simulator with the deterministic effects on. It predicts the
               catalog's real types, not this machine, so with emulated or CPU-bound types the
               error mostly measures the difference between the two.

The relative error of a prediction is (predicted - measured) / measured.
"""

from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from heterps_exec.runtime.layout import RunSpec
from heterps_sim.core.plan import Plan, plan_from_dict
from heterps_sim.core.result import RunResult
from heterps_sim.inputs.shipped import SHIPPED


def profile_dirs() -> tuple[Path, ...]:
    """Where a host's profile is looked for, in order: the current folder's traces/profiles
    (where `heterps-exec profile` writes by default), the user's config folder
    ($XDG_CONFIG_HOME/heterps/profiles, ~/.config when unset), then the profiles heterps ships
    (the repository's traces/profiles in a checkout, the wheel's copy else)."""
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return (Path("traces/profiles"), Path(config) / "heterps" / "profiles",
            SHIPPED / "traces" / "profiles")


PROFILE_DIRS = profile_dirs()
"""profile_dirs() as this process started (the calls below read it afresh)."""
SOURCES = ("profile", "roofline")


@dataclass(frozen=True, slots=True, kw_only=True)
class Prediction:
    source: str
    """"profile" (this host's measured profile) or "roofline" (the catalog types)."""
    analytic: RunResult
    simulated: RunResult
    profile: str = ""
    links: str = ""
    effects: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)


def host_name() -> str:
    """The name `heterps-exec profile` gives this host's files."""
    return os.uname().nodename


def device_tag(spec: RunSpec) -> str:
    """"cpu" or "cuda0": the device of the run's first stage, as a profile file names it."""
    device = spec.bindings[0].device if spec.bindings else "cpu"
    return device.replace(":", "")


def find_profile(spec: RunSpec, model: str, *, host: str | None = None,
                 dirs=None) -> tuple[Path, Path] | None:
    """(profile CSV, links JSON) of this host, device and model, or None (`dirs`: where to
    look, profile_dirs() by default)."""
    dirs = profile_dirs() if dirs is None else dirs
    host = host or host_name()
    for d in dirs:
        csv_path = Path(d) / f"{host}-{device_tag(spec)}-{model}.csv"
        links = Path(d) / f"{host}-links.json"
        if csv_path.is_file() and links.is_file():
            return csv_path, links
    return None


def _profile_rows(path: Path, model: str) -> list[dict]:
    with open(path, newline="") as fh:
        return [r for r in csv.DictReader(fh) if r.get("model") == model]


def predict(spec: RunSpec, problem, *, dirs=None, host: str | None = None) -> Prediction:
    """Both predictions of the run `spec` describes (module docstring): from this host's
    profile when one is found and covers the model's layers, else from the roofline."""
    from heterps_exec.model.spec_graph import graph_for
    from heterps_sim.util import progress
    progress.phase("heterps-exec: the analytic model's and the simulator's predictions of the "
                   "plan, beside the measurement")
    plan = plan_from_dict(spec.plan)
    graph = graph_for(spec)
    found = find_profile(spec, graph.name, host=host, dirs=dirs)
    notes = []
    if found is not None:
        try:
            return _from_profile(spec, problem, plan, graph, *found)
        except (OSError, ValueError, KeyError) as exc:  # a profile that does not fit this run
            notes.append(f"{found[0]} not used: {exc}")
    return _from_roofline(spec, problem, plan, tuple(notes))


def _hps_fields(spec: RunSpec) -> tuple[dict, list[str]]:
    """The run's H-PS options as simulator fields (auto quantisation has no fixed encoding)."""
    fields = {"share": spec.share, "overlap": spec.overlap,
              "slow_replicas": tuple(tuple(x) for x in spec.slow_replicas)}
    notes = []
    if spec.quantize.startswith("auto"):
        notes.append(f"--quantize {spec.quantize}: simulated without quantisation")
    else:
        fields["quantize"] = spec.quantize
    if spec.ps_shards:
        notes.append(f"--ps-shards {spec.ps_shards}: the parameter-server ranks are not "
                     "in the prediction")
    return fields, notes


def _from_profile(spec: RunSpec, problem, plan: Plan, graph, csv_path: Path,
                  links_path: Path) -> Prediction:
    from heterps_exec.calibration.calibrate import LayerFit, calibrated_problem
    from heterps_exec.calibration.validate import allreduce_note, allreduce_rows, simulator_options
    from heterps_sim.des import DesOptions, simulate
    from heterps_sim.planner import Pricing
    rows = _profile_rows(csv_path, graph.name)
    if not rows:
        raise ValueError(f"no rows for model {graph.name!r}")
    links = json.loads(links_path.read_text())
    fit = LayerFit.from_rows(rows)
    slow = [b.slowdown for b in spec.bindings]
    allreduce, allreduce_cpu = allreduce_rows(links)
    hps, notes = _hps_fields(spec)
    note = allreduce_note(links, [plan])
    if note:
        notes.append(note)
    base = simulator_options(plan, slow, steps=spec.steps, warmup=spec.warmup_steps,
                             allreduce=allreduce, message_cpu=links.get("message_cpu"),
                             allreduce_cpu=allreduce_cpu)
    options = DesOptions(**{**base.model_dump(), **hps})
    calibrated = {mode: calibrated_problem(problem, graph, plan, fit, slow, links["latency_s"],
                                           links["bytes_per_s"], for_des=mode == "des")
                  for mode in ("analytic", "des")}
    analytic = Pricing.of(calibrated["analytic"], schedule=plan.schedule).price(
        calibrated["analytic"], plan)[1]
    simulated = simulate(calibrated["des"], plan, seed=spec.seed, options=options,
                         record_spans=False).result
    return Prediction(source="profile", analytic=analytic, simulated=simulated,
                      profile=str(csv_path), links=str(links_path),
                      effects=tuple(sorted(options.effects)), notes=tuple(notes))


def _from_roofline(spec: RunSpec, problem, plan: Plan, notes: tuple[str, ...]) -> Prediction:
    from heterps_sim.des import DesOptions, simulate
    from heterps_sim.planner import Pricing
    from heterps_sim.planner.check import DETERMINISTIC_EFFECTS
    hps, more = _hps_fields(spec)
    options = DesOptions.with_effects(DETERMINISTIC_EFFECTS, num_steps=spec.steps,
                                      warmup_steps=spec.warmup_steps,
                                      num_microbatches=plan.num_microbatches, **hps)
    analytic = Pricing.of(problem, schedule=plan.schedule).price(problem, plan)[1]
    simulated = simulate(problem, plan, seed=spec.seed, options=options,
                         record_spans=False).result
    return Prediction(source="roofline", analytic=analytic, simulated=simulated,
                      effects=DETERMINISTIC_EFFECTS, notes=notes + tuple(more))


def error_pct(predicted: float, measured: float) -> float | None:
    """100 x (predicted - measured) / measured; None when nothing was measured."""
    if measured <= 0 or not math.isfinite(predicted):
        return None
    return 100.0 * (predicted - measured) / measured


def prediction_record(prediction: Prediction, measured: RunResult) -> dict:
    """extra["predicted"] of a run's result: both predictions with their errors."""
    def one(r: RunResult) -> dict:
        return {"throughput": r.throughput,
                "step_time_s": r.step_time_s if math.isfinite(r.step_time_s) else None,
                "error_pct": error_pct(r.throughput, measured.throughput)}
    return {"source": prediction.source, "profile": prediction.profile,
            "links": prediction.links, "analytic": one(prediction.analytic),
            "simulator": {**one(prediction.simulated), "effects": list(prediction.effects)},
            "notes": list(prediction.notes)}


def with_prediction(measured: RunResult, prediction: Prediction) -> RunResult:
    """The measured result with extra["predicted"] (prediction_record)."""
    return replace(measured, extra={**measured.extra,
                                    "predicted": prediction_record(prediction, measured)})


def prediction_lines(result: RunResult) -> list[str]:
    """Predicted beside measured, as `heterps-exec run` prints them."""
    rec = result.extra.get("predicted")
    if not rec:
        return []
    where = (f"this host's profile {rec['profile']}" if rec["source"] == "profile" else
             "the roofline of the catalog types (no measured profile of this host: "
             "heterps-exec profile writes one)")
    lines = [f"predicted from {where}:"]
    for label, key in (("analytic", "analytic"), ("simulator", "simulator")):
        r = rec[key]
        err = "" if r["error_pct"] is None else f"   error {r['error_pct']:+.1f}%"
        lines.append(f"  {label:10}{r['throughput']:>14,.0f} samples/s{err}")
    verdict = "FEASIBLE" if result.feasible else "MISSES the limit"
    lines.append(f"  {'measured':10}{result.throughput:>14,.0f} samples/s   limit "
                 f"{result.throughput_limit:,.0f}: {verdict}")
    lines += [f"  note: {n}" for n in rec["notes"]]
    return lines
