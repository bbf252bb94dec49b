"""ServingModels (providers/local/serving.py), the pure logic of switching
the local model without a gap, with stand-in children (the real ones are
exercised in tests/e2e/test_local_model_switch.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentls.core.types.errors import ModelError
from agentls.providers.local.process import _ChildSpec
from agentls.providers.local.serving import ServingModels


def spec(name: str, path: Path | None = None) -> _ChildSpec:
    return _ChildSpec(alias=name, catalog_id=None if path else name, path=path, n_ctx=2048,
                      n_threads=1, chat_format=None)


class Child:
    """Stands in for _ModelProcess: loads when told to (gate), or fails."""

    def __init__(self, child_spec: _ChildSpec, fail: str | None = None) -> None:
        self.spec = child_spec
        self.fail = fail
        self.gate = asyncio.Event()
        self.ready = False
        self.in_use = 0
        self.retired = False
        self.load_seconds = 0.5
        self.loads = 0
        self.stopped = False

    async def client(self) -> None:
        self.loads += 1
        await self.gate.wait()
        if self.fail:
            raise ModelError(f"local: {self.spec.alias} {self.fail}", model=self.spec.alias)
        self.ready = True

    async def stop(self) -> None:
        self.ready, self.stopped = False, True


class Shown:
    def __init__(self) -> None:
        self.begun: list[str] = []
        self.errors: list[str] = []

    def begin(self, title: str, **_: Any) -> Shown:
        self.begun.append(title)
        return self

    def report(self, **_: Any) -> None:
        pass

    def end(self, message: str = "", *, error: str | None = None) -> None:
        if error:
            self.errors.append(error)


def serving(children: dict[str, Child], shown: Shown) -> ServingModels:
    def make(child_spec: _ChildSpec) -> Any:
        return children[child_spec.alias]

    async def loaded(child_spec: _ChildSpec, role: str) -> None:
        return None

    return ServingModels(make, lambda: shown, loaded)  # type: ignore[arg-type,return-value]


def wanting(name: str, path: Path | None = None) -> Callable[[], _ChildSpec]:
    return lambda: spec(name, path)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def start(models: ServingModels, child: Child, role: str) -> None:
    """The first load of a role: the request itself waits for it."""
    chosen: Any = models.choose(lambda: child.spec, role)
    assert chosen is child and not child.ready
    child.gate.set()
    await child.client()
    models.mark_serving(role, chosen)


async def test_the_serving_child_answers_while_the_new_one_loads_then_is_stopped() -> None:
    old, new = Child(spec("old")), Child(spec("new"))
    shown = Shown()
    models = serving({"old": old, "new": new}, shown)
    await start(models, old, "completion")
    assert models.choose(wanting("new"), "completion") is old
    assert models.choose(wanting("new"), "completion") is old  # one load, not two
    await settle()
    assert new.loads == 1 and shown.begun == ["Loading new"]
    new.gate.set()
    await settle()
    assert models.choose(wanting("new"), "completion") is new
    await settle()
    assert old.stopped and old.retired and not shown.errors


async def test_a_model_the_settings_left_while_it_loaded_does_not_take_over() -> None:
    old, new = Child(spec("old")), Child(spec("new"))
    models = serving({"old": old, "new": new}, Shown())
    await start(models, old, "chat")
    assert models.choose(wanting("new"), "chat") is old
    assert models.choose(wanting("old"), "chat") is old  # changed back before it loaded
    new.gate.set()
    await settle()
    assert models.serving["chat"] is old and new.stopped and not old.stopped


async def test_a_child_in_use_is_stopped_only_when_its_request_ends() -> None:
    old, new = Child(spec("old")), Child(spec("new"))
    models = serving({"old": old, "new": new}, Shown())
    await start(models, old, "chat")
    old.in_use = 1
    models.choose(wanting("new"), "chat")
    new.gate.set()
    await settle()
    assert models.serving["chat"] is new and not old.stopped
    old.in_use = 0
    models.release(old)  # type: ignore[arg-type]
    await settle()
    assert old.stopped


async def test_a_failing_new_model_never_takes_over_and_is_told_once(tmp_path: Path) -> None:
    gguf = tmp_path / "bad.gguf"
    gguf.write_bytes(b"GGUF cut short")
    old, bad = Child(spec("old")), Child(spec("bad", gguf), fail="failed to load")
    bad.gate.set()
    shown = Shown()
    models = serving({"old": old, "bad": bad}, shown)
    await start(models, old, "completion")
    for _ in range(3):
        assert models.choose(wanting("bad", gguf), "completion") is old
        await settle()
    assert bad.loads == 1 and len(shown.errors) == 1
    assert shown.errors[0].startswith("local: cannot switch to bad: bad failed to load")
    assert "old keeps serving completion" in shown.errors[0]
    assert "`inlineCompletion.model`" in shown.errors[0]
    gguf.write_bytes(b"GGUF downloaded again, a different size")  # the file changed: try again
    assert models.choose(wanting("bad", gguf), "completion") is old
    await settle()
    assert bad.loads == 2 and not old.stopped


async def test_a_name_that_cannot_be_resolved_leaves_the_serving_child() -> None:
    old = Child(spec("old"))
    shown = Shown()
    models = serving({"old": old}, shown)
    await start(models, old, "chat")

    def unknown() -> _ChildSpec:
        raise ModelError("local: unknown model 'nope'", model="nope")

    assert models.choose(unknown, "chat") is old
    assert models.choose(unknown, "chat") is old
    assert len(shown.errors) == 1 and "`model`" in shown.errors[0]
    with pytest.raises(ModelError):  # nothing serving completion: the error is the answer
        models.choose(unknown, "completion")


async def test_take_over_moves_the_serving_children() -> None:
    chat, other = Child(spec("chat-model")), Child(spec("idle"))
    before = serving({"chat-model": chat, "idle": other}, Shown())
    await start(before, chat, "chat")
    before.process(other.spec)  # known but not serving anything
    after = serving({}, Shown())
    after.take_over(before)
    assert after.serving == {"chat": chat} and after.processes == {chat.spec: chat}
    assert before.processes == {other.spec: other} and before.serving == {}
    await before.aclose()
    assert other.stopped and not chat.stopped
    await after.aclose()
    assert chat.stopped
