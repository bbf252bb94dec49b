"""`HttpProvider`: what the HTTP providers (openai, anthropic, ollama) share
beyond the wire format: one HttpClient per instance, the default model,
the `providerOptions.fim` override of fill-in-the-middle, repr and close.
Whether a server does FIM otherwise is each provider's business, found out
from the server (ollama: /api/show; openai: fim_probe.py), never guessed
from the model's name. Each provider sets the class attributes and writes only its
own request/response translation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from agentls.core.provider.contract import BaseProvider, ProviderConfig
from agentls.providers.http.client import HttpClient
from agentls.providers.http.errors import bearer_auth

if TYPE_CHECKING:
    from agentls.core.types.conversation import Message

__all__ = ["HttpProvider", "apply_extra", "text_of", "tool_result_text"]


class HttpProvider(BaseProvider):
    default_base_url: ClassVar[str] = ""
    default_api_key_env: ClassVar[str | None] = None
    default_model_id: ClassVar[str] = ""
    hints: ClassVar[Mapping[str, str]] = {}

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        self._http = HttpClient(
            config,
            provider=self.name,
            default_base_url=self.default_base_url,
            default_api_key_env=self.default_api_key_env,
            auth_headers=self._auth_headers,
            hints=self.hints,
        )

    def _auth_headers(self, key: str) -> dict[str, str]:
        return bearer_auth(key)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(base_url={self._http.base_url!r}, model={self.default_model!r})"
        )

    @property
    def default_model(self) -> str:
        return self.config.model or self.default_model_id

    def model_supports_fim(self, model: str | None = None) -> bool:
        """providerOptions.fim (true/false); without it, no FIM (providers
        that can ask their server override this)."""
        return bool(self.config.options.get("fim"))

    async def aclose(self) -> None:
        await self._http.aclose()


def text_of(value: Any) -> str:
    """Message content as the text a wire format wants (JSON for data)."""
    import json

    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, default=str)


def tool_result_text(message: Message) -> str:
    """What a tool message says to the model: its content, else its result."""
    if message.content not in (None, ""):
        return text_of(message.content)
    result = message.tool_result or {}
    if result.get("success", True):
        return text_of(result.get("output", ""))
    return text_of({"error": result.get("error")})


def apply_extra(body: dict[str, Any], extra: Mapping[str, Any]) -> None:
    """CompletionOptions.extra into a request body: `extra` wins, and a None
    value removes a field (e.g. {"stream_options": None} for a server that
    rejects it)."""
    for key, value in extra.items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value
