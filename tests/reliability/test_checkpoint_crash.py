"""Checkpoints survive kill -9: the server stores a file's content before it
sends the edit, so a server killed between the two (the editor never got
the edit, or applied it but the answer never came back) loses nothing. A
new server on the same AGENTLS_STATE_DIR lists the checkpoint and the
restore puts the file back without calling the applied edit someone else's
change.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest

from tests.reliability.harness import LspProcess, scripted_settings, wait_until

CAPABILITIES = {
    "workspace": {
        "applyEdit": True,
        "workspaceEdit": {"documentChanges": True,
                          "resourceOperations": ["create", "rename", "delete"],
                          "changeAnnotationSupport": {}},
    },
}


def _path(uri: str) -> Path:
    return Path(unquote(urlparse(uri).path))


def _offset(text: str, position: dict[str, int]) -> int:
    lines = text.splitlines(keepends=True)
    return sum(len(line) for line in lines[: position["line"]]) + position["character"]


def apply_to_disk(edit: dict[str, Any]) -> None:
    """What an editor does with the edit of a file it does not have open
    (ASCII text: characters are code units)."""
    for change in edit.get("documentChanges") or []:
        kind = change.get("kind")
        if kind == "create":
            _path(change["uri"]).write_text("")
        elif kind == "delete":
            _path(change["uri"]).unlink()
        elif kind == "rename":
            _path(change["oldUri"]).rename(_path(change["newUri"]))
        else:
            path = _path(change["textDocument"]["uri"])
            text = path.read_text()
            spans = sorted(((_offset(text, e["range"]["start"]), _offset(text, e["range"]["end"]),
                             e["newText"]) for e in change["edits"]), reverse=True)
            for start, end, new in spans:
                text = text[:start] + new + text[end:]
            path.write_text(text)


def stored_checkpoint_files(state: Path) -> list[tuple[int, str, str | None]]:
    conn = sqlite3.connect(f"file:{state / 'sessions.sqlite3'}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = conn.execute("SELECT turn, path, content FROM checkpoint_files").fetchall()
    finally:
        conn.close()
    return [(turn, path, content) for turn, path, content in rows]


@pytest.mark.parametrize("applied", [False, True], ids=["edit-never-arrived", "edit-applied"])
def test_kill_9_between_checkpoint_and_edit_loses_nothing(
    tmp_path: Path, workspace: Path, applied: bool
) -> None:
    state = tmp_path / "state"
    notes = workspace / "notes.md"
    settings, _ = scripted_settings(tmp_path, "crash", [
        {"tool_calls": [{"id": "w1", "name": "edit_file",
                         "arguments": {"path": "notes.md", "old_string": "42",
                                       "new_string": "43"}}]},
        {"text": "never reached"},
    ])
    lsp = LspProcess.spawn(state_dir=state)
    sent = threading.Event()

    def editor(method: str, params: Any) -> Any:
        if method == "workspace/applyEdit":
            if applied:
                apply_to_disk(params["edit"])
            sent.set()
            time.sleep(60)  # the answer never makes it back: the server dies first
        return None

    lsp.responder = editor
    lsp.initialize(workspace=workspace, settings=settings, capabilities=CAPABILITIES)
    lsp.request_async("agentls/chat", {"prompt": "Bump the answer."})
    wait_until(sent.is_set, "the applyEdit request")
    session_id = lsp.notifications_of("agentls/message")[0]["sessionId"]
    lsp.kill()

    assert stored_checkpoint_files(state) == [
        (1, str(notes.resolve()), "the notes say 42\n")]
    assert notes.read_text() == ("the notes say 43\n" if applied else "the notes say 42\n")

    after, _ = scripted_settings(tmp_path, "after", [])
    with LspProcess.start(state_dir=state, workspace=workspace, settings=after,
                          capabilities=CAPABILITIES) as again:
        edits: list[dict[str, Any]] = []

        def applies(method: str, params: Any) -> Any:
            if method == "workspace/applyEdit":
                edits.append(params)
                apply_to_disk(params["edit"])
                return {"applied": True}
            return None

        again.responder = applies
        listed = again.result("agentls/checkpoints", {"sessionId": session_id})
        assert [(c["turn"], c["files"]) for c in listed["checkpoints"]] == [(1, ["notes.md"])]
        answer = again.result("agentls/restoreCheckpoint", {"sessionId": session_id, "turn": 1})
        # The applied edit was the agent's (its hash was stored as pending
        # before it was sent), so it is no conflict.
        assert answer["restored"] == ["notes.md"] and answer["conflicts"] == [], answer
        assert len(edits) == (1 if applied else 0)
    assert notes.read_text() == "the notes say 42\n"
