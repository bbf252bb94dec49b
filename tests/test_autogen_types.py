"""autogen_core.models types: shapes, JSON round trips, ModelFamily, validation."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from agentls.core.compat.autogen_types import (
    AssistantMessage,
    CancellationToken,
    ChatCompletionTokenLogprob,
    CreateResult,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    ModelCapabilities,
    ModelFamily,
    ModelInfo,
    RequestUsage,
    SystemMessage,
    TopLogprob,
    UserMessage,
    validate_model_info,
)
from agentls.core.types import messages as core_models

LLM = TypeAdapter(LLMMessage)

CALL = FunctionCall(id="c1", arguments='{"path": "a.py"}', name="read_file")

MODELS: list[BaseModel] = [
    SystemMessage(content="Be brief."),
    UserMessage(content="Hi", source="user"),
    UserMessage(content=["look at", "this"], source="user"),
    AssistantMessage(content="Hello", source="assistant"),
    AssistantMessage(content=[CALL], thought="I should read it", source="assistant"),
    FunctionExecutionResult(content="print(1)", name="read_file", call_id="c1"),
    FunctionExecutionResultMessage(
        content=[FunctionExecutionResult(content="boom", name="x", call_id="c2", is_error=True)]
    ),
    ChatCompletionTokenLogprob(
        token="Hi", logprob=-0.1, top_logprobs=[TopLogprob(logprob=-0.2, bytes=[72])], bytes=[72]
    ),
    CreateResult(finish_reason="stop", content="Hi", usage=RequestUsage(3, 1), cached=False),
    CreateResult(
        finish_reason="function_calls",
        content=[CALL],
        usage=RequestUsage(prompt_tokens=5, completion_tokens=7),
        cached=True,
        logprobs=[ChatCompletionTokenLogprob(token="x", logprob=0.0)],
        thought="thinking",
    ),
]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: type(m).__name__)
def test_json_round_trip(model: BaseModel) -> None:
    again = type(model).model_validate_json(model.model_dump_json())
    assert again == model


@pytest.mark.parametrize(
    ("cls", "value"),
    [
        (FunctionCall, CALL),
        (RequestUsage, RequestUsage(prompt_tokens=1, completion_tokens=2)),
        (TopLogprob, TopLogprob(logprob=-1.5)),
        (TopLogprob, TopLogprob(logprob=-1.5, bytes=[1, 2])),
    ],
)
def test_dataclass_round_trip(cls: type, value: Any) -> None:
    adapter: TypeAdapter[Any] = TypeAdapter(cls)
    assert adapter.validate_json(adapter.dump_json(value)) == value


def test_field_names_and_defaults_match_the_seed() -> None:
    assert SystemMessage(content="x").type == "SystemMessage"
    assert UserMessage(content="x", source="u").type == "UserMessage"
    message = AssistantMessage(content="x", source="a")
    assert (message.type, message.thought) == ("AssistantMessage", None)
    assert FunctionExecutionResultMessage(content=[]).type == "FunctionExecutionResultMessage"
    assert FunctionExecutionResult(content="", name="n", call_id="").is_error is None
    usage = RequestUsage(0, 0)
    result = CreateResult(finish_reason="unknown", content="", usage=usage, cached=False)
    assert (result.logprobs, result.thought) == (None, None)
    assert set(CreateResult.model_fields) == {
        "finish_reason", "content", "usage", "cached", "logprobs", "thought",
    }  # fmt: skip
    with pytest.raises(ValidationError):
        CreateResult(finish_reason="tool_calls", content="", usage=RequestUsage(0, 0), cached=False)
    with pytest.raises(ValidationError):
        AssistantMessage(content="x")  # type: ignore[call-arg]  # source is required


@pytest.mark.parametrize("model", [m for m in MODELS if hasattr(m, "type")], ids=str)
def test_discriminated_union_parses_by_type(model: BaseModel) -> None:
    parsed = LLM.validate_json(model.model_dump_json())
    assert type(parsed) is type(model)
    assert parsed == model


def test_union_parses_plain_dicts_and_rejects_unknown_types() -> None:
    parsed = LLM.validate_python(
        {
            "type": "AssistantMessage",
            "source": "a",
            "content": [{"id": "1", "name": "f", "arguments": "{}"}],
        }
    )
    assert isinstance(parsed, AssistantMessage)
    assert parsed.content == [FunctionCall(id="1", arguments="{}", name="f")]
    with pytest.raises(ValidationError):
        LLM.validate_python({"type": "ToolMessage", "content": "x"})
    with pytest.raises(ValidationError):
        LLM.validate_python({"content": "no type"})
    history = TypeAdapter(list[LLMMessage]).validate_json(
        '[{"type": "SystemMessage", "content": "s"},'
        ' {"type": "UserMessage", "content": "u", "source": "me"},'
        ' {"type": "FunctionExecutionResultMessage",'
        '  "content": [{"content": "r", "name": "f", "call_id": "1"}]}]'
    )
    kinds = [type(m) for m in history]
    assert kinds == [SystemMessage, UserMessage, FunctionExecutionResultMessage]


# -- ModelFamily -----------------------------------------------------------------

OPENAI = {"gpt-41", "gpt-45", "gpt-4o", "o1", "o3", "o4", "gpt-4", "gpt-35"}
GEMINI = {"gemini-1.5-flash", "gemini-1.5-pro", "gemini-2.0-flash", "gemini-2.5-pro"}
CLAUDE = {
    "claude-3-haiku", "claude-3-sonnet", "claude-3-opus",
    "claude-3-5-haiku", "claude-3-5-sonnet", "claude-3-7-sonnet",
}  # fmt: skip
MISTRAL = {"codestral", "open-codestral-mamba", "mistral", "ministral", "pixtral"}
NO_VENDOR = {"r1", "unknown"}
SEED_CONSTANTS = {
    "GPT_41": "gpt-41", "GPT_45": "gpt-45", "GPT_4O": "gpt-4o", "O1": "o1", "O3": "o3",
    "O4": "o4", "GPT_4": "gpt-4", "GPT_35": "gpt-35", "R1": "r1",
    "GEMINI_1_5_FLASH": "gemini-1.5-flash", "GEMINI_1_5_PRO": "gemini-1.5-pro",
    "GEMINI_2_0_FLASH": "gemini-2.0-flash", "GEMINI_2_5_PRO": "gemini-2.5-pro",
    "CLAUDE_3_HAIKU": "claude-3-haiku", "CLAUDE_3_SONNET": "claude-3-sonnet",
    "CLAUDE_3_OPUS": "claude-3-opus", "CLAUDE_3_5_HAIKU": "claude-3-5-haiku",
    "CLAUDE_3_5_SONNET": "claude-3-5-sonnet", "CLAUDE_3_7_SONNET": "claude-3-7-sonnet",
    "CODESRAL": "codestral", "OPEN_CODESRAL_MAMBA": "open-codestral-mamba",
    "MISTRAL": "mistral", "MINISTRAL": "ministral", "PIXTRAL": "pixtral", "UNKNOWN": "unknown",
}  # fmt: skip


def test_model_family_constants_are_the_seeds() -> None:
    constants = {k: v for k, v in vars(ModelFamily).items() if k.isupper() and isinstance(v, str)}
    assert constants == SEED_CONSTANTS
    assert set(ModelFamily.ANY.__args__) == set(SEED_CONSTANTS.values())  # type: ignore[attr-defined]
    assert OPENAI | GEMINI | CLAUDE | MISTRAL | NO_VENDOR == set(SEED_CONSTANTS.values())


@pytest.mark.parametrize("family", sorted(SEED_CONSTANTS.values()))
def test_model_family_predicates(family: str) -> None:
    assert ModelFamily.is_openai(family) is (family in OPENAI)
    assert ModelFamily.is_gemini(family) is (family in GEMINI)
    assert ModelFamily.is_claude(family) is (family in CLAUDE)
    assert ModelFamily.is_mistral(family) is (family in MISTRAL)


@pytest.mark.parametrize("family", ["gpt-4o-mini", "claude", "gemini", "llama-3", "", "GPT-4O"])
def test_model_family_predicates_are_exact(family: str) -> None:
    predicates = (
        ModelFamily.is_openai, ModelFamily.is_gemini, ModelFamily.is_claude, ModelFamily.is_mistral
    )  # fmt: skip
    assert not any(p(family) for p in predicates)


def test_model_family_is_a_namespace() -> None:
    with pytest.raises(TypeError):
        ModelFamily()


# -- ModelInfo ---------------------------------------------------------------------

FULL: ModelInfo = {
    "vision": False,
    "function_calling": True,
    "json_output": True,
    "family": ModelFamily.GPT_4O,
    "structured_output": True,
}


def test_validate_model_info_accepts_a_full_info() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        validate_model_info(FULL)
        validate_model_info({**FULL, "family": "my-own-family", "multiple_system_messages": True})


@pytest.mark.parametrize("missing", ["vision", "function_calling", "json_output", "family"])
def test_validate_model_info_names_the_missing_field(missing: str) -> None:
    info = {k: v for k, v in FULL.items() if k != missing}
    with pytest.raises(ValueError, match=f"'{missing}'"):
        validate_model_info(info)  # type: ignore[arg-type]


def test_validate_model_info_only_warns_about_structured_output() -> None:
    info = {k: v for k, v in FULL.items() if k != "structured_output"}
    with pytest.warns(UserWarning, match="structured_output"):
        validate_model_info(info)  # type: ignore[arg-type]


def test_autogen_model_info_is_not_the_core_model_info() -> None:
    autogen_info: object = ModelInfo
    assert autogen_info is not core_models.ModelInfo
    assert "context_window" in core_models.ModelInfo.model_fields
    assert "context_window" not in ModelInfo.__annotations__
    capabilities = ModelCapabilities(vision=True, function_calling=False, json_output=True)
    assert capabilities == {"vision": True, "function_calling": False, "json_output": True}


# -- CancellationToken -----------------------------------------------------------------


def test_cancellation_token_runs_callbacks_once() -> None:
    token = CancellationToken()
    calls: list[str] = []
    token.add_callback(lambda: calls.append("a"))
    assert not token.is_cancelled()
    token.cancel()
    token.cancel()
    assert token.is_cancelled()
    assert calls == ["a"]
    token.add_callback(lambda: calls.append("late"))  # already cancelled: runs at once
    assert calls == ["a", "late"]


def test_cancellation_token_survives_a_failing_callback() -> None:
    token = CancellationToken()
    calls: list[str] = []

    def broken() -> None:
        raise RuntimeError("boom")

    token.add_callback(broken)
    token.add_callback(lambda: calls.append("after"))
    token.cancel()
    assert calls == ["after"]


async def test_cancellation_token_links_futures() -> None:
    token = CancellationToken()
    loop = asyncio.get_running_loop()
    future: asyncio.Future[int] = loop.create_future()
    assert token.link_future(future) is future
    token.cancel()
    assert future.cancelled()
    late: asyncio.Future[int] = loop.create_future()
    token.link_future(late)
    assert late.cancelled()
