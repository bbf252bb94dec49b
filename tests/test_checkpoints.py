"""Checkpoints, pure logic: the store's rows (agentls.core.checkpoints.store),
the schema upgrade of a database from before checkpoints, the recording
editor (agentls.core.checkpoints.files.CheckpointingEditor) over a stand-in
applier, and restore planning against files on disk. The real server and
editor paths are in tests/e2e/test_checkpoints.py."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentls.core.checkpoints.files import (
    CheckpointingEditor,
    TurnCheckpoints,
    current_text,
    plan_restore,
    prompt_turn,
)
from agentls.core.checkpoints.store import ABSENT, CheckpointStore, content_hash
from agentls.core.editor.edits import EditOutcome, EditRequest
from agentls.core.sessions.errors import SessionNotFound
from agentls.core.sessions.schema import SCHEMA_VERSION
from agentls.core.sessions.store import SessionStore
from agentls.core.tools.contract import ToolContext
from agentls.core.types.conversation import Message


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    with SessionStore(tmp_path / "s.sqlite3") as opened:
        yield opened


def test_a_database_from_before_checkpoints_is_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    raw = sqlite3.connect(path)
    from agentls.core.sessions.schema import MIGRATIONS

    for statement in MIGRATIONS[0]:
        raw.execute(statement)
    raw.execute("PRAGMA user_version = 1")
    raw.execute("INSERT INTO sessions VALUES ('old', 't', '2026-01-01T00:00:00+00:00', "
                "'2026-01-01T00:00:00+00:00', '{}', '{\"session_id\": \"old\", "
                "\"started_at\": \"2026-01-01T00:00:00+00:00\"}')")
    raw.commit()
    raw.close()
    with SessionStore(path) as upgraded:
        checkpoints = CheckpointStore(upgraded)
        checkpoints.save_before("old", 1, 0, {"/w/a.txt": "a\n"})
        [checkpoint] = checkpoints.list_checkpoints("old")
        assert checkpoint.files == ("/w/a.txt",)
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
    raw.close()


def test_rows_keep_the_first_before_and_the_newest_hashes(store: SessionStore) -> None:
    store.create_session("s")
    checkpoints = CheckpointStore(store)
    checkpoints.save_before("s", 1, 0, {"/w/a": "one", "/w/new": None},
                            pending={"/w/a": content_hash("two")})
    checkpoints.save_before("s", 1, 0, {"/w/a": "ignored: the turn stored it already"})
    checkpoints.settle("s", {(1, "/w/a"): content_hash("two"), (1, "/w/new"): content_hash("n")})
    checkpoints.save_before("s", 3, 5, {"/w/a": "two", "/w/b": "b"})
    checkpoints.settle("s", {(3, "/w/a"): content_hash("three"), (3, "/w/b"): None})

    listed = checkpoints.list_checkpoints("s")
    assert [(c.turn, c.message_index, c.files) for c in listed] == [
        (1, 0, ("/w/a", "/w/new")), (3, 5, ("/w/a", "/w/b"))]
    since_1 = {f.path: f for f in checkpoints.files_since("s", 1) or []}
    assert since_1["/w/a"].before == "one" and since_1["/w/a"].latest_turn == 3
    assert since_1["/w/a"].is_agents(content_hash("three"))
    assert not since_1["/w/a"].is_agents(content_hash("two"))
    assert since_1["/w/new"].before is None and since_1["/w/new"].is_agents(content_hash("n"))
    assert since_1["/w/b"].written_hash == content_hash("b")  # not applied: unchanged
    assert {f.path: f.before for f in checkpoints.files_since("s", 3) or []} == {
        "/w/a": "two", "/w/b": "b"}
    assert checkpoints.files_since("s", 2) is None
    with pytest.raises(SessionNotFound):
        checkpoints.list_checkpoints("nope")
    with pytest.raises(SessionNotFound):
        checkpoints.save_before("nope", 1, 0, {"/w/a": "x"})

    checkpoints.settle("s", {}, dropped=[(3, "/w/a"), (3, "/w/b")])
    assert [c.turn for c in checkpoints.list_checkpoints("s")] == [1]


def test_hashes_see_content_not_line_ends() -> None:
    assert content_hash("a\r\nb\rc\n") == content_hash("a\nb\nc\n") != content_hash("a b c")
    assert content_hash(None) == ABSENT != content_hash("")


def test_turns_count_prompts_not_injected_context() -> None:
    messages = [Message("user", "one"), Message("assistant", "ok"),
                Message("user", "lint", {"source": "hook"}),
                Message("user", "summary", {"source": "compaction"}), Message("user", "two")]
    assert prompt_turn(messages) == 2
    assert TurnCheckpoints.for_prompt(None, "s", messages) is None


class Applier:
    """Stands in for the editor: applies to the disk when `applied`."""

    position_encoding = "utf-16"

    def __init__(self, applied: bool = True) -> None:
        self.applied = applied
        self.requests: list[EditRequest] = []

    async def apply(self, request: EditRequest) -> EditOutcome:
        self.requests.append(request)
        if not self.applied:
            return EditOutcome(applied=False, code="declined", reason="no")
        for path, text in request.after.items():
            _write(path, text)
        return EditOutcome(applied=True)


def _write(path: str, text: str | None) -> None:
    if text is None:
        Path(path).unlink()
    else:
        Path(path).write_text(text)


async def test_the_recording_editor_stores_before_and_what_it_wrote(
    store: SessionStore, tmp_path: Path
) -> None:
    store.create_session("s")
    target = tmp_path / "a.txt"
    target.write_text("before\n")
    turn = TurnCheckpoints(CheckpointStore(store), "s", 1, 0)
    applier = Applier()
    context = turn.wrap(ToolContext(editor=applier))
    editor = context.editor
    assert isinstance(editor, CheckpointingEditor)
    assert turn.wrap(context) is context  # wrapped once
    assert editor.position_encoding == "utf-16"  # the applier's attributes show through

    def request(after: dict[str, str | None]) -> EditRequest:
        return EditRequest("write_file", "s", "label", {}, "", tuple(after), after=after)

    assert (await editor.apply(request({str(target): "after 1\n"}))).applied
    assert (await editor.apply(request({str(target): "after 2\n"}))).applied
    [tracked] = CheckpointStore(store).files_since("s", 1) or []
    assert tracked.before == "before\n"
    assert tracked.is_agents(content_hash("after 2\n"))
    assert tracked.pending_hash is None

    applier.applied = False
    new = tmp_path / "declined.txt"
    assert not (await editor.apply(request({str(new): "x"}))).applied
    [checkpoint] = CheckpointStore(store).list_checkpoints("s")
    assert checkpoint.files == (str(target),)  # the declined file is not part of the turn


async def test_an_unsaved_checkpoint_means_no_edit(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "s.sqlite3") as store:
        turn = TurnCheckpoints(CheckpointStore(store), "gone", 1, 0)  # no such session
        applier = Applier()
        editor = turn.wrap(ToolContext(editor=applier)).editor
        outcome = await editor.apply(EditRequest("write_file", "gone", "l", {}, "",
                                                 (str(tmp_path / "x"),),
                                                 after={str(tmp_path / "x"): "x"}))
    assert not outcome.applied and "Nothing was written" in outcome.reason
    assert applier.requests == []


def test_plan_restore(store: SessionStore, tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "edited.txt").write_text("agent\r\nline 😀")
    (root / "created.txt").write_text("agent made it")
    (root / "theirs.txt").write_text("someone else")
    (root / "folder").mkdir()
    (root / "moved.txt").write_text("moved text")  # was renamed.txt
    store.create_session("s")
    checkpoints = CheckpointStore(store)
    before = {str(root / "edited.txt"): "orig", str(root / "created.txt"): None,
              str(root / "deleted.txt"): "was here", str(root / "theirs.txt"): "orig",
              str(root / "folder"): "was a file", str(tmp_path / "outside.txt"): "o",
              str(root / "renamed.txt"): "moved text", str(root / "moved.txt"): None}
    checkpoints.save_before("s", 1, 0, before)
    checkpoints.settle("s", {
        (1, str(root / "edited.txt")): content_hash("agent\r\nline 😀"),
        (1, str(root / "created.txt")): content_hash("agent made it"),
        (1, str(root / "deleted.txt")): ABSENT,
        (1, str(root / "theirs.txt")): content_hash("agent"),
        (1, str(root / "renamed.txt")): ABSENT,
        (1, str(root / "moved.txt")): content_hash("moved text"),
    })
    files = checkpoints.files_since("s", 1) or []

    def lookup(path: str):  # type: ignore[no-untyped-def]
        from agentls.core.editor.edits import DocumentSnapshot

        text = current_text(path, None)
        return None if text is None else DocumentSnapshot(Path(path).as_uri(), path, text, None)

    def inside(real: Path) -> bool:
        return real.is_relative_to(root.resolve())

    plan = plan_restore(files, lookup, inside)
    assert sorted(Path(p).name for p in plan.restored) == [
        "created.txt", "deleted.txt", "edited.txt", "moved.txt", "renamed.txt"]
    reasons = {Path(c.path).name: c.reason for c in plan.conflicts}
    assert "changed by someone else" in reasons["theirs.txt"]
    assert "is a folder now" in reasons["folder"]
    assert "outside the workspace" in reasons["outside.txt"]
    kinds = [c.get("kind", "text") for c in plan.changes]
    assert sorted(kinds) == ["create", "delete", "rename", "text", "text"]
    [rename] = [c for c in plan.changes if c.get("kind") == "rename"]
    assert (rename["oldUri"], rename["newUri"]) == (
        (root / "moved.txt").as_uri(), (root / "renamed.txt").as_uri())
    edited = next(c for c in plan.changes if c.get("textDocument", {}).get("uri", "").endswith(
        "edited.txt"))
    # the whole text is replaced: the end is line 1, after "line 😀" in UTF-16 units
    assert edited["edits"][0]["range"]["end"] == {"line": 1, "character": 7}
    assert edited["edits"][0]["newText"] == "orig"

    forced = plan_restore(files, lookup, inside, force=True)
    assert "theirs.txt" in {Path(p).name for p in forced.restored}
    assert {Path(c.path).name for c in forced.conflicts} == {"folder", "outside.txt"}
