"""The prompt of a model with native tool calls, rendered from its GGUF's
own chat template (Jinja), with the tools and the earlier tool calls and
results in the shapes Hugging Face chat templates expect.

Why here and not in the child: llama-cpp-python's server does pass `tools`
to the template, but its request types take an assistant tool call's
`arguments` only as a JSON *string*, which templates then `tojson` a second
time (`"arguments": "{\"path\": ...}"`), so the model would see its earlier
calls in a shape it was never trained on. Rendering here gives the template
what transformers gives it (arguments as an object, tools as
`{"type": "function", "function": {...}}`), and the prompt goes to the
child's raw completion endpoint (special tokens parsed, no BOS added twice).

The environment mirrors transformers' chat-template rendering: sandboxed,
trim_blocks/lstrip_blocks, loop controls, a `tojson` that keeps non-ASCII,
`raise_exception` and `strftime_now`. jinja2 comes with llama-cpp-python
(the `local` extra); it is imported on the first native tool-call turn.
"""

from __future__ import annotations

import hashlib
import json
import string
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

from agentls.core.plugins.injections import SYSTEM_REMINDER, is_leading_system
from agentls.core.provider.contract import ToolSpec
from agentls.core.types.conversation import Message
from agentls.core.types.errors import ModelError
from agentls.providers.local.tool_calls.grammar import _text_of
from agentls.providers.local.tool_calls.native_format import ToolFormat

_ALNUM = string.ascii_letters + string.digits


def _mistral_id(call_id: str) -> str:
    """Mistral's templates refuse tool-call ids that are not exactly nine
    letters or digits: map ours onto such ids, the same one every time."""
    digest = hashlib.sha256(call_id.encode()).digest()
    return "".join(_ALNUM[byte % len(_ALNUM)] for byte in digest[:9])


def _arguments(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError:
            return {"input": value}
    return value if isinstance(value, dict) else {}


def template_messages(messages: Iterable[Message], tool_format: ToolFormat) -> list[dict[str, Any]]:
    """Core messages -> the message dicts a chat template reads: assistant
    `tool_calls` with object arguments, tool results as role "tool" with
    the call's id and tool name; the leading system messages joined into
    the first. A later system message (a linter's findings after a tool
    result, agentls's note on a malformed call) stays where it is, as user
    text in a <system-reminder> (as the anthropic provider sends it): moved
    into the system prompt it would change the prompt's first tokens, and
    llama.cpp would evaluate the whole conversation again (4.8 s -> 33 s
    per call with a 1.5B model)."""
    def call_id(raw: Any) -> str:
        text = str(raw or "")
        return _mistral_id(text) if tool_format == "mistral" else text

    names: dict[str, str] = {}
    system: list[str] = []
    out: list[dict[str, Any]] = []
    leading = True
    for message in messages:
        text = _text_of(message.content)
        if message.role == "system" and is_leading_system(
                (message.metadata or {}).get("source"), leading):
            system.append(text)
            continue
        leading = False
        if message.role == "system":
            if not text.strip():
                continue
            message = Message("user", SYSTEM_REMINDER.format(text=text))
            text = message.content
        if message.role == "tool":
            result = message.tool_result or {}
            if not text:
                text = (_text_of(result.get("output")) if result.get("success", True)
                        else f"Error: {_text_of(result.get('error'))}")
            raw_id = message.tool_call_id or ""
            out.append({"role": "tool", "tool_call_id": call_id(raw_id),
                        "name": names.get(raw_id, ""), "content": text})
        elif message.role == "assistant" and message.tool_calls:
            calls = []
            for call in message.tool_calls:
                if hasattr(call, "model_dump"):
                    call = call.model_dump()
                name = str(call.get("tool") or call.get("name") or "")
                names[str(call.get("id"))] = name
                calls.append({
                    "id": call_id(call.get("id")),
                    "type": "function",
                    "function": {"name": name, "arguments": _arguments(call.get("arguments"))},
                })
            if tool_format == "llama3":
                # Llama 3's templates take one call per assistant message.
                out.append({"role": "assistant", "content": text or None,
                            "tool_calls": calls[:1]})
                out += [{"role": "assistant", "content": None, "tool_calls": [call]}
                        for call in calls[1:]]
            else:
                out.append({"role": "assistant", "content": text or None, "tool_calls": calls})
        elif out and out[-1]["role"] == message.role == "user":
            out[-1]["content"] += "\n\n" + text  # injected context right after the prompt
        elif tool_format == "mistral" and message.role == "user" and out and \
                out[-1]["role"] == "tool":
            # Mistral's templates want user and assistant turns to alternate,
            # tool results aside: context injected after a result joins it.
            out[-1]["content"] += "\n\n" + text
        else:
            out.append({"role": message.role, "content": text})
    if any(system):
        out.insert(0, {"role": "system", "content": "\n\n".join(s for s in system if s)})
    return out


def template_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool["name"],
                "description": str(tool.get("description", "")),
                "parameters": tool.get("parameters") or {"type": "object", "properties": {}},
            },
        }
        for tool in tools
    ]


def render_prompt(
    template: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    *,
    bos_token: str = "",
    eos_token: str = "",
    model: str = "",
) -> str:
    """The prompt text, ready for generation (add_generation_prompt)."""
    import jinja2

    try:
        compiled = _compile(template)
        return str(compiled.render(
            messages=messages,
            tools=tools or None,
            bos_token=bos_token,
            eos_token=eos_token,
            add_generation_prompt=True,
        ))
    except (jinja2.TemplateError, ValueError, TypeError) as exc:
        raise ModelError(
            f"local: {model}'s chat template could not render this conversation with tools "
            f"({exc}). Start a new session, or set providerOptions.chat_format to use the "
            "JSON-schema tool grammar instead.",
            model=model,
            code="bad_request",
        ) from exc


def _raise(message: str) -> None:
    raise ValueError(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


@lru_cache(maxsize=8)
def _compile(template: str) -> Any:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class _Generation(jinja2.ext.Extension):
        """transformers' `{% generation %}` tag (marks trainable text): a no-op."""

        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            parser.stream.skip(1)
            return parser.parse_statements(("name:endgeneration",), drop_needle=True)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True,
        extensions=[_Generation, jinja2.ext.loopcontrols],
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(template)
