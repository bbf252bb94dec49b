"""examples/demo_turn.py, the README's scripted demo: it runs (real server,
scripted provider, ruff), shows a full turn in order, and prints exactly
the transcript the README quotes, so the README stays true."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentls.features.linters import default_linters
from tests.e2e.helpers import server_env

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo_turn.py"
README = ROOT / "README.md"
HEADING = "## A full agent turn (scripted demo)"

pytestmark = pytest.mark.skipif(not default_linters(), reason="ruff is not installed")


@pytest.fixture(scope="module")
def transcript() -> str:
    done = subprocess.run(
        [sys.executable, str(DEMO)], capture_output=True, text=True, timeout=120,
        env=server_env(), cwd=ROOT, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_demo_shows_a_full_turn_in_order(transcript: str) -> None:
    steps = [
        "[user]     Add a greet(name) helper in greet.py.",
        '[agent]    calls write_file(path="greet.py"',
        "[editor]   agentls asks (window/showMessageRequest):",
        "[user]     clicks [Allow once]",
        '[editor]   applies "agentls: write_file greet.py" (workspace/applyEdit)',
        "5:22 error F821 ruff: Undefined name `nmae` [source: agentls]",
        "[agentls]  warning: ruff found 1 problem in greet.py after the agent's edit",
        "[hook]     linters adds for the model (system):",
        "greet.py:5:22: F821 Undefined name `nmae`",
        '[agent]    calls edit_file(path="greet.py", old_string="{nmae}", new_string="{name}")',
        "[user]     clicks [Allow once]",
        "[editor]   diagnostics for greet.py: cleared",
        "[agent]    Done:",
        "[turn]     completed (3 model calls)",
        '   5 |     return f"Hello, {name}!"',
    ]
    position = 0
    for step in steps:
        found = transcript.find(step, position)
        assert found >= 0, f"{step!r} missing or out of order in:\n{transcript}"
        position = found + len(step)


def test_the_readme_quotes_what_the_demo_prints(transcript: str) -> None:
    readme = README.read_text(encoding="utf-8")
    assert HEADING in readme
    section = readme.split(HEADING, 1)[1]
    match = re.search(r"```text\n(.*?)```", section, re.DOTALL)
    assert match is not None, "no ```text block in the README's demo section"
    quoted = match.group(1)
    assert quoted.rstrip("\n") == transcript.rstrip("\n"), (
        "README.md is out of date: run `python examples/demo_turn.py` and paste its output "
        f"into the ```text block under {HEADING!r}")
