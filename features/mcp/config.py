"""Which MCP servers to run, and with what: the `mcpServers` setting, the
workspace's `.mcp.json`, `${env:NAME}` references, and the environment a
stdio server gets.

`.mcp.json` is the file Claude Code and Cursor read at a project root
(`{"mcpServers": {...}}`); VS Code's `.vscode/mcp.json` puts the same
blocks under `servers`, which is accepted too. A server from the settings
wins over a workspace server of the same name. Workspace servers start
only after the user agreed to this content of the file (feature.py asks;
the answer lives in the user's TrustStore, kind "mcp").

Secrets stay out of files: `${env:NAME}` (or `${NAME}`, as Claude Code
writes it) in `env` and `headers` values is read from the environment when
the server starts. A stdio server gets the user's environment minus the
provider API keys (a server has no business with the model's key) unless
its `env` names one.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentls.core.settings.schema import DEFAULT_API_KEY_ENV
from agentls.core.trust.workspace import digest, locate

if TYPE_CHECKING:
    from agentls.features.mcp.server_config import McpServerConfig

__all__ = [
    "WORKSPACE_FILE",
    "McpServerSpec",
    "WorkspaceServers",
    "child_environment",
    "expand_env",
    "read_workspace_file",
    "server_specs",
]

log = logging.getLogger("agentls.mcp")

WORKSPACE_FILE = ".mcp.json"
MAX_WORKSPACE_FILE_BYTES = 1_000_000
_REF = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}")
# Variables that hold model API keys: a server never sees them unless its
# `env` asks for one by name.
_PROVIDER_KEY_NAMES = frozenset({*DEFAULT_API_KEY_ENV.values(), "GEMINI_API_KEY",
                                 "GOOGLE_API_KEY", "MISTRAL_API_KEY", "GROQ_API_KEY",
                                 "OPENROUTER_API_KEY", "DEEPSEEK_API_KEY", "XAI_API_KEY",
                                 "AZURE_OPENAI_API_KEY", "COHERE_API_KEY"})

Origin = Literal["settings", "workspace"]


@dataclass(frozen=True)
class McpServerSpec:
    """One configured server, as the manager starts it."""

    name: str
    config: McpServerConfig
    origin: Origin = "settings"

    @property
    def fingerprint(self) -> str:
        """Changes when anything that affects the running server changes."""
        return json.dumps(self.config.model_dump(mode="json"), sort_keys=True)

    def describe(self) -> str:
        """How the user sees it in a question or in `agentls check` (no env values)."""
        c = self.config
        if c.command is not None:
            return " ".join([c.command, *c.args])
        return str(c.url)


@dataclass
class WorkspaceServers:
    """What `.mcp.json` at the workspace root says."""

    file: Path
    digest: str
    servers: list[McpServerSpec] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    # Every block as the file writes it (the trust question shows them whole).
    blocks: dict[str, Any] = field(default_factory=dict)
    link_target: str | None = None  # the file is a symbolic link to this
    outside: bool = False  # it resolves outside the workspace folder


def read_workspace_file(root: Path | None) -> WorkspaceServers | None:
    """The workspace's `.mcp.json`, or None when there is none. Bad content
    is reported in `problems`, never raised."""
    if root is None:
        return None
    path = root / WORKSPACE_FILE
    try:
        if path.stat().st_size > MAX_WORKSPACE_FILE_BYTES:
            return WorkspaceServers(path, "", [], [f"{path} is larger than 1 MB; ignored."])
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return WorkspaceServers(path, "", [], [f"Cannot read {path}: {exc.strerror}."])
    link_target, outside = locate(path, root)
    found = WorkspaceServers(path, digest(data), link_target=link_target, outside=outside)
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        found.problems.append(f"{path} is not valid JSON ({exc}); its servers are ignored.")
        return found
    block = None
    if isinstance(parsed, dict):
        block = parsed.get("mcpServers", parsed.get("servers"))
    if not isinstance(block, dict):
        found.problems.append(f'{path} needs an object {{"mcpServers": {{name: {{command, args, '
                              'env}} or {{url, headers}}}}}}; its servers are ignored.')
        return found
    specs, problems = parse_servers(block, "workspace", str(path))
    found.servers, found.problems = specs, problems
    found.blocks = {str(name): raw for name, raw in block.items()}
    return found


def parse_servers(block: Mapping[str, Any], origin: Origin, where: str
                  ) -> tuple[list[McpServerSpec], list[str]]:
    specs: list[McpServerSpec] = []
    problems: list[str] = []
    for name, raw in block.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name):
            problems.append(f"{where}: server name {str(name)!r} must be 1-64 letters, "
                            "digits, '_', '.' or '-'; skipped.")
            continue
        from agentls.features.mcp.server_config import (
            validated,  # pydantic: only when there is a block
        )

        try:
            config = validated(raw)
        except ValueError as exc:
            problems.append(f"{where}: server {name!r} is invalid ({exc}); skipped.")
            continue
        specs.append(McpServerSpec(name, config, origin))
    return specs, problems


def server_specs(settings_servers: Mapping[str, Any],
                 workspace: WorkspaceServers | None, *, workspace_trusted: bool
                 ) -> tuple[list[McpServerSpec], list[tuple[str, str]]]:
    """The servers to run: the settings' ones, then the workspace file's
    when trusted (a name in both keeps the settings' block); disabled ones
    are left out. Also (name, problem) for each settings block that is
    invalid: that server is skipped, the others run."""
    specs, problems = parse_servers(settings_servers, "settings", "mcpServers")
    invalid = [(_problem_name(p), p) for p in problems]
    names = {s.name for s in specs} | {name for name, _ in invalid}
    if workspace is not None and workspace_trusted:
        specs += [s for s in workspace.servers if s.name not in names]
    return [s for s in specs if not s.config.disabled], invalid


def _problem_name(problem: str) -> str:
    match = re.search(r"server (?:name )?'([^']*)'", problem)
    return match.group(1) if match else "?"


def expand_env(value: str, environ: Mapping[str, str], missing: list[str]) -> str:
    """`${env:NAME}` / `${NAME}` replaced by the variable's value; names
    that are not set become "" and are added to `missing`."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            missing.append(name)
            return ""
        return environ[name]

    return _REF.sub(replace, value)


def provider_key_names(extra: str | None = None) -> frozenset[str]:
    return _PROVIDER_KEY_NAMES | ({extra} if extra else set())


def child_environment(config: McpServerConfig, environ: Mapping[str, str],
                      hidden: frozenset[str]) -> tuple[dict[str, str], list[str]]:
    """The stdio server's environment and the `${env:...}` names that were
    not set. The user's variables minus `hidden` (the provider keys),
    then the server's own `env` block, whose values may name variables."""
    missing: list[str] = []
    env = {k: v for k, v in environ.items() if k not in hidden}
    for key, value in config.env.items():
        env[key] = expand_env(value, environ, missing)
    return env, missing


def resolved_headers(config: McpServerConfig, environ: Mapping[str, str]
                     ) -> tuple[dict[str, str], list[str]]:
    missing: list[str] = []
    return {k: expand_env(v, environ, missing) for k, v in config.headers.items()}, missing


def os_environ() -> Mapping[str, str]:
    return os.environ
