"""Secret files never reach the model without read_file's question
(docs/security.md), through the REAL server: the scripted provider records every
request, the test plays the editor.

The ways a file's text goes to the model besides read_file, each tried with
a secret file (`.env`, `.git/config`):

- `instructions.files = [".env"]` in the workspace's `.agentls.toml`;
- an `AGENTS.md` that is a symlink to `.env`;
- a `sub/CLAUDE.md` that links to `.git/config`, applying once the turn
  reads a file under `sub/`;
- an `@file:.env` mention inside code sent with the "Explain" code action;
- a workspace template (`.agentls/templates/explain.md`) holding
  `@file:.git/config`, and a template file that is itself a link to `.env`.

Each time the secret is absent from every model request, and the request
says which file was kept back and why (a secret file needs read_file's
approval), so neither the agent nor the user is left guessing.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.harness import LspProcess, scripted_settings

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX symlinks")

ENV_SECRET = "sk-PLANTED-dotenv-51c7e0"
GIT_SECRET = "ghp_PLANTEDgitconfig9a8b7c"
WHY = "reaches the model only through read_file"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text(
        f'[remote "origin"]\n\turl = https://user:{GIT_SECRET}@example.com/r.git\n')
    (root / ".env").write_text(f"OPENAI_API_KEY={ENV_SECRET}\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('hi')\n")
    return root


def record_text(record: Path) -> str:
    return record.read_text() if record.exists() else ""


def chat(lsp: LspProcess, prompt: str, **params: Any) -> dict[str, Any]:
    result = lsp.result("agentls/chat", {"prompt": prompt, **params}, timeout=60)
    assert result["status"] == "completed", str(result)[:800]
    return dict(result)


def assert_no_secret(record: Path, *also: Any) -> None:
    sent = record_text(record)
    assert sent, "the model was never called"
    for text in (sent, *(json.dumps(a) for a in also)):
        assert ENV_SECRET not in text
        assert GIT_SECRET not in text


def test_instruction_files_naming_or_linking_to_secrets_are_withheld(
    tmp_path: Path, workspace: Path
) -> None:
    # The workspace file names .env as an instruction file (instructions.*
    # applies without trust); AGENTS.md links to .env; sub/CLAUDE.md links
    # to .git/config and applies once the turn reads a file under sub/.
    (workspace / ".agentls.toml").write_text('[instructions]\nfiles = [".env", "CLAUDE.md"]\n')
    (workspace / "sub").mkdir()
    (workspace / "sub" / "CLAUDE.md").symlink_to("../.git/config")
    (workspace / "sub" / "x.py").write_text("x = 1\n")
    settings, record = scripted_settings(tmp_path, "instructions", [
        {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "sub/x.py"}}]},
        {"text": "done"}])
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings) as lsp:
        result = chat(lsp, "Hello")
    assert_no_secret(record, result)
    requests = [json.loads(line) for line in record_text(record).splitlines()]
    assert len(requests) == 2
    system = [m["content"] for m in requests[-1]["messages"] if m["role"] == "system"]
    text = "\n".join(system)
    assert 'file=".env" withheld="true"' in text and WHY in text
    assert 'file="sub/CLAUDE.md" withheld="true"' in text and "leads to .git/config" in text
    # The chat views list the instruction files with the prompt and the
    # replies: the user sees they were not sent, and why.
    listed = [name for m in result["messages"]
              for name in (m.get("metadata") or {}).get("instructions") or []]
    assert any(name.startswith(".env (not sent: ") and WHY in name for name in listed), listed
    assert any(name.startswith("sub/CLAUDE.md (not sent: ") for name in listed), listed

    # AGENTS.md as a link to .env, with the default instruction files.
    (workspace / ".agentls.toml").unlink()
    (workspace / "AGENTS.md").symlink_to(".env")
    settings, record = scripted_settings(tmp_path, "agents-link", [{"text": "done"}])
    with LspProcess.start(state_dir=tmp_path / "state2", workspace=workspace,
                          settings=settings) as lsp:
        result = chat(lsp, "Hello")
    assert_no_secret(record, result)
    assert "AGENTS.md leads to .env" in record_text(record)


def explain_prompt(lsp: LspProcess, uri: str, text: str) -> str:
    """The prompt of the "Explain" code action over the whole document."""
    lines = text.splitlines()
    actions = lsp.result("textDocument/codeAction", {
        "textDocument": {"uri": uri},
        "range": {"start": {"line": 0, "character": 0},
                  "end": {"line": len(lines) - 1, "character": len(lines[-1])}},
        "context": {"diagnostics": []}})
    explain = next(a for a in actions if a["title"] == "Explain")
    return str(explain["command"]["arguments"][0]["prompt"])


def test_mentions_in_explained_code_and_templates_do_not_attach_secrets(
    tmp_path: Path, workspace: Path
) -> None:
    code = "# see @file:.env and @file:src/app.py\nx = 1\n"
    (workspace / "src" / "mod.py").write_text(code)
    settings, record = scripted_settings(tmp_path, "mentions", [{"text": "ok"}] * 2)
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings) as lsp:
        uri = (workspace / "src" / "mod.py").as_uri()
        lsp.open(uri, code)
        prompt = explain_prompt(lsp, uri, code)
        assert "@file:.env" in prompt  # the code carries the mention
        first = chat(lsp, prompt)
        # The chat's "Attached:" footer (metadata.mentions) names what the
        # model got, never the withheld .env.
        # (src/mod.py: the prompt names the explained file, so named-files
        # attaches it too; its text holds no secret.)
        assert first["messages"][0]["metadata"]["mentions"] == ["src/app.py", "src/mod.py"]

        # A workspace template replacing "explain" mentions .git/config.
        templates = workspace / ".agentls" / "templates"
        templates.mkdir(parents=True)
        (templates / "explain.md").write_text(
            "Explain this, with the remote in @file:.git/config\n\n{{selection}}\n")
        # ... and a template that is a link to .env.
        (templates / "leak.md").symlink_to("../../.env")
        prompt = explain_prompt(lsp, uri, code)
        assert "@file:.git/config" in prompt
        second = chat(lsp, prompt)
        # The template list goes to the editor, whose chat sends the text on.
        listed = lsp.result("agentls/templates", {})
    assert_no_secret(record, first, second, listed)
    sent = record_text(record)
    # The other mention is attached; the secret ones are named with the reason.
    assert "print('hi')" in sent
    assert '<file path=\\".env\\" error=' in sent and WHY in sent
    assert '<file path=\\".git/config\\" error=' in sent
    leak = next(t for t in listed["templates"] if t["name"] == "leak")
    assert WHY in leak["template"] or WHY in leak["description"]


FILE_SERVER = '''
import os, sys
from pathlib import Path
from mcp.server.mcpserver import MCPServer

server = MCPServer("files")


def reader(path):
    def read() -> str:
        return path.read_text()
    return read


for name in os.environ["FILES"].split(os.pathsep):
    path = Path(name)
    server.resource(path.as_uri(), name=path.name)(reader(path))

server.run("stdio")
'''


def test_mcp_file_resources_of_secret_files_are_not_attached(
    tmp_path: Path, workspace: Path
) -> None:
    """A server the user set up offers files as resources: the mention of
    `.env` is not attached (the secret rule applies whichever server offers
    the file), the mention of a plain file is."""
    script = tmp_path / "file_server.py"
    script.write_text(FILE_SERVER)
    notes = workspace / "notes.md"
    notes.write_text("Plain notes 7f3a.\n")
    env = workspace / ".env"
    settings, record = scripted_settings(tmp_path, "resources", [{"text": "ok"}])
    settings["mcpServers"] = {"files": {
        "command": sys.executable, "args": [str(script)],
        "env": {"FILES": os.pathsep.join([str(env), str(notes)])}}}
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings) as lsp:
        result = chat(lsp, f"Compare @mcp:files:{env.as_uri()} with @mcp:files:{notes.as_uri()}")
    assert_no_secret(record, result)
    sent = record_text(record)
    assert "Plain notes 7f3a." in sent
    assert "not attached" in sent and WHY in sent


def test_a_mention_with_a_nul_byte_is_refused_alone_and_the_user_is_told(
    tmp_path: Path, workspace: Path
) -> None:
    """Before, the NUL's ValueError dropped every mention of the prompt."""
    settings, record = scripted_settings(tmp_path, "nul", [{"text": "ok"}])
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings) as lsp:
        result = chat(lsp, 'Compare @file:"src/b\x00ad.py" with @file:src/app.py')
        shown = lsp.shown_messages()
    assert result["messages"][0]["metadata"]["mentions"] == ["src/app.py"]
    sent = record_text(record)
    assert "print('hi')" in sent  # the good mention is attached
    assert "NUL byte" in sent  # the model reads why the other is not
    [told] = [m for m in shown if "not attached" in m]
    assert "src/b\\x00ad.py" in told and "NUL byte" in told
