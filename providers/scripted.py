"""`scripted`: replays a scripted conversation. For tests and demos only; it
is not a stand-in for the real providers.

Configure it with `providerOptions.script`: a path to a JSON (or YAML, when
PyYAML is installed) file, or, from Python, the list itself. A script is
either a list of responses or an object:

    {"responses": [...],   # one per model call, in order
     "fim": [...],         # one per fill-in-the-middle call (same shape)
     "loop": false,        # start over when exhausted (else: an error)
     "record": "calls.jsonl"}   # append every request received, for tests

`providerOptions.contextWindow` sets the window list_models reports (32768
by default), for tests of the context budget.

A response:

    {"text": "Hello", "chunks": ["Hel", "lo"], "reasoning": "...",
     "tool_calls": [{"name": "read_file", "arguments": {"path": "a.py"}, "id": "c1"}],
                   # or "raw_arguments": "{path: a.py}" (sent as written, for bad JSON)
     "usage": {"input_tokens": 10, "output_tokens": 2},
     "finish_reason": "stop", "delay": 0.01, "stall": false,
     "error": {"code": "rate_limit", "message": "slow down"}}

`error` raises ModelError(code=...) after any chunks; `stall` waits until the
request is cancelled (for cancellation tests).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from agentls.core.provider.contract import (
    BaseProvider,
    CompletionOptions,
    FimChunk,
    FimRequest,
    FimUsage,
    ProviderConfig,
    ToolSpec,
)
from agentls.core.types.conversation import Message
from agentls.core.types.errors import ModelError
from agentls.core.types.messages import ModelInfo, ProviderInfo, StreamChunk, ToolCallDelta, Usage

__all__ = ["ScriptedProvider", "load_script"]


def load_script(source: Any) -> dict[str, Any]:
    """Normalise a script (path, list or dict) to {"responses", "fim", ...}."""
    if source is None:
        return {"responses": [], "fim": []}
    if isinstance(source, str | Path):
        path = Path(source).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ModelError(
                f"Cannot read the scripted provider's script {str(path)!r}: {exc.strerror}. "
                "Set providerOptions.script to an existing JSON file.",
                code="bad_request",
            ) from exc
        source = _parse_script_text(text, path)
    if isinstance(source, list):
        source = {"responses": source}
    if not isinstance(source, dict):
        raise ModelError(
            "A scripted provider script must be a list of responses or an object with "
            f"'responses'; got {type(source).__name__}",
            code="bad_request",
        )
    script = dict(source)
    script.setdefault("responses", [])
    script.setdefault("fim", [])
    for key in ("responses", "fim"):
        if not isinstance(script[key], list) or not all(isinstance(r, dict) for r in script[key]):
            raise ModelError(f"Script key {key!r} must be a list of objects", code="bad_request")
    return script


def _parse_script_text(text: str, path: Path) -> Any:
    if path.suffix in (".yaml", ".yml"):
        try:
            import yaml  # type: ignore[import-untyped]  # optional: only for YAML scripts
        except ImportError as exc:
            raise ModelError(
                f"{path} is YAML but PyYAML is not installed; `pip install pyyaml` or use JSON.",
                code="bad_request",
            ) from exc
        return yaml.safe_load(text)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelError(
            f"The script {path} is not valid JSON: {exc.msg} at line {exc.lineno} "
            f"column {exc.colno}",
            code="bad_request",
        ) from exc


class ScriptedProvider(BaseProvider):
    name = "scripted"

    def __init__(self, config: ProviderConfig | None = None) -> None:
        super().__init__(config or ProviderConfig(name="scripted"))
        self._script = load_script(self.config.options.get("script"))
        self._cursor = {"responses": 0, "fim": 0}
        self.requests: list[dict[str, Any]] = []

    @property
    def default_model(self) -> str:
        return self.config.model or "scripted-1"

    def get_info(self) -> ProviderInfo:
        return ProviderInfo(
            id="scripted",
            display_name="Scripted (tests and demos)",
            capabilities=["streaming", "tools", "fim"],
            defaults={"model": self.default_model},
        )

    async def list_models(self) -> list[ModelInfo]:
        return [
            ModelInfo(
                id=self.default_model,
                display_name="Scripted model",
                context_window=int(self.config.options.get("contextWindow") or 32768),
                max_output_tokens=4096,
                capabilities=["tools", "streaming", "fim"],
            )
        ]

    def _next(self, kind: str) -> dict[str, Any]:
        responses: list[dict[str, Any]] = self._script[kind]
        index = self._cursor[kind]
        if index >= len(responses):
            if self._script.get("loop") and responses:
                index = 0
            else:
                raise ModelError(
                    f"The scripted provider has no {kind} response left "
                    f"({len(responses)} scripted, call {index + 1}).",
                    model=self.default_model,
                    code="bad_request",
                )
        self._cursor[kind] = index + 1
        return responses[index]

    def _record(self, entry: dict[str, Any]) -> None:
        self.requests.append(entry)
        target = self._script.get("record")
        if target:
            with open(target, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry, default=str) + "\n")

    def _stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None,
        options: CompletionOptions,
    ) -> AsyncIterator[StreamChunk]:
        self._record(
            {
                "kind": "chat",
                "messages": [m.to_dict() for m in messages],
                "tools": [t.get("name") for t in tools or []],
                "model": options.model or self.default_model,
                "max_tokens": options.max_tokens,
                "stop": list(options.stop),
                "retry": options.retry,
            }
        )
        return self._play(self._next("responses"), messages)

    def _stream_fim(self, request: FimRequest) -> AsyncIterator[FimChunk]:
        self._record(
            {
                "kind": "fim",
                "prefix": request.prefix,
                "suffix": request.suffix,
                "model": request.options.model or self.default_model,
                "max_tokens": request.options.max_tokens,
                "stop": list(request.options.stop),
            }
        )
        return _as_fim(self._play(self._next("fim"),
                                  [Message(role="user", content=request.prefix)]))

    async def _play(
        self, response: dict[str, Any], messages: Sequence[Message]
    ) -> AsyncIterator[StreamChunk]:
        delay = float(response.get("delay", 0))
        text = str(response.get("text", ""))
        chunks = response.get("chunks") or _split_words(text)
        if response.get("reasoning"):
            yield StreamChunk(reasoning=str(response["reasoning"]))
        for piece in chunks:
            if delay:
                await asyncio.sleep(delay)
            yield StreamChunk(delta=str(piece))
        if response.get("stall"):
            await asyncio.Event().wait()  # until cancelled
        if "error" in response:
            err = response["error"] or {}
            raise ModelError(
                str(err.get("message", "scripted error")),
                model=self.default_model,
                code=str(err.get("code", "server_error")),
            )
        calls = response.get("tool_calls") or []
        for index, call in enumerate(calls):
            yield StreamChunk(
                tool_call_deltas=[
                    ToolCallDelta(
                        index=index,
                        id=str(call.get("id") or f"call_{index}"),
                        name=str(call.get("name") or call.get("tool")),
                        # raw_arguments: the text as sent, valid JSON or not
                        arguments=str(call["raw_arguments"]) if "raw_arguments" in call
                        else json.dumps(call.get("arguments", {})),
                    )
                ]
            )
        usage = response.get("usage") or {}
        input_tokens = int(usage.get("input_tokens", _estimate(messages)))
        output_tokens = int(usage.get("output_tokens", max(1, len(text) // 4) if text else 1))
        yield StreamChunk(
            finish_reason=response.get("finish_reason") or ("tool_calls" if calls else "stop"),
            usage=Usage(
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                total_tokens=input_tokens + output_tokens,
            ),
        )


async def _as_fim(chunks: AsyncIterator[StreamChunk]) -> AsyncIterator[FimChunk]:
    """A scripted FIM stream in stream_fim()'s chunk type."""
    async for chunk in chunks:
        usage = chunk.usage
        yield FimChunk(delta=chunk.delta, finish_reason=chunk.finish_reason,
                       usage=FimUsage(usage.input_tokens, usage.output_tokens, usage.total_tokens))


def _split_words(text: str) -> list[str]:
    """Stream word by word (keeping the spaces) so deltas look like a model's."""
    if not text:
        return []
    pieces: list[str] = []
    current = ""
    for ch in text:
        current += ch
        if ch == " ":
            pieces.append(current)
            current = ""
    if current:
        pieces.append(current)
    return pieces


def _estimate(messages: Sequence[Message]) -> int:
    return max(1, sum(len(str(m.content)) for m in messages) // 4)
