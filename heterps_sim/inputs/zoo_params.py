"""A zoo model's parameters from a scenario, checked against its builder's signature.

    checked_params("dlrm", {"bottom_mlp": [512, 256, 64]}, "s.yaml")  -> {"bottom_mlp": (512, 256, 64)}

YAML gives lists where the builders take tuples (table rows, MLP widths, ranges), and a typo
such as `mlp: "64,32"` must not reach the builder (it would fail deep inside with a Python
error). Each parameter is validated with pydantic against the builder's type hint: lists become
tuples of the right length and element type, a whole float (`1.0e+6`) is accepted for an int,
and a string, a boolean, a negative or a non-finite number is rejected with one line naming
`model.params.<name>`.
"""

from __future__ import annotations

import inspect
import math
import typing
from typing import Annotated, Any

from pydantic import ConfigDict, TypeAdapter, ValidationError
from pydantic.json_schema import WithJsonSchema

from heterps_sim.core.files import UserFileError
from heterps_sim.inputs import zoo

ZooParam = Annotated[Any, WithJsonSchema({
    "anyOf": [{"type": "number"}, {"type": "string"}, {"type": "null"},
              {"type": "array", "items": {"type": "number"}}]})]
"""A scenario's `model.params` value: taken as written and checked by `checked_params`
against the builder (one line per problem, instead of one per member of a type union)."""


class ParamError(UserFileError):
    """A zoo parameter that does not fit its builder; one line."""


def _accepts_str(hint) -> bool:
    return hint is str or str in typing.get_args(hint)


def _numbers_ok(value) -> str:
    """'' when every number inside `value` is finite and >= 0, else the problem."""
    items = value if isinstance(value, (list, tuple)) else [value]
    for x in items:
        if isinstance(x, bool):
            return f"expected a number, got {x!r}"
        if isinstance(x, (int, float)) and not (math.isfinite(x) and x >= 0):
            return f"must be a finite number >= 0, got {x!r}"
        if isinstance(x, (list, tuple)):
            return f"expected numbers, got a nested list {x!r}"
    return ""


def checked_params(name: str, params: dict, source: str) -> dict:
    """`params` converted to the types `zoo.GRAPHS[name]` declares; ParamError names the field."""
    if name not in zoo.GRAPHS:
        return dict(params)  # the caller reports the unknown model name
    fn = zoo.GRAPHS[name]
    signature = inspect.signature(fn)
    hints = typing.get_type_hints(fn)
    unknown = sorted(set(params) - set(signature.parameters))
    if unknown:
        raise ParamError(f"{source}: model.params.{unknown[0]}: model {name!r} has no such "
                         f"parameter; it takes {', '.join(signature.parameters)}")
    out = {}
    for key, value in params.items():
        where = f"{source}: model.params.{key}"
        hint = hints[key]
        if isinstance(value, str) and not _accepts_str(hint):
            raise ParamError(f"{where}: expected {_describe(hint)}, got the string {value!r}")
        problem = _numbers_ok(value)
        if problem:
            raise ParamError(f"{where}: {problem}")
        try:
            out[key] = TypeAdapter(hint, config=ConfigDict(strict=False)).validate_python(value)
        except ValidationError as exc:
            err = exc.errors()[0]
            at = "".join(f"[{x}]" for x in err["loc"])
            raise ParamError(f"{where}{at}: {err['msg']} (expected {_describe(hint)})") from None
    return out


def _describe(hint) -> str:
    """A short human name for a builder's type hint."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {args[0].__name__}s"
        return f"a list of {len(args)} numbers"
    if args:  # a union such as int | None
        return " or ".join("null" if a is type(None) else _describe(a) for a in args)
    return getattr(hint, "__name__", str(hint))
