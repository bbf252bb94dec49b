"""Deep paths do not freeze the server (docs/security.md), through the REAL
server: the model reads files 2,000 folders deep (reads are auto-allowed,
and every path a turn touched is looked up for nested AGENTS.md files
before each later model call). The lookup is bounded, cached per folder
and runs off the event loop, so the next model call is made and
`agentls/status` is answered while the turn is still running.

No timing is asserted: the old code spent minutes of CPU on the event loop
here, so the waits below (bounded, as every wait in this suite) never
ended; bench/bench_instructions.py measures the lookup itself.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.reliability.harness import LspProcess, scripted_settings, wait_until

DEPTH = 2000


def deep(name: str) -> str:
    return "d/" * DEPTH + name


def test_a_turn_over_paths_2000_folders_deep_leaves_the_server_responsive(
    tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    (workspace / "d" / "d").mkdir(parents=True)
    (workspace / "AGENTS.md").write_text("Be brief.\n")
    (workspace / "d" / "AGENTS.md").write_text("Nested rules.\n")
    reads = [{"id": f"r{i}", "name": "read_file", "arguments": {"path": deep(f"f{i}.py")}}
             for i in range(3)]
    settings, record = scripted_settings(tmp_path, "deep", [
        {"tool_calls": reads},
        {"tool_calls": [{"id": "r9", "name": "read_file",
                         "arguments": {"path": deep("again.py")}}]},
        {"chunks": ["still thinking"], "stall": True},
    ])
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings) as lsp:
        turn = lsp.request_async("agentls/chat", {"prompt": "Read the deep files."})

        def model_calls() -> list[dict[str, object]]:
            text = record.read_text() if record.exists() else ""
            # Only whole lines: the server may be writing the last one (a read
            # mid-write failed as "Unterminated string" under load).
            return [json.loads(line) for line in text.splitlines(keepends=True)
                    if line.endswith("\n")]

        # The third model call is made: the lookups over the deep paths
        # before the second and third calls are done.
        wait_until(lambda: len(model_calls()) >= 3, "the model call after the deep reads",
                   timeout=60)
        status = lsp.result("agentls/status", {})
        assert isinstance(status, dict)
        assert not turn.done(), "the turn is stalled by the script; it cannot have finished"
        # The nested file of the first folder applies; nothing deeper is
        # looked for past the depth limit, and the root file still applies.
        last = model_calls()[-1]["messages"]
        assert isinstance(last, list)
        system = "\n".join(m["content"] for m in last if m["role"] == "system")
        assert "Be brief." in system and "Nested rules." in system
