"""Dependency direction: the shared types and the cost model import neither simpy nor torch,
and no module imports one that imports it back."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("heterps_sim", "heterps_exec")
LIGHT = ["heterps_sim", "heterps_sim.core.spec", "heterps_sim.core.hps", "heterps_sim.core.plan",
         "heterps_sim.core.result", "heterps_sim.core.pipeline", "heterps_sim.core.problem",
         "heterps_sim.cost.reference", "heterps_sim.inputs.scenario",
         "heterps_sim.schedulers.registry", "heterps_sim.cli"]


@pytest.mark.parametrize("module", LIGHT)
def test_module_imports_neither_simpy_nor_torch(module):
    code = (f"import sys, {module}; heavy = [m for m in ('torch', 'simpy') if m in sys.modules]; "
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every module of both packages."""
    files = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def imported_modules(path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules a file imports anywhere in it (lazy imports in functions count).
    `from pkg import sub` depends on pkg.sub, and on pkg only when a name is not a submodule."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{alias.name}" for alias in node.names}
            found.update(sub for sub in subs if sub in known)
            if any(sub not in known for sub in subs):
                found.add(node.module)
    return {name for name in found if name in known}


def test_no_module_imports_one_that_imports_it_back():
    known = module_files()
    graph = {name: imported_modules(path, known) - {name} for name, path in known.items()}
    circles = sorted({tuple(sorted((a, b))) for a in graph for b in graph[a] if a in graph[b]})
    assert circles == []


def test_the_circle_finder_sees_a_circle(tmp_path):
    """The oracle above could pass by seeing nothing: on two files that import each other
    (one lazily, inside a function), it must find the pair."""
    (tmp_path / "a.py").write_text("import b\n")
    (tmp_path / "b.py").write_text("def f():\n    from a import x\n")
    known = {"a": tmp_path / "a.py", "b": tmp_path / "b.py"}
    assert imported_modules(known["a"], known) == {"b"}
    assert imported_modules(known["b"], known) == {"a"}


def test_core_imports_neither_simpy_nor_torch_anywhere():
    """core/ is the contract both packages share: numpy + pydantic, even in lazy imports."""
    for path in (ROOT / "heterps_sim" / "core").rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            heavy = [n for n in names if n.split(".")[0] in ("torch", "simpy", "heterps_exec")]
            assert not heavy, f"{path.name} imports {heavy}"
