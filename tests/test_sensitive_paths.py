"""features/policy/sensitive.py: the protected table and the one check for a
file's text reaching the model (ModelFileAccess), on a real directory tree."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from agentls.core.editor.file_access import ModelFile, ReadableFile, Withheld
from agentls.features.policy.sensitive import (
    PROTECTED,
    PROTECTED_PATTERNS,
    SENSITIVE,
    ModelFileAccess,
    protected_match,
    protected_reason,
    secret_match,
    secret_reason,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX links and FIFOs")


def test_every_protected_entry_has_a_reason_and_appears_once() -> None:
    assert all(entry.reason.strip() for entry in PROTECTED)
    assert len(set(PROTECTED_PATTERNS)) == len(PROTECTED_PATTERNS)


def test_the_one_table_gives_every_row_its_reasons_and_each_pattern_one_row() -> None:
    assert len({row.pattern for row in SENSITIVE}) == len(SENSITIVE)
    for row in SENSITIVE:
        assert row.protect or row.secret, row
        assert all(reason is None or reason.strip() for reason in (row.protect, row.secret))
    both = {row.pattern for row in SENSITIVE if row.protect and row.secret}
    assert {"**/.env", "**/.npmrc", "**/.yarnrc.yml", "**/.ssh/**"} <= both


# The files that make a shell, a login, ssh, git, the desktop or systemd run
# commands: protected wherever they are.
@pytest.mark.parametrize(("path", "says"), [
    (".bashrc", "shell"), (".profile", "shell"), (".bash_profile", "shell"),
    (".zshrc", "shell"), (".zprofile", "shell"), ("dotfiles/.zshenv", "shell"),
    (".ssh/authorized_keys", "ssh"), (".ssh/config", "ssh"), (".gitconfig", "git"),
    (".config/git/config", "git"), (".config/autostart/evil.desktop", "desktop"),
    (".config/systemd/user/x.service", "systemd"), (".local/bin/ls", "PATH"),
    (".xprofile", "login"), (".config/environment.d/p.conf", "login"),
    (".config/fish/config.fish", "shell"), (".vimrc", "Vim"),
    ("Library/LaunchAgents/x.plist", "launch agents"), (".config/nvim/init.lua", "configuration"),
])
def test_start_up_files_are_protected_with_their_reason(path: str, says: str) -> None:
    assert says in (protected_reason(path) or ""), (path, protected_reason(path))


@pytest.mark.parametrize("path", [
    ".qwen/settings.json", ".crush.json", "crush.json", ".kilocode/mcp.json",
    ".amazonq/mcp.json", ".junie/mcp/mcp.json", ".trae/mcp.json", ".augment/settings.json",
    # the rules: any MCP list, any tool folder's settings file
    "mcp.json", "tools/mcp.json", "config/mcp_servers.json", ".newagent/settings.json",
    ".newagent/config.toml",
])
def test_other_agents_configs_are_protected_by_list_or_rule(path: str) -> None:
    assert protected_reason(path), path


@pytest.mark.parametrize("path", [
    ".config/gh/hosts.yml", ".config/glab-cli/config.yml", ".docker/config.json",
    ".kube/config", "ops/prod.kubeconfig", ".aws/credentials", ".aws/config",
    ".config/gcloud/application_default_credentials.json", ".azure/msal_token_cache.json",
    ".npmrc", ".yarnrc.yml", ".pypirc", ".cargo/credentials.toml", ".cargo/credentials",
    "terraform.tfstate", "envs/prod/terraform.tfstate.backup",
    ".terraform.d/credentials.tfrc.json", ".netrc", ".pgpass", ".my.cnf",
    ".config/rclone/rclone.conf", ".bash_history", ".zsh_history", ".python_history",
    ".psql_history", ".local/share/fish/fish_history", "service-account.json",
    "keys/prod-service-account.json", ".vault-token", ".gem/credentials",
])
def test_cli_and_cloud_credentials_are_secret_with_a_reason(path: str) -> None:
    assert secret_match(path), path
    assert secret_reason(path), path


@pytest.mark.parametrize("path", [
    "src/history.py", "docs/history.md", "CHANGELOG.md", "terraform/main.tf", "yarn.lock",
    ".github/dependabot.yml", "config/settings.json", "service.json",
])
def test_everyday_files_are_not_secret(path: str) -> None:
    assert secret_match(path) is None, path


def test_the_real_path_counts_too() -> None:
    # a workspace that is ~/.ssh or ~/.config: the name alone says nothing
    assert protected_reason("authorized_keys", "/home/me/.ssh/authorized_keys")
    assert protected_reason("git/config", "/home/me/.config/git/config")
    assert protected_reason("authorized_keys") is None
    assert secret_match("config", "/home/me/.aws/config") == "**/.aws/**"
    assert secret_match("app.py", "/home/me/src/app.py") is None


def test_hard_linked_files_are_not_sent(tree: Path, tmp_path: Path) -> None:
    outside = tmp_path / "id_key"
    outside.write_text("PLANTED key")
    os.link(outside, tree / "notes.txt")
    access = ModelFileAccess([tree])
    for result in (access.check("notes.txt"), access.read_for_model("notes.txt",
                                                                    max_bytes=100)):
        assert isinstance(result, Withheld) and "hard links" in result.reason
    # an editor buffer the user opened is theirs to send
    assert isinstance(access.check(tree / "notes.txt", confine=False), ReadableFile)


@pytest.mark.parametrize("path", [
    ".claude/settings.json", ".claude/settings.local.json", ".cursor/mcp.json",
    ".gemini/settings.json", ".continue/config.json", ".hg/hgrc", "sub/.HG/hgrc",
    ".windsurf/rules/x.md", ".roo/mcp.json", ".clinerules", ".aider.conf.yml",
    ".codex/config.toml", ".jj/repo/config.toml", "lefthook.yml", ".envrc", ".env",
    "mise.toml", ".github/workflows/ci.yml", ".gitlab/ci/x.yml", "bitbucket-pipelines.yml",
    ".yarn/plugins/p.cjs", "bunfig.toml", "rust-toolchain.toml", ".vscode/tasks.json",
    ".git/hooks/pre-commit", ".devcontainer/devcontainer.json", ".dir-locals.el",
])
def test_files_that_make_programs_run_commands_are_protected(path: str) -> None:
    assert protected_match(path) is not None
    assert protected_reason(path)


@pytest.mark.parametrize("path", [
    "package.json", "Makefile", "pyproject.toml", "src/app.py", "AGENTS.md", "CLAUDE.md",
    ".env.example", "docs/claude.md", "README.md",
])
def test_everyday_files_are_not_protected(path: str) -> None:
    assert protected_match(path) is None and protected_reason(path) is None


def test_the_reason_names_the_program() -> None:
    assert "Claude Code" in (protected_reason(".claude/settings.json") or "")
    assert "Mercurial" in (protected_reason(".hg/hgrc") or "")


def test_secret_rule_is_unchanged() -> None:
    assert secret_match(".env") and secret_match("a/.git/config") and secret_match("id_rsa")
    assert secret_match(".env.example") is None and secret_match("id_rsa.pub") is None


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text("[remote] PLANTED")
    (root / ".env").write_text("KEY=PLANTED")
    (root / "notes.md").write_text("hello")
    (tmp_path / "outside.txt").write_text("PLANTED outside")
    return root


def test_plain_workspace_files_are_read(tree: Path) -> None:
    access = ModelFileAccess([tree])
    read = access.read_for_model("notes.md", max_bytes=100)
    assert isinstance(read, ModelFile) and read.text == "hello" and read.rel == "notes.md"
    cut = access.read_for_model("notes.md", max_bytes=2)
    assert isinstance(cut, ModelFile) and cut.text == "he" and cut.truncated


@pytest.mark.parametrize(("name", "target", "says"), [
    ("link.md", ".env", "link.md leads to .env"),
    ("AGENTS.md", ".git/config", "AGENTS.md leads to .git/config"),
    ("out.md", "../outside.txt", "leads outside the workspace"),
])
def test_links_to_secrets_or_out_are_withheld(tree: Path, name: str, target: str,
                                              says: str) -> None:
    (tree / name).symlink_to(target)
    result = ModelFileAccess([tree]).read_for_model(name, max_bytes=1000)
    assert isinstance(result, Withheld) and says in result.reason


def test_a_secret_name_linking_elsewhere_is_still_withheld(tree: Path) -> None:
    (tree / ".env.local").symlink_to("notes.md")
    assert isinstance(ModelFileAccess([tree]).check(".env.local"), Withheld)


def test_a_folder_link_into_git_is_seen(tree: Path) -> None:
    (tree / "docs").symlink_to(".git")
    result = ModelFileAccess([tree]).check("docs/config")
    assert isinstance(result, Withheld) and "docs/config leads to .git/config" in result.reason


def test_fifos_and_folders_are_not_read(tree: Path) -> None:
    os.mkfifo(tree / "pipe.md")
    access = ModelFileAccess([tree])
    assert access.read_for_model("pipe.md", max_bytes=10) is None  # no hang
    assert access.read_for_model(".git", max_bytes=10) is None
    assert access.read_for_model("missing.md", max_bytes=10) is None


def test_unconfined_checks_apply_only_the_secret_rule(tree: Path, tmp_path: Path) -> None:
    access = ModelFileAccess([tree])
    outside = access.check(tmp_path / "outside.txt", confine=False)
    assert isinstance(outside, ReadableFile)
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text("Host x")
    assert isinstance(access.check(tmp_path / ".ssh" / "config", confine=False), Withheld)
    assert isinstance(ModelFileAccess([]).check("notes.md"), Withheld)
    assert isinstance(access.check("a\0b"), Withheld)


def test_mcp_contents_answering_with_a_secret_uri_are_kept_back(tree: Path) -> None:
    from agentls.features.mcp.results import attachable_contents, withheld_resource

    env, notes = (tree / ".env").as_uri(), (tree / "notes.md").as_uri()
    kept, notes_out = attachable_contents(
        [{"uri": notes, "text": "hello"}, {"uri": env, "text": "KEY=PLANTED"},
         {"uri": "notes://today", "text": "milk"}, "junk"], [tree])
    assert [c["uri"] for c in kept] == [notes, "notes://today"]
    assert len(notes_out) == 1 and "PLANTED" not in notes_out[0] and env in notes_out[0]
    assert withheld_resource("notes://x", [tree]) is None
    assert withheld_resource((tree / ".git" / "config").as_uri(), [tree])


def _corpus() -> list[str]:
    import random

    from agentls.features.policy.sensitive import _SECRET_EXCEPTIONS, SECRET_PATTERNS

    names: set[str] = {"src", "a", "x.py", "README.md", "Id_RSA.pub", "notes.env", ".ENV.local",
             "my-credentials-prod.json", "w.code-workspace", "mise.dev.toml", "config"}
    for pattern in (*PROTECTED_PATTERNS, *SECRET_PATTERNS, *_SECRET_EXCEPTIONS):
        for part in pattern.split("/"):
            if part != "**":
                names.add(part.replace("*", "zz"))
                names.add(part.replace("*", "").upper())
    names -= {".", ".."}  # `.*` without its star: never a component of a resolved path
    ordered = sorted(names)
    rng = random.Random(22)
    paths = ordered + [f"{first}/{rng.choice(ordered)}" for first in ordered]
    paths += ["/".join(rng.choice(ordered) for _ in range(rng.randint(2, 5)))
              for _ in range(600)]
    return paths


def test_the_fast_matcher_agrees_with_wcmatch() -> None:
    """The folder-name matcher gives the same first pattern as a wcmatch
    glob per pattern (the old code) on every path of a corpus built from
    the patterns' own names, in both letter cases."""
    from wcmatch import glob

    from agentls.features.policy.sensitive import _SECRET_EXCEPTIONS, SECRET_PATTERNS

    flags = glob.GLOBSTAR | glob.DOTGLOB | glob.IGNORECASE | glob.BRACE

    def slow(rel: str, patterns: tuple[str, ...]) -> str | None:
        return next((p for p in patterns if glob.globmatch(rel, p, flags=flags)), None)

    for rel in _corpus():
        assert protected_match(rel) == slow(rel, PROTECTED_PATTERNS), rel
        expected = None if slow(rel, _SECRET_EXCEPTIONS) else slow(rel, SECRET_PATTERNS)
        assert secret_match(rel) == expected, rel


def test_matching_a_path_20000_folders_deep_costs_few_pattern_matches(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """Linear in the path: no glob runs over the long path (only the last
    names are compared), counted rather than timed."""
    from wcmatch import fnmatch, glob

    calls = {"glob": 0, "fnmatch": 0}
    real_glob, real_fn = glob.globmatch, fnmatch.fnmatch

    def counting_glob(*args: object, **kwargs: object) -> bool:
        calls["glob"] += 1
        return bool(real_glob(*args, **kwargs))  # type: ignore[arg-type]

    def counting_fn(*args: object, **kwargs: object) -> bool:
        calls["fnmatch"] += 1
        return bool(real_fn(*args, **kwargs))  # type: ignore[arg-type]

    monkeypatch.setattr(glob, "globmatch", counting_glob)
    monkeypatch.setattr(fnmatch, "fnmatch", counting_fn)
    deep = "d/" * 20_000 + "x.py"
    assert protected_match(deep) is None and secret_match(deep) is None
    assert protected_match("d/" * 20_000 + ".git/config") == "**/.git/**"
    assert secret_match("d/" * 20_000 + ".env") == "**/.env"
    assert calls["glob"] == 0 and calls["fnmatch"] < 100, calls


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc/self/fd (Linux)")
def test_a_folder_swapped_for_a_link_after_the_check_is_caught(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tree / "docs").mkdir()
    (tree / "docs" / "config").write_text("harmless")
    real_open = os.open

    def swap_then_open(path: object, *args: object, **kwargs: object) -> int:
        # Between the check and the open, docs/ becomes a link into .git.
        (tree / "docs" / "config").unlink()
        (tree / "docs").rmdir()
        (tree / "docs").symlink_to(".git")
        monkeypatch.setattr(os, "open", real_open)
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", swap_then_open)
    result = ModelFileAccess([tree]).read_for_model("docs/config", max_bytes=100)
    assert isinstance(result, Withheld) and "PLANTED" not in result.reason
