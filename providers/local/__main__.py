"""`python -m agentls.providers.local serve ...`: the command line the
provider starts each model's child process with (process.py); the child
itself is worker.py. `... host ...`: the per-user model host
(shared/host.py)."""

from __future__ import annotations

import sys

if __name__ == "__main__":
    if sys.argv[1:2] == ["host"]:
        from agentls.providers.local.shared.host import host_main

        sys.exit(host_main(sys.argv[1:]))
    from agentls.providers.local.worker import _worker_main

    sys.exit(_worker_main(sys.argv[1:]))
