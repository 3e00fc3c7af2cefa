"""The capture cache: a user model's ModelSpec kept on disk, so planning it again skips torch.

    spec = cached_spec(section, source, search_paths, make=lambda: capture_and_measure())

Capturing a user model takes seconds on a small machine: importing torch (about half),
building the module, torch.export, and running each layer alone to count its FLOPs. The
planner needs only the resulting ModelSpec, a few numbers per layer, so that is what is
kept: one JSON file per key under `<cache dir>/capture/`. A hit reads it without importing
torch, and says again the stderr lines the capture said (notices.py).

The key is a sha256 of everything the spec depends on:
- CAPTURE_FORMAT (the entry's layout) and the source of this package (an edit of heterps'
  capture, grouping or measuring re-captures), the Python minor version and torch's version
  (read from its installed metadata, torch not imported);
- the scenario's model section as validated (module, kwargs, inputs, loss, output, layers,
  split_points, name) and the scenario path the spec's `source` names;
- the bytes of the factory's module file, of the loss's, column factory's and extra loss's, of
  the package `__init__` files on their import paths, and of every module they import (`ast`,
  not importing them) that lives beside their top-level package or module (the model's own
  package), transitively.

Not in the key: modules the model imports from elsewhere (an edited site-packages library is
not noticed; delete the cache folder, or turn the cache off) and a module already imported
in this process but since edited on disk (the key reads the file, the capture the module).

The cache folder is $HETERPS_CACHE_DIR, else $XDG_CACHE_HOME/heterps, else ~/.cache/heterps.
HETERPS_CAPTURE_CACHE=0 (or off, false, no) turns the cache off. A folder that cannot be
written turns it off silently; an entry that cannot be read, or holds something else, is
ignored and written afresh: the cache never makes a run fail. Entries are written to a
temporary file in the same folder, then renamed over the entry (os.replace), so a reader
never sees half an entry and two processes capturing at once both leave a whole one.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from importlib.machinery import ModuleSpec, PathFinder
from pathlib import Path

from heterps_sim.core.outputs import OutputError, atomic_write
from heterps_sim.core.spec import Layer, ModelSpec
from heterps_sim.inputs.torch_model import notices

CAPTURE_FORMAT = 1
"""The layout of a cache entry; bump it when what an entry holds changes."""
ENV_DIR, ENV_SWITCH = "HETERPS_CACHE_DIR", "HETERPS_CAPTURE_CACHE"
OFF = ("0", "off", "false", "no")
PACKAGE = Path(__file__).resolve().parent
"""heterps_sim/inputs/torch_model/: its source is part of every key."""
MAX_FILES = 200
"""Files of the model's own package hashed at most (a key stays cheap)."""


def cache_folder() -> Path | None:
    """<cache dir>/capture, or None when the cache is off."""
    if os.environ.get(ENV_SWITCH, "").strip().lower() in OFF:
        return None
    root = os.environ.get(ENV_DIR) or ""
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        root = str(Path(xdg) / "heterps")
    return Path(root) / "capture"


def cached_spec(section, source: str, search_paths: Sequence[str],
                make: Callable[[], ModelSpec]) -> ModelSpec:
    """The section's ModelSpec from the cache, else make() (written to the cache)."""
    folder = cache_folder()
    key = entry_key(section, source, search_paths) if folder is not None else None
    if key is None:
        return make()
    path = folder / f"{key}.json"
    found = read_entry(path, key)
    if found is not None:
        spec, said = found
        for line in said:
            notices.say_once(line)
        return spec
    with notices.recording() as said:
        spec = make()
    write_entry(path, key, spec, said)
    return spec


def read_entry(path: Path, key: str) -> tuple[ModelSpec, list[str]] | None:
    """(spec, the lines its capture said) from an entry; None for a missing, unreadable or
    foreign one."""
    try:
        data = json.loads(path.read_text())
        if data["format"] != CAPTURE_FORMAT or data["key"] != key:
            return None
        raw = data["spec"]
        spec = ModelSpec(name=raw["name"], source=raw["source"],
                         layers=tuple(Layer(**layer) for layer in raw["layers"]))
        return spec, [str(line) for line in data["notices"]]
    except Exception:  # noqa: BLE001 - any broken entry is a miss, never a failure
        return None


def write_entry(path: Path, key: str, spec: ModelSpec, said: list[str]) -> None:
    """Write the entry atomically (core.outputs); a cache that cannot be written is no error."""
    text = json.dumps({"format": CAPTURE_FORMAT, "key": key, "notices": said,
                       "spec": {"name": spec.name, "source": spec.source,
                                "layers": [asdict(layer) for layer in spec.layers]}})
    with contextlib.suppress(OutputError, OSError):
        atomic_write(path, text)


def entry_key(section, source: str, search_paths: Sequence[str]) -> str | None:
    """The sha256 naming the section's entry (module docstring), or None when the factory's
    module is no Python file heterps can find (then nothing is cached)."""
    paths = [*map(str, search_paths), os.getcwd(), *sys.path]
    modules = [section.module.partition(":")[0]]
    for hook in (section.loss, section.column_factory or "", section.extra_loss or ""):
        if ":" in hook:  # the loss's, the column factory's and the extra loss's modules
            modules.append(hook.partition(":")[0])
    files = model_files(modules, paths)
    if files is None:
        return None
    digest = hashlib.sha256()
    for part in (CAPTURE_FORMAT, f"{sys.version_info[0]}.{sys.version_info[1]}",
                 torch_version(), section.model_dump_json(exclude={"batchnorm"}),
                 source):  # (batchnorm: a training rule, the chain is the same)
        digest.update(str(part).encode() + b"\0")
    for name in sorted(PACKAGE.glob("*.py")):
        digest.update(name.name.encode() + b"\0" + name.read_bytes())
    for name, file in sorted(files.items()):
        digest.update(name.encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()[:32]


def torch_version() -> str:
    """torch's version, without importing it when it is not imported yet."""
    if "torch" in sys.modules:
        return str(sys.modules["torch"].__version__)
    from importlib import metadata
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "none"


def find_module(name: str, paths: list[str]) -> ModuleSpec | None:
    """Where `import name` would find the module, without running it (an imported module:
    where it came from)."""
    loaded = sys.modules.get(name)
    if loaded is not None:
        return getattr(loaded, "__spec__", None)
    parts = name.split(".")
    try:
        spec = PathFinder.find_spec(parts[0], paths)
        for k in range(1, len(parts)):
            if spec is None or spec.submodule_search_locations is None:
                return None
            spec = PathFinder.find_spec(".".join(parts[:k + 1]), spec.submodule_search_locations)
    except (ImportError, ValueError, OSError):
        return None
    return spec


def _python_file(spec: ModuleSpec | None) -> Path | None:
    origin = getattr(spec, "origin", None)
    if spec is None or not spec.has_location or not origin or not origin.endswith(".py"):
        return None
    return Path(origin)


def _home(top: ModuleSpec) -> Path | None:
    """The folder holding a top-level package or module."""
    file = _python_file(top)
    if file is not None:
        return file.parent.parent if top.submodule_search_locations is not None else file.parent
    locations = list(top.submodule_search_locations or [])  # a namespace package
    return Path(locations[0]).parent if locations else None


def model_files(modules: list[str], paths: list[str]) -> dict[str, Path] | None:
    """module name -> file for the given modules, the package `__init__` files on their
    paths, and every module they import (transitively) whose top-level package or module
    lives in the same folder as theirs. None when a given module has no Python file."""
    homes, todo = set(), []
    for name in modules:
        top = find_module(name.split(".")[0], paths)
        home = _home(top) if top is not None else None
        if _python_file(find_module(name, paths)) is None or home is None:
            return None
        homes.add(home)
        parts = name.split(".")
        todo += [".".join(parts[:k]) for k in range(1, len(parts) + 1)]
    files: dict[str, Path] = {}
    while todo and len(files) < MAX_FILES:
        name = todo.pop()
        if name in files:
            continue
        spec = find_module(name, paths)
        file = _python_file(spec)
        if file is None:
            continue
        files[name] = file
        package = name if spec.submodule_search_locations is not None else name.rpartition(".")[0]
        for imported in _imports(file, package):
            top = find_module(imported.split(".")[0], paths)
            if imported not in files and top is not None and _home(top) in homes:
                todo.append(imported)
    return files


def _imports(file: Path, package: str) -> list[str]:
    """The modules a file imports (for `from m import x`: m, and m.x in case x is one)."""
    try:
        tree = ast.parse(file.read_bytes())
    except (SyntaxError, ValueError, OSError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1] if node.level > 1 else anchor
                base = ".".join([*anchor, base] if base else anchor)
            if base:
                out.append(base)
                out += [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]
    return out
