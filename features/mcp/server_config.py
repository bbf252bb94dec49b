"""One MCP server's block, validated: `McpServerConfig` (pydantic).

Split from config.py so that the MCP feature, which starts in every session,
imports pydantic only when there is a server block to check.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

__all__ = ["McpServerConfig", "validated"]


_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


def _reject_bool(value: Any) -> Any:
    # pydantic's lax mode reads true as 1; for a timeout that is always a
    # mistake the user should hear about.
    if isinstance(value, bool):
        raise ValueError("a number is required, not true/false")
    return value


# inf would serialise to null and NaN passes no comparison.
_Seconds = Annotated[float, BeforeValidator(_reject_bool), Field(gt=0, allow_inf_nan=False)]


class _Model(BaseModel):
    """camelCase on the wire, snake_case in Python, immutable, no stray keys.

    pydantic here, unlike the settings (core/settings/schema.py, msgspec):
    this module is imported only when a server block is read, never on the
    start-up or inline-completion path nor by the MCP feature's start
    without servers.
    """

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid"
    )


class McpServerConfig(_Model):
    """One MCP server, in the shape Claude Desktop, Cursor and VS Code's
    mcp.json use: `command` (+ args, env, cwd) for stdio, or `url` (+
    headers) for streamable HTTP. Keys other clients add (autoApprove,
    envFile, ...) are ignored, so a block copied from another tool loads;
    approval comes from approval.rules, never from the server's block.
    `${env:NAME}` in env and headers values is read from the environment
    when the server starts (features/mcp/config.py)."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["stdio", "http", "streamable-http", "streamableHttp"] | None = None
    command: str | None = Field(None, min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[Annotated[str, Field(pattern=_ENV_NAME)], str] = Field(default_factory=dict)
    cwd: str | None = Field(None, min_length=1)
    url: str | None = None
    headers: dict[Annotated[str, Field(min_length=1)], str] = Field(default_factory=dict)
    disabled: bool = False
    # Longest wait for one tools/call (or prompt/resource read) and for start-up.
    timeout_seconds: _Seconds = 60.0
    startup_timeout_seconds: _Seconds = 30.0

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("url must be an http:// or https:// URL (streamable HTTP)")
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either `command` (a stdio server) or `url` (a streamable "
                             "HTTP server), not both or neither")
        if self.type == "stdio" and self.command is None:
            raise ValueError("type 'stdio' needs `command`")
        if self.type not in (None, "stdio") and self.url is None:
            raise ValueError(f"type {self.type!r} needs `url`")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"


def validated(raw: Any) -> McpServerConfig:
    """A server block as a McpServerConfig; ValueError naming each bad key."""
    try:
        return McpServerConfig.model_validate(raw)
    except ValidationError as exc:
        raise ValueError("; ".join(
            (".".join(str(p) for p in e.get("loc", ())) + ": " if e.get("loc") else "")
            + e.get("msg", "") for e in exc.errors())) from None
