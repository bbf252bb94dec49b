"""A file path with control characters or a bidi override is shown escaped
in every question about it (docs/security.md, "Long questions"), through
the REAL server: in annotation mode the editor's own confirmation (the
change annotation's label and description, the applyEdit label) is the
question, and it shows `<U+001B>` / `<U+202E>` as message mode does."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.harness import LspProcess, scripted_settings

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file names")

NAME = "a\x1b[2Kb\u202etxt.exe"
ANNOTATIONS = {"window": {"showMessage": {"messageActionItem": {}}},
               "workspace": {"applyEdit": True, "workspaceEdit": {
                   "documentChanges": True, "resourceOperations": ["create"],
                   "changeAnnotationSupport": {"groupsOnLabel": True}}}}


@pytest.mark.parametrize("mode", ["annotation", "message"])
def test_a_path_with_control_characters_is_escaped_in_the_question(
    tmp_path: Path, mode: str
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    settings, _ = scripted_settings(tmp_path, "odd", [
        {"tool_calls": [{"id": "w", "name": "write_file",
                         "arguments": {"path": NAME, "content": "x\n"}}]}, {"text": "ok"}])
    settings["approval"] = {"mode": mode}
    seen: list[tuple[str, Any]] = []

    def editor(method: str, params: Any) -> Any:
        seen.append((method, params))
        if method == "window/showMessageRequest":
            return {"title": "Deny"}
        return {"applied": False, "failureReason": "declined"}

    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings, capabilities=ANNOTATIONS) as lsp:
        lsp.responder = editor
        result = lsp.result("agentls/chat", {"prompt": "go"}, timeout=60)
        assert result["status"] == "completed", str(result)[:500]
    shown: list[str] = []
    for method, params in seen:
        if method == "window/showMessageRequest":
            shown.append(params["message"])
        elif method == "workspace/applyEdit":
            shown.append(params.get("label", ""))
            for annotation in params["edit"].get("changeAnnotations", {}).values():
                shown += [annotation["label"], annotation.get("description", "")]
    assert shown, seen
    for text in shown:
        assert "\x1b" not in text and "\u202e" not in text, json.dumps(text)
    assert any("a<U+001B>[2Kb<U+202E>txt.exe" in text for text in shown), shown
