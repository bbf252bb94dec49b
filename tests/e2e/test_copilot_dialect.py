"""The Copilot language server's dialect over real LSP (docs/copilot-plugins.md):
the server as a subprocess, configured as a Copilot plugin's user configures
it (the user config file: the plugins send no agentls settings), provider
`openai` on the loopback fake backend, and each plugin's messages as its
source sends them: copilot.lua (zbirenbaum/copilot.lua, as recorded in
/work/shared/traces), copilot.el (copilot-emacs/copilot.el: copilot.el's
initialize, textDocument/inlineCompletion, didShowCompletion,
didPartiallyAcceptCompletion, the item command through
workspace/executeCommand, getPanelCompletions with `doc` and `panelId`).
Also: bad input to every dialect method (-32602, the server goes on), a
standard client gets none of it, `agentls --copilot`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.e2e.helpers import server_env
from tests.fakes.http_backend import (
    SSE_DONE,
    FakeBackend,
    error_reply,
    openai_chunk,
    sse,
    sse_reply,
)
from tests.reliability.harness import LspProcess, wait_until

COMPLETIONS = "/v1/completions"
TEXT = "def add(a, b):\n    return \n"
MODEL = "qwen2.5-coder-1.5b"
TIMEOUT = 30.0


def fim_reply(text: str) -> Any:
    return sse_reply([sse(openai_chunk(text=text)),
                      sse(openai_chunk(text="", finish_reason="stop")), SSE_DONE])


def user_config(tmp_path: Path, backend: FakeBackend) -> Path:
    """The user config file (AGENTLS_CONFIG_FILE): where a Copilot plugin's
    user puts agentls's settings."""
    path = tmp_path / "config.toml"
    path.write_text(
        f'provider = "openai"\nbaseUrl = "{backend.url}/v1"\nmodel = "{MODEL}"\n'
        'apiKeyEnv = "AGENTLS_E2E_NO_KEY"\n'
        "[providerOptions]\nfim = true\n[inlineCompletion]\ndebounceMs = 0\n")
    return path


def spawn(tmp_path: Path, backend: FakeBackend, *args: str) -> LspProcess:
    env = server_env(AGENTLS_STATE_DIR=str(tmp_path / "state"),
                     AGENTLS_CONFIG_FILE=str(user_config(tmp_path, backend)))
    proc = subprocess.Popen([sys.executable, "-m", "agentls", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    return LspProcess(proc, stderr_path=None)


def copilot_lua_initialize(workspace: Path) -> dict[str, Any]:
    """copilot.lua 1.515.0's initialize (the recorded trace, capabilities cut
    to what the server reads)."""
    return {
        "processId": 4242, "clientInfo": {"name": "Neovim", "version": "0.12.0-dev+fbb1caf"},
        "rootPath": str(workspace), "rootUri": workspace.as_uri(),
        "initializationOptions": {
            "editorPluginInfo": {"name": "copilot.lua", "version": "1.515.0"},
            "editorInfo": {"name": "Neovim", "version": "0.12.0-dev-fbb1caf"}},
        "workDoneToken": "1",
        "capabilities": {"textDocument": {"inlineCompletion": {"dynamicRegistration": False}},
                         "window": {"showDocument": {"support": True},
                                    "workDoneProgress": True},
                         "workspace": {"workspaceFolders": True}},
        "workspaceFolders": [{"uri": workspace.as_uri(), "name": str(workspace)}],
    }


def copilot_lua_start(lsp: LspProcess, workspace: Path, uri: str) -> None:
    """What copilot.lua sends from initialize to its first checkStatus."""
    result = lsp.result("initialize", copilot_lua_initialize(workspace), timeout=TIMEOUT)
    assert result["serverInfo"]["name"] == "agentls"
    lsp.notify("initialized", {})
    lsp.notify("workspace/didChangeConfiguration", {"settings": {
        "telemetry": {"telemetryLevel": "all"}, "advanced": {"timeout": 30000}}})
    lsp.notify("textDocument/didOpen", {"textDocument": {
        "languageId": "python", "text": TEXT, "version": 0, "uri": uri}})
    lsp.notify("workspace/didChangeConfiguration", {"settings": {
        "github": {"copilot": {"selectedCompletionModel": ""}}, "enableAutoCompletions": True,
        "disabledLanguages": [{"languageId": "markdown"}, {"languageId": "yaml"}]}})
    lsp.notify("$/setTrace", {"value": "off"})


def doc_params(uri: str, version: int, line: int, character: int) -> dict[str, Any]:
    """copilot.lua's util.get_doc_params(): `doc` and the newer
    `textDocument` / `position` side by side."""
    position = {"line": line, "character": character}
    return {"textDocument": {"relativePath": "calc.py", "version": version, "uri": uri},
            "position": position,
            "doc": {"uri": uri, "relativePath": "calc.py", "insertSpaces": True,
                    "version": version, "tabSize": 4, "position": position, "indentSize": 4},
            "_": True}


def counters(lsp: LspProcess) -> dict[str, int]:
    """The acceptance counters of agentls/status (its latency summary aside)."""
    completions: dict[str, int] = lsp.result("agentls/status", {}, timeout=TIMEOUT)[
        "completions"]
    completions.pop("latency")
    return completions


def test_copilot_lua_session_gets_a_signed_in_user_and_a_completion_it_can_accept(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    fake_backend.script("POST", COMPLETIONS, fim_reply(" + b"))
    workspace = tmp_path / "project"
    workspace.mkdir()
    uri = (workspace / "calc.py").as_uri()
    with spawn(tmp_path, fake_backend) as lsp:
        copilot_lua_start(lsp, workspace, uri)
        status = lsp.result("checkStatus", {"_": True}, timeout=TIMEOUT)
        # copilot.lua's auth: a `user` is signed in; status OK (not NotAuthorized)
        assert status == {"status": "OK", "user": f"agentls (openai: {MODEL})"}
        lsp.notify("textDocument/didChange", {
            "textDocument": {"version": 4, "uri": uri},
            "contentChanges": [{"text": "a", "rangeLength": 0, "range": {
                "start": {"line": 1, "character": 11}, "end": {"line": 1, "character": 11}}}]})
        assert lsp.result("checkStatus", {"_": True})["status"] == "OK"
        answer = lsp.result("getCompletions", doc_params(uri, 4, 1, 12), timeout=TIMEOUT)
        (completion,) = answer["completions"]
        at = {"line": 1, "character": 12}
        # GitHub's server's form: the whole line in `text`, its range from column 0
        assert completion == {"uuid": completion["uuid"], "text": "    return a + b",
                              "displayText": " + b",
                              "range": {"start": {"line": 1, "character": 0}, "end": at},
                              "position": at, "docVersion": 4}
        assert isinstance(completion["uuid"], str) and completion["uuid"]
        # the same feature as textDocument/inlineCompletion: its FIM prompt
        assert fake_backend.requests_to(COMPLETIONS)[-1].json["prompt"].endswith("return a")
        # notifyShown / notifyAccepted are requests in copilot.lua
        assert "error" not in lsp.request("notifyShown", {"uuid": completion["uuid"], "_": True})
        lsp.notify("$/cancelRequest", {"id": 4})
        assert "error" not in lsp.request("notifyAccepted", {
            "acceptedLength": 4, "uuid": completion["uuid"], "_": True})
        lsp.request("notifyAccepted", {"uuid": completion["uuid"], "_": True})  # counted once
        assert counters(lsp) == {"served": 1, "shown": 1, "accepted": 1,
                                 "partiallyAccepted": 0, "warmed": 0}
        # Cycling: the same path, answered from its type-ahead cache
        cycled = lsp.result("getCompletionsCycling", doc_params(uri, 4, 1, 12))
        assert [c["displayText"] for c in cycled["completions"]] == [" + b"]
        assert len(fake_backend.requests_to(COMPLETIONS)) == 1
        assert lsp.result("notifyRejected", {"uuids": [cycled["completions"][0]["uuid"]],
                                             "_": True}) is None
        # no "unknown setting 'editorPluginInfo'" or any other warning
        assert lsp.shown_messages() == []
        ready = lsp.notifications_of("statusNotification")
        assert ready[0] == {"status": "Normal",
                            "message": f"agentls: ready (agentls (openai: {MODEL}))"}


def test_a_completion_inside_a_line_keeps_the_rest_of_the_line_in_its_text(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    fake_backend.script("POST", COMPLETIONS, fim_reply("a + b"))
    workspace = tmp_path / "project"
    workspace.mkdir()
    uri = (workspace / "calc.py").as_uri()
    with spawn(tmp_path, fake_backend) as lsp:
        copilot_lua_start(lsp, workspace, uri)
        lsp.notify("textDocument/didChange", {
            "textDocument": {"version": 1, "uri": uri},
            "contentChanges": [{"text": "  # é😀", "range": {
                "start": {"line": 1, "character": 11}, "end": {"line": 1, "character": 11}}}]})
        answer = lsp.result("getCompletions", doc_params(uri, 1, 1, 11), timeout=TIMEOUT)
        (completion,) = answer["completions"]
        # the line after the cursor is in `text` (copilot.vim replaces the whole
        # line), and the range ends at the line's end in UTF-16 units
        assert completion["text"] == "    return a + b  # é😀"
        assert completion["displayText"] == "a + b  # é😀"
        assert completion["range"] == {"start": {"line": 1, "character": 0},
                                       "end": {"line": 1, "character": 11 + 7}}


def test_copilot_lua_sign_in_version_models_and_panel(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    fake_backend.script("POST", COMPLETIONS, fim_reply("a + b"))
    workspace = tmp_path / "project"
    workspace.mkdir()
    uri = (workspace / "calc.py").as_uri()
    with spawn(tmp_path, fake_backend) as lsp:
        copilot_lua_start(lsp, workspace, uri)
        user = f"agentls (openai: {MODEL})"
        # copilot.lua's `:Copilot auth`: a user from checkStatus ends it ("Authenticated as")
        assert lsp.result("signInInitiate", {"_": True})["user"] == user
        assert lsp.result("signInConfirm", {"userCode": "", "_": True}) == {
            "status": "OK", "user": user}
        assert lsp.result("signOut", {"_": True})["user"] == user
        assert lsp.result("checkStatus", {"options": {"localChecksOnly": True}, "_": True})[
            "user"] == user
        assert isinstance(lsp.result("getVersion", {"_": True})["version"], str)
        assert lsp.result("checkFileStatus", {"uri": uri}) == {"status": "Included"}
        models = lsp.result("copilot/models", {"_": True})
        assert models[0]["id"] == MODEL and "completion" in models[0]["scopes"]
        assert models[0]["default"] is True and models[0]["modelName"] == MODEL
        # The panel: {solutionCountTarget}, then PanelSolution(s) and PanelSolutionsDone
        params = doc_params(uri, 0, 1, 11)
        params["panelId"] = "1:copilot:///panel/calc.py"
        assert lsp.result("getPanelCompletions", params, timeout=TIMEOUT) == {
            "solutionCountTarget": 1}
        done = wait_until(lambda: lsp.notifications_of("PanelSolutionsDone"),
                          "PanelSolutionsDone")
        assert done == [{"panelId": params["panelId"], "status": "OK"}]
        (solution,) = lsp.notifications_of("PanelSolution")
        at = {"line": 1, "character": 11}
        assert solution == {"panelId": params["panelId"], "solutionId": solution["solutionId"],
                            "completionText": "a + b", "displayText": "a + b",
                            "range": {"start": at, "end": at}, "score": 1.0}
        # accepting from the panel is a notifyAccepted with the solutionId
        lsp.result("notifyAccepted", {"uuid": solution["solutionId"], "_": True})
        assert counters(lsp)["accepted"] == 1


def test_copilot_lua_gets_copilot_inline_edit_as_before(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    workspace = tmp_path / "project"
    workspace.mkdir()
    uri = (workspace / "calc.py").as_uri()
    with spawn(tmp_path, fake_backend) as lsp:
        copilot_lua_start(lsp, workspace, uri)
        # copilot-lsp's NES request: no edit history yet, no model call
        answer = lsp.result("textDocument/copilotInlineEdit", {
            "textDocument": {"uri": uri, "version": 0},
            "position": {"line": 1, "character": 11}})
        assert answer == {"edits": []}
        assert not fake_backend.requests


def test_copilot_el_session_over_inline_completion(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    fake_backend.script("POST", COMPLETIONS, fim_reply("a + b"))
    workspace = tmp_path / "project"
    workspace.mkdir()
    uri = (workspace / "calc.py").as_uri()
    with spawn(tmp_path, fake_backend, "--stdio") as lsp:
        lsp.result("initialize", {
            "processId": 4242, "rootUri": workspace.as_uri(),
            "capabilities": {"workspace": {"workspaceFolders": True}},
            "workspaceFolders": [{"uri": workspace.as_uri(), "name": "project"}],
            "initializationOptions": {
                "editorInfo": {"name": "Emacs", "version": "30.1"},
                "editorPluginInfo": {"name": "copilot.el", "version": "0.3.0"}}})
        lsp.notify("initialized", {})
        lsp.notify("workspace/didChangeConfiguration", {"settings": {
            "github": {"copilot": {"selectedCompletionModel": MODEL}}}})
        lsp.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 0, "text": TEXT}})
        lsp.notify("textDocument/didFocus", {"textDocument": {"uri": uri}})
        # copilot.el sends checkStatus / signInInitiate with no params
        assert lsp.result("checkStatus")["user"] == f"agentls (openai: {MODEL})"
        signed_in = lsp.result("signInInitiate")
        assert signed_in["status"] == "AlreadySignedIn"  # "Already signed in as ..."
        answer = lsp.result("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri}, "position": {"line": 1, "character": 11},
            "context": {"triggerKind": 2},
            "formattingOptions": {"tabSize": 4, "insertSpaces": True}}, timeout=TIMEOUT)
        (item,) = answer["items"]
        assert item["insertText"] == "a + b"
        command = item["command"]
        lsp.notify("textDocument/didShowCompletion", {"item": {"command": command}})
        lsp.notify("textDocument/didPartiallyAcceptCompletion",
                   {"item": {"command": command}, "acceptedLength": 1})
        lsp.notify("textDocument/didPartiallyAcceptCompletion",  # once per item
                   {"item": {"command": command}, "acceptedLength": 3})
        # copilot.el runs the item's command object as the executeCommand params
        assert "error" not in lsp.request("workspace/executeCommand", command)
        assert counters(lsp) == {"served": 1, "shown": 1, "accepted": 1,
                                 "partiallyAccepted": 1, "warmed": 0}
        # copilot.el's panel: `doc` (with its position) and a panelId
        panel_id = "copilot-panel"
        assert lsp.result("getPanelCompletions", {"doc": {
            "version": 0, "tabSize": 4, "indentSize": 4, "insertSpaces": True,
            "path": str(workspace / "calc.py"), "uri": uri, "relativePath": "calc.py",
            "languageId": "python", "position": {"line": 1, "character": 11}},
            "panelId": panel_id}, timeout=TIMEOUT) == {"solutionCountTarget": 1}
        wait_until(lambda: lsp.notifications_of("PanelSolutionsDone"), "PanelSolutionsDone")
        (solution,) = lsp.notifications_of("PanelSolution")
        assert solution["completionText"] == "a + b" and solution["score"] == 1.0
        # copilot-select-completion-model keeps models with the "completion" scope
        models = lsp.result("copilot/models")
        assert [m["id"] for m in models if "completion" in m["scopes"]] == [MODEL]
        # copilot.el's mode line reads didChangeStatus
        assert lsp.notifications_of("didChangeStatus")[0]["kind"] == "Normal"
        assert lsp.shown_messages() == []


def test_a_backend_failure_reaches_the_plugins_status(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    fake_backend.script("POST", COMPLETIONS,
                        error_reply(404, f"The model '{MODEL}' does not exist",
                                    code="model_not_found"), fim_reply(" + b"))
    workspace = tmp_path / "project"
    workspace.mkdir()
    uri = (workspace / "calc.py").as_uri()
    with spawn(tmp_path, fake_backend) as lsp:
        copilot_lua_start(lsp, workspace, uri)
        failed = lsp.result("getCompletions", doc_params(uri, 0, 1, 11), timeout=TIMEOUT)
        assert failed == {"completions": []}
        error = wait_until(lambda: [s for s in lsp.notifications_of("statusNotification")
                                    if s["status"] == "Error"], "an Error status")
        assert "does not exist" in error[0]["message"]
        assert lsp.notifications_of("didChangeStatus")[-1]["kind"] == "Error"
        lsp.notify("textDocument/didChange", {
            "textDocument": {"version": 1, "uri": uri},
            "contentChanges": [{"text": "a", "range": {
                "start": {"line": 1, "character": 11}, "end": {"line": 1, "character": 11}}}]})
        answer = lsp.result("getCompletions", doc_params(uri, 1, 1, 12), timeout=TIMEOUT)
        assert [c["displayText"] for c in answer["completions"]] == [" + b"]
        assert lsp.notifications_of("statusNotification")[-1]["status"] == "Normal"


BAD_INPUT = [
    ("checkStatus", [1], "params must be an object"),
    ("signInInitiate", "x", "params must be an object"),
    ("signInConfirm", [], "params must be an object"),
    ("signIn", 1, "params must be an object"),
    ("signOut", [None], "params must be an object"),
    ("getVersion", [], "params must be an object"),
    ("copilot/models", 5, "params must be an object"),
    ("getCompletions", {}, "textDocument.uri"),
    ("getCompletions", {"doc": "calc.py"}, "`doc` must be an object"),
    ("getCompletions", {"textDocument": {"uri": 7}, "position": {"line": 0, "character": 0}},
     "textDocument.uri"),
    ("getCompletions", {"textDocument": {"uri": "URI"}, "position": {"line": -1,
                                                                     "character": 0}},
     "`position`"),
    ("getCompletions", {"textDocument": {"uri": "URI"}, "position": {"line": 99,
                                                                     "character": 0}},
     "getCompletions:"),
    ("getCompletionsCycling", {"textDocument": {"uri": "URI"}, "position": [1, 2]},
     "`position`"),
    ("getPanelCompletions", {"textDocument": {"uri": "URI"},
                             "position": {"line": 0, "character": 0}}, "panelId"),
    ("getPanelCompletions", {"textDocument": {"uri": "URI"}, "panelId": 3,
                             "position": {"line": 0, "character": 0}}, "panelId"),
    ("notifyShown", {}, "uuid"),
    ("notifyAccepted", {"uuid": 5}, "uuid"),
    ("notifyAccepted", {"uuid": "u", "acceptedLength": "all"}, "acceptedLength"),
    ("notifyRejected", {"uuids": "u1"}, "uuids"),
    ("notifyRejected", None, "params must be an object"),
    ("checkFileStatus", {"uri": None}, "uri"),
    ("setEditorInfo", [], "params must be an object"),
]


def test_bad_input_to_every_dialect_method_is_a_32602_and_the_server_goes_on(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    fake_backend.script("POST", COMPLETIONS, fim_reply("a + b"))
    workspace = tmp_path / "project"
    workspace.mkdir()
    uri = (workspace / "calc.py").as_uri()
    with spawn(tmp_path, fake_backend) as lsp:
        copilot_lua_start(lsp, workspace, uri)
        for method, params, says in BAD_INPUT:
            if isinstance(params, dict) and isinstance(params.get("textDocument"), dict) \
                    and params["textDocument"].get("uri") == "URI":
                params = {**params, "textDocument": {"uri": uri}}
            response = lsp.request(method, params, timeout=TIMEOUT)
            assert response.get("error", {}).get("code") == -32602, (method, params, response)
            assert says in response["error"]["message"], (method, response)
        assert lsp.alive()
        answer = lsp.result("getCompletions", doc_params(uri, 0, 1, 11), timeout=TIMEOUT)
        assert [c["displayText"] for c in answer["completions"]] == ["a + b"]


def test_a_standard_client_gets_no_dialect(tmp_path: Path, fake_backend: FakeBackend) -> None:
    fake_backend.script("POST", COMPLETIONS, fim_reply("a + b"))
    workspace = tmp_path / "project"
    workspace.mkdir()
    uri = (workspace / "calc.py").as_uri()
    settings = {"provider": "openai", "baseUrl": fake_backend.url + "/v1", "model": MODEL,
                "apiKeyEnv": "AGENTLS_E2E_NO_KEY", "providerOptions": {"fim": True},
                "inlineCompletion": {"debounceMs": 0}}
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings) as lsp:
        lsp.open(uri, TEXT)
        for method in ("checkStatus", "signInInitiate", "getVersion", "copilot/models",
                       "getCompletions", "getPanelCompletions", "notifyAccepted",
                       "conversation/create", "conversation/templates"):
            response = lsp.request(method, doc_params(uri, 1, 1, 11))
            assert response.get("error", {}).get("code") == -32601, (method, response)
        answer = lsp.result("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri}, "position": {"line": 1, "character": 11},
            "context": {"triggerKind": 1}}, timeout=TIMEOUT)
        assert [i["insertText"] for i in answer["items"]] == ["a + b"]
        lsp.result("agentls/status", {})
        assert lsp.notifications_of("statusNotification") == []
        assert lsp.notifications_of("didChangeStatus") == []


def test_copilot_flag_speaks_the_dialect_to_a_client_without_plugin_info(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    workspace = tmp_path / "project"
    workspace.mkdir()
    with spawn(tmp_path, fake_backend, "--copilot", "--stdio") as lsp:
        lsp.result("initialize", {"processId": None, "rootUri": workspace.as_uri(),
                                  "capabilities": {},
                                  "initializationOptions": {"editorInfo": {"name": "Vim"}}})
        lsp.notify("initialized", {})
        assert lsp.result("checkStatus", {})["status"] == "OK"
        assert lsp.shown_messages() == []


def test_copilot_vim_shows_the_completion_its_way(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    """copilot.vim (client.vim era): initializationOptions with
    copilotIntegrationId when g:copilot_integration_id is set; it shows a
    completion only when range.start.character is 0 and `text` starts with
    what is typed on the line, and puts text[col:] in place of the rest of
    the line."""
    fake_backend.script("POST", COMPLETIONS, fim_reply("a + b"))
    workspace = tmp_path / "project"
    workspace.mkdir()
    uri = (workspace / "calc.py").as_uri()
    with spawn(tmp_path, fake_backend) as lsp:
        lsp.result("initialize", {
            "processId": 4242, "capabilities": {
                "workspace": {"workspaceFolders": True},
                "window": {"showDocument": {"support": True}}},
            "workspaceFolders": [],
            "initializationOptions": {
                "editorInfo": {"name": "Vim", "version": "9.1.0016"},
                "editorPluginInfo": {"name": "copilot.vim", "version": "1.41.0"},
                "copilotIntegrationId": "vscode-chat"}})
        lsp.notify("initialized", {})
        lsp.notify("workspace/didChangeConfiguration", {"settings": {
            "http": {"proxy": None, "proxyStrictSSL": None},
            "github-enterprise": {"uri": None}}})
        lsp.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "version": 3, "languageId": "python",
            "text": "def add(a, b):\n    return  # sum\n"}})
        status = lsp.result("checkStatus", {})
        assert "user" in status and status["status"] not in ("NotAuthorized",
                                                               "NoTelemetryConsent")
        answer = lsp.result("getCompletions", {
            "textDocument": {"uri": uri, "version": 3},
            "position": {"line": 1, "character": 11},
            "formattingOptions": {"insertSpaces": True, "tabSize": 4}}, timeout=TIMEOUT)
        (choice,) = answer["completions"]
        line, col = "    return  # sum", 11
        assert choice["range"]["start"] == {"line": 1, "character": 0}
        assert choice["text"][:col] == line[:col]
        # what copilot.vim puts in place of the rest of the line
        assert line[:col] + choice["text"][col:] == "    return a + b # sum"
        lsp.result("notifyShown", {"uuid": choice["uuid"]})
        lsp.result("notifyAccepted", {"uuid": choice["uuid"]})
        assert counters(lsp)["accepted"] == 1
        assert lsp.shown_messages() == []  # copilotIntegrationId is no unknown setting


def test_lsp_copilot_with_the_copilot_flag(tmp_path: Path, fake_backend: FakeBackend) -> None:
    """LSP-copilot (Sublime Text) sends no initializationOptions; it says who
    it is with setEditorInfo after getVersion and checkStatus, so it needs
    `agentls --copilot`."""
    workspace = tmp_path / "project"
    workspace.mkdir()
    with spawn(tmp_path, fake_backend, "--copilot", "--stdio") as lsp:
        lsp.result("initialize", {"processId": 1, "rootUri": workspace.as_uri(),
                                  "capabilities": {}})
        lsp.notify("initialized", {})
        assert isinstance(lsp.result("getVersion", {})["version"], str)
        # LSP-copilot: signed_in = status in {NotAuthorized, OK}, authorized = OK
        assert lsp.result("checkStatus", {})["status"] == "OK"
        assert lsp.result("setEditorInfo", {
            "editorInfo": {"name": "vscode", "version": "4180"},
            "editorPluginInfo": {"name": "LSP-copilot", "version": "unknown"}}) == "OK"
        assert lsp.result("checkFileStatus", {"uri": (workspace / "a.py").as_uri()}) == {
            "status": "Included"}


def test_a_plugins_completion_and_panel_in_a_secret_file_reach_no_model(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    """The dialect's requests take the inline path, its secret-file rule
    with it: asked inside `.env`, nothing is sent."""
    fake_backend.script("POST", COMPLETIONS, fim_reply("your key"))
    workspace = tmp_path / "project"
    workspace.mkdir()
    uri = (workspace / "calc.py").as_uri()
    secret_uri = (workspace / ".env").as_uri()
    with spawn(tmp_path, fake_backend) as lsp:
        copilot_lua_start(lsp, workspace, uri)
        lsp.notify("textDocument/didOpen", {"textDocument": {
            "languageId": "sh", "version": 0, "uri": secret_uri,
            "text": "OPENAI_API_KEY=sk-PLANTED-copilot-19af\n"}})
        answer = lsp.result("getCompletions", doc_params(secret_uri, 0, 0, 15),
                            timeout=TIMEOUT)
        assert answer == {"completions": []}
        params = doc_params(secret_uri, 0, 0, 15)
        params["panelId"] = "1:copilot:///panel/.env"
        assert lsp.result("getPanelCompletions", params, timeout=TIMEOUT) == {
            "solutionCountTarget": 0}
        wait_until(lambda: lsp.notifications_of("PanelSolutionsDone"), "PanelSolutionsDone")
        assert lsp.notifications_of("PanelSolution") == []
        # another file still completes, and the .env is in no prompt
        other = lsp.result("getCompletions", doc_params(uri, 0, 1, 11), timeout=TIMEOUT)
        assert other["completions"]
        bodies = [r.body.decode() for r in fake_backend.requests_to(COMPLETIONS)]
        assert len(bodies) == 1 and "sk-PLANTED" not in bodies[0]
