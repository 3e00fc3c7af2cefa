"""Command inputs: a scenario YAML or a numeric problem JSON, named on the command line.

Every failure is an `InputError` whose str() is one line naming the file, the field and the
problem, so the CLI can print it and exit 2 with no traceback.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from .plan import Plan, plan_from_dict
from .problem import Problem, problem_from_dict
from .scenario import (
    ScenarioError,
    ScenarioModel,
    load_scenario,
    parse_scenario,
    read_yaml,
    scenario_problem,
)


class InputError(ValueError):
    pass


@dataclass(slots=True)
class LoadedInput:
    problem: Problem
    path: Path | None
    scenario: ScenarioModel | None
    """None when the input was a problem JSON."""


def _errors_line(path: Path, exc: ValidationError) -> str:
    parts = [f"{'.'.join(str(x) for x in e['loc']) or '(top level)'}: {e['msg']}" for e in exc.errors()]
    return f"{path}: " + "; ".join(parts)


def read_json(path: Path) -> dict:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object at the top level")
    return data


def load_input(path: str | Path | None) -> LoadedInput:
    """A scenario (.yaml/.yml, or none: the built-in default) or a problem (.json)."""
    try:
        if path is None:
            scn, p = load_scenario(None)
            return LoadedInput(scenario_problem(scn, p), None, scn)
        p = Path(path)
        if p.suffix == ".json":
            data = read_json(p)
            try:
                return LoadedInput(problem_from_dict(data), p, None)
            except ValidationError as exc:
                raise InputError(_errors_line(p, exc)) from None
        scn = parse_scenario(read_yaml(p), str(p))
        return LoadedInput(scenario_problem(scn, p), p, scn)
    except ScenarioError as exc:
        raise InputError(str(exc)) from None


def load_plan(path: str | Path) -> Plan:
    p = Path(path)
    data = read_json(p)
    try:
        return plan_from_dict(data)
    except ValidationError as exc:
        raise InputError(_errors_line(p, exc)) from None
    except ValueError as exc:
        raise InputError(f"{p}: {exc}") from None
