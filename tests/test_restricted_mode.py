"""Restricted mode (features/policy/restricted.py, docs/security.md): which
workspace folders are a home, root or system folder, and what the approval
policy (features/policy/rules.py) answers there: every edit, command and
call asks with no session memory, whatever the user's allow rules say;
reads follow the usual rules; the user's `approval.unrestrictedFolders`
lifts it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agentls.core.approval.gate import ApprovalQuestion
from agentls.core.settings.schema import ApprovalRule, ApprovalSettings
from agentls.core.tools.contract import ToolNeed
from agentls.features.policy.restricted import restricted_folders, restricted_notice
from agentls.features.policy.rules import Policy

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX folders")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home" / "me"
    (folder / "src" / "app").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.delenv("USERPROFILE", raising=False)
    return folder.resolve()


def whys(*folders: str | Path, lifted: tuple[str, ...] = ()) -> list[str]:
    return [f.what for f in restricted_folders(folders, lifted)]


def test_home_root_and_system_folders_are_restricted(home: Path) -> None:
    assert whys(home) == ["your home folder"]
    assert whys(home.parent) == ["a folder that holds your home folder"]
    assert whys("/") == ["the root of the file system"]
    assert whys("/etc") == ["a system folder"] and whys("/etc/nginx") == ["a system folder"]
    assert whys("/usr") == ["a system folder"]


def test_project_folders_are_not(home: Path) -> None:
    assert whys(home / "src" / "app") == []
    # common container workdirs below system folders
    assert whys("/usr/src/app", "/opt/app", "/srv/site", "/var/www/site") == []


def test_the_users_list_lifts_it(home: Path) -> None:
    assert whys(home, lifted=(str(home),)) == []
    assert whys(home, lifted=("~",)) == []
    assert whys(home, lifted=(str(home / "src"),)) == ["your home folder"]


def test_the_notice_names_the_folder_and_the_way_out(home: Path) -> None:
    notice = restricted_notice(restricted_folders([home]))
    assert notice is not None
    assert str(home) in notice and "your home folder" in notice
    assert "approval.unrestrictedFolders" in notice
    assert restricted_notice([]) is None


def ask(policy: Policy, tool: str, need: ToolNeed) -> str:
    return policy.decide(ApprovalQuestion(tool, {}, need, "s")).verdict


def test_the_policy_asks_every_change_in_restricted_mode(home: Path) -> None:
    allow_all = ApprovalSettings(rules=[
        ApprovalRule(tool="*", action="allow"),
        ApprovalRule(tool="run_command", command="ls", action="allow")])
    policy = Policy(allow_all, [home])
    assert ask(policy, "write_file", ToolNeed("edit", ("notes.txt",), remember=True)) \
        == "protected"
    assert ask(policy, "run_command", ToolNeed("run", (), command="ls", cwd=".")) == "protected"
    assert ask(policy, "mcp__x__y", ToolNeed("call")) == "protected"
    assert ask(policy, "read_file", ToolNeed("read", ("notes.txt",))) == "allow"
    answer = policy.decide(ApprovalQuestion(
        "write_file", {}, ToolNeed("edit", ("notes.txt",), remember=True), "s"))
    assert "restricted mode" in answer.reason and str(home) in answer.reason
    # a deny rule still denies
    deny = Policy(ApprovalSettings(rules=[ApprovalRule(tool="write_file", action="deny")]),
                  [home])
    assert ask(deny, "write_file", ToolNeed("edit", ("notes.txt",))) == "deny"


def test_a_project_folder_keeps_its_rules(home: Path) -> None:
    allow = ApprovalSettings(rules=[ApprovalRule(tool="write_file", action="allow")])
    project = home / "src" / "app"
    assert ask(Policy(allow, [project]), "write_file",
               ToolNeed("edit", ("notes.txt",))) == "allow"
    assert ask(Policy(ApprovalSettings(), [project]), "write_file",
               ToolNeed("edit", ("notes.txt",))) == "ask"
    lifted = ApprovalSettings(unrestricted_folders=[str(home)])
    assert ask(Policy(lifted, [home]), "write_file", ToolNeed("edit", ("notes.txt",))) == "ask"
