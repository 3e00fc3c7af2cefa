"""The units bound of one stage is stated once (core.limits.MAX_REPLICAS): plans, the cost
model's provisioning search and the simulator's re-provisioning share it."""

import re
from pathlib import Path

from heterps_sim.core import limits


def test_every_user_of_the_bound_reads_core_limits():
    from heterps_sim.cost import MAX_REPLICAS as face
    from heterps_sim.cost.reference import MAX_REPLICAS as reference
    from heterps_sim.cost.terms import MAX_REPLICAS as terms
    from heterps_sim.planner.repair import MAX_UNITS
    assert face == reference == terms == MAX_UNITS == limits.MAX_REPLICAS


def test_no_module_defines_its_own():
    package = Path(limits.__file__).resolve().parents[1]
    own = [str(p.relative_to(package)) for p in package.rglob("*.py")
           if re.search(r"^MAX_REPLICAS\s*=", p.read_text(), re.M)]
    assert own == ["core/limits.py"]
