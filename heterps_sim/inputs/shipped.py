"""The files heterps ships: scenarios, plans, bindings, examples and measured profiles, found
by name wherever the package is installed.

The wheel carries them under `heterps_sim/shipped/` (in a checkout those are links to the
repository's `scenarios/`, `examples/`, `traces/profiles/` and `traces/spot/`, so there is one
copy). A user outside a checkout types what the docs show and it works:

    heterps-sim schedule dlrm-criteo1tb-aws                    # a shipped scenario by name
    heterps-sim schedule scenarios/dlrm-criteo1tb-aws.yaml     # the docs' path, from anywhere
    heterps-sim evaluate exec-tiny scenarios/plans/exec-tiny-pipeline.json

A path that exists is always the user's own file: a shipped file never shadows it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SHIPPED = Path(__file__).resolve().parents[1] / "shipped"
"""heterps_sim/shipped/: scenarios/, examples/, traces/profiles/, traces/spot/ (links in a
checkout)."""
ROOTS = ("scenarios", "examples", "traces")
"""Relative paths that start with one of these are looked up in SHIPPED when absent here."""


def resolve(path: str | Path) -> Path:
    """`path` when it exists (or is absolute), else the shipped file it names: a scenario
    name ("dlrm-criteo1tb-aws"), a file name in scenarios/ ("exec-tiny.yaml"), or a path that
    starts with scenarios/, examples/ or traces/. When nothing shipped matches, `path`
    unchanged, so the error that follows names what the user typed."""
    p = Path(path)
    if p.is_absolute() or p.exists():
        return p
    for candidate in _candidates(p):
        if candidate.is_file():
            return candidate
    return p


def _candidates(p: Path) -> list[Path]:
    parts = p.parts
    if not parts or ".." in parts:
        return []
    if parts[0] in ROOTS:
        return [SHIPPED / p]
    if len(parts) == 1:  # a bare name: a scenario, with or without its suffix
        return [SHIPPED / "scenarios" / p] + (
            [SHIPPED / "scenarios" / f"{p.name}.yaml"] if not p.suffix else [])
    return []


@dataclass(frozen=True, slots=True)
class ShippedScenario:
    name: str
    path: Path
    description: str


def scenarios() -> list[ShippedScenario]:
    """Every shipped scenario, by name, with its description (one line)."""
    from heterps_sim.core.files import read_mapping
    out = []
    for path in sorted((SHIPPED / "scenarios").glob("*.yaml")):
        data = read_mapping(path)
        text = " ".join(str(data.get("description", "")).split())
        out.append(ShippedScenario(name=path.stem, path=path, description=text))
    return out
