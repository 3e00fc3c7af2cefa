"""`python -m heterps_sim.cli`: the same as the `heterps-sim` command."""

import sys

from heterps_sim.cli import main

sys.exit(main())
