"""`python -m agentls`: the same as the `agentls` console script."""

import sys

from agentls.cli import main

sys.exit(main())
