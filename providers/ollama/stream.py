"""Ollama's NDJSON stream's common part: /api/generate (fill in the
middle) and /api/chat lines carry errors, the `done` line, the finish
reason and the token counts the same way. `LineReader` reads them and
decodes /api/generate; ollama_chat.ChatLineReader adds /api/chat's chunks.

Apart from ollama.py so that the chat module can subclass the reader
without importing the provider.
"""

from __future__ import annotations

import logging
from typing import Any

from agentls.core.provider.contract import FimChunk, FimUsage
from agentls.core.types.errors import FinishReason
from agentls.providers.http.client import HttpClient
from agentls.providers.http.stream import StreamReader, estimated_tokens

__all__ = ["LineReader", "text_or_empty"]

logger = logging.getLogger("agentls.providers.ollama.provider")

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "load": "stop",  # an empty conversation only loads the model
    "unload": "stop",
}


class LineReader(StreamReader):
    """Reads NDJSON lines: errors sent in the stream, the finish reason, the
    usage counts. `generate_chunk` decodes /api/generate (FIM);
    ollama_chat.ChatLineReader adds /api/chat's chunks."""

    def __init__(self, http: HttpClient, model: str, *, prompt_chars: int) -> None:
        super().__init__(http, model, prompt_chars=prompt_chars)
        self.tool_calls = 0
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None

    def check(self, value: Any) -> dict[str, Any]:
        line = self.object(value, "a stream line")
        self.raise_sent_error(line)
        return line

    def generate_chunk(self, value: Any) -> FimChunk | None:
        line = self.check(value)
        text = text_or_empty(line.get("response"))
        # A thinking model's reasoning is counted but not passed on: a
        # completion is the text alone.
        self.output_chars += len(text) + len(text_or_empty(line.get("thinking")))
        finish = self.finish_reason(line)
        if not (text or finish):
            return None
        return FimChunk(delta=text, finish_reason=finish)

    def finish_reason(self, line: dict[str, Any]) -> FinishReason | None:
        if line.get("done") is not True:
            return None
        self.done = True
        prompt, output = line.get("prompt_eval_count"), line.get("eval_count")
        if isinstance(prompt, int) and not isinstance(prompt, bool):
            self.input_tokens = prompt
        if isinstance(output, int) and not isinstance(output, bool):
            self.output_tokens = output
        reason = _FINISH.get(str(line.get("done_reason") or "stop"), "stop")
        # Ollama says "stop" after tool calls.
        return "tool_calls" if reason == "stop" and self.tool_calls else reason

    def fim_finish(self) -> FimChunk:
        """The FIM stream's closing usage chunk; raises if it was cut short."""
        prompt, output = self.token_counts()
        return FimChunk(usage=FimUsage(prompt, output, prompt + output))

    def token_counts(self) -> tuple[int, int]:
        """(input, output) tokens as the server said, else estimated."""
        if not self.done:
            raise self.cut_short('it finished (no line with "done": true)')
        # Ollama omits prompt_eval_count when the whole prompt came from its
        # cache; estimate what is missing as characters / 4 (usage is always filled).
        prompt = self.input_tokens
        if prompt is None:
            prompt = estimated_tokens(self.prompt_chars)
            logger.debug("ollama: no prompt_eval_count; estimated %d input tokens", prompt)
        output = self.output_tokens
        if output is None:
            output = estimated_tokens(self.output_chars)
            logger.debug("ollama: no eval_count; estimated %d output tokens", output)
        return prompt, output


def text_or_empty(value: Any) -> str:
    return value if isinstance(value, str) else ""
