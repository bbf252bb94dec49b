"""Tool calls decoded under the tools' grammar (providers/local/
constrained_calls.py) and the child's schema-to-grammar middleware
(schema_grammar.py): pure logic, with a scripted stream and a fake ASGI
app. The real llama.cpp child is in tests/test_provider_local.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentls.core.provider.contract import CompletionOptions, FimChunk, FimRequest, FimUsage
from agentls.providers.local.tool_calls.constrained import call_schema, constrained_calls
from agentls.providers.local.tool_calls.native_format import NativeToolCallParser
from agentls.providers.local.tool_calls.schema_grammar import SchemaGrammar

READ = {"name": "read_file", "description": "Read a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                       "required": ["path"]}}
RUN = {"name": "run_command", "description": "Run.",
       "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                      "required": ["command"]}}


class Engine:
    """Answers each request with the next script, chunk by chunk; records
    the requests and how far each stream was read before it was closed."""

    def __init__(self, *scripts: list[str]) -> None:
        self.scripts = list(scripts)
        self.requests: list[FimRequest] = []
        self.read: list[int] = []
        self.closed: list[bool] = []

    def __call__(self, request: FimRequest) -> AsyncIterator[FimChunk]:
        self.requests.append(request)
        script = self.scripts.pop(0)
        index = len(self.read)
        self.read.append(0)
        self.closed.append(False)

        async def stream() -> AsyncIterator[FimChunk]:
            try:
                for piece in script:
                    self.read[index] += 1
                    yield FimChunk(delta=piece)
                yield FimChunk(finish_reason="stop", usage=FimUsage(10, 5, 15))
            finally:
                self.closed[index] = True

        return stream()


async def run(engine: Engine, request: FimRequest) -> list[FimChunk]:
    return [c async for c in constrained_calls(request, engine, [READ, RUN], "hermes")]


REQUEST = FimRequest(prefix="<|im_start|>assistant\n", suffix="",
                     options=CompletionOptions(max_tokens=256, stop=("<|im_end|>",),
                                               extra={"suffix": None}))


@pytest.mark.asyncio
async def test_the_call_after_the_opener_is_asked_again_under_the_grammar() -> None:
    engine = Engine(
        ["Let me look.", "\n<tool", "_call>\n", '{"name": "read_fi', "NEVER READ"],
        ['{"name": "read_file", "arguments": {"path": "a.py"}}'],
    )
    chunks = await run(engine, REQUEST)
    text = "".join(c.delta for c in chunks)
    assert text == ('Let me look.\n<tool_call>\n{"name": "read_file", "arguments": '
                    '{"path": "a.py"}}\n</tool_call>')
    # The free stream was closed at the opener (its generation stops there).
    assert engine.read[0] == 3 and engine.closed[0]
    first, call = engine.requests
    assert first is REQUEST
    assert call.prefix == REQUEST.prefix + "Let me look.\n<tool_call>\n"
    assert call.options.stop[0] == "</tool_call>" and "<|im_end|>" in call.options.stop
    assert call.options.extra["suffix"] is None  # the raw-prompt flag is kept
    schema = call.options.extra["json_schema"]
    assert [alt["properties"]["name"]["const"] for alt in schema["oneOf"]] == [
        "read_file", "run_command"]
    assert schema["oneOf"][0]["properties"]["arguments"] == READ["parameters"]
    assert call.options.max_tokens >= 2048  # a whole file's content may follow
    # one finish reason, at the very end; the usage of the call comes through
    assert [c.finish_reason for c in chunks if c.finish_reason] == ["stop"]
    assert chunks[-1].finish_reason == "stop"
    assert any(c.usage.total_tokens == 15 for c in chunks)
    # and the parser reads the result as one call
    parser = NativeToolCallParser("hermes", model="m", tool_names=["read_file", "run_command"])
    out = [*parser.feed(text), *parser.finish("stop")]
    deltas = [d for c in out for d in c.tool_call_deltas]
    assert {d.index for d in deltas} == {0}  # one call
    assert [d.name for d in deltas if d.name] == ["read_file"]
    assert json.loads("".join(d.arguments for d in deltas)) == {"path": "a.py"}


@pytest.mark.asyncio
async def test_a_call_opened_with_the_tools_tag_is_read_as_a_call() -> None:
    """Qwen2.5-Coder-1.5B wrote `<tools>` (the tag its prompt lists the
    tools in) where `<tool_call>` belongs: the call is asked properly."""
    engine = Engine(["<to", "ols>\n", '{"name": "edit_file"'],
                    ['{"name": "read_file", "arguments": {"path": "a.py"}}'])
    chunks = await run(engine, REQUEST)
    text = "".join(c.delta for c in chunks)
    assert text.startswith("<tool_call>\n{") and "<tools>" not in text
    assert engine.requests[1].prefix == REQUEST.prefix + "<tool_call>\n"


@pytest.mark.asyncio
@pytest.mark.parametrize(("written", "before"), [
    (["I will run it.\n``", '`json\n{"name": "run_', 'command", "arguments": {"argv": [1,'],
     "I will run it.\n"),
    (['{"name": "read_file", "argu', 'ments": {path: a.py}}'], ""),
    (["  \n", '{ "name" : "read_file"'], "  \n"),
    (['{{"name": "read_file", "arguments": {"path": "a.py"}}}'], ""),
], ids=["fenced", "bare", "bare-after-blank", "doubled-brace"])
async def test_a_call_written_as_json_without_the_tag_is_asked_as_a_call(
    written: list[str], before: str
) -> None:
    """Qwen2.5-Coder-1.5B writes calls in ```json fences or bare, and breaks
    their JSON: a fence or a leading object whose "name" is an offered tool
    is asked again as a tagged call under the grammar."""
    engine = Engine(written, ['{"name": "read_file", "arguments": {"path": "a.py"}}'])
    chunks = await run(engine, REQUEST)
    text = "".join(c.delta for c in chunks)
    assert text == (before + '<tool_call>\n{"name": "read_file", "arguments": '
                    '{"path": "a.py"}}\n</tool_call>')
    assert engine.requests[1].prefix == REQUEST.prefix + before + "<tool_call>\n"


@pytest.mark.asyncio
@pytest.mark.parametrize("written", [
    ['```json\n{\n  "name": "initials",\n', '  "arguments": {"full_name": "ada"}\n}\n```'],
    ['{"name": "chunk", "parameters": {"items": [1, 2]}}'],
], ids=["fenced", "bare"])
async def test_a_reply_that_opens_with_a_call_of_no_offered_tool_is_asked_under_the_grammar(
    written: list[str],
) -> None:
    """The 1.5B "calls" the function it was asked to write: at the start of
    a reply, a JSON call of any name with its arguments is a call, and the
    grammar makes it one of an offered tool."""
    engine = Engine(written, ['{"name": "read_file", "arguments": {"path": "names.py"}}'])
    chunks = await run(engine, REQUEST)
    text = "".join(c.delta for c in chunks)
    assert text == ('<tool_call>\n{"name": "read_file", "arguments": {"path": "names.py"}}'
                    "\n</tool_call>")
    assert engine.requests[1].prefix == REQUEST.prefix + "<tool_call>\n"
    assert "oneOf" in engine.requests[1].options.extra["json_schema"]


@pytest.mark.asyncio
@pytest.mark.parametrize("written", [
    ["Use this:\n```json\n", '{"name": "Ada", "age": 3}\n```'],  # no tool of that name
    ['{"name": "my-app", "version": "1.0.0",', ' "scripts": {"test": "jest"}}'],  # package.json
    ["Call it as ", '{"name": "f", "arguments": {}}'],  # after text: not the reply's start
    ['{"count": 3, ', '"name": "read_file"}'],  # a JSON answer: "name" is not its first key
    ["Code:\n```python\n", "def f():\n    return {'name': 'read_file'}\n```\n"],
    ["Say ", '{"name": "read_file"}'],  # an object after text, not in a fence
], ids=["other-name", "package-json", "after-text", "json-answer", "code-fence", "inline"])
async def test_json_that_is_not_a_call_passes_as_text(written: list[str]) -> None:
    engine = Engine(written)
    chunks = await run(engine, REQUEST)
    assert "".join(c.delta for c in chunks) == "".join(written)
    assert len(engine.requests) == 1


@pytest.mark.asyncio
async def test_a_reply_without_a_call_is_one_request_untouched() -> None:
    engine = Engine(["The answer ", "is 42 <to", "o."])
    chunks = await run(engine, REQUEST)
    assert "".join(c.delta for c in chunks) == "The answer is 42 <too."
    assert len(engine.requests) == 1 and engine.closed == [True]
    assert chunks[-1].finish_reason == "stop"


def test_call_schema_names_each_offered_tool_once() -> None:
    schema = call_schema([READ])
    (alternative,) = schema["oneOf"]
    assert alternative["required"] == ["name", "arguments"]
    assert alternative["properties"]["name"] == {"const": "read_file"}


# --------------------------------------------------------------------------- the child's side


class Recorder:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.headers: list[dict[bytes, bytes]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.bodies.append(body)
        self.headers.append(dict(scope.get("headers", [])))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


async def call(app: Any, path: str, body: bytes) -> list[dict[str, Any]]:
    parts = [{"type": "http.request", "body": body[:5], "more_body": True},
             {"type": "http.request", "body": body[5:], "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return parts.pop(0) if parts else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": path,
             "headers": [(b"content-type", b"application/json"),
                         (b"content-length", str(len(body)).encode())]}
    await app(scope, receive, send)
    return sent


@pytest.mark.asyncio
async def test_a_json_schema_becomes_the_grammar_the_server_takes() -> None:
    inner, converted = Recorder(), []

    def convert(schema: str) -> str:
        converted.append(schema)
        return "root ::= \"{}\""

    app = SchemaGrammar(inner, convert)
    body = json.dumps({"prompt": "p", "json_schema": {"type": "object"}}).encode()
    for _ in range(2):
        await call(app, "/v1/completions", body)
    forwarded = json.loads(inner.bodies[0])
    assert forwarded == {"prompt": "p", "grammar": "root ::= \"{}\""}
    assert inner.headers[0][b"content-length"] == str(len(inner.bodies[0])).encode()
    assert len(converted) == 1  # the second request used the cached grammar


@pytest.mark.asyncio
async def test_other_requests_pass_untouched_and_a_bad_schema_is_a_400() -> None:
    inner = Recorder()

    def convert(schema: str) -> str:
        raise ValueError("unsupported keyword")

    app = SchemaGrammar(inner, convert)
    plain = json.dumps({"prompt": "p"}).encode()
    await call(app, "/v1/completions", plain)
    await call(app, "/v1/chat/completions", b'{"json_schema": 1}')
    assert inner.bodies == [plain, b'{"json_schema": 1}']
    sent = await call(app, "/v1/completions", b'{"json_schema": {"type": "x"}}')
    assert sent[0]["status"] == 400
    assert b"unsupported keyword" in sent[1]["body"]
    assert len(inner.bodies) == 2  # the bad request never reached the model
