"""copilot.el's chat (copilot-chat.el) against agentls over real LSP: the
server is a subprocess, the test sends what copilot-chat.el sends, message
for message (initialize with its editorInfo / editorPluginInfo and
capabilities, conversation/create with its params, conversation/
registerTools with its four tools, conversation/turn, conversation/
destroy), and answers the server's requests as copilot-chat.el does
(conversation/invokeClientToolConfirmation -> {result: accept|dismiss},
conversation/invokeClientTool -> a LanguageModelToolResult, any request it
has no handler for -> null). The scripted provider plays the model; its
record shows what the model was sent.

The provider comes from the user's config file (AGENTLS_CONFIG_FILE), as a
copilot.el user would configure agentls: copilot.el sends no agentls
settings.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.harness import LspProcess, wait_until

TIMEOUT = 20.0

# copilot-chat--tool-definitions, as copilot-chat.el registers them.
COPILOT_EL_TOOLS = [
    {"name": "run_in_terminal", "description": "Run a shell command in the terminal.",
     "inputSchema": {"type": "object", "properties": {"command": {"type": "string"},
                                                      "explanation": {"type": "string"}},
                     "required": ["command"]}},
    {"name": "create_file", "description": "Create a new file with the given content.",
     "inputSchema": {"type": "object", "properties": {"filePath": {"type": "string"},
                                                      "content": {"type": "string"}},
                     "required": ["filePath", "content"]}},
    {"name": "get_errors", "description": "Get diagnostics/errors for the given files.",
     "inputSchema": {"type": "object", "properties": {
         "filePaths": {"type": "array", "items": {"type": "string"}}},
         "required": ["filePaths"]}},
    {"name": "fetch_web_page", "description": "Fetch the content of web pages.",
     "inputSchema": {"type": "object", "properties": {
         "urls": {"type": "array", "items": {"type": "string"}}},
         "required": ["urls"]}},
]


class CopilotEl:
    """The editor side: what copilot-chat.el answers, and what it was sent."""

    def __init__(self, lsp: LspProcess, workspace: Path) -> None:
        self.lsp = lsp
        self.workspace = workspace
        self.confirm = "accept"
        self.choose: str | None = None  # window/showMessageRequest: the title picked
        self.requests: list[tuple[str, Any]] = []
        self.lock = threading.Lock()
        lsp.responder = self.answer

    def answer(self, method: str, params: Any) -> Any:
        with self.lock:
            self.requests.append((method, params))
        if method == "conversation/invokeClientToolConfirmation":
            return {"result": self.confirm}
        if method == "conversation/invokeClientTool" and params["name"] == "create_file":
            path = Path(params["input"]["filePath"])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(params["input"]["content"])
            return {"status": "success",
                    "content": [{"value": f"File {params['input']['filePath']} created."}]}
        if method == "window/showMessageRequest" and self.choose is not None:
            return {"title": self.choose}  # copilot.el's completing-read over the titles
        if method == "workspace/applyEdit":
            return {"applied": apply_edit(params["edit"])}
        return None  # copilot.el has no handler: jsonrpc answers null

    def asked(self, method: str) -> list[Any]:
        with self.lock:
            return [p for m, p in self.requests if m == method]

    def progress(self, token: str) -> list[dict[str, Any]]:
        return [p["value"] for p in self.lsp.notifications_of("$/progress")
                if p.get("token") == token]

    def wait_end(self, token: str) -> list[dict[str, Any]]:
        wait_until(lambda: any(v["kind"] == "end" for v in self.progress(token)),
                   f"the progress end of {token}", TIMEOUT)
        return self.progress(token)


def apply_edit(edit: dict[str, Any]) -> bool:
    """A plain `changes` edit, applied to files on disk (ASCII test texts)."""
    from pygls.uris import to_fs_path

    for uri, text_edits in (edit.get("changes") or {}).items():
        path = Path(to_fs_path(uri) or "")
        lines = path.read_text().splitlines(keepends=True) if path.exists() else []
        text = "".join(lines)

        def offset(pos: dict[str, int], lines: list[str] = lines) -> int:
            return sum(len(line) for line in lines[:pos["line"]]) + pos["character"]

        for e in sorted(text_edits, key=lambda e: offset(e["range"]["start"]), reverse=True):
            text = (text[:offset(e["range"]["start"])] + e["newText"]
                    + text[offset(e["range"]["end"]):])
        path.write_text(text)
    return True


def reply_text(values: list[dict[str, Any]]) -> str:
    return "".join(v.get("reply") or "" for v in values if v["kind"] == "report")


def recorded(record: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in record.read_text().splitlines() if line.strip()]


def call(tool: str, call_id: str = "c1", **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": tool, "arguments": arguments}]}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "a.py").write_text("x = 1\n")
    return folder


def start(tmp_path: Path, workspace: Path, responses: list[dict[str, Any]], *,
          apply_edit: bool = False, config_text: str = "") -> tuple[LspProcess, Path]:
    record = tmp_path / "model.record.jsonl"
    script = tmp_path / "model.script.json"
    script.write_text(json.dumps({"responses": responses, "record": str(record)}))
    config = tmp_path / "agentls.toml"
    config.write_text(f'provider = "scripted"\n{config_text}'
                      f'[providerOptions]\nscript = "{script}"\n')
    lsp = LspProcess.spawn(state_dir=tmp_path / "state",
                           stderr_file=tmp_path / "stderr.log",
                           env={"AGENTLS_CONFIG_FILE": str(config)})
    # copilot--client-capabilities; `applyEdit` is not in it (see the edit test).
    capabilities: dict[str, Any] = {
        "workspace": {"workspaceFolders": True},
        "textDocument": {"inlineCompletion": {"dynamicRegistration": False}},
        "copilot": {"ipCodeCitation": False, "watchedFiles": False},
    }
    if apply_edit:
        capabilities["workspace"]["applyEdit"] = True
    root = workspace.as_uri()
    lsp.result("initialize", {
        "processId": 4242, "rootUri": root, "capabilities": capabilities,
        "workspaceFolders": [{"uri": root, "name": workspace.name}],
        "initializationOptions": {"editorInfo": {"name": "Emacs", "version": "30.1"},
                                  "editorPluginInfo": {"name": "copilot.el",
                                                       "version": "0.7.1"}},
    }, timeout=TIMEOUT)
    lsp.notify("initialized", {})
    lsp.notify("workspace/didChangeConfiguration", {"settings": None})
    return lsp, record


def copilot_doc(path: Path) -> dict[str, Any]:
    """copilot-chat--generate-context-doc for the buffer visiting `path`."""
    return {"version": 0, "tabSize": 4, "indentSize": 4, "insertSpaces": True,
            "path": str(path), "uri": path.as_uri(), "relativePath": path.name,
            "languageId": "python", "position": {"line": 0, "character": 0},
            "source": path.read_text()}


def create_params(workspace: Path, token: str, message: str) -> dict[str, Any]:
    """copilot-chat--create in agent mode (copilot-chat-use-agent-mode)."""
    return {"workDoneToken": token,
            "turns": [{"request": message, "response": "", "turnId": ""}],
            "capabilities": {"skills": ["current-editor"], "allSkills": True},
            "source": "panel",
            "workspaceFolders": [{"uri": f"file://{workspace}", "name": workspace.name}],
            "chatMode": "Agent", "needToolCallConfirmation": True}


def test_conversation_with_a_client_tool_then_destroy(tmp_path: Path, workspace: Path) -> None:
    """create (a reply streams as begin / report / end), registerTools,
    a turn whose model calls copilot.el's create_file: confirmed through
    invokeClientToolConfirmation, then invoked; its result reaches the model;
    destroy; a turn after destroy is refused."""
    new_file = workspace / "notes" / "todo.txt"
    lsp, record = start(tmp_path, workspace, [
        {"text": "Hello from agentls."},
        call("create_file", filePath=str(new_file), content="write tests\n"),
        {"text": "Created notes/todo.txt."},
    ])
    with lsp:
        emacs = CopilotEl(lsp, workspace)
        created = lsp.result("conversation/create",
                             create_params(workspace, "copilot-chat-1.5", "Say hello"),
                             timeout=TIMEOUT)
        assert set(created) == {"conversationId", "turnId"}
        first = emacs.wait_end("copilot-chat-1.5")
        assert first[0] == {"kind": "begin", "title": "agentls", **created}
        assert first[-1] == {"kind": "end", "result": {}, **created}
        assert reply_text(first) == "Hello from agentls."

        assert lsp.request("conversation/registerTools",
                           {"tools": COPILOT_EL_TOOLS})["result"] is None
        turn = lsp.result("conversation/turn", {
            "workDoneToken": "copilot-chat-2.5", "conversationId": created["conversationId"],
            "message": "Write a todo file", "source": "panel",
            "doc": copilot_doc(workspace / "a.py")}, timeout=TIMEOUT)
        assert turn["conversationId"] == created["conversationId"]
        assert turn["turnId"] != created["turnId"]
        second = emacs.wait_end("copilot-chat-2.5")
        assert reply_text(second) == "Created notes/todo.txt."
        assert "error" not in second[-1]["result"]

        [confirmation] = emacs.asked("conversation/invokeClientToolConfirmation")
        assert confirmation["name"] == "create_file"
        assert confirmation["input"] == {"filePath": str(new_file), "content": "write tests\n"}
        assert confirmation["conversationId"] == created["conversationId"]
        assert confirmation["turnId"] == turn["turnId"]
        [invoked] = emacs.asked("conversation/invokeClientTool")
        assert invoked["name"] == "create_file" and invoked["input"] == confirmation["input"]
        # copilot.el ties an input edited at confirmation to its invocation by this id.
        assert confirmation["toolCallId"] == invoked["toolCallId"] == "c1"
        assert new_file.read_text() == "write tests\n"

        calls = recorded(record)
        asked = [m for m in calls[1]["messages"] if m["role"] == "user"][-1]["content"]
        assert '<editor file="a.py"' in asked  # the turn's `doc` is the editor context
        assert "create_file" not in calls[0]["tools"]  # registered after the first turn
        assert {"create_file", "run_in_terminal", "get_errors",
                "fetch_web_page"} <= set(calls[1]["tools"])
        tool_results = [m for m in calls[2]["messages"] if m["role"] == "tool"]
        assert "File " + str(new_file) + " created." in str(tool_results[-1]["content"])
        # The session is agentls's own: the whole exchange is stored.
        session = lsp.result("agentls/session", {"sessionId": created["conversationId"]})
        assert [m["role"] for m in session["messages"]][:2] == ["user", "assistant"]

        assert lsp.result("conversation/destroy",
                          {"conversationId": created["conversationId"]}) == "OK"
        after = lsp.request("conversation/turn", {
            "workDoneToken": "copilot-chat-3.5", "conversationId": created["conversationId"],
            "message": "Still there?", "source": "panel"})
        assert after["error"]["code"] == -32602
        assert "Unknown conversationId" in after["error"]["message"]
        assert len(recorded(record)) == 3


def test_a_dismissed_client_tool_is_not_invoked(tmp_path: Path, workspace: Path) -> None:
    new_file = workspace / "x.txt"
    lsp, record = start(tmp_path, workspace, [
        call("create_file", filePath=str(new_file), content="no\n"),
        {"text": "Understood."},
    ])
    with lsp:
        emacs = CopilotEl(lsp, workspace)
        emacs.confirm = "dismiss"
        lsp.result("conversation/registerTools", {"tools": COPILOT_EL_TOOLS})
        lsp.result("conversation/create", create_params(workspace, "t-1", "Make x.txt"),
                   timeout=TIMEOUT)
        assert reply_text(emacs.wait_end("t-1")) == "Understood."
        assert emacs.asked("conversation/invokeClientToolConfirmation")
        assert not emacs.asked("conversation/invokeClientTool")
        assert not new_file.exists()
        tool_result = [m for m in recorded(record)[1]["messages"] if m["role"] == "tool"][-1]
        assert "declined" in str(tool_result["content"]).lower()


def test_a_client_tool_outside_the_workspace_is_refused(tmp_path: Path,
                                                       workspace: Path) -> None:
    """The gate confines a client tool's path arguments: nobody is asked,
    nothing is invoked."""
    outside = tmp_path / "outside.txt"
    lsp, record = start(tmp_path, workspace, [
        call("create_file", filePath=str(outside), content="escape\n"),
        {"text": "Cannot."},
    ])
    with lsp:
        emacs = CopilotEl(lsp, workspace)
        lsp.result("conversation/registerTools", {"tools": COPILOT_EL_TOOLS})
        lsp.result("conversation/create", create_params(workspace, "t-1", "Escape"),
                   timeout=TIMEOUT)
        emacs.wait_end("t-1")
        assert not emacs.asked("conversation/invokeClientToolConfirmation")
        assert not emacs.asked("conversation/invokeClientTool")
        assert not outside.exists()
        tool_result = [m for m in recorded(record)[1]["messages"] if m["role"] == "tool"][-1]
        assert "outside" in str(tool_result["content"]).lower()


@pytest.mark.parametrize("answer", ["accept", "dismiss"])
def test_an_edit_is_asked_then_applied(tmp_path: Path, workspace: Path, answer: str) -> None:
    """agentls's own write_file in a conversation: asked through the
    client's tool confirmation, applied with workspace/applyEdit after an
    accept, not sent after a dismiss. copilot.el itself does not advertise
    workspace.applyEdit; this client does (see the next test)."""
    lsp, record = start(tmp_path, workspace, [
        call("write_file", path="a.py", content="x = 2\n"),
        {"text": "Done."},
    ], apply_edit=True)
    with lsp:
        emacs = CopilotEl(lsp, workspace)
        emacs.confirm = answer
        lsp.result("conversation/create", create_params(workspace, "t-1", "Set x to 2"),
                   timeout=TIMEOUT)
        assert reply_text(emacs.wait_end("t-1")) == "Done."
        [confirmation] = emacs.asked("conversation/invokeClientToolConfirmation")
        assert confirmation["name"] == "write_file"
        assert "a.py" in confirmation["message"]
        assert not emacs.asked("window/showMessageRequest")
        if answer == "accept":
            assert len(emacs.asked("workspace/applyEdit")) == 1
            assert (workspace / "a.py").read_text() == "x = 2\n"
        else:
            assert not emacs.asked("workspace/applyEdit")
            assert (workspace / "a.py").read_text() == "x = 1\n"
        assert len(recorded(record)) == 2


def test_client_tools_can_be_turned_off(tmp_path: Path, workspace: Path) -> None:
    lsp, record = start(tmp_path, workspace, [{"text": "No tools."}],
                        config_text='[features]\ndisabled = ["copilot-client-tools"]\n')
    with lsp:
        emacs = CopilotEl(lsp, workspace)
        lsp.result("conversation/registerTools", {"tools": COPILOT_EL_TOOLS})
        lsp.result("conversation/create", create_params(workspace, "t-1", "Hi"),
                   timeout=TIMEOUT)
        emacs.wait_end("t-1")
        offered = set(recorded(record)[0]["tools"])
        assert "read_file" in offered and "create_file" not in offered


def test_a_protected_write_is_asked_with_show_message_request(tmp_path: Path,
                                                              workspace: Path) -> None:
    """A question that must reach the user every time (a protected file)
    is not put as the plugin's tool confirmation, which its "always" memory
    may answer: it stays window/showMessageRequest (null here: denied)."""
    (workspace / ".mcp.json").write_text("{}\n")
    lsp, record = start(tmp_path, workspace, [
        call("write_file", path=".mcp.json", content='{"mcpServers": {}}\n'),
        {"text": "Not written."},
    ], apply_edit=True)
    with lsp:
        emacs = CopilotEl(lsp, workspace)
        lsp.result("conversation/create", create_params(workspace, "t-1", "Add MCP"),
                   timeout=TIMEOUT)
        emacs.wait_end("t-1")
        [asked] = emacs.asked("window/showMessageRequest")
        assert ".mcp.json" in asked["message"]
        assert not emacs.asked("conversation/invokeClientToolConfirmation")
        assert not emacs.asked("workspace/applyEdit")
        assert (workspace / ".mcp.json").read_text() == "{}\n"
        tool_result = [m for m in recorded(record)[1]["messages"] if m["role"] == "tool"][-1]
        assert "dismissed" in str(tool_result["content"])


def test_a_command_is_asked_with_show_message_request(tmp_path: Path,
                                                      workspace: Path) -> None:
    """agentls asks about every command line (no "Allow for session"), so
    the plugin's confirmation, whose "always" would remember run_command
    for the conversation, is not used; the answer here allows it once."""
    lsp, record = start(tmp_path, workspace, [
        call("run_command", argv=[sys.executable, "-c", "print('ran it')"]),
        {"text": "Ran."},
    ])
    with lsp:
        emacs = CopilotEl(lsp, workspace)
        emacs.choose = "Allow once"
        lsp.result("conversation/create", create_params(workspace, "t-1", "Run it"),
                   timeout=TIMEOUT)
        emacs.wait_end("t-1")
        [asked] = emacs.asked("window/showMessageRequest")
        assert "print" in asked["message"]
        assert not emacs.asked("conversation/invokeClientToolConfirmation")
        tool_result = [m for m in recorded(record)[1]["messages"] if m["role"] == "tool"][-1]
        assert "ran it" in str(tool_result["content"])


def test_without_apply_edit_nothing_is_written(tmp_path: Path, workspace: Path) -> None:
    """copilot.el's own capabilities: no workspace/applyEdit, so agentls's
    file tools tell the model they cannot change files, before anyone is
    asked; the file is untouched."""
    lsp, record = start(tmp_path, workspace, [
        call("write_file", path="a.py", content="x = 2\n"),
        {"text": "I could not."},
    ])
    with lsp:
        emacs = CopilotEl(lsp, workspace)
        lsp.result("conversation/create", create_params(workspace, "t-1", "Set x to 2"),
                   timeout=TIMEOUT)
        emacs.wait_end("t-1")
        assert not emacs.asked("conversation/invokeClientToolConfirmation")
        assert not emacs.asked("workspace/applyEdit")
        assert (workspace / "a.py").read_text() == "x = 1\n"
        tool_result = [m for m in recorded(record)[1]["messages"] if m["role"] == "tool"][-1]
        assert "applyEdit" in str(tool_result["content"])


def test_templates_modes_and_restored_turns(tmp_path: Path, workspace: Path) -> None:
    lsp, record = start(tmp_path, workspace, [{"text": "Yes, 42."}])
    with lsp:
        emacs = CopilotEl(lsp, workspace)
        folders = {"workspaceFolders": [{"uri": workspace.as_uri(), "name": workspace.name}]}
        templates = lsp.result("conversation/templates", folders)
        assert templates and all({"id", "description", "scopes"} <= set(t) for t in templates)
        assert all("agent-panel" in t["scopes"] for t in templates)
        modes = lsp.result("conversation/modes", folders)
        assert [m["kind"] for m in modes] == ["Agent"]
        # copilot-chat-restore: the saved turns are replayed ahead of the new one.
        params = create_params(workspace, "t-1", "Still 42?")
        params["turns"] = [{"request": "What is the answer?", "response": "42."},
                           {"request": "Still 42?", "response": "", "turnId": ""}]
        lsp.result("conversation/create", params, timeout=TIMEOUT)
        emacs.wait_end("t-1")
        sent = [(m["role"], m["content"]) for m in recorded(record)[0]["messages"]
                if m["role"] in ("user", "assistant")]
        assert sent[:2] == [("user", "What is the answer?"), ("assistant", "42.")]
        assert "Still 42?" in str(sent[2][1])


def test_file_references_are_attached(tmp_path: Path, workspace: Path) -> None:
    """copilot-chat-add-file-reference: the turn's `references`."""
    (workspace / "b.py").write_text("def answer():\n    return 42\n")
    lsp, record = start(tmp_path, workspace, [{"text": "It returns 42."}])
    with lsp:
        emacs = CopilotEl(lsp, workspace)
        params = create_params(workspace, "t-1", "What does it return?")
        params["references"] = [{"type": "file", "uri": (workspace / "b.py").as_uri()}]
        lsp.result("conversation/create", params, timeout=TIMEOUT)
        emacs.wait_end("t-1")
        [user] = [m for m in recorded(record)[0]["messages"] if m["role"] == "user"]
        assert user["content"].startswith("What does it return?")
        assert "return 42" in user["content"]


def test_compress_compacts_the_session(tmp_path: Path, workspace: Path) -> None:
    """copilot-chat-compact: conversation/compress, then the next turn is
    built from the summary."""
    lsp, record = start(tmp_path, workspace, [
        {"text": "The answer is 42."}, {"text": "Summary: the user asked; it is 42."},
        {"text": "Still 42."}])
    with lsp:
        emacs = CopilotEl(lsp, workspace)
        created = lsp.result("conversation/create",
                             create_params(workspace, "t-1", "What is the answer?"),
                             timeout=TIMEOUT)
        emacs.wait_end("t-1")
        cid = {"conversationId": created["conversationId"]}
        assert lsp.result("conversation/compress", cid, timeout=TIMEOUT) == {
            "success": True, "turnCount": 1}
        again = lsp.result("conversation/compress", cid, timeout=TIMEOUT)
        assert again["success"] is False and again["error"]["message"]
        lsp.result("conversation/turn", {**cid, "workDoneToken": "t-2", "message": "Sure?",
                                         "source": "panel"}, timeout=TIMEOUT)
        emacs.wait_end("t-2")
        sent = json.dumps(recorded(record)[2]["messages"])
        assert "Summary: the user asked" in sent and "What is the answer?" not in sent


def test_a_slash_template_is_expanded(tmp_path: Path, workspace: Path) -> None:
    """copilot-chat-slash-command sends `/id args` as the message."""
    lsp, record = start(tmp_path, workspace, [{"text": "It sets x."}])
    with lsp:
        emacs = CopilotEl(lsp, workspace)
        [explain] = [t for t in lsp.result("conversation/templates", None)
                     if t["id"] == "explain"]
        lsp.result("conversation/create",
                   create_params(workspace, "t-1", f"/{explain['id']} a.py"), timeout=TIMEOUT)
        emacs.wait_end("t-1")
        [user] = [m for m in recorded(record)[0]["messages"] if m["role"] == "user"]
        assert str(user["content"]).startswith("Explain what this code does")
        assert "\na.py" in user["content"]  # the words after the command follow it


def test_lsp_copilot_chat(tmp_path: Path, workspace: Path) -> None:
    """LSP-copilot's chat panel (Sublime Text): preconditions, then create
    with its params; its turn's references carry selections and may name
    unsaved buffers (`buffer:<id>`), which are not files."""
    lsp, record = start(tmp_path, workspace, [{"text": "Hi."}, {"text": "Again."}])
    with lsp:
        emacs = CopilotEl(lsp, workspace)
        assert lsp.result("conversation/preconditions", {}) is not None
        assert lsp.result("conversation/agents", {"options": {}}) == []
        assert lsp.result("conversation/templates", {"options": {}})
        token = "copilot_chat://2"
        created = lsp.result("conversation/create", {
            "turns": [{"request": "Hello"}],
            "capabilities": {"allSkills": True, "skills": []},
            "workDoneToken": token, "computeSuggestions": True, "source": "panel"},
            timeout=TIMEOUT)
        assert reply_text(emacs.wait_end(token)) == "Hi."
        a_py = workspace / "a.py"
        selection = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 5}}
        lsp.result("conversation/turn", {
            "conversationId": created["conversationId"], "message": "And this?",
            "workDoneToken": token, "doc": copilot_doc(a_py), "computeSuggestions": True,
            "references": [
                {"type": "file", "status": "included", "uri": a_py.as_uri(),
                 "position": selection["start"], "range": selection,
                 "visibleRange": selection, "selection": selection,
                 "openedAt": None, "activeAt": None},
                {"type": "file", "status": "included", "uri": "buffer:12",
                 "position": selection["start"], "range": selection,
                 "visibleRange": selection, "selection": selection,
                 "openedAt": None, "activeAt": None}],
            "source": "panel"}, timeout=TIMEOUT)
        wait_until(lambda: len([v for v in emacs.progress(token) if v["kind"] == "end"]) == 2,
                   "the second turn's end")
        assert "Again." in reply_text(emacs.progress(token))
        user = [m for m in recorded(record)[1]["messages"] if m["role"] == "user"][-1]
        assert "x = 1" in user["content"] and "buffer:12" not in user["content"]


BAD_INPUT = [
    ("conversation/create", None),
    ("conversation/create", [1, 2]),
    ("conversation/create", {"turns": []}),
    ("conversation/create", {"turns": "hello"}),
    ("conversation/create", {"turns": [{"request": 7}]}),
    ("conversation/create", {"turns": [{"request": "  "}]}),
    ("conversation/create", {"turns": [{"request": "hi"}], "workDoneToken": {"x": 1}}),
    ("conversation/create", {"turns": [{"request": "hi"}], "doc": "file.py"}),
    ("conversation/create", {"turns": [{"request": "hi"}], "references": "a.py"}),
    ("conversation/create", {"turns": [{"request": "hi"}], "references": [{"uri": 1}]}),
    ("conversation/turn", {"message": "hi"}),
    ("conversation/turn", {"conversationId": "nope", "message": "hi"}),
    ("conversation/turn", {"conversationId": 3, "message": "hi"}),
    ("conversation/destroy", {}),
    ("conversation/destroy", {"conversationId": "nope"}),
    ("conversation/compress", {"conversationId": "nope"}),
    ("conversation/compress", None),
    ("conversation/registerTools", {}),
    ("conversation/registerTools", {"tools": [{"name": "bad name!"}]}),
    ("conversation/registerTools", {"tools": [{"name": "a"}, {"name": "a"}]}),
    ("conversation/registerTools", {"tools": [{"name": "a", "inputSchema": "x"}]}),
    ("conversation/templates", [1]),
    ("conversation/modes", "x"),
    ("conversation/preconditions", 5),
    ("conversation/agents", [None]),
]


def test_bad_input_gets_invalid_params(tmp_path: Path, workspace: Path) -> None:
    lsp, record = start(tmp_path, workspace, [{"text": "still here"}])
    with lsp:
        emacs = CopilotEl(lsp, workspace)
        for method, params in BAD_INPUT:
            response = lsp.request(method, params, timeout=TIMEOUT)
            assert response.get("error", {}).get("code") == -32602, (method, params, response)
            assert response["error"]["message"], (method, params)
        assert not record.exists()  # no turn ran, no model call was made
        lsp.result("conversation/create", create_params(workspace, "t-1", "hi"),
                   timeout=TIMEOUT)
        assert reply_text(emacs.wait_end("t-1")) == "still here"


def test_stop_cancels_the_turn_and_the_conversation_goes_on(tmp_path: Path,
                                                            workspace: Path) -> None:
    """copilot-chat-stop: $/cancelRequest with the id of the create request,
    which was answered when the turn started. The turn stops (its progress
    ends with an error); the next turn of the conversation runs."""
    lsp, record = start(tmp_path, workspace, [{"text": "never finished", "stall": True},
                                              {"text": "Back again."}])
    with lsp:
        emacs = CopilotEl(lsp, workspace)
        created = lsp.wait(lsp.request_async("conversation/create",
                                             create_params(workspace, "t-1", "Think hard"),
                                             msg_id=7), TIMEOUT, "conversation/create")
        created = created["result"]
        wait_until(lambda: record.exists(), "the model call")
        lsp.notify("$/cancelRequest", {"id": 7})
        assert emacs.wait_end("t-1")[-1]["result"]["error"]["message"] == "Cancelled"
        lsp.result("conversation/turn", {
            "workDoneToken": "t-2", "conversationId": created["conversationId"],
            "message": "And now?", "source": "panel"}, timeout=TIMEOUT)
        assert reply_text(emacs.wait_end("t-2")) == "Back again."
        lsp.notify("$/cancelRequest", {"id": 7})  # late, again: nothing to stop
        assert lsp.result("conversation/modes", None)


def test_a_failed_turn_ends_with_its_error(tmp_path: Path, workspace: Path) -> None:
    """copilot.el shows `result.error` of the end: the provider's error, said."""
    lsp, _ = start(tmp_path, workspace, [
        {"text": "Par", "error": {"code": "auth", "message": "the key was refused"}}])
    with lsp:
        emacs = CopilotEl(lsp, workspace)
        lsp.result("conversation/create", create_params(workspace, "t-1", "Hi"),
                   timeout=TIMEOUT)
        values = emacs.wait_end("t-1")
        assert reply_text(values) == "Par"  # what streamed before the error stays shown
        assert "the key was refused" in values[-1]["result"]["error"]["message"]


def test_shutdown_ends_a_running_turn(tmp_path: Path, workspace: Path) -> None:
    lsp, record = start(tmp_path, workspace, [{"text": "never finished", "stall": True}])
    emacs = CopilotEl(lsp, workspace)
    created = lsp.result("conversation/create", create_params(workspace, "t-1", "Think"),
                         timeout=TIMEOUT)
    wait_until(lambda: record.exists(), "the model call")
    lsp.request("shutdown", None, timeout=TIMEOUT)  # answered after the turn ended
    end = emacs.progress("t-1")[-1]
    assert end == {"kind": "end", "result": {"error": {"message": "Cancelled"}}, **created}
    assert lsp.close() == 0


def test_two_turns_sent_at_once_start_one(tmp_path: Path, workspace: Path) -> None:
    lsp, record = start(tmp_path, workspace, [{"text": "First."}, {"text": "Second."},
                                              {"text": "Third."}])
    with lsp:
        emacs = CopilotEl(lsp, workspace)
        created = lsp.result("conversation/create", create_params(workspace, "t-1", "One"),
                             timeout=TIMEOUT)
        emacs.wait_end("t-1")
        turn = {"conversationId": created["conversationId"], "message": "Two",
                "source": "panel"}
        both = [lsp.request_async("conversation/turn", {**turn, "workDoneToken": token})
                for token in ("t-2", "t-3")]
        answers = [lsp.wait(f, TIMEOUT, "conversation/turn") for f in both]
        assert sorted("error" in a for a in answers) == [False, True]
        started = "t-2" if "result" in answers[0] else "t-3"
        assert reply_text(emacs.wait_end(started)) == "Second."
        assert len(recorded(record)) == 2


def test_one_turn_at_a_time_and_destroy_cancels(tmp_path: Path, workspace: Path) -> None:
    """A turn sent while one runs is refused (the running one goes on);
    destroy cancels the running turn, whose progress ends with an error."""
    lsp, record = start(tmp_path, workspace, [{"text": "never finished", "stall": True}])
    with lsp:
        emacs = CopilotEl(lsp, workspace)
        created = lsp.result("conversation/create",
                             create_params(workspace, "t-1", "Think hard"), timeout=TIMEOUT)
        wait_until(lambda: record.exists(), "the model call")
        busy = lsp.request("conversation/turn", {
            "workDoneToken": "t-2", "conversationId": created["conversationId"],
            "message": "And now?", "source": "panel"}, timeout=TIMEOUT)
        assert busy["error"]["code"] == -32602
        assert "already has a turn running" in busy["error"]["message"]
        assert not any(v["kind"] == "end" for v in emacs.progress("t-1"))
        assert lsp.result("conversation/destroy",
                          {"conversationId": created["conversationId"]},
                          timeout=TIMEOUT) == "OK"
        end = emacs.wait_end("t-1")[-1]
        assert end["result"]["error"]["message"] == "Cancelled"
        assert not emacs.progress("t-2")


def test_an_editor_leaving_cancels_its_conversations_turn(tmp_path: Path,
                                                          workspace: Path) -> None:
    """Over a socket: the create request was answered, but its turn is the
    client's work still; the client going away (no exit) cancels it, as it
    cancels the requests it had running."""
    from tests.e2e.test_edits import scripted
    from tests.reliability.test_transport import Client, _connect_and_initialize, tcp_server

    settings, record = scripted(tmp_path, "stall", [{"text": "never", "stall": True}])
    with tcp_server(tmp_path) as (srv, port):
        editor = Client.tcp(port)
        editor.initialize(workspace, settings=settings,
                          plugin={"name": "copilot.el", "version": "0.2.0"})
        answer = editor.response(editor.request(
            "conversation/create", create_params(workspace, "t-1", "Think")))
        sid = answer["result"]["conversationId"]
        wait_until(lambda: record.exists(), "the model call")
        editor.close()

        def ended(client: Client) -> Any:
            found = client.response(client.request("agentls/sessions", {}))
            [session] = [s for s in found["result"]["sessions"] if s["sessionId"] == sid]
            status = session["status"]["status"]
            return status != "running" and status

        nxt = wait_until(lambda: _connect_and_initialize(port), "the next editor", TIMEOUT)
        assert wait_until(lambda: ended(nxt), "the left editor's turn to end",
                          TIMEOUT) == "cancelled"
        assert srv.alive()
        nxt.close()
