"""The one list of workspace paths that need the user's eye whatever the
rules say (docs/security.md has the same table for users).

* **Protected** paths configure agentls, the editor, git, CI, the shell or a
  package manager: writing one can make code run later (a git hook, a CI
  workflow, a direnv `.envrc`, an MCP server list) or change what the agent
  may do. A write there always asks, even under an allow rule or after
  "Allow for session"; a deny rule still denies.
* **Secret** paths hold credentials: reading one asks first, and listing or
  searching skips them unless the user names the file.

Names match at any depth (`sub/.git/hooks/x` is as protected as
`.git/hooks/x`) and ignoring letter case, so a case-insensitive file system
cannot be used to slip past them. Paths are workspace-relative, `/`-separated.
"""

from __future__ import annotations

from wcmatch import glob

__all__ = ["PROTECTED_PATTERNS", "SECRET_PATTERNS", "protected_match", "secret_match"]

PROTECTED_PATTERNS: tuple[str, ...] = (
    # agentls itself and MCP server lists (they start processes)
    "**/.agentls.toml",
    "**/.mcp.json",
    # editors: settings, tasks and launch configs run commands
    "**/.vscode",
    "**/.vscode/**",
    "**/*.code-workspace",
    "**/.idea/**",
    "**/.zed/**",
    "**/.nvim.lua",
    "**/.nvimrc",
    "**/.exrc",
    # git: hooks, config (aliases, core.fsmonitor, filters run code)
    "**/.git",
    "**/.git/**",
    "**/.gitmodules",
    "**/.gitattributes",
    # shell environment and pre-commit hooks
    "**/.envrc",
    "**/.pre-commit-config.yaml",
    "**/.husky/**",
    # CI definitions run with the repository's secrets
    "**/.github/workflows/**",
    "**/.github/actions/**",
    "**/.gitlab-ci.yml",
    "**/.circleci/**",
    "**/azure-pipelines.yml",
    "**/Jenkinsfile",
    # package managers: registries, tokens and install hooks
    "**/.npmrc",
    "**/.yarnrc",
    "**/.yarnrc.yml",
    "**/.pnpmfile.cjs",
    "**/pip.conf",
    "**/pip.ini",
    "**/.pypirc",
    "**/.cargo/config",
    "**/.cargo/config.toml",
    # dev containers run images and commands
    "**/.devcontainer/**",
    "**/.devcontainer.json",
)

SECRET_PATTERNS: tuple[str, ...] = (
    "**/.env",
    "**/.env.*",
    "**/*.pem",
    "**/*.key",
    "**/*.p12",
    "**/*.pfx",
    "**/*.jks",
    "**/*.keystore",
    "**/id_rsa*",
    "**/id_dsa*",
    "**/id_ecdsa*",
    "**/id_ed25519*",
    "**/.git/config",
    "**/.git-credentials",
    "**/.netrc",
    "**/_netrc",
    "**/.npmrc",
    "**/.pypirc",
    "**/credentials",
    "**/credentials.json",
    "**/*credentials*.json",
    "**/.aws",
    "**/.aws/**",
    "**/.ssh",
    "**/.ssh/**",
    "**/.gnupg",
    "**/.gnupg/**",
    "**/.docker/config.json",
    "**/.kube/config",
    "**/secrets.yml",
    "**/secrets.yaml",
    "**/*.secret",
    "**/*.secrets",
)

# Shareable templates of secret files carry no secret by convention.
_SECRET_EXCEPTIONS: tuple[str, ...] = (
    "**/.env.example",
    "**/.env.sample",
    "**/.env.template",
    "**/.env.dist",
    "**/id_*.pub",
)

_FLAGS = glob.GLOBSTAR | glob.DOTGLOB | glob.IGNORECASE | glob.BRACE


def _first_match(rel: str, patterns: tuple[str, ...]) -> str | None:
    rel = rel.replace("\\", "/").strip("/")
    if not rel or rel == ".":
        return None
    for pattern in patterns:
        if glob.globmatch(rel, pattern, flags=_FLAGS):
            return pattern
    return None


def protected_match(rel: str) -> str | None:
    """The protected pattern `rel` (workspace-relative) matches, or None."""
    return _first_match(rel, PROTECTED_PATTERNS)


def secret_match(rel: str) -> str | None:
    """The secret pattern `rel` (workspace-relative) matches, or None."""
    if _first_match(rel, _SECRET_EXCEPTIONS):
        return None
    return _first_match(rel, SECRET_PATTERNS)
