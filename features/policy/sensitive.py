"""The one table of paths that need the user's eye whatever the rules say
(`SENSITIVE`; docs/security.md has the same table for users), and the one
check every path of a file's text to the model goes through. Each row is a
pattern with the reason a write there always asks and/or the reason a read
asks:

* **Protected** paths make a program run commands or change what the agent
  may do: agentls's and other agents' settings and hooks (and, as rules,
  any MCP list and any tool folder's settings file), the editor's tasks,
  version control configs and hooks, the shell, login, ssh, desktop and
  systemd start-up files, CI workflows, package managers' install hooks
  and registries. A write there always asks, even under an allow rule or
  after "Allow for session"; a deny rule still denies.
* **Secret** paths hold credentials (keys, the common CLIs' and clouds'
  token files, database passwords, Terraform state, shell histories):
  reading one asks first, and listing or searching skips them unless the
  user names the file.

A path matches by its workspace-relative form or by its real absolute path
(a workspace that is ~/.ssh still holds authorized_keys).
* **Text for the model** (`model_file_check`, `read_for_model`): every way a
  file's text reaches the model without read_file (instruction files,
  `@file:` mentions, templates, MCP resources, next-edit context) applies the
  secret rule to the file the path really leads to, and keeps to the
  workspace folders; a withheld file is named with the reason, never
  skipped silently. A file with more than one hard link is kept back too:
  its other name may be a secret file outside the workspace.

Names match at any depth (`sub/.git/hooks/x` is as protected as
`.git/hooks/x`) and ignoring letter case, so a case-insensitive file system
cannot be used to slip past them. Paths are workspace-relative, `/`-separated.

What is deliberately *not* protected: build and package files the user runs
on purpose (`package.json` scripts, `Makefile`, `pyproject.toml`,
`conftest.py`, `build.gradle`, ...). Writing them is everyday agent work,
the change is shown in the approval, and they are no different from any
source file the user's next test run executes; protecting them would make
"Allow for session" useless without closing that door. Protected are the
files that run commands *without* the user choosing to run the project:
when the folder is opened or entered, when git, another agent or the
editor starts, or when a dependency is installed.
"""

from __future__ import annotations

import functools
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from wcmatch import fnmatch, glob

from agentls.core.editor.file_access import ModelFile, ReadableFile, Withheld

__all__ = [
    "PROTECTED",
    "PROTECTED_PATTERNS",
    "SECRETS",
    "SECRET_PATTERNS",
    "SENSITIVE",
    "ModelFileAccess",
    "Sensitive",
    "buffer_withheld",
    "model_file_check",
    "protected_match",
    "protected_reason",
    "read_for_model",
    "secret_match",
    "secret_reason",
]


@dataclass(frozen=True)
class Sensitive:
    """One row of the table: a pattern, why a write there always asks
    (`protect`, None: writes follow the rules) and why a read asks
    (`secret`, None: not a secret)."""

    pattern: str
    protect: str | None = None
    secret: str | None = None

    @property
    def reason(self) -> str:
        return self.protect or self.secret or ""


def _protect(reason: str, *patterns: str) -> tuple[Sensitive, ...]:
    return tuple(Sensitive(pattern, protect=reason) for pattern in patterns)


def _secret(reason: str, *patterns: str) -> tuple[Sensitive, ...]:
    return tuple(Sensitive(pattern, secret=reason) for pattern in patterns)


def _table(*rows: Sensitive) -> tuple[Sensitive, ...]:
    """The rows in order, a pattern listed in both kinds merged into one row."""
    merged: dict[str, Sensitive] = {}
    for row in rows:
        old = merged.get(row.pattern)
        if old is None:
            merged[row.pattern] = row
        else:
            merged[row.pattern] = Sensitive(row.pattern, old.protect or row.protect,
                                            old.secret or row.secret)
    return tuple(merged.values())


_MCP = "an MCP server list: every server in it is a program that starts"

# The one table (docs/security.md shows it to users). `_protect` rows: a
# write always asks, with the reason in the question; `_secret` rows: a
# read asks, nothing is listed, searched or attached unasked.
SENSITIVE: tuple[Sensitive, ...] = _table(
    # -- agentls itself
    *_protect("agentls settings: linters, MCP servers and approval rules run commands or "
              "change what needs your approval",
              "**/.agentls.toml", "**/.agentls/**"),
    *_protect(_MCP, "**/.mcp.json"),
    # -- other agents: settings, hooks, MCP lists, custom commands
    *_protect("Claude Code settings: hooks, permissions and MCP servers run commands",
              "**/.claude/**", "**/.claude.json"),
    *_protect("Cursor settings: MCP servers and environment scripts run commands",
              "**/.cursor/**"),
    *_protect("Gemini CLI settings: MCP servers, tool discovery and custom commands run "
              "commands", "**/.gemini/**"),
    *_protect("Continue settings: MCP servers and context providers run commands",
              "**/.continue/**", "**/.continuerc.json"),
    *_protect("Windsurf settings: workflows, hooks and MCP servers run commands",
              "**/.windsurf/**", "**/.codeium/**"),
    *_protect("Cline / Roo Code / Kilo Code settings: hooks, MCP servers and modes run "
              "commands",
              "**/.clinerules", "**/.clinerules/**", "**/.roo/**", "**/.roomodes",
              "**/.kilocode/**", "**/.kilocodemodes"),
    *_protect("Aider settings: lint and test commands run after each change",
              "**/.aider.conf.yml", "**/.aider.conf.yaml"),
    *_protect("Codex settings: MCP servers and shell permissions",
              "**/.codex/**"),
    *_protect("GitHub Copilot hooks and agent settings run commands",
              "**/.github/hooks/**", "**/.github/copilot/**", "**/.copilot/**"),
    *_protect("OpenCode / Kiro / Amp settings: plugins, hooks and MCP servers run commands",
              "**/opencode.json", "**/opencode.jsonc", "**/.opencode/**", "**/.kiro/**",
              "**/.amp/**"),
    *_protect("Qwen Code / Crush / Amazon Q / Junie / Trae / Augment / Goose / OpenHands / "
              "Factory settings: MCP servers, hooks and allowed commands run commands",
              "**/.qwen/**", "**/crush.json", "**/.crush.json", "**/.crush/**",
              "**/.amazonq/**", "**/.junie/**", "**/.trae/**", "**/.augment/**",
              "**/.goose/**", "**/.openhands/**", "**/.factory/**"),
    # -- editors: settings, tasks and launch configurations run commands
    *_protect("editor settings, tasks and launch configurations run commands",
              "**/.vscode", "**/.vscode/**", "**/*.code-workspace", "**/.idea/**",
              "**/.zed/**", "**/.fleet/**", "**/.helix/**", "**/.theia/**",
              "**/*.sublime-project"),
    *_protect("Vim / Neovim / Emacs run this file's code when the folder is opened",
              "**/.nvim.lua", "**/.nvimrc", "**/.exrc", "**/.lazy.lua",
              "**/.dir-locals.el", "**/.dir-locals-2.el"),
    *_protect("Vim / Neovim / Emacs run this file's code every time they start",
              "**/.vimrc", "**/.gvimrc", "**/.vim/**", "**/.emacs", "**/.emacs.el",
              "**/.emacs.d/**"),
    # -- version control: config, hooks, filters
    *_protect("git's own folder: config (core.fsmonitor, aliases, filters) and hooks run "
              "commands", "**/.git", "**/.git/**"),
    *_protect("your git config: aliases, core.fsmonitor, core.sshCommand, filters and "
              "hooksPath run commands in every repository",
              "**/.gitconfig", "**/.config/git/**"),
    *_protect("git submodule and attribute files select URLs and filters git runs",
              "**/.gitmodules", "**/.gitattributes", "**/.lfsconfig"),
    *_protect("Mercurial, Sapling, Jujutsu, Subversion and Bazaar repository configs: hooks "
              "and aliases run commands",
              "**/.hg", "**/.hg/**", "**/.sl/**", "**/.jj/**", "**/.svn", "**/.svn/**",
              "**/.bzr/**", "**/.hgrc"),
    *_protect("git hook managers: these commands run at every commit or push",
              "**/.pre-commit-config.yaml", "**/.husky/**", "**/.githooks/**",
              "**/lefthook.yml", "**/lefthook.yaml", "**/.lefthook.yml", "**/.lefthook.yaml",
              "**/lefthook-local.yml", "**/.lefthook/**", "**/.overcommit.yml",
              "**/.simple-git-hooks.json", "**/.simple-git-hooks.js"),
    # -- shell, login, desktop and systemd start-up files (a home folder's):
    # protected wherever they are, not only in a home folder
    *_protect("a shell runs this file's commands every time it starts (or you log in)",
              "**/.bashrc", "**/.bash_profile", "**/.bash_login", "**/.bash_logout",
              "**/.bash_aliases", "**/.profile", "**/.zshrc", "**/.zshenv", "**/.zprofile",
              "**/.zlogin", "**/.zlogout", "**/.oh-my-zsh/**", "**/.kshrc", "**/.mkshrc",
              "**/.cshrc", "**/.tcshrc", "**/.login", "**/.logout", "**/.inputrc",
              "**/.config/fish/**", "**/.config/nushell/**", "**/.config/powershell/**",
              "**/.tmux.conf", "**/.screenrc"),
    *_protect("your login session runs or loads this at every login (X session, PAM, "
              "systemd environment)",
              "**/.xprofile", "**/.xinitrc", "**/.xsession", "**/.xsessionrc",
              "**/.pam_environment", "**/.config/environment.d/**"),
    *_protect("ssh: authorized_keys lets whoever holds the key log in, config's "
              "ProxyCommand / LocalCommand and rc run commands",
              "**/.ssh", "**/.ssh/**"),
    *_protect("the desktop starts these programs at login or when opened (autostart, "
              "application entries, macOS launch agents)",
              "**/.config/autostart/**", "**/.local/share/applications/**",
              "**/Library/LaunchAgents/**"),
    *_protect("systemd user units and timers run commands at login or on schedule",
              "**/.config/systemd/**", "**/.local/share/systemd/**"),
    *_protect("programs here are found on your PATH before the system's: writing `ls` "
              "there runs it the next time you type ls",
              "**/.local/bin/**"),
    *_protect("interpreters run this file at start (Python, R, Ruby)",
              "**/.pythonrc", "**/.pythonrc.py", "**/.Rprofile", "**/.irbrc", "**/.pryrc"),
    # -- shell environment: runs when a shell enters the folder
    *_protect("direnv / mise run this when a shell enters the folder",
              "**/.envrc", "**/mise.toml", "**/.mise.toml", "**/mise.*.toml",
              "**/.mise/**", "**/.config/mise/**"),
    *_protect("environment files are loaded into programs' environment (direnv, pipenv, "
              "docker compose): LD_PRELOAD or NODE_OPTIONS there run code",
              "**/.env"),
    # -- CI: runs with the repository's secrets
    *_protect("CI definitions run commands with the repository's secrets",
              "**/.github/workflows/**", "**/.github/actions/**", "**/.gitea/workflows/**",
              "**/.forgejo/workflows/**", "**/.gitlab-ci.yml", "**/.gitlab/**",
              "**/.circleci/**", "**/azure-pipelines.yml", "**/.azure-pipelines/**",
              "**/Jenkinsfile", "**/.travis.yml", "**/bitbucket-pipelines.yml",
              "**/.buildkite/**", "**/.drone.yml", "**/.woodpecker.yml", "**/.woodpecker/**",
              "**/appveyor.yml", "**/.appveyor.yml", "**/.semaphore/**", "**/buildspec.yml"),
    # -- package managers: registries, tokens, and code they run on every command
    *_protect("package manager settings: registries, tokens, and code run at install",
              "**/.npmrc", "**/.yarnrc", "**/.yarnrc.yml", "**/.yarn/plugins/**",
              "**/.yarn/releases/**", "**/.pnpmfile.cjs", "**/.pnpmfile.mjs",
              "**/bunfig.toml", "**/.bunfig.toml", "**/pip.conf", "**/pip.ini",
              "**/.pypirc", "**/uv.toml", "**/.condarc"),
    *_protect("Cargo / rustup settings: build wrappers, runners and the toolchain run "
              "whenever cargo does",
              "**/.cargo/config", "**/.cargo/config.toml", "**/rust-toolchain",
              "**/rust-toolchain.toml"),
    *_protect("cloud and cluster CLI configs name helper programs they run for "
              "credentials (credential_process, exec plugins, credsStore)",
              "**/.aws/config", "**/.kube/config", "**/.docker/config.json"),
    # -- dev environments: run images and commands when the folder is opened
    *_protect("dev container / cloud workspace definitions run commands when opened",
              "**/.devcontainer/**", "**/.devcontainer.json", "**/.gitpod.yml",
              "**/.replit"),
    # Rules for the agents this list does not know yet: any MCP list, any
    # tool folder's settings file.
    *_protect(_MCP, "**/*mcp*.json", "**/*mcp*.jsonc", "**/*mcp*.toml", "**/*mcp*.yaml",
              "**/*mcp*.yml"),
    *_protect("a tool's own settings folder: agents, CLIs and editors keep hooks, MCP "
              "servers and helper commands in these files",
              "**/.*/settings.json", "**/.*/settings.local.json", "**/.*/settings.jsonc",
              "**/.*/config.json", "**/.*/config.toml", "**/.*/config.yaml",
              "**/.*/config.yml"),
    *_protect("your user configuration folder: programs read their settings (and the "
              "commands in them) from here when they start",
              "**/.config/**"),
    # -- secrets: keys, tokens and passwords
    *_secret("environment files usually hold API keys and passwords",
             "**/.env", "**/.env.*"),
    *_secret("a private key or certificate store",
             "**/*.pem", "**/*.key", "**/*.p12", "**/*.pfx", "**/*.jks", "**/*.keystore",
             "**/id_rsa*", "**/id_dsa*", "**/id_ecdsa*", "**/id_ed25519*"),
    *_secret("git remotes and credential stores carry tokens",
             "**/.git/config", "**/.git-credentials", "**/.config/git/credentials"),
    *_secret("netrc: logins and passwords for hosts (curl, git, ftp)",
             "**/.netrc", "**/_netrc"),
    *_secret("package registry tokens (npm, yarn, PyPI, Cargo, RubyGems, Poetry)",
             "**/.npmrc", "**/.yarnrc.yml", "**/.pypirc", "**/.cargo/credentials",
             "**/.cargo/credentials.toml", "**/.gem/credentials",
             "**/.config/pypoetry/auth.toml"),
    *_secret("a credentials file",
             "**/credentials", "**/credentials.json", "**/*credentials*.json"),
    *_secret("cloud CLI credentials (AWS, Google Cloud, Azure) and service-account keys",
             "**/.aws", "**/.aws/**", "**/.config/gcloud/**", "**/.azure/**",
             "**/application_default_credentials.json", "**/*service-account*.json",
             "**/*service_account*.json"),
    *_secret("ssh and gpg keys", "**/.ssh", "**/.ssh/**", "**/.gnupg", "**/.gnupg/**",
             "**/.password-store/**"),
    *_secret("GitHub / GitLab CLI tokens",
             "**/.config/gh/hosts.yml", "**/.config/glab-cli/config.yml", "**/.config/hub"),
    *_secret("container registry and cluster credentials (docker, kubectl)",
             "**/.docker/config.json", "**/.dockercfg", "**/.kube/config", "**/kubeconfig",
             "**/*.kubeconfig"),
    *_secret("Terraform state holds every resource's secrets in plain text; its CLI "
             "config holds the registry token",
             "**/*.tfstate", "**/*.tfstate.backup", "**/.terraform.d/credentials.tfrc.json",
             "**/.terraformrc", "**/terraform.rc"),
    *_secret("database client passwords (PostgreSQL, MySQL)",
             "**/.pgpass", "**/.pg_service.conf", "**/.my.cnf", "**/.mylogin.cnf"),
    *_secret("storage and secret-manager tokens (rclone, s3cmd, boto, Vault)",
             "**/rclone.conf", "**/.s3cfg", "**/.boto", "**/.vault-token"),
    *_secret("shell and REPL histories hold every command typed, passwords and tokens "
             "pasted on a command line included",
             "**/.*_history", "**/.history", "**/.zhistory", "**/fish_history",
             "**/.lesshst"),
    *_secret("a secrets file", "**/secrets.yml", "**/secrets.yaml", "**/*.secret",
             "**/*.secrets"),
)

PROTECTED: tuple[Sensitive, ...] = tuple(row for row in SENSITIVE if row.protect)
PROTECTED_PATTERNS: tuple[str, ...] = tuple(row.pattern for row in PROTECTED)
SECRETS: tuple[Sensitive, ...] = tuple(row for row in SENSITIVE if row.secret)
SECRET_PATTERNS: tuple[str, ...] = tuple(row.pattern for row in SECRETS)

# Shareable templates of secret files carry no secret by convention.
_SECRET_EXCEPTIONS: tuple[str, ...] = (
    "**/.env.example",
    "**/.env.sample",
    "**/.env.template",
    "**/.env.dist",
    "**/id_*.pub",
)

_FLAGS = glob.GLOBSTAR | glob.DOTGLOB | glob.IGNORECASE | glob.BRACE
_NAME_FLAGS = fnmatch.DOTMATCH | fnmatch.IGNORECASE
_GLOB_CHARS = frozenset("*?[]{}!")


@dataclass(frozen=True)
class _Shape:
    """`**/a/b` (the path ends in a/b) or `**/a/b/**` (the path is under
    a/b), segments casefolded; `segments` None: any other glob, matched by
    wcmatch as written."""

    pattern: str
    segments: tuple[str, ...] | None
    under: bool
    literal: bool
    # per segment: None (a plain name) or the compiled fnmatch of that name
    globs: tuple[re.Pattern[str] | None, ...] = ()


def _name_glob(segment: str) -> re.Pattern[str] | None:
    if not _GLOB_CHARS & set(segment):
        return None
    include, exclude = fnmatch.translate(segment, flags=_NAME_FLAGS)
    if len(include) != 1 or exclude:
        raise ValueError(f"unsupported name glob {segment!r}")
    return re.compile(include[0])


def _shape(pattern: str) -> _Shape:
    under = pattern.endswith("/**")
    body = pattern[3:-3] if under else pattern[3:]
    if not pattern.startswith("**/") or not body or "**" in body or "{" in body:
        return _Shape(pattern, None, False, False)
    segments = tuple(part.casefold() for part in body.split("/"))
    globs = tuple(_name_glob(part) for part in segments)
    return _Shape(pattern, segments, under, all(g is None for g in globs), globs)


class _Matcher:
    """The first of `patterns` a path matches, in time linear in the path's
    length. The patterns are wcmatch globs (GLOBSTAR, DOTGLOB, IGNORECASE),
    nearly all `**/name`, `**/dir/**` or `**/a/b`: those are matched on the
    path's folder names (a set lookup, fnmatch on the last names only), any
    other pattern by wcmatch itself. A glob per pattern costs about 0.2 ms on
    a short path and 1.5 s on one 20,000 folders deep, and the model
    chooses the paths (tests/test_sensitive_paths.py checks both agree)."""

    def __init__(self, patterns: tuple[str, ...]) -> None:
        self.shapes = tuple(_shape(p) for p in patterns)

    def first(self, rel: str) -> str | None:
        names = [part.casefold() for part in rel.split("/") if part]
        where: dict[str, list[int]] | None = None
        for shape in self.shapes:
            segments = shape.segments
            if segments is None:
                if glob.globmatch(rel, shape.pattern, flags=_FLAGS):
                    return shape.pattern
                continue
            count = len(segments)
            if shape.under:
                if shape.literal:
                    if where is None:
                        where = {}
                        for index, name in enumerate(names):
                            where.setdefault(name, []).append(index)
                    starts: Sequence[int] = where.get(segments[0], ())
                else:
                    starts = range(len(names))
                for start in starts:
                    if start + count < len(names) and _names_match(
                            names[start:start + count], shape):
                        return shape.pattern
            elif len(names) >= count and _names_match(names[-count:], shape):
                return shape.pattern
        return None


def _names_match(names: Sequence[str], shape: _Shape) -> bool:
    if shape.literal:
        return tuple(names) == shape.segments
    assert shape.segments is not None
    return all(name == segment if compiled is None else compiled.match(name) is not None
               for name, segment, compiled in zip(names, shape.segments, shape.globs,
                                                  strict=True))


@functools.cache
def _matcher(patterns: tuple[str, ...]) -> _Matcher:
    return _Matcher(patterns)  # built on first use: the server's start need not pay


def _clean(rel: str) -> str | None:
    rel = rel.replace("\\", "/").strip("/")
    return None if not rel or rel == "." else rel


def _first_match(rel: str, patterns: tuple[str, ...]) -> str | None:
    cleaned = _clean(rel)
    return None if cleaned is None else _matcher(patterns).first(cleaned)


@functools.cache
def _rows() -> dict[str, Sensitive]:
    return {row.pattern: row for row in SENSITIVE}


def _subjects(rel: str, real: str | os.PathLike[str] | None) -> tuple[str, ...]:
    # The real path too: a workspace that is ~/.ssh or ~/.config still holds
    # authorized_keys and git/config ("wherever they are").
    if real is None:
        return (rel,)
    return (rel, _posix(os.fspath(real)))


def _protected_entry(rel: str, real: str | os.PathLike[str] | None = None
                     ) -> Sensitive | None:
    for subject in _subjects(rel, real):
        pattern = _first_match(subject, PROTECTED_PATTERNS)
        if pattern is not None:
            return _rows()[pattern]
    return None


def protected_match(rel: str, real: str | os.PathLike[str] | None = None) -> str | None:
    """The protected pattern `rel` (workspace-relative) or its real absolute
    path `real` matches, or None."""
    entry = _protected_entry(rel, real)
    return entry.pattern if entry is not None else None


def protected_reason(rel: str, real: str | os.PathLike[str] | None = None) -> str | None:
    """Why a write to `rel` (real path `real`) always asks (for the approval
    question), or None when it is not protected."""
    entry = _protected_entry(rel, real)
    return entry.protect if entry is not None else None


def secret_match(rel: str, real: str | os.PathLike[str] | None = None) -> str | None:
    """The secret pattern `rel` (workspace-relative) or its real absolute
    path `real` matches, or None."""
    for subject in _subjects(rel, real):
        if _first_match(subject, _SECRET_EXCEPTIONS):
            continue
        pattern = _first_match(subject, SECRET_PATTERNS)
        if pattern is not None:
            return pattern
    return None


def secret_reason(rel: str, real: str | os.PathLike[str] | None = None) -> str | None:
    """What kind of secret `rel` may hold (the table's reason), or None."""
    pattern = secret_match(rel, real)
    return None if pattern is None else _rows()[pattern].secret


# --------------------------------------------------------------------------- text for the model

_SECRET_SENTENCE = ("may hold secrets (keys, tokens, passwords): a secret file reaches the model "
                    "only through read_file, which asks the user first")
_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
               | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))


def _posix(path: str) -> str:
    return path.replace(os.sep, "/") if os.sep != "/" else path


class ModelFileAccess:
    """The one check (`check`) and read (`read_for_model`) for a file's text
    going to the model without read_file's question (agentls.core.editor.file_access).

    The same rule as read_file: the path is resolved the way the operating
    system opens it (symlinks, `..`), must lead inside a workspace folder,
    and neither the path as named nor the file it leads to may be a secret
    file. Only regular files are read (a FIFO would hang), without
    following a link swapped in after the check."""

    def __init__(self, folders: Sequence[str | os.PathLike[str]]) -> None:
        real: list[Path] = []
        for folder in folders:
            text = os.fspath(folder).strip()
            if text:
                try:
                    real.append(Path(os.path.realpath(text)))
                except (OSError, ValueError):
                    continue
        self.folders = tuple(real)

    def _inside(self, path: Path) -> tuple[Path, str] | None:
        for folder in self.folders:
            if path == folder or path.is_relative_to(folder):
                return folder, path.relative_to(folder).as_posix()
        return None

    def check(self, path: str | os.PathLike[str], *, confine: bool = True
              ) -> ReadableFile | Withheld:
        given = os.fspath(path)
        shown = _posix(given)
        if "\0" in given:
            return Withheld(shown, f"{shown!r} is not a path (it contains a NUL character).")
        raw = Path(given)
        if not raw.is_absolute():
            if not self.folders:
                return Withheld(shown, f"{shown} is not read: no workspace folder is open.")
            raw = self.folders[0] / raw
        lexical = Path(os.path.normpath(raw))
        named = self._inside(lexical)
        if named is not None:
            shown = named[1]
        try:
            real = Path(os.path.realpath(raw))
        except (OSError, ValueError) as exc:
            return Withheld(shown, f"{shown} cannot be resolved ({type(exc).__name__}).")
        inside = self._inside(real)
        if inside is None and confine:
            return Withheld(shown, f"{shown} leads outside the workspace folders ({real}); only "
                            "files inside them are sent to the model.")
        rel = inside[1] if inside is not None else real.as_posix()
        # The file's real name decides (a link named AGENTS.md to .env is the
        # .env); so does the name it was given (a `.env` linking elsewhere is
        # still what the user thinks of as secret).
        lexical_rel = named[1] if named is not None else lexical.as_posix()
        hit = secret_match(rel, real) or secret_match(lexical_rel)
        if hit is not None:
            if rel.casefold() != shown.casefold():
                what = f"{shown} leads to {rel}, which"
            else:
                what = shown
            return Withheld(shown, f"{what} {_SECRET_SENTENCE} (it matches {hit}).")
        links = _hard_links(real) if confine else 0  # buffers and MCP: the user chose them
        if links:
            return Withheld(shown, _hard_link_sentence(shown, links))
        return ReadableFile(real, rel)

    def read_for_model(self, path: str | os.PathLike[str], *, max_bytes: int
                       ) -> ModelFile | Withheld | None:
        checked = self.check(path)
        if isinstance(checked, Withheld):
            return checked
        try:
            fd = os.open(checked.path, _OPEN_FLAGS)
        except OSError:
            return None  # missing, a folder, or a link swapped in since the check
        try:
            opened = _opened_path(fd)
            if opened is not None and opened != checked.path:
                # A folder on the way was swapped for a link after the check:
                # judge the file really opened.
                again = self.check(opened)
                if isinstance(again, Withheld):
                    return again
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return None
            if info.st_nlink > 1:  # linked since the check
                return Withheld(checked.rel, _hard_link_sentence(checked.rel, info.st_nlink))
            chunks: list[bytes] = []
            left = max_bytes + 1
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 16))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
        except OSError:
            return None
        finally:
            os.close(fd)
        data = b"".join(chunks)
        truncated = len(data) > max_bytes or info.st_size > max_bytes
        text = data[:max_bytes].decode("utf-8", errors="replace")
        return ModelFile(checked.path, checked.rel, text, info.st_size, truncated)


def _hard_links(path: Path) -> int:
    """The link count of a regular file with other hard links, else 0."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return 0
    return info.st_nlink if stat.S_ISREG(info.st_mode) and info.st_nlink > 1 else 0


def _hard_link_sentence(shown: str, links: int) -> str:
    # Writes refuse such a file too (rules.py): the other name may be a
    # secret file outside the workspace, which no name check here can see.
    return (f"{shown} has {links} hard links; another one may be a secret file outside the "
            "workspace, so its text is not sent to the model.")


def _opened_path(fd: int) -> Path | None:
    """The path the kernel says `fd` is open on (Linux), or None."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return None


def model_file_check(path: str | os.PathLike[str], folders: Sequence[str | os.PathLike[str]],
                     *, confine: bool = True) -> ReadableFile | Withheld:
    """`ModelFileAccess(folders).check(path)`."""
    return ModelFileAccess(folders).check(path, confine=confine)


def read_for_model(path: str | os.PathLike[str], folders: Sequence[str | os.PathLike[str]],
                   *, max_bytes: int) -> ModelFile | Withheld | None:
    """`ModelFileAccess(folders).read_for_model(path, max_bytes=...)`."""
    return ModelFileAccess(folders).read_for_model(path, max_bytes=max_bytes)


def buffer_withheld(uri: str) -> str | None:
    """Why the text of the editor buffer `uri` may not go to the model as
    context (next edit, completions), or None. The user opened the buffer,
    so it may be outside the workspace; only the secret rule applies. A URI
    that is not a file (untitled:) names no file to check."""
    if not isinstance(uri, str) or uri[:5].lower() != "file:":
        return None
    path = unquote(urlsplit(uri).path)
    if os.name == "nt" and len(path) > 2 and path[0] == "/" and path[2] == ":":
        path = path[1:]  # file:///C:/x -> C:/x
    if not path:
        return None
    checked = ModelFileAccess(()).check(path, confine=False)
    return checked.reason if isinstance(checked, Withheld) else None
