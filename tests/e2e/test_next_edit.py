"""Next edit suggestions over real LSP (textDocument/copilotInlineEdit): the
server runs as a subprocess with provider `openai` pointed at the loopback
fake backend, which answers like a chat model that carries the user's
rename through the region it is shown.

Covered: rename a parameter -> the matching edits at its use and its call
site (ranges, textDocument version, accept command, nextEdits counters);
the prompt holds the user's edit as a diff and the cursor marker; no
request without recent edits; supersede and $/cancelRequest (the HTTP call
is closed); garbage and undo answers give nothing; unknown document, stale
version, bad position; exactly the requests sidekick.nvim's NES client
sends (didFocus, the request with context.triggerKind, cancelling the
previous one, the accept command); the agent's applyEdit is not history.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.e2e.test_inline_completion import (
    CHAT_SETTINGS,
    TIMEOUT,
    Server,
    agentls,
    base_url,
    chat_reply,
    stalled_reply,
    wait_until,
)
from tests.fakes.http_backend import FakeBackend, RecordedRequest, Reply

METHOD = "textDocument/copilotInlineEdit"
CHAT = "/v1/chat/completions"
SOURCE = (
    "def scale(x, factor):\n"
    "    return x * factor\n"
    "\n"
    "\n"
    "print(scale(2, factor=3))\n"
)
START = "<|editable_region_start|>"
END = "<|editable_region_end|>"


def region_of(request: RecordedRequest) -> str:
    user = request.json["messages"][-1]["content"]
    match = re.search(re.escape(START) + r"\n(.*?)" + re.escape(END), user, re.S)
    assert match, user
    return match.group(1).replace("<|user_cursor|>", "")


def renaming_model(request: RecordedRequest) -> Reply:
    """A model that carries factor -> ratio through the region."""
    rewritten = region_of(request).replace("factor", "ratio")
    return chat_reply(f"{START}\n{rewritten}{END}")


def rename_parameter(server: Server, uri: str) -> types.Position:
    """The user replaces `factor` in the signature with `ratio`, key by key
    (delete, then type); returns the cursor after the new name."""
    line, column = 0, SOURCE.index("factor")
    version = 1
    for index in range(len("factor"), 0, -1):
        version += 1
        at = types.Position(line=line, character=column + index - 1)
        end = types.Position(line=line, character=column + index)
        server.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangePartial(
                range=types.Range(start=at, end=end), text="")]))
    for index, char in enumerate("ratio"):
        version += 1
        server.type_text(uri, version, types.Position(line=line, character=column + index), char)
    return types.Position(line=line, character=column + len("ratio"))


def inline_edit(server: Server, uri: str, at: types.Position, version: int | None,
                msg_id: str | None = None, **extra: Any) -> asyncio.Future[Any]:
    params: dict[str, Any] = {
        "textDocument": {"uri": uri, "version": version},
        "position": {"line": at.line, "character": at.character}, **extra}
    server.next_id += 1
    return asyncio.ensure_future(server.client.protocol.send_request_async(
        METHOD, params, msg_id=msg_id or f"ne-{server.next_id}"))


async def ask(server: Server, uri: str, at: types.Position, version: int | None) -> Any:
    return plain(await asyncio.wait_for(inline_edit(server, uri, at, version), TIMEOUT))


def plain(value: Any) -> Any:
    from tests.e2e.helpers import plain as to_plain

    return to_plain(value)


SETTINGS = {**CHAT_SETTINGS, "nextEdit": {"debounceMs": 0}}
VERSION_AFTER_RENAME = 1 + len("factor") + len("ratio")


async def test_rename_parameter_suggests_the_call_site(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    fake_backend.respond("POST", CHAT, renaming_model)
    async with agentls(tmp_path, {**SETTINGS, "baseUrl": base_url(fake_backend)}) as server:
        uri = server.open(SOURCE, name="scale.py")
        cursor = rename_parameter(server, uri)
        answer = await ask(server, uri, cursor, VERSION_AFTER_RENAME)
        edits = answer["edits"]
        assert [(e["range"], e["text"]) for e in edits] == [
            ({"start": {"line": 1, "character": 15}, "end": {"line": 1, "character": 21}},
             "ratio"),
            ({"start": {"line": 4, "character": 15}, "end": {"line": 4, "character": 21}},
             "ratio"),
        ]
        for edit in edits:
            assert edit["textDocument"] == {"uri": uri, "version": VERSION_AFTER_RENAME}
            assert edit["command"]["command"] == "agentls.nextEditAccepted"
        (sent,) = fake_backend.requests_to(CHAT)
        system, user = sent.json["messages"]
        assert "next edit" in system["content"]
        assert "-def scale(x, factor):\n+def scale(x, ratio):" in user["content"]
        assert "def scale(x, ratio<|user_cursor|>):" in user["content"]

        # The editor applies both and runs the commands: counted once each.
        for edit in edits:
            command = edit["command"]
            params = types.ExecuteCommandParams(command=command["command"],
                                                arguments=command["arguments"])
            await server.request(types.WORKSPACE_EXECUTE_COMMAND, params)
            await server.request(types.WORKSPACE_EXECUTE_COMMAND, params)
        status = await server.request("agentls/status", {})
        assert status["nextEdits"] == {"served": 1, "accepted": 2}


async def test_no_recent_edits_no_model_call(tmp_path: Path, fake_backend: FakeBackend) -> None:
    fake_backend.respond("POST", CHAT, renaming_model)
    async with agentls(tmp_path, {**SETTINGS, "baseUrl": base_url(fake_backend)}) as server:
        uri = server.open(SOURCE, name="scale.py")
        assert await ask(server, uri, types.Position(line=0, character=0), 1) == {"edits": []}
        # A marker: with an edit, the next request does call the model. Had
        # the first one called it (before its answer or after), that request
        # would be counted too.
        at = rename_parameter(server, uri)
        edits = (await ask(server, uri, at, VERSION_AFTER_RENAME))["edits"]
        assert edits, "the request after an edit calls the model"
        (sent,) = fake_backend.requests_to(CHAT)
        assert "+def scale(x, ratio):" in sent.json["messages"][-1]["content"]


async def test_garbage_and_undo_answers_give_nothing(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    def undoing(request: RecordedRequest) -> Reply:
        return chat_reply(f"{START}\n{region_of(request).replace('ratio', 'factor')}{END}")

    fake_backend.script("POST", CHAT, chat_reply("Sure! Here is a poem about the sea."))
    async with agentls(tmp_path, {**SETTINGS, "baseUrl": base_url(fake_backend)}) as server:
        uri = server.open(SOURCE, name="scale.py")
        cursor = rename_parameter(server, uri)
        assert await ask(server, uri, cursor, VERSION_AFTER_RENAME) == {"edits": []}
        fake_backend.respond("POST", CHAT, undoing)
        # (the same question again would be answered from the cache: ask one
        # character to the left)
        left = types.Position(line=cursor.line, character=cursor.character - 1)
        assert await ask(server, uri, left, VERSION_AFTER_RENAME) == {"edits": []}
        assert len(fake_backend.requests_to(CHAT)) == 2
        status = await server.request("agentls/status", {})
        assert status["nextEdits"]["served"] == 0


async def test_bad_requests(tmp_path: Path, fake_backend: FakeBackend) -> None:
    fake_backend.respond("POST", CHAT, renaming_model)
    async with agentls(tmp_path, {**SETTINGS, "baseUrl": base_url(fake_backend)}) as server:
        uri = server.open(SOURCE, name="scale.py")
        cursor = rename_parameter(server, uri)
        unknown = (server.workspace / "nope.py").as_uri()
        assert await ask(server, unknown, cursor, 1) == {"edits": []}
        assert await ask(server, uri, cursor, 3) == {"edits": []}  # stale version
        with pytest.raises(JsonRpcException) as raised:
            await ask(server, uri, types.Position(line=99, character=0), VERSION_AFTER_RENAME)
        assert raised.value.code == -32602 and "past the end" in str(raised.value)
        for params in [{"textDocument": {"uri": uri}}, {"position": {"line": 0, "character": 0}},
                       {"textDocument": {"uri": uri, "version": "x"},
                        "position": {"line": 0, "character": 0}}, None]:
            with pytest.raises(JsonRpcException) as raised:
                await server.request(METHOD, params)
            assert raised.value.code == -32602, params
        # Still serving after all that; the same question again is answered
        # from the cache, without a model call.
        answer = await ask(server, uri, cursor, VERSION_AFTER_RENAME)
        assert len(answer["edits"]) == 2
        calls = len(fake_backend.requests_to(CHAT))
        again = await ask(server, uri, cursor, VERSION_AFTER_RENAME)
        assert [e["range"] for e in again["edits"]] == [e["range"] for e in answer["edits"]]
        assert len(fake_backend.requests_to(CHAT)) == calls


async def test_newer_request_supersedes_and_cancel_answers_cancelled(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    fake_backend.script("POST", CHAT, stalled_reply(), stalled_reply())
    async with agentls(tmp_path, {**SETTINGS, "baseUrl": base_url(fake_backend)}) as server:
        uri = server.open(SOURCE, name="scale.py")
        cursor = rename_parameter(server, uri)
        older = inline_edit(server, uri, cursor, VERSION_AFTER_RENAME)
        await wait_until(lambda: fake_backend.requests_to(CHAT), "the first call")
        newer = inline_edit(server, uri, cursor, VERSION_AFTER_RENAME, msg_id="to-cancel")
        assert plain(await asyncio.wait_for(older, TIMEOUT)) == {"edits": []}
        first = fake_backend.requests_to(CHAT)[0]
        assert fake_backend.wait_for_disconnect(first, timeout=5)

        await wait_until(lambda: len(fake_backend.requests_to(CHAT)) == 2, "the second call")
        server.client.protocol.notify("$/cancelRequest", types.CancelParams(id="to-cancel"))
        with pytest.raises(JsonRpcException) as raised:
            await asyncio.wait_for(newer, TIMEOUT)
        assert raised.value.code == -32800
        second = fake_backend.requests_to(CHAT)[1]
        assert fake_backend.wait_for_disconnect(second, timeout=5)


async def test_what_sidekick_nvim_sends(tmp_path: Path, fake_backend: FakeBackend) -> None:
    """sidekick.nvim's NES module: textDocument/didFocus on BufEnter, the
    request with make_position_params + textDocument.version + context
    {triggerKind: 2}, $/cancelRequest of the pending request when the
    buffer changes again, and workspace/executeCommand with the edit's
    command after applying it."""
    calls: list[RecordedRequest] = []

    def stall_then_rename(request: RecordedRequest) -> Reply:
        calls.append(request)
        return stalled_reply() if len(calls) == 1 else renaming_model(request)

    fake_backend.respond("POST", CHAT, stall_then_rename)
    async with agentls(tmp_path, {**SETTINGS, "baseUrl": base_url(fake_backend)}) as server:
        uri = server.open(SOURCE, name="scale.py")
        server.client.protocol.notify("textDocument/didFocus", {"textDocument": {"uri": uri}})
        cursor = rename_parameter(server, uri)
        context = {"context": {"triggerKind": 2}}
        pending = inline_edit(server, uri, cursor, VERSION_AFTER_RENAME, msg_id="sk-1",
                              **context)
        await wait_until(lambda: fake_backend.requests_to(CHAT), "the first call")
        server.client.protocol.notify("$/cancelRequest", types.CancelParams(id="sk-1"))
        with pytest.raises(JsonRpcException) as raised:
            await asyncio.wait_for(pending, TIMEOUT)
        assert raised.value.code == -32800
        answer = plain(await asyncio.wait_for(
            inline_edit(server, uri, cursor, VERSION_AFTER_RENAME, msg_id="sk-2", **context),
            TIMEOUT))
        assert [e["text"] for e in answer["edits"]] == ["ratio", "ratio"]
        # sidekick applies the TextEdits itself, then runs each edit's command.
        version = VERSION_AFTER_RENAME
        for edit in reversed(answer["edits"]):
            version += 1
            server.client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangePartial(
                    range=types.Range(
                        start=types.Position(**edit["range"]["start"]),
                        end=types.Position(**edit["range"]["end"])),
                    text=edit["text"])]))
        for edit in answer["edits"]:
            await server.request(types.WORKSPACE_EXECUTE_COMMAND, types.ExecuteCommandParams(
                command=edit["command"]["command"], arguments=edit["command"]["arguments"]))
        status = await server.request("agentls/status", {})
        assert status["nextEdits"] == {"served": 1, "accepted": 2}
        assert not [m for m in server.shown() if "rror" in m]


async def test_agent_edits_are_not_history_and_base_models_get_a_continuation(
    tmp_path: Path,
) -> None:
    """The user edits, then the agent's applyEdit (answered by an editor that
    sends didChange before its answer, as VS Code does) changes another
    line: the suggestion still follows the user's edit, never the agent's.
    The scripted provider is a base model (FIM capable), so the prompt is
    the plain-text continuation: the region before the user's edit and what
    that edit was."""
    from tests.e2e.test_edits import Editor, call, capabilities, chat, editor_session, recorded

    workspace = tmp_path / "ws"
    workspace.mkdir()
    before = "def f(a):\n    return a\n\nx = 1\ny = 1\n"
    after_user = before.replace("x = 1", "x = 2")
    after_agent = after_user.replace("return a", "return a + 1")
    record = tmp_path / "calls.jsonl"
    script = tmp_path / "script.json"
    script.write_text(json.dumps({
        "responses": [call("edit_file", path="calc.py", old_string="return a",
                           new_string="return a + 1"), {"text": "Done."}],
        "fim": [{"text": after_agent.replace("y = 1", "y = 2") + "```\ntrailing words"}],
        "record": str(record)}))
    settings = {"provider": "scripted", "providerOptions": {"script": str(script)},
                "nextEdit": {"debounceMs": 0}}
    editor: Editor
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=True)) as editor:
        uri = editor.open("calc.py", before)
        editor.change(uri, after_user)  # the user's own edit
        result = await chat(editor, prompt="add one")
        assert result["status"] == "completed", result
        assert editor.text("calc.py") == after_agent
        version = editor.docs[uri][0]
        answer = plain(await asyncio.wait_for(editor.client.protocol.send_request_async(
            METHOD, {"textDocument": {"uri": uri, "version": version},
                     "position": {"line": 3, "character": 5}}), TIMEOUT))
        assert [(e["range"], e["text"]) for e in answer["edits"]] == [
            ({"start": {"line": 4, "character": 4}, "end": {"line": 4, "character": 5}}, "2")]
    fim = [c for c in recorded(record) if c["kind"] == "fim"]
    assert len(fim) == 1
    prompt = fim[0]["prefix"]
    # The last edit described is the user's; the region "before it" holds the
    # agent's change as it is now, with only the user's edit undone.
    assert prompt.endswith("The same code after `x = 1` was changed to `x = 2` and the same "
                           "change is made wherever it applies:\n```plaintext\n")
    assert "```plaintext\ndef f(a):\n    return a + 1\n\nx = 1\ny = 1\n```" in prompt
    assert fim[0]["stop"] == ["```"]
