"""`ChatCompletionClient`: autogen's model-client protocol (autogen_core.models), by name.

autogen users write `from autogen_core.models import ChatCompletionClient`;
agentls code and users without autogen write
`from agentls.providers.autogen.client import ChatCompletionClient` and get
the same abstract members. agentls' implementation is
`AgentlsChatCompletionClient` (providers/autogen/client.py), which is also
registered as a virtual subclass of autogen's class when autogen_core is
loaded, so `isinstance(client, autogen_core.models.ChatCompletionClient)` holds.
No autogen import here: autogen stays optional.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel

from agentls.core.compat.autogen_types import (
    CancellationToken,
    CreateResult,
    LLMMessage,
    ModelCapabilities,
    ModelInfo,
    RequestUsage,
)

__all__ = ["ChatCompletionClient"]

_NO_ARGS: Mapping[str, Any] = MappingProxyType({})


class ChatCompletionClient(ABC):
    """The abstract model client: one completion (`create`) or a stream of
    text ending with a CreateResult (`create_stream`), usage, token budget,
    and what the model can do."""

    @abstractmethod
    async def create(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Any] = (),
        json_output: bool | type[BaseModel] | None = None,
        extra_create_args: Mapping[str, Any] = _NO_ARGS,
        cancellation_token: CancellationToken | None = None,
    ) -> CreateResult: ...

    @abstractmethod
    def create_stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Any] = (),
        json_output: bool | type[BaseModel] | None = None,
        extra_create_args: Mapping[str, Any] = _NO_ARGS,
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncGenerator[str | CreateResult, None]: ...

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    def actual_usage(self) -> RequestUsage: ...

    @abstractmethod
    def total_usage(self) -> RequestUsage: ...

    @abstractmethod
    def count_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Any] = ()) -> int:
        ...

    @abstractmethod
    def remaining_tokens(
        self, messages: Sequence[LLMMessage], *, tools: Sequence[Any] = ()
    ) -> int: ...

    @property
    @abstractmethod
    def capabilities(self) -> ModelCapabilities: ...

    @property
    @abstractmethod
    def model_info(self) -> ModelInfo: ...
