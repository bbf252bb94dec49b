"""A /template picked in the chat buffer arrives with placeholders; the
server fills them from the request's context before the model sees them.
Settings pulled with workspace/configuration apply to the very first turn."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.test_chat import agentls, recorded, scripted


async def test_template_placeholders_filled_from_context(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    settings, record = scripted(tmp_path, "tpl", [{"text": "It subtracts."}])
    async with agentls(workspace, tmp_path / "state", settings) as s:
        uri = s.open("calc.py", "def add(a, b):\n    return a - b\n")
        result = await s.chat(
            prompt="Explain {{path}} ({{language}}):\n```\n{{selection}}\n```",
            context={"uri": uri, "range": {"start": {"line": 0, "character": 0},
                                           "end": {"line": 2, "character": 0}}})
        assert result["status"] == "completed"
    sent = recorded(record)[0]["messages"][-1]["content"]
    assert "{{" not in sent
    assert "Explain calc.py (python):" in sent
    assert "return a - b" in sent
    assert sent.count("return a - b") == 1  # the selection is not attached twice


async def test_first_turn_uses_workspace_configuration(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    settings, record = scripted(tmp_path, "cfg", [{"text": "ok"}])
    # The provider is chosen ONLY by workspace/configuration: a turn sent
    # right after start-up must wait for it instead of using the default.
    async with agentls(workspace, tmp_path / "state", {}, configuration=settings) as s:
        result = await s.chat(prompt="hello")
        assert result["status"] == "completed", result
    assert recorded(record)[0]["messages"][-1]["content"] == "hello"


async def test_did_change_status_busy_then_ready_then_error(tmp_path: Path) -> None:
    import json

    from tests.e2e.helpers import RawClient, server_env

    script = tmp_path / "s.json"
    script.write_text(json.dumps([
        {"text": "fine"}, {"error": {"code": "rate_limit", "message": "slow down"}}]))
    raw = await RawClient.start(env=server_env(
        AGENTLS_PROVIDER="scripted", AGENTLS_STATE_DIR=str(tmp_path / "state"),
        AGENTLS_PROVIDER_OPTIONS=json.dumps({"script": str(script)})))
    try:
        await raw.initialize(rootUri=tmp_path.as_uri())
        ok = await raw.request("agentls/chat", {"prompt": "hi"}, timeout=20)
        assert ok["result"]["status"] == "completed"
        failed = await raw.request("agentls/chat", {"prompt": "again"}, timeout=20)
        assert failed["result"]["status"] == "failed"
        statuses = [n["params"] for n in raw.notifications if n["method"] == "didChangeStatus"]
        assert [s["busy"] for s in statuses] == [True, False, True, False]
        assert statuses[1]["kind"] == "Normal"
        assert statuses[3]["kind"] == "Error" and "slow down" in statuses[3]["message"]
    finally:
        await raw.close()
