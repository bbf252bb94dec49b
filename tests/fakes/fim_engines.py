"""Loopback fakes of the serving engines inline completion meets, each with
the fill-in-the-middle quirk the real one has (on tests/fakes/http_backend's
FakeBackend: 127.0.0.1, a random port, TCP_NODELAY):

    engine               `suffix`                        its own tokenizer
    llama-cpp-python     accepted; the FIM prompt has    POST /extras/tokenize
                         token id 0 (padding) around the
                         parts: the model writes on past
                         the suffix
    LM Studio            accepted and ignored            none
    llama.cpp server     /v1/completions: HTTP 500       POST /tokenize; GET /props;
                         "Unsupported param: suffix";    POST /infill
                         its FIM is /infill
    Ollama               /api/generate builds the FIM    (the template in /api/show)
                         prompt from the model's template
                         (`insert` capability)
    vLLM                 HTTP 400 "suffix is not         POST /tokenize
                         currently supported"

Every engine serves a model of one FIM family (`family`, fim_templates.py)
and tokenizes special tokens in a raw prompt, as the real ones do. The
"model" behind them: given a real FIM layout of its own tokens it answers
`fill(prefix, suffix)` then its end token and more text (so a client that
does not send the family's stop tokens gets text past the hole); given a
prefix alone it answers `fill(prefix, "")` and runs on (RUNAWAY).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from agentls.providers.fim.templates import FimTokens, family_by_name

from .http_backend import (
    SSE_DONE,
    STALL,
    FakeBackend,
    RecordedRequest,
    Reply,
    error_reply,
    json_reply,
    ndjson,
    ndjson_reply,
    openai_chunk,
    sse,
    sse_reply,
)

__all__ = ["QWEN", "RUNAWAY", "FimModel", "default_fill", "fim_server", "llama_cpp_python",
           "llama_cpp_server", "lm_studio", "ollama", "sent_prompts", "vllm"]

QWEN = family_by_name("qwen2.5-coder")
assert QWEN is not None
RUNAWAY = "\n\n\nclass Other:\n    def method(self):\n        pass\n"

Fill = Callable[[str, str], str]


def default_fill(prefix: str, suffix: str) -> str:
    """The right fill where the suffix tells it (an attribute the class after
    the hole defines, as in the known-answer probe), else `x * 2`."""
    defined = re.search(r"self\.(\w+) = ", suffix)
    if prefix.endswith(".") and defined:
        return defined.group(1)
    if prefix.endswith("."):
        return "name"  # what a model without the suffix guesses
    return "x * 2"


class FimModel:
    """A code model of one FIM family, as the fakes' engines run it."""

    def __init__(self, family: FimTokens = QWEN, fill: Fill = default_fill) -> None:
        self.family = family
        self.fill = fill

    def vocabulary(self) -> set[str]:
        f = self.family
        return {f.prefix, f.suffix, *([f.middle] if f.middle else []), *f.stops}

    def token_count(self, text: str) -> int:
        return 1 if text in self.vocabulary() else max(2, len(text))

    def split(self, prompt: str) -> tuple[str, str] | None:
        """(prefix, suffix) of a prompt in this family's FIM layout, or None."""
        f = self.family
        if f.family == "codellama":
            match = re.fullmatch(r"<PRE> (.*) <SUF>(.*) <MID>", prompt, re.S)
            return (match.group(1), match.group(2)) if match else None
        if f.suffix_first:
            if not prompt.startswith(f.suffix) or f.prefix not in prompt:
                return None
            suffix, prefix = prompt[len(f.suffix):].split(f.prefix, 1)
            return prefix, suffix
        middle = f.middle or ""
        if not (prompt.startswith(f.prefix) and f.suffix in prompt and middle in prompt):
            return None
        # PSM; the text after the middle token (the code typed on the
        # cursor's line) starts the fill, so it belongs to the prefix.
        body, typed = (prompt[len(f.prefix):].rsplit(middle, 1) if middle
                       else (prompt[len(f.prefix):], ""))
        prefix, suffix = body.split(f.suffix, 1)
        return prefix + typed, suffix

    def answer_raw(self, prompt: str) -> str:
        """A raw completion: FIM when the prompt is laid out with this
        family's tokens, else a continuation that runs on."""
        parts = self.split(prompt)
        if parts is not None:
            end = self.family.stops[0] if self.family.stops else ""
            return self.fill(*parts) + end + "\nprint('past the hole')\n"
        return self.fill(prompt, "") + RUNAWAY

    def answer_fim(self, prefix: str, suffix: str) -> str:
        """What the engine's own FIM (done right) answers: the fill, then EOS."""
        return self.fill(prefix, suffix)


def _cut(text: str, stops: Any) -> str:
    for stop in stops if isinstance(stops, list) else []:
        if isinstance(stop, str) and stop and stop in text:
            text = text[: text.index(stop)]
    return text


def _openai_text(request: RecordedRequest, text: str) -> Reply:
    body = request.json or {}
    text = _cut(text, body.get("stop"))
    if not body.get("stream"):
        return json_reply({"id": "cmpl-1", "object": "text_completion",
                           "choices": [{"index": 0, "text": text, "finish_reason": "stop"}]})
    half = len(text) // 2
    return sse_reply([sse(openai_chunk(text=text[:half])),
                      sse(openai_chunk(text=text[half:], finish_reason="stop")), SSE_DONE])


def _models(backend: FakeBackend, model_id: str) -> None:
    backend.script("GET", "/v1/models", json_reply({"object": "list", "data": [
        {"id": model_id, "object": "model"}]}))


def llama_cpp_python(backend: FakeBackend, model: FimModel, model_id: str = "model.gguf") -> None:
    """llama-cpp-python's OpenAI server: `suffix` is accepted, but its FIM
    prompt uses token id 0 for the FIM tokens (`prefix_token_id: int = 0  #
    TODO` in its llama.py), so the model sees padding around prefix and
    suffix and writes on after the suffix."""

    def completions(request: RecordedRequest) -> Reply:
        body = request.json or {}
        suffix = body.get("suffix")
        if suffix:
            return _openai_text(request, "    def other(self):\n        return None\n")
        return _openai_text(request, model.answer_raw(str(body.get("prompt", ""))))

    def tokenize(request: RecordedRequest) -> Reply:
        text = str((request.json or {}).get("input", ""))
        return json_reply({"tokens": list(range(model.token_count(text)))})

    backend.respond("POST", "/v1/completions", completions)
    backend.respond("POST", "/extras/tokenize", tokenize)
    _models(backend, model_id)


def lm_studio(backend: FakeBackend, model: FimModel, model_id: str) -> None:
    """LM Studio: accepts `suffix` and ignores it (no FIM); no tokenizer route."""

    def completions(request: RecordedRequest) -> Reply:
        return _openai_text(request, model.answer_raw(str((request.json or {}).get("prompt", ""))))

    backend.respond("POST", "/v1/completions", completions)
    _models(backend, model_id)


def llama_cpp_server(backend: FakeBackend, model: FimModel, model_id: str = "model.gguf",
                     busy: Callable[[dict[str, Any]], bool] | None = None) -> None:
    """llama.cpp's llama-server: GET /props, /tokenize (`content`, special
    tokens parsed), /infill (its FIM, from the GGUF's tokens) and a
    /v1/completions that rejects `suffix` with HTTP 500. A completion whose
    body `busy` picks is still being evaluated: nothing comes until the
    client hangs up."""

    def completions(request: RecordedRequest) -> Reply:
        body = request.json or {}
        if busy is not None and busy(body):
            return Reply(chunks=[STALL])
        if "suffix" in body:
            return Reply(500, body={"error": {"code": 500, "message": "Unsupported param: suffix",
                                              "type": "server_error"}})
        return _openai_text(request, model.answer_raw(str(body.get("prompt", ""))))

    def tokenize(request: RecordedRequest) -> Reply:
        text = str((request.json or {}).get("content", ""))
        return json_reply({"tokens": list(range(model.token_count(text)))})

    def infill(request: RecordedRequest) -> Reply:
        body = request.json or {}
        text = model.answer_fim(str(body.get("input_prefix", "")),
                                str(body.get("input_suffix", "")))
        return json_reply({"content": text, "stop": True})

    backend.script("GET", "/props", json_reply({
        "default_generation_settings": {"n_ctx": 4096, "params": {}}, "total_slots": 1,
        "model_path": "/models/" + model_id}))
    backend.respond("POST", "/v1/completions", completions)
    backend.respond("POST", "/tokenize", tokenize)
    backend.respond("POST", "/infill", infill)
    _models(backend, model_id)


def fim_server(backend: FakeBackend, model: FimModel, model_id: str = "my-coder:latest") -> None:
    """An OpenAI-compatible server whose `suffix` FIM is right (the model's
    own FIM tokens around prefix and suffix), no tokenizer route."""

    def completions(request: RecordedRequest) -> Reply:
        body = request.json or {}
        suffix = body.get("suffix")
        prompt = str(body.get("prompt", ""))
        if suffix:
            return _openai_text(request, model.answer_fim(prompt, str(suffix)))
        return _openai_text(request, model.answer_raw(prompt))

    backend.respond("POST", "/v1/completions", completions)
    _models(backend, model_id)


def vllm(backend: FakeBackend, model: FimModel, model_id: str) -> None:
    """vLLM: plain /v1/completions (special tokens in the text are tokens),
    `suffix` refused with HTTP 400, POST /tokenize (`prompt`)."""

    def completions(request: RecordedRequest) -> Reply:
        body = request.json or {}
        if body.get("suffix") is not None:
            return error_reply(400, "suffix is not currently supported",
                               type="BadRequestError")
        return _openai_text(request, model.answer_raw(str(body.get("prompt", ""))))

    def tokenize(request: RecordedRequest) -> Reply:
        text = str((request.json or {}).get("prompt", ""))
        count = model.token_count(text)
        return json_reply({"tokens": list(range(count)), "count": count, "max_model_len": 8192})

    backend.respond("POST", "/v1/completions", completions)
    backend.respond("POST", "/tokenize", tokenize)
    _models(backend, model_id)


def ollama(backend: FakeBackend, models: dict[str, tuple[FimModel, str, list[str]]],
           *, suffix_honoured: bool = True) -> None:
    """Ollama: /api/show gives each model's template and capabilities
    (models: name -> (model, template, capabilities)); /api/generate with
    `suffix` (raw false) lays the prompt out by the template, which is right
    when the template has the family's FIM tokens (`suffix_honoured`: a
    Modelfile whose template drops .Suffix makes it ignore the suffix);
    raw true sends the prompt as is."""

    def show(request: RecordedRequest) -> Reply:
        name = str((request.json or {}).get("model"))
        if name not in models:
            return json_reply({"error": f"model '{name}' not found"}, status=404)
        _, template, capabilities = models[name]
        return json_reply({"template": template, "capabilities": capabilities,
                           "details": {"family": "qwen2"},
                           "model_info": {"general.architecture": "qwen2"}})

    def generate(request: RecordedRequest) -> Reply:
        body = request.json or {}
        model = models[str(body.get("model"))][0]
        prompt, suffix = str(body.get("prompt", "")), body.get("suffix")
        if body.get("raw"):
            text = model.answer_raw(prompt)
        elif suffix and suffix_honoured:
            text = model.answer_fim(prompt, str(suffix))
        else:
            text = model.fill(prompt, "") + RUNAWAY
        text = _cut(text, (body.get("options") or {}).get("stop"))
        done = {"model": body.get("model"), "done": True, "done_reason": "stop",
                "prompt_eval_count": 10, "eval_count": 3}
        if not body.get("stream", True):
            return json_reply({**done, "response": text})
        return ndjson_reply([ndjson({"model": body.get("model"), "response": text,
                                     "done": False}), ndjson({**done, "response": ""})])

    backend.respond("POST", "/api/show", show)
    backend.respond("POST", "/api/generate", generate)
    backend.script("GET", "/api/tags", json_reply({"models": [
        {"name": name, "model": name, "details": {}} for name in models]}))


def sent_prompts(backend: FakeBackend, path: str) -> list[dict[str, Any]]:
    """The JSON bodies sent to `path` (for assertions)."""
    return [json.loads(r.body) for r in backend.requests_to(path) if r.body]
