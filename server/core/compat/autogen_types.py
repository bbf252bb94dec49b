"""autogen_core.models types for the autogen compatibility layer.

Names and fields are autogen's, so code written against `autogen_core.models`
reads the same here; agentls does not depend on autogen. As in autogen,
`FunctionCall`, `RequestUsage` and `TopLogprob` are plain dataclasses and the
messages are pydantic models. autogen's `ModelInfo` TypedDict is distinct from
`agentls.core.types.messages.ModelInfo` (Amplifier's), hence this separate module.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired, Required, TypeAlias

from pydantic import BaseModel, Field
from typing_extensions import TypedDict  # pydantic validates only this TypedDict before 3.12

__all__ = [
    "AssistantMessage",
    "CancellationToken",
    "ChatCompletionTokenLogprob",
    "CreateResult",
    "FinishReasons",
    "FunctionCall",
    "FunctionExecutionResult",
    "FunctionExecutionResultMessage",
    "LLMMessage",
    "ModelCapabilities",
    "ModelFamily",
    "ModelInfo",
    "RequestUsage",
    "SystemMessage",
    "ToolSchema",
    "TopLogprob",
    "UserMessage",
    "validate_model_info",
]

log = logging.getLogger("agentls.autogen")


@dataclass
class FunctionCall:
    """A tool call the model asked for; `arguments` is the JSON string as sent."""

    id: str
    arguments: str
    name: str


@dataclass
class RequestUsage:
    prompt_tokens: int
    completion_tokens: int


@dataclass
class TopLogprob:
    logprob: float
    bytes: list[int] | None = None


FinishReasons = Literal["stop", "length", "function_calls", "content_filter", "unknown"]


class SystemMessage(BaseModel):
    """Instructions for the model from the developer."""

    content: str
    type: Literal["SystemMessage"] = "SystemMessage"


class UserMessage(BaseModel):
    """Input from end users, or a catch-all for data provided to the model.

    autogen types list items as `str | Image`; agentls has no Image class, so
    any non-string item (an autogen Image, an image-part dict) is accepted.
    """

    content: str | list[str | Any]
    source: str
    type: Literal["UserMessage"] = "UserMessage"


class AssistantMessage(BaseModel):
    """A message sampled from the language model."""

    content: str | list[FunctionCall]
    thought: str | None = None
    source: str
    type: Literal["AssistantMessage"] = "AssistantMessage"


class FunctionExecutionResult(BaseModel):
    """The output of one function call."""

    content: str
    name: str
    call_id: str
    is_error: bool | None = None


class FunctionExecutionResultMessage(BaseModel):
    """The outputs of several function calls."""

    content: list[FunctionExecutionResult]
    type: Literal["FunctionExecutionResultMessage"] = "FunctionExecutionResultMessage"


LLMMessage = Annotated[
    SystemMessage | UserMessage | AssistantMessage | FunctionExecutionResultMessage,
    Field(discriminator="type"),
]


class ChatCompletionTokenLogprob(BaseModel):
    token: str
    logprob: float
    top_logprobs: list[TopLogprob] | None = None
    bytes: list[int] | None = None


class CreateResult(BaseModel):
    """The output of a model completion."""

    finish_reason: FinishReasons
    content: str | list[FunctionCall]
    usage: RequestUsage
    cached: bool
    logprobs: list[ChatCompletionTokenLogprob] | None = None
    thought: str | None = None


class ModelFamily:
    """Namespace of the model families autogen knows; other strings are unknown families."""

    GPT_41 = "gpt-41"
    GPT_45 = "gpt-45"
    GPT_4O = "gpt-4o"
    O1 = "o1"
    O3 = "o3"
    O4 = "o4"
    GPT_4 = "gpt-4"
    GPT_35 = "gpt-35"
    R1 = "r1"
    GEMINI_1_5_FLASH = "gemini-1.5-flash"
    GEMINI_1_5_PRO = "gemini-1.5-pro"
    GEMINI_2_0_FLASH = "gemini-2.0-flash"
    GEMINI_2_5_PRO = "gemini-2.5-pro"
    CLAUDE_3_HAIKU = "claude-3-haiku"
    CLAUDE_3_SONNET = "claude-3-sonnet"
    CLAUDE_3_OPUS = "claude-3-opus"
    CLAUDE_3_5_HAIKU = "claude-3-5-haiku"
    CLAUDE_3_5_SONNET = "claude-3-5-sonnet"
    CLAUDE_3_7_SONNET = "claude-3-7-sonnet"
    CODESRAL = "codestral"  # autogen's spelling
    OPEN_CODESRAL_MAMBA = "open-codestral-mamba"
    MISTRAL = "mistral"
    MINISTRAL = "ministral"
    PIXTRAL = "pixtral"
    UNKNOWN = "unknown"

    ANY: TypeAlias = Literal[
        "gpt-41", "gpt-45", "gpt-4o", "o1", "o3", "o4", "gpt-4", "gpt-35", "r1",
        "gemini-1.5-flash", "gemini-1.5-pro", "gemini-2.0-flash", "gemini-2.5-pro",
        "claude-3-haiku", "claude-3-sonnet", "claude-3-opus", "claude-3-5-haiku",
        "claude-3-5-sonnet", "claude-3-7-sonnet",
        "codestral", "open-codestral-mamba", "mistral", "ministral", "pixtral",
        "unknown",
    ]  # fmt: skip

    def __new__(cls, *args: Any, **kwargs: Any) -> ModelFamily:
        raise TypeError(f"{cls.__name__} is a namespace class and cannot be instantiated.")

    # Exact membership, as autogen does: "r1" (DeepSeek) is in ANY but belongs
    # to no vendor, and unknown strings belong to none either.
    @staticmethod
    def is_claude(family: str) -> bool:
        return family in _CLAUDE

    @staticmethod
    def is_gemini(family: str) -> bool:
        return family in _GEMINI

    @staticmethod
    def is_openai(family: str) -> bool:
        return family in _OPENAI

    @staticmethod
    def is_mistral(family: str) -> bool:
        return family in _MISTRAL


_OPENAI = frozenset(
    {
        ModelFamily.GPT_45, ModelFamily.GPT_41, ModelFamily.GPT_4O, ModelFamily.O1,
        ModelFamily.O3, ModelFamily.O4, ModelFamily.GPT_4, ModelFamily.GPT_35,
    }
)  # fmt: skip
_GEMINI = frozenset(
    {
        ModelFamily.GEMINI_1_5_FLASH, ModelFamily.GEMINI_1_5_PRO,
        ModelFamily.GEMINI_2_0_FLASH, ModelFamily.GEMINI_2_5_PRO,
    }
)  # fmt: skip
_CLAUDE = frozenset(
    {
        ModelFamily.CLAUDE_3_HAIKU, ModelFamily.CLAUDE_3_SONNET, ModelFamily.CLAUDE_3_OPUS,
        ModelFamily.CLAUDE_3_5_HAIKU, ModelFamily.CLAUDE_3_5_SONNET,
        ModelFamily.CLAUDE_3_7_SONNET,
    }
)  # fmt: skip
_MISTRAL = frozenset(
    {
        ModelFamily.CODESRAL, ModelFamily.OPEN_CODESRAL_MAMBA, ModelFamily.MISTRAL,
        ModelFamily.MINISTRAL, ModelFamily.PIXTRAL,
    }
)  # fmt: skip


class ModelCapabilities(TypedDict, total=False):
    """Deprecated in autogen in favour of ModelInfo; kept because `capabilities` returns it."""

    vision: Required[bool]
    function_calling: Required[bool]
    json_output: Required[bool]


class ModelInfo(TypedDict, total=False):
    """autogen's model properties (not agentls.core.types.messages.ModelInfo)."""

    vision: Required[bool]
    function_calling: Required[bool]
    json_output: Required[bool]
    family: Required[ModelFamily.ANY | str]
    structured_output: Required[bool]
    multiple_system_messages: bool | None


class ParametersSchema(TypedDict, total=False):
    type: Required[str]
    properties: Required[dict[str, Any]]
    required: list[str]
    additionalProperties: bool


class ToolSchema(TypedDict):
    """autogen_core.tools.ToolSchema: what a Tool's `.schema` returns."""

    name: str
    description: NotRequired[str]
    parameters: NotRequired[ParametersSchema]
    strict: NotRequired[bool]


_REQUIRED_FIELDS = ("vision", "function_calling", "json_output", "family")


def validate_model_info(model_info: ModelInfo) -> None:
    """Raise ValueError naming the first missing required field.

    `structured_output` only warns: autogen added it later and still accepts
    model infos without it.
    """
    for name in _REQUIRED_FIELDS:
        if name not in model_info:
            raise ValueError(
                f"Missing required field '{name}' in ModelInfo. "
                "Starting in v0.4.7, the required fields are enforced."
            )
    if "structured_output" not in model_info:
        warnings.warn(
            "Missing required field 'structured_output' in ModelInfo. "
            "This field will be required in a future version of AutoGen.",
            UserWarning,
            stacklevel=2,
        )


class CancellationToken:
    """autogen_core.CancellationToken: cancel() runs the registered callbacks once.

    Callbacks run outside the lock, so a callback may query the token; they
    run on the thread that calls cancel().
    """

    def __init__(self) -> None:
        self._cancelled = False
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    def cancel(self) -> None:
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            _run_callback(callback)

    def is_cancelled(self) -> bool:
        with self._lock:
            return self._cancelled

    def add_callback(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if not self._cancelled:
                self._callbacks.append(callback)
                return
        _run_callback(callback)

    def link_future(
        self, future: asyncio.Future[Any] | concurrent.futures.Future[Any]
    ) -> asyncio.Future[Any] | concurrent.futures.Future[Any]:
        """Cancel `future` when the token is cancelled (at once if it already is)."""

        def _cancel() -> None:
            future.cancel()

        self.add_callback(_cancel)
        return future


def _run_callback(callback: Callable[[], Any]) -> None:
    try:
        callback()
    except Exception:  # one broken callback must not stop the others
        log.exception("CancellationToken callback %r failed", callback)
