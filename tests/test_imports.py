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
         "heterps_sim.schedulers.registry", "heterps_sim.cli", "heterps_exec", "heterps_exec.cli"]


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


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative): every
    import circle, of any length, lies inside one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def project_graph() -> dict[str, set[str]]:
    known = module_files()
    return {name: imported_modules(path, known) - {name} for name, path in known.items()}


def test_no_import_cycle_of_any_length():
    assert import_cycles(project_graph()) == []


def test_the_cycle_finder_sees_long_and_short_cycles():
    """The oracle could pass by seeing nothing: a five-module circle, a two-module one and a
    chain that is no circle."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"d"}, "d": {"e"}, "e": {"a"},
             "x": {"y"}, "y": {"x", "a"}, "p": {"q"}, "q": set()}
    assert sorted(import_cycles(graph)) == [["a", "b", "c", "d", "e"], ["x", "y"]]


FORBIDDEN = {
    "heterps_sim.schedulers": ("heterps_sim.planner", "heterps_sim.studies", "heterps_sim.cli"),
    "heterps_sim.planner": ("heterps_sim.studies", "heterps_sim.cli"),
    "heterps_sim.cost": ("heterps_sim.planner", "heterps_sim.studies", "heterps_sim.cli",
                         "heterps_sim.schedulers"),
}
EXEC_MAY_USE = ("heterps_sim.core", "heterps_sim.util", "heterps_sim.inputs", "heterps_sim.cost",
                "heterps_sim.tiers", "heterps_sim.planner", "heterps_sim.des")
"""heterps_exec uses heterps_sim only through these (the simulator for its predictions)."""


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_folder_rules():
    broken = []
    for module, imports in project_graph().items():
        if _under(module, "heterps_sim.core"):
            broken += [(module, m) for m in imports if not _under(m, "heterps_sim.core")]
        if _under(module, "heterps_sim.util"):  # plumbing: the contract and itself only
            broken += [(module, m) for m in imports
                       if not (_under(m, "heterps_sim.util") or _under(m, "heterps_sim.core"))]
        for package, forbidden in FORBIDDEN.items():
            if _under(module, package):
                broken += [(module, m) for m in imports
                           if any(_under(m, f) for f in forbidden)]
        if _under(module, "heterps_exec"):
            broken += [(module, m) for m in imports if _under(m, "heterps_sim")
                       and m != "heterps_sim" and not any(_under(m, p) for p in EXEC_MAY_USE)]
    assert broken == []


def test_core_imports_neither_simpy_nor_torch_anywhere():
    """core/ is the contract both packages share: numpy + pydantic, even in lazy imports."""
    for path in (ROOT / "heterps_sim" / "core").rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            heavy = [n for n in names if n.split(".")[0] in ("torch", "simpy", "heterps_exec")]
            assert not heavy, f"{path.name} imports {heavy}"


ROOT_MODULES_MAX = 8
"""A package root holds at most this many modules (`__init__` included); the rest live in
rooms, one folder per role (launch/, runtime/, checkpoint/, ...)."""


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_root_holds_at_most_8_modules(package):
    modules = sorted(p.name for p in (ROOT / package).glob("*.py"))
    assert len(modules) <= ROOT_MODULES_MAX, f"{package}/ holds {len(modules)}: {modules}"
