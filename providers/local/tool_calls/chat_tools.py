"""The two ways a local model is offered tools, chosen per model by its
GGUF's chat template (tool_format.py):

- native (hermes, mistral, llama3): the prompt is the template rendered with
  the tools and the earlier calls and results (chat_template.py), sent to the
  child's raw completion endpoint; the streamed text goes through
  NativeToolCallParser, so text streams as it arrives and each call becomes
  a ToolCallDelta, several per reply;
- grammar (no native format): tool_grammar.py's JSON-schema grammar on the
  chat endpoint, one call or one text answer per reply, and a notice for
  the user (shown once per session by the turn) that says so and what to
  pull instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable, Iterable, Sequence

from agentls.core.provider.contract import CompletionOptions, FimChunk, FimRequest, ToolSpec
from agentls.core.types.conversation import Message
from agentls.core.types.errors import FinishReason
from agentls.core.types.messages import StreamChunk, Usage
from agentls.providers.local.models.catalog import DEFAULT_CHAT_MODEL
from agentls.providers.local.models.gguf_meta import ModelFacts
from agentls.providers.local.models.recommended import RECOMMENDED_CHAT
from agentls.providers.local.tool_calls.chat_template import (
    render_prompt,
    template_messages,
    template_tools,
)
from agentls.providers.local.tool_calls.grammar import ToolReplyDecoder
from agentls.providers.local.tool_calls.native_format import NativeToolCallParser, ToolFormat

# End-of-turn strings of the native families, in case the model prints one
# as text (llama.cpp already stops at end-of-generation tokens).
_END_STRINGS = ("<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "</s>")


def native_request(
    facts: ModelFacts,
    alias: str,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    options: CompletionOptions,
) -> FimRequest:
    """The raw completion request: the GGUF's template rendered with tools."""
    tool_format = facts.tool_format
    assert facts.chat_template is not None
    prompt = render_prompt(
        facts.chat_template,
        template_messages(messages, tool_format),
        template_tools(tools),
        bos_token=facts.bos_token,
        eos_token=facts.eos_token,
        model=alias,
    )
    if facts.add_bos and facts.bos_token and prompt.startswith(facts.bos_token):
        prompt = prompt[len(facts.bos_token):]  # llama.cpp adds it to a raw prompt itself
    stop = list(options.stop)
    for end in (facts.eos_token, *_END_STRINGS):
        if end and end not in stop:
            stop.append(end)
    return FimRequest(
        prefix=prompt,
        suffix="",
        # suffix None: llama-cpp-python then parses the special tokens in the prompt.
        options=dataclasses.replace(options, stop=tuple(stop),
                                    extra={**options.extra, "suffix": None}),
    )


async def decode_native(
    chunks: AsyncIterator[FimChunk], tool_format: ToolFormat, *, model: str,
    tool_names: Iterable[str],
) -> AsyncIterator[StreamChunk]:
    """An unknown tool name after a marker passes through: the turn answers
    it with an error result the model can correct. JSON without a marker
    counts as a call only to an offered tool (else it is an answer)."""
    parser = NativeToolCallParser(tool_format, model=model, tool_names=tool_names)
    async for out in _decode(chunks, parser.feed, parser.finish):
        yield out


async def decode_grammar(
    chunks: AsyncIterator[StreamChunk], *, model: str, tool_names: Iterable[str]
) -> AsyncIterator[StreamChunk]:
    decoder = ToolReplyDecoder(tool_names, model=model)
    async for out in _decode(chunks, decoder.feed, decoder.finish):
        yield out


async def _decode(
    chunks: AsyncIterator[StreamChunk] | AsyncIterator[FimChunk],
    feed: Callable[[str], list[StreamChunk]],
    finish: Callable[[FinishReason | None], list[StreamChunk]],
) -> AsyncIterator[StreamChunk]:
    finish_reason: FinishReason | None = None
    closing: list[StreamChunk] = []
    async for chunk in chunks:
        for out in feed(chunk.delta):
            yield out
        if chunk.finish_reason is not None:
            finish_reason = chunk.finish_reason
        usage = chunk.usage
        if usage.total_tokens or usage.output_tokens:
            closing.append(StreamChunk(usage=Usage(
                input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                total_tokens=usage.total_tokens)))
    for out in finish(finish_reason):
        yield out
    for out in closing:
        yield out


def grammar_notice(alias: str) -> str:
    """What the user is told (once per session) when a model without native
    tool calls is offered tools."""
    return (
        f"{alias} has no native tool calling (its chat template has no tool-call format), "
        "so agentls constrains its replies with a JSON grammar instead: at most one tool call "
        "per reply, and a small model often answers in words when a tool was needed. For a "
        f"local model that calls tools natively, set `model` to {DEFAULT_CHAT_MODEL} (the "
        "packaged default), or run `agentls pull --recommended` and set `model` to "
        f"{RECOMMENDED_CHAT}."
    )
