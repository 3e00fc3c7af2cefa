"""Command inputs: a scenario YAML or a numeric problem JSON, named on the command line.

Every failure is an `InputError` (a UserFileError) whose str() is one line naming the file,
the field and the problem, so the CLI can print it and exit 2 with no traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from heterps_sim.core.files import UserFileError, read_mapping, validation_message
from heterps_sim.core.plan import Plan, plan_from_dict
from heterps_sim.core.problem import Problem, problem_from_dict
from heterps_sim.inputs.bounds import check_problem
from heterps_sim.inputs.scenario import (
    ScenarioModel,
    load_scenario,
    parse_scenario,
    scenario_problem,
)
from heterps_sim.inputs.shipped import resolve

InputError = UserFileError


@dataclass(slots=True)
class LoadedInput:
    problem: Problem
    path: Path | None
    scenario: ScenarioModel | None
    """None when the input was a problem JSON."""


def load_input(path: str | Path | None, model: str | None = None) -> LoadedInput:
    """A scenario (.yaml/.yml, or none: the built-in default) or a problem (.json); `model`
    ("default" | "paper") overrides the analytic model the input names."""
    loaded = _load_input(path, model)
    if model is not None:
        loaded.problem = loaded.problem.with_model(model)
    check_problem(loaded.problem, str(path) if path is not None else "<built-in scenario>")
    return loaded


def _with_model(scn: ScenarioModel, model: str | None) -> ScenarioModel:
    """The scenario as if its costs.model said `model`: built under it from the start, so
    its odt_s is that model's exactly (core/ps_odt.py), not converted to rounding."""
    if model is None or scn.costs.model == model:
        return scn
    return scn.model_copy(update={"costs": scn.costs.model_copy(update={"model": model})})


def _load_input(path: str | Path | None, model: str | None = None) -> LoadedInput:
    if path is None:
        scn, p = load_scenario(None)
        return LoadedInput(scenario_problem(_with_model(scn, model), p), None, scn)
    p = resolve(path)  # a shipped scenario by name works wherever a path does
    data = read_mapping(p)
    if p.suffix == ".json":
        try:
            return LoadedInput(problem_from_dict(data), p, None)
        except ValidationError as exc:
            raise InputError(validation_message(str(p), exc)) from None
    scn = parse_scenario(data, str(p))
    return LoadedInput(scenario_problem(_with_model(scn, model), p), p, scn)


def load_plan(path: str | Path) -> Plan:
    p = resolve(path)
    data = read_mapping(p)
    try:
        return plan_from_dict(data)
    except ValidationError as exc:
        raise InputError(validation_message(str(p), exc)) from None
    except ValueError as exc:
        raise InputError(f"{p}: {exc}") from None
