"""`python -m agentls.providers.local serve ...`: the command line the
provider starts each model's child process with (process.py); the child
itself is worker.py."""

from __future__ import annotations

import sys

from agentls.providers.local.worker import _worker_main

if __name__ == "__main__":
    sys.exit(_worker_main(sys.argv[1:]))
