"""Dependency direction: the shared types and the cost model import neither simpy nor torch."""

import subprocess
import sys

import pytest

LIGHT = ["heterps_sim", "heterps_sim.core.spec", "heterps_sim.core.plan", "heterps_sim.core.result", "heterps_sim.core.pipeline",
         "heterps_sim.core.problem", "heterps_sim.cost.reference", "heterps_sim.inputs.scenario",
         "heterps_sim.schedulers.registry", "heterps_sim.cli"]


@pytest.mark.parametrize("module", LIGHT)
def test_module_imports_neither_simpy_nor_torch(module):
    code = (f"import sys, {module}; heavy = [m for m in ('torch', 'simpy') if m in sys.modules]; "
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
