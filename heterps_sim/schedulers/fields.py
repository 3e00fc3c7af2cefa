"""A pydantic model's fields as a user meets them: rows of a listing, flags of a parser.

Every scheduler `Config` and both RL trainers' `Args` keep one docstring under each field;
`use_attribute_docstrings=True` makes it the field's description. This module turns those
fields into what `heterps-sim schedule --scheduler NAME --set help` prints and into the
trainers' command-line flags, so an option is named, typed, defaulted and explained once:

    >>> from heterps_sim.schedulers.base import BudgetedConfig
    >>> row = field_rows(BudgetedConfig)[1]
    >>> row["name"], row["type"], row["default"]
    ('budget', 'int >= 1', 20000)
    >>> row["description"]
    'Plan evaluations to spend (one more re-checks the winner; see search_space).'

pydantic only (no torch): the CLI imports it to list a scheduler's options.
"""

from __future__ import annotations

import argparse
import typing
from collections.abc import Iterable

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

_BOUNDS = (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="), ("min_length", "length >="),
           ("max_length", "length <="))


def type_text(info: FieldInfo) -> str:
    """The field's type as written in the source, with its bounds: "int >= 1", "bool",
    "int | None", "Literal['analytic', 'des']"."""
    annotation = info.annotation
    text = annotation.__name__ if isinstance(annotation, type) and not typing.get_args(
        annotation) else str(annotation).replace("typing.", "")
    bounds = [f"{sign} {getattr(m, attr)}" for m in info.metadata for attr, sign in _BOUNDS
              if getattr(m, attr, None) is not None]
    return " ".join([text, ", ".join(bounds)]) if bounds else text


def default_of(info: FieldInfo):
    """The value a field takes when it is not given (a default factory is called)."""
    return info.default_factory() if info.default_factory is not None else info.default


def field_rows(model: type[BaseModel]) -> list[dict]:
    """One row per field, in declaration order: name, type (with bounds), default and the
    docstring under it ("" when it has none)."""
    return [{"name": name, "type": type_text(info), "default": default_of(info),
             "description": " ".join((info.description or "").split())}
            for name, info in model.model_fields.items()]


def add_flags(parser: argparse.ArgumentParser, model: type[BaseModel], *,
              skip: Iterable[str] = ()) -> None:
    """One --flag per field (under_score -> --under-score): its docstring is the help, its
    default the default; bool fields get --flag / --no-flag, list fields take several values,
    every other field is parsed with its annotated type."""
    for name, info in model.model_fields.items():
        if name in skip:
            continue
        flag, text = "--" + name.replace("_", "-"), (info.description or "").replace("%", "%%")
        if info.annotation is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction,
                                default=default_of(info), help=text)
        elif typing.get_origin(info.annotation) is list:
            parser.add_argument(flag, nargs="*", default=default_of(info), help=text)
        else:
            parser.add_argument(flag, type=info.annotation, default=default_of(info),
                                help=f"{text} (default: %(default)s)".lstrip())


def plain_message(exc: ValidationError) -> str:
    """A model's validation error as the sentences its validators raised, on one line
    ("batch must be > 0, got 0"); type errors keep the field's name."""
    parts = []
    for error in exc.errors():
        cause = (error.get("ctx") or {}).get("error")
        where = ".".join(str(x) for x in error["loc"])
        parts.append(str(cause) if isinstance(cause, Exception) else
                     f"{where}: {error['msg']}" if where else error["msg"])
    return "; ".join(parts)


TRAINING_LIMITS = {
    **dict.fromkeys(("seconds", "imitation_seconds", "ppo_seconds"), 1e6),  # 11.6 days
    **dict.fromkeys(("updates", "imitation_updates", "ppo_updates", "save_every"), 10**9),
    **dict.fromkeys(("hidden", "embed", "encoder"), 4096),
    **dict.fromkeys(("batch", "imitation_batch", "des_top"), 65536),
    **dict.fromkeys(("lr", "imitation_lr", "clip"), 10.0),
    "entropy": 100.0, "max_grad_norm": 1e6, "threads": 1024, "epochs": 1000,
    "imitation_problems": 10**6, "max_stage_layers": 10_000, "des_steps": 10_000,
    "dagger_rounds": 1000, "dagger_updates": 10**9,
}
"""The largest value each numeric training setting may take (the trainers' `Args`): far
above any real recipe, far below what overflows (a lr of 1e308 trained to NaN weights and
still wrote the checkpoint; a hidden size of 10^9 asks for exabytes)."""


def check_upper_bounds(args: BaseModel, limits: dict[str, float] = TRAINING_LIMITS) -> None:
    """Raise ValueError("NAME must be <= LIMIT, got VALUE") for the first field of `args`
    above its limit."""
    for name, high in limits.items():
        value = getattr(args, name, None)
        if isinstance(value, int | float) and value > high:
            raise ValueError(f"{name} must be <= {high:g}, got {value:g}")
