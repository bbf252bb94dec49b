"""Linter hooks (features/linters/) against real subprocesses: ruff (the
default), small Python scripts as generic linters, `sleep` for timeouts.

Covered: ruff JSON and generic `file:line:col: message` parsing; the temp
copy and stdin modes; the workspace's ruff configuration; touched / new /
outstanding filtering; injection size limits; timeouts, linters that cannot
start or fail, reported once; languages matching; the default (ruff when
installed, nothing otherwise); diagnostics with UTF-16 columns, replaced and
cleared; renames and deletes; the event loop stays free while linting.
"""

from __future__ import annotations

import asyncio
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentls.core.editor.edits import DocumentSnapshot
from agentls.core.plugins.hook_modules import HookContext, register_hook_modules
from agentls.core.plugins.hooks import HookRegistry
from agentls.core.settings.schema import AgentlsSettings, SessionSettings
from agentls.core.types.messages import HookResult
from agentls.features import linters as linters_module
from agentls.features.linters import (
    DIAGNOSTIC_SOURCE,
    Finding,
    Linter,
    LintersHook,
    changed_line_ranges,
    default_linters,
    filter_findings,
    format_injection,
    language_id_for,
    linters_for,
    parse_output,
    run_linter,
    to_diagnostic,
)
from agentls.features.linters import config as linter_config
from agentls.features.linters import report as linter_report

pytestmark = pytest.mark.skipif(
    not default_linters(), reason="ruff is not installed in the test environment"
)

BAD = "import os\n\nprint(undefined_name)\n"
GOOD = "print('hello')\n"

# A generic linter: flags every line containing TODO as `path:line:col: W001 ...`
# and checks it was given a file with the document's name.
TODO_LINTER = (
    "import sys, pathlib\n"
    "p = pathlib.Path(sys.argv[1])\n"
    "for n, line in enumerate(p.read_text().splitlines(), 1):\n"
    "    c = line.find('TODO')\n"
    "    if c >= 0:\n"
    "        print(f'{p}:{n}:{c + 1}: W001 TODO left in {p.name}')\n"
)
# The same on stdin, naming the file '-'.
TODO_STDIN_LINTER = (
    "import sys\n"
    "for n, line in enumerate(sys.stdin.read().splitlines(), 1):\n"
    "    c = line.find('TODO')\n"
    "    if c >= 0:\n"
    "        print(f'-:{n}:{c + 1}: error: TODO on stdin [todo]')\n"
)


def ruff() -> Linter:
    return default_linters()[0]


def settings(**values: Any) -> AgentlsSettings:
    return AgentlsSettings.model_validate(values)


def post(
    path: Path,
    new_text: str | None,
    old_text: str | None = None,
    changed: list[list[int]] | None = None,
    *,
    tool: str = "write_file",
    success: bool = True,
    tool_input: dict[str, Any] | None = None,
) -> dict[str, Any]:
    output: dict[str, Any] = {
        "path": str(path), "uri": path.as_uri(), "old_text": old_text, "new_text": new_text,
        "applied": True,
    }
    if changed is not None:
        output["changed_lines"] = changed
    return {
        "tool_name": tool, "tool_input": tool_input or {"path": path.name},
        "tool_call_id": "call-1", "session_id": "s1",
        "result": {"success": success, "output": output if success else None,
                   "error": None if success else {"message": "declined"}},
    }


class Harness:
    """The hook module registered on a HookRegistry, with a recording
    publish_diagnostics and an optional open-buffer lookup."""

    def __init__(self, workspace: Path, config: AgentlsSettings | None = None) -> None:
        self.workspace = workspace
        self.published: list[tuple[str, list[dict[str, Any]], int | None]] = []
        self.buffers: dict[str, DocumentSnapshot] = {}
        self.module = LintersHook()
        self.context = HookContext(
            settings=config or AgentlsSettings(),
            workspace_folders=[workspace],
            documents=self.buffers.get,
            publish_diagnostics=lambda uri, diags, version: self.published.append(
                (uri, diags, version)),
        )
        self.hooks = register_hook_modules([self.module], self.context)

    async def post(self, *args: Any, **kwargs: Any) -> HookResult:
        return await self.hooks.emit("tool:post", post(*args, **kwargs))


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


# --------------------------------------------------------------------------- ruff


async def test_ruff_findings_from_the_real_subprocess(ws: Path) -> None:
    run = await run_linter(ruff(), BAD, ws / "foo.py", cwd=ws)
    assert run.failure is None
    assert [(f.code, f.line, f.column, f.severity) for f in run.findings] == [
        ("F401", 0, 7, "error"), ("F821", 2, 6, "error")]
    first = run.findings[0]
    assert first.message == "`os` imported but unused"
    assert (first.end_line, first.end_column) == (0, 9)
    assert first.linter == "ruff" and first.url and "unused-import" in first.url


async def test_ruff_reads_the_workspace_configuration(ws: Path) -> None:
    (ws / "pyproject.toml").write_text(
        '[tool.ruff]\nline-length = 20\n[tool.ruff.lint]\nselect = ["E501"]\n'
        '[tool.ruff.lint.per-file-ignores]\n"generated.py" = ["E501"]\n')
    text = "import os\nx = 'a very long line of text'\n"
    run = await run_linter(ruff(), text, ws / "foo.py", cwd=ws)
    assert [f.code for f in run.findings] == ["E501"]  # F401 not selected there
    ignored = await run_linter(ruff(), text, ws / "generated.py", cwd=ws)
    assert ignored.findings == [] and ignored.failure is None


async def test_ruff_with_a_broken_configuration_is_a_failure(ws: Path) -> None:
    (ws / "pyproject.toml").write_text("[tool.ruff.lint]\nnot-an-option = 1\n")
    run = await run_linter(ruff(), BAD, ws / "foo.py", cwd=ws)
    assert run.failure_kind == "failed" and run.findings == []
    assert "exited with status 2" in (run.failure or "")


def test_ruff_json_parsing_keeps_only_the_linted_file() -> None:
    output = (
        '[{"code": "F401", "filename": "/tmp/x/foo.py", "location": {"row": 2, "column": 1},'
        ' "end_location": {"row": 2, "column": 4}, "message": "m1", "severity": "warning"},'
        ' {"code": "F821", "filename": "/tmp/x/other.py", "location": {"row": 1, "column": 1},'
        ' "message": "m2"},'
        ' {"code": null, "filename": "/tmp/x/foo.py", "location": {"row": 1, "column": 3},'
        ' "message": "SyntaxError: bad"}]'
    )
    findings, omitted = parse_output(output, linter="ruff", names={"foo.py"}, fmt="ruff-json")
    assert omitted == 0
    assert [(f.code, f.line, f.column, f.severity) for f in findings] == [
        ("F401", 1, 0, "warning"), (None, 0, 2, "error")]
    with pytest.raises(ValueError):
        parse_output("ruff failed", linter="ruff", fmt="ruff-json")


# --------------------------------------------------------------------------- generic


def test_generic_line_formats() -> None:
    output = "\n".join([
        "/tmp/a/foo.py:3:5: F401 'os' imported but unused",  # flake8
        "foo.py:7: error: Name \"x\" is not defined  [name-defined]",  # mypy
        "/tmp/a/foo.py:2:10: 'y' is assigned a value but never used. [Error/no-unused-vars]",
        "foo.py:4:1: note: just so you know",
        "other.py:1:1: E999 not this file",
        "Found 3 errors.",
        "",
    ])
    findings, _ = parse_output(output, linter="lint", names={"foo.py"})
    assert [(f.line, f.column, f.code, f.severity, f.message) for f in findings] == [
        (2, 4, "F401", "warning", "'os' imported but unused"),
        (6, 0, "name-defined", "error", 'Name "x" is not defined'),
        (1, 9, "no-unused-vars", "error", "'y' is assigned a value but never used."),
        (3, 0, None, "information", "just so you know"),
    ]


async def test_generic_linter_runs_on_a_temp_copy_with_the_same_name(ws: Path) -> None:
    linter = Linter("todo", ("python",), (sys.executable, "-c", TODO_LINTER, "{file}"))
    target = ws / "pkg" / "mod.py"  # need not exist: the buffer may be unsaved
    run = await run_linter(linter, "x = 1\n# TODO: later\n", target, cwd=ws)
    assert run.failure is None
    assert [(f.line, f.column, f.code, f.message) for f in run.findings] == [
        (1, 2, "W001", "TODO left in mod.py")]
    assert not target.exists()


async def test_generic_linter_without_file_placeholder_reads_stdin(ws: Path) -> None:
    linter = Linter("todo", ("python",), (sys.executable, "-c", TODO_STDIN_LINTER))
    run = await run_linter(linter, "a = 1\nb = 2  # TODO\n", ws / "m.py", cwd=ws)
    assert [(f.line, f.column, f.code, f.severity) for f in run.findings] == [
        (1, 9, "todo", "error")]


async def test_failing_generic_linter_without_findings_is_a_failure(ws: Path) -> None:
    linter = Linter("bad", ("python",), (sys.executable, "-c", "import sys; sys.exit(3)", "{file}"))
    run = await run_linter(linter, "x = 1\n", ws / "m.py", cwd=ws)
    assert run.failure_kind == "failed" and "status 3" in (run.failure or "")


# --------------------------------------------------------------------------- trouble


@pytest.mark.skipif(shutil.which("sleep") is None or shutil.which("sh") is None
                    or not Path("/proc/self/stat").exists(),
                    reason="needs sh, sleep and /proc to see the child")
async def test_timeout_kills_the_linter(ws: Path) -> None:
    # `sh` starts `sleep` as a child and writes its pid: the whole process
    # group is stopped, the child included.
    pid_file = ws / "sleep.pid"
    script = f"sleep 31.4159 & echo $! > {shlex.quote(str(pid_file))}; wait; echo $0"
    linter = Linter("sleepy", ("python",), ("sh", "-c", script, "{file}"), timeout=1.5)
    # Bounded: a child left running holds the output pipe, and the run would
    # then last as long as the child (31 s).
    run = await asyncio.wait_for(run_linter(linter, "x = 1\n", ws / "m.py", cwd=ws), 20)
    assert run.failure_kind == "timeout" and "1.5 s" in (run.failure or "")
    # The pid proves the child was running when the timeout struck; a killed
    # process is gone once its parent (init, after sh died) reaps it.
    assert pid_file.exists(), "sh never started its child: the test proved nothing"
    child = int(pid_file.read_text())
    for _ in range(500):
        if not _running(child):
            break
        await asyncio.sleep(0.01)
    assert not _running(child), "the linter's child survived the timeout"


def _running(pid: int) -> bool:
    """The process exists and is not a zombie (Linux /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def test_linter_that_cannot_start(ws: Path) -> None:
    linter = Linter("ghost", ("python",), (str(ws / "no-such-linter"), "{file}"))
    run = await run_linter(linter, "x = 1\n", ws / "m.py", cwd=ws)
    assert run.failure_kind == "start" and "could not start" in (run.failure or "")


@pytest.mark.skipif(shutil.which("sleep") is None or shutil.which("sh") is None,
                    reason="needs sh and sleep")
async def test_timeouts_are_reported_once_and_not_fatal(ws: Path) -> None:
    config = settings(linters=[
        {"languages": ["python"], "command": ["sh", "-c", "sleep 30", "{file}"],
         "timeoutSeconds": 0.3},
        {"languages": ["python"], "command": [*ruff().command]},
    ])
    harness = Harness(ws, config)
    first = await harness.post(ws / "foo.py", BAD)
    # ruff still ran: its findings are injected; the sleeper is reported
    assert first.action == "inject_context" and "F821" in (first.context_injection or "")
    assert first.user_message_level == "warning"
    assert "the linter sh " in (first.user_message or "")
    assert "did not finish within 0.3 s" in (first.user_message or "")
    second = await harness.post(ws / "foo.py", BAD + "x = 1\n", BAD, [[3, 3]])
    assert "did not finish" not in (second.user_message or "")


async def test_event_loop_is_not_blocked_while_linting(ws: Path) -> None:
    slow = "import time, sys; time.sleep(0.6); print(sys.argv[1] + ':1:1: W1 slow')"
    config = settings(linters=[
        {"languages": ["python"], "command": [sys.executable, "-c", slow, "{file}"]}])
    harness = Harness(ws, config)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.02)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        result = await harness.post(ws / "foo.py", "x = 1\n")
    finally:
        task.cancel()
    assert "W1 slow" in (result.context_injection or "")
    assert ticks >= 10


# --------------------------------------------------------------------------- filtering


def finding(line: int, code: str, message: str = "m") -> Finding:
    return Finding(line=line, column=0, message=message, code=code, linter="ruff")


def test_filter_keeps_touched_and_new_findings() -> None:
    before = [finding(0, "F401", "os"), finding(5, "F821", "x")]
    after = [finding(0, "F401", "os"), finding(7, "F821", "x"), finding(9, "F821", "x"),
             finding(3, "E711", "none")]
    kept = filter_findings(after, changed=[(3, 3)], baseline=before)
    # F401 existed and is untouched; one F821 "x" existed (moved lines), the
    # second is new; E711 is on a touched line
    assert [(f.line, f.code) for f in kept] == [(9, "F821"), (3, "E711")]


def test_filter_with_unknown_baseline_keeps_only_touched_lines() -> None:
    after = [finding(0, "F401"), finding(4, "F821")]
    assert filter_findings(after, changed=[(4, 6)], baseline=None) == [after[1]]


def test_filter_new_file_keeps_everything() -> None:
    after = [finding(0, "F401"), finding(4, "F821")]
    assert filter_findings(after, changed=[], baseline=[]) == after


def test_filter_keeps_findings_reported_earlier_that_are_still_there() -> None:
    before = [finding(0, "F401", "os"), finding(2, "F821", "x")]
    after = [finding(2, "F821", "x")]
    assert filter_findings(after, changed=[(0, 0)], baseline=before) == []
    outstanding = {("ruff", "F821", "x"): 1}
    assert filter_findings(after, changed=[(0, 0)], baseline=before,
                           outstanding=outstanding) == after


def test_changed_line_ranges() -> None:
    assert changed_line_ranges(None, "a\nb\n") == [(0, 2)]
    assert changed_line_ranges("a\nb\nc\n", "a\nB\nc\n") == [(1, 1)]
    assert changed_line_ranges("a\nb\nc\n", "a\nc\n") == [(1, 1)]
    assert changed_line_ranges("a\n", "a\nb\nc\n") == [(1, 2)]


# --------------------------------------------------------------------------- injection


def test_injection_lists_path_line_col_code_message() -> None:
    text = format_injection(
        [finding(0, "F401", "`os` imported but unused")], shown_path="src/foo.py",
        tool_name="write_file")
    assert text is not None
    assert "ruff found 1 problem in src/foo.py after your write_file" in text
    assert text.splitlines()[-1] == "src/foo.py:1:1: F401 `os` imported but unused"


def test_injection_is_truncated_with_a_count_within_the_limit() -> None:
    findings = [finding(i, "F821", f"Undefined name `name_{i}`") for i in range(100)]
    for limit in (300, 1000, 4000):
        text = format_injection(findings, shown_path="a.py", tool_name="edit_file",
                                max_bytes=limit)
        assert text is not None and len(text.encode()) <= limit
        listed = [line for line in text.splitlines() if line.startswith("a.py:")]
        assert 0 < len(listed) < 100
        assert text.endswith(f"... and {100 - len(listed)} more problems not shown "
                             "(injection size limit).")
    assert format_injection(findings, shown_path="a.py", tool_name="edit_file",
                            max_bytes=20) is None
    whole = format_injection(findings, shown_path="a.py", tool_name="edit_file")
    assert whole is not None and "not shown" not in whole


async def test_hook_respects_the_injection_size_limit(ws: Path) -> None:
    text = "".join(f"print(undefined_{i})\n" for i in range(60))
    harness = Harness(ws, AgentlsSettings(session=SessionSettings(injection_size_limit=1000)))
    result = await harness.post(ws / "many.py", text)
    assert result.action == "inject_context"
    injected = result.context_injection or ""
    assert len(injected.encode()) <= 1000 and "more problems not shown" in injected
    assert "ruff found 60 problems" in (result.user_message or "")
    assert len(harness.published[-1][1]) == 60  # the editor shows them all


# --------------------------------------------------------------------------- selection


def test_languages_matching() -> None:
    def names(path: str, language_id: str | None = None) -> list[str]:
        linters = [
            Linter("py", ("python",), ("x",)), Linter("ext", (".pyi",), ("x",)),
            Linter("bare", ("ts",), ("x",)), Linter("glob", ("*.test.js",), ("x",)),
            Linter("all", ("*",), ("x",)), Linter("md", ("markdown",), ("x",)),
        ]
        return [linter.name for linter in linters_for(linters, path, language_id)]

    assert names("src/a.py") == ["py", "all"]
    assert names("stubs/a.pyi") == ["py", "ext", "all"]
    assert names("web/a.ts") == ["bare", "all"]
    assert names("web/a.test.js") == ["glob", "all"]
    assert names("notes.txt", "markdown") == ["all", "md"]  # the editor's languageId
    assert language_id_for("Dockerfile") == "dockerfile"
    assert language_id_for("a.TSX") == "typescriptreact"


def test_default_is_ruff_when_installed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (linter,) = default_linters()
    assert linter.name == "ruff" and linter.languages == ("python",)
    assert linter.command[-8:] == ("check", "--output-format", "json", "--no-cache",
                                   "--force-exclude", "--stdin-filename", "{path}", "-")
    assert linter.uses_stdin and linter.output == "ruff-json"
    assert linters_module.configured_linters(AgentlsSettings()) == [linter]
    assert linters_module.configured_linters(settings(linters=[])) == []

    # Not on PATH, not next to the interpreter: `python -m ruff` when importable
    monkeypatch.setattr(linter_config.shutil, "which", lambda name: None)
    monkeypatch.setattr(linter_config.sys, "executable", str(tmp_path / "python"))
    (module,) = default_linters()
    assert module.command[:3] == (str(tmp_path / "python"), "-m", "ruff")
    # Not installed at all: no default linter
    monkeypatch.setattr(linter_config.importlib.util, "find_spec", lambda name: None)
    assert default_linters() == []


# --------------------------------------------------------------------------- diagnostics


def test_diagnostic_columns_are_utf16() -> None:
    text = 's = "😀é"; q = zz\n'
    lines = linter_report.split_lines(text)
    f = Finding(line=0, column=14, end_line=0, end_column=16, message="Undefined name `zz`",
                code="F821", severity="error", linter="ruff")
    diagnostic = to_diagnostic(f, lines)
    assert diagnostic["range"] == {"start": {"line": 0, "character": 15},
                                   "end": {"line": 0, "character": 17}}
    assert diagnostic["source"] == DIAGNOSTIC_SOURCE and diagnostic["severity"] == 1
    assert diagnostic["code"] == "F821"
    assert to_diagnostic(f, lines, "utf-8")["range"]["start"]["character"] == 18
    no_column = Finding(line=0, column=0, message="m")
    assert to_diagnostic(no_column, lines)["range"]["end"] == {"line": 0, "character": 17}


async def test_hook_injects_publishes_and_clears(ws: Path) -> None:
    harness = Harness(ws)
    path = ws / "src" / "foo.py"
    path.parent.mkdir()
    uri = path.as_uri()
    harness.buffers[str(path)] = DocumentSnapshot(uri, str(path), BAD, 4)

    bad = await harness.post(path, BAD, None, [[0, 2]])
    assert bad.action == "inject_context" and bad.context_injection_role == "system"
    assert not bad.ephemeral
    injected = bad.context_injection or ""
    # The agent hears of the error only (the default ruff's ERROR_CODES); the
    # editor is shown both.
    assert "F401" not in injected
    assert "src/foo.py:3:7: F821 Undefined name `undefined_name`" in injected
    assert injected.startswith("ruff found 1 problem in src/foo.py after your write_file")
    assert bad.user_message == "ruff found 2 problems in src/foo.py after the agent's edit"
    assert bad.user_message_level == "warning"
    (published_uri, diagnostics, version) = harness.published[-1]
    assert published_uri == uri and version == 4  # the buffer holds exactly the linted text
    assert [(d["code"], d["range"]["start"], d["source"]) for d in diagnostics] == [
        ("F401", {"line": 0, "character": 7}, "agentls"),
        ("F821", {"line": 2, "character": 6}, "agentls")]

    # The agent removes the import only: the undefined name it was told
    # about is still there (untouched line) and is reported again.
    half = "\nprint(undefined_name)\n"
    partly = await harness.post(path, half, BAD, [[0, 0]], tool="edit_file")
    assert partly.action == "inject_context"
    assert "F821" in (partly.context_injection or "")
    assert "F401" not in (partly.context_injection or "")
    assert [d["code"] for d in harness.published[-1][1]] == ["F821"]
    assert harness.published[-1][2] is None  # the buffer lookup has other text

    fixed = await harness.post(path, GOOD, half, [[1, 1]], tool="edit_file")
    assert fixed.action == "continue" and fixed.user_message is None
    assert harness.published[-1] == (uri, [], None)
    count = len(harness.published)
    again = await harness.post(path, GOOD + "x = 1\n", GOOD, [[1, 1]], tool="edit_file")
    assert again.action == "continue" and len(harness.published) == count  # nothing to clear


async def test_style_findings_are_shown_to_the_user_not_pushed_to_the_agent(ws: Path) -> None:
    harness = Harness(ws)
    path = ws / "style.py"
    text = "import os\n\n\ndef even(n):\n    return n % 2 == 0\n"
    style = await harness.post(path, text, None, [[0, 4]])
    assert style.action == "continue" and style.context_injection is None
    assert style.user_message == "ruff found 1 problem in style.py after the agent's edit"
    assert [d["code"] for d in harness.published[-1][1]] == ["F401"]
    # A linter the user configured sends the agent everything it reports.
    mine = Harness(ws, settings(linters=[{"languages": ["python"],
                                          "command": [*ruff().command]}]))
    told = await mine.post(path, text, None, [[0, 4]])
    assert told.action == "inject_context" and "F401" in (told.context_injection or "")


async def test_preexisting_findings_outside_the_edit_are_not_reported(ws: Path) -> None:
    harness = Harness(ws)
    old = "import os\n\nx = 1\n"
    new = "import os\n\nx = 2\n"
    result = await harness.post(ws / "a.py", new, old, [[2, 2]], tool="edit_file")
    assert result.action == "continue" and harness.published == []
    # without changed_lines the touched lines are computed from the texts
    result = await harness.post(ws / "a.py", "import os\n\nx = y\n", old, tool="edit_file")
    assert "F821" in (result.context_injection or "")
    assert "F401" not in (result.context_injection or "")


async def test_rename_and_delete_clear_published_diagnostics(ws: Path) -> None:
    harness = Harness(ws)
    old, new = ws / "old.py", ws / "new.py"
    await harness.post(old, BAD)
    assert harness.published[-1][0] == old.as_uri()
    moved = await harness.post(new, BAD, BAD, [], tool="rename_file",
                               tool_input={"path": "old.py", "new_path": "new.py"})
    # the findings stay on record for the new name; the old name is cleared
    assert (old.as_uri(), [], None) in harness.published
    assert moved.action == "continue"  # nothing new: a rename changes no line
    await harness.post(new, BAD + "y = z\n", BAD, [[3, 3]], tool="edit_file")
    assert harness.published[-1][0] == new.as_uri()
    await harness.post(new, None, BAD, None, tool="delete_file")
    assert harness.published[-1] == (new.as_uri(), [], None)


async def test_ignores_failed_calls_other_tools_and_other_languages(ws: Path) -> None:
    harness = Harness(ws)
    assert (await harness.post(ws / "a.py", BAD, success=False)).action == "continue"
    assert (await harness.post(ws / "a.py", BAD, tool="read_file")).action == "continue"
    assert (await harness.post(ws / "notes.md", "import os\n")).action == "continue"
    assert harness.published == []


async def test_no_linters_configured(ws: Path) -> None:
    harness = Harness(ws, settings(linters=[]))
    assert (await harness.post(ws / "a.py", BAD)).action == "continue"


async def test_registered_as_an_entry_point() -> None:
    from agentls.core.plugins.registry import PluginRegistry

    registry = PluginRegistry.discover()
    modules = [m for m in registry.plugins("hook") if getattr(m, "name", "") == "linters"]
    assert len(modules) == 1 and isinstance(modules[0], LintersHook)
    hooks = HookRegistry()
    modules[0].register(hooks, HookContext(settings=AgentlsSettings()))
    assert hooks.list_handlers("tool:post") == {"tool:post": ["linters"]}


async def test_diagnostics_use_the_negotiated_position_encoding(ws: Path) -> None:
    class Utf8Lookup:
        position_encoding = "utf-8"

        def __call__(self, path: str) -> DocumentSnapshot | None:
            return None

    harness = Harness(ws)
    harness.context.documents = Utf8Lookup()
    await harness.post(ws / "e.py", 's = "é"; q = zz\n')
    (diagnostic,) = harness.published[-1][1]
    assert diagnostic["range"]["start"] == {"line": 0, "character": 14}  # é is 2 bytes


@pytest.mark.skipif(shutil.which("sleep") is None or shutil.which("sh") is None,
                    reason="needs sh and sleep")
async def test_linters_stop_before_the_hook_registry_gives_up(ws: Path) -> None:
    config = settings(linters=[
        {"languages": ["python"], "command": ["sh", "-c", "sleep 30", "{file}"],
         "timeoutSeconds": 60}])
    module = LintersHook()
    hooks = HookRegistry(handler_timeout=4.0)
    module.register(hooks, HookContext(settings=config, workspace_folders=[ws]))
    started = time.monotonic()
    result = await hooks.emit("tool:post", post(ws / "a.py", "x = 1\n"))
    assert time.monotonic() - started < 4.0
    assert "did not finish within 2 s" in (result.user_message or "")
