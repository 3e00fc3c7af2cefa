"""`python -m heterps_exec.cli`: the same as the `heterps-exec` command."""

import sys

from heterps_exec.cli import main

sys.exit(main())
