"""Credential files of the common CLIs and clouds, and hard-linked files,
never reach the model unasked (docs/security.md, "Secret files"), through
the REAL server: the scripted provider records every request, the test
plays the editor and answers Deny.

- In a workspace that is a home folder, read_file of the GitHub CLI's
  token, `.pgpass`, Cargo's and rclone's credentials and the shell
  history asks each time; denied, no token is in any model request.
- Anywhere, a prompt naming `service-account.json`, `terraform.tfstate` or
  `.yarnrc.yml` does not attach them.
- A file with a second hard link (to a key outside the workspace) is
  neither read by read_file, searched by search_text nor attached, as
  writes already refuse it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.harness import LspProcess, scripted_settings

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX home folder, links")

MESSAGE_MODE = {"window": {"showMessage": {"messageActionItem": {}}},
                "workspace": {"applyEdit": True,
                              "workspaceEdit": {"documentChanges": True}}}

CLI_FILES = {
    ".config/gh/hosts.yml": "github.com:\n  oauth_token: gho_PLANTEDgh11\n",
    ".pgpass": "db:5432:*:me:PLANTEDpgpass22\n",
    ".cargo/credentials.toml": '[registry]\ntoken = "cio_PLANTEDcargo33"\n',
    ".config/rclone/rclone.conf": "[s3]\nsecret_access_key = PLANTEDrclone44\n",
    ".bash_history": "export AWS_SECRET_ACCESS_KEY=PLANTEDhistory55\n",
    ".zsh_history": ": 1:0;mysql -pPLANTEDzsh66\n",
}
NAMED_FILES = {
    "service-account.json": '{"private_key": "PLANTEDsa77"}\n',
    "terraform.tfstate": '{"outputs": {"db_password": "PLANTEDtf88"}}\n',
    ".yarnrc.yml": 'npmAuthToken: "PLANTEDyarn99"\n',
}


def plant(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def planted(files: dict[str, str]) -> list[str]:
    return [word for text in files.values() for word in text.replace('"', " ").split()
            if "PLANTED" in word]


class User:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, method: str, params: Any) -> Any:
        if method == "window/showMessageRequest":
            self.asked.append(str(params["message"]))
            return {"title": "Deny"}
        return None


def chat(tmp_path: Path, workspace: Path, responses: list[dict[str, Any]], prompt: str,
         home: Path) -> tuple[User, str, dict[str, Any]]:
    settings, record = scripted_settings(tmp_path, "reads", [*responses, {"text": "done"}])
    settings.update(approval={"mode": "message"},
                    session={"maxIterations": len(responses) + 5})
    user = User()
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings, capabilities=MESSAGE_MODE,
                          env={"HOME": str(home)}) as lsp:
        lsp.responder = user
        result = lsp.result("agentls/chat", {"prompt": prompt}, timeout=120)
        assert result["status"] == "completed", str(result)[:500]
    return user, record.read_text() if record.exists() else "", result


def reads(paths: list[str]) -> list[dict[str, Any]]:
    return [{"tool_calls": [{"id": f"r{i}", "name": "read_file", "arguments": {"path": p}}]}
            for i, p in enumerate(paths)]


def test_cli_credentials_in_a_home_folder_ask_every_time(tmp_path: Path) -> None:
    home = tmp_path / "home"
    plant(home, CLI_FILES)
    user, sent, _ = chat(tmp_path, home, reads(list(CLI_FILES)), "Read my config", home)
    assert sent, "the model was never called"
    for token in planted(CLI_FILES):
        assert token not in sent, token
    assert len(user.asked) == len(CLI_FILES), user.asked
    for rel, question in zip(CLI_FILES, user.asked, strict=True):
        assert rel in question and "may hold secrets" in question


def test_named_credential_files_are_not_attached(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = home / "src" / "infra"
    plant(project, NAMED_FILES)
    _, sent, _ = chat(tmp_path, project, [], "Check service-account.json, terraform.tfstate "
                      "and .yarnrc.yml for mistakes", home)
    assert sent, "the model was never called"
    for token in planted(NAMED_FILES):
        assert token not in sent, token


def test_hard_linked_files_are_neither_read_searched_nor_attached(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = home / "src" / "app"
    project.mkdir(parents=True)
    key = home / "deploy_key"  # outside the workspace, under a harmless-looking name inside
    key.write_text("-----BEGIN KEY----- PLANTEDhardlink00\n")
    os.link(key, project / "notes.txt")
    search = {"tool_calls": [{"id": "s", "name": "search_text",
                              "arguments": {"pattern": "PLANTED"}}]}
    _, sent, result = chat(tmp_path, project, [*reads(["notes.txt"]), search],
                           "Summarise notes.txt", home)
    assert sent, "the model was never called"
    assert "PLANTEDhardlink00" not in sent
    read, searched = [m for m in result["messages"] if m["role"] == "tool"]
    assert read["toolResult"]["success"] is False
    assert "hard links" in read["toolResult"]["error"]["message"]
    assert searched["toolResult"]["output"]["matches"] == []
    assert searched["toolResult"]["output"]["skipped_linked"] == ["notes.txt"]
