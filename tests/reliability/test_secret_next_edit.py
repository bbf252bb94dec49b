"""Next edit suggestions never send a secret file's text (docs/security.md,
"next-edit context"), through the REAL server with the loopback backend:
the user's recent edits in an open `.env` are not shown to the model as
context for another file, and no suggestion is asked for inside `.env`.
"""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from tests.e2e.test_inline_completion import agentls, base_url
from tests.e2e.test_next_edit import (
    CHAT,
    SETTINGS,
    SOURCE,
    VERSION_AFTER_RENAME,
    ask,
    rename_parameter,
    renaming_model,
)
from tests.fakes.http_backend import FakeBackend

SECRET = "sk-PLANTED-nextedit-0c41d9"


async def test_secret_buffers_are_not_next_edit_context(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    fake_backend.respond("POST", CHAT, renaming_model)
    async with agentls(tmp_path, {**SETTINGS, "baseUrl": base_url(fake_backend)}) as server:
        env_text = f"OPENAI_API_KEY={SECRET}\n"
        env = server.open(env_text, name=".env", language="dotenv")
        # The user edits the key in .env, then renames a parameter in scale.py.
        server.type_text(env, 2, types.Position(line=0, character=len(env_text) - 1), "x")
        uri = server.open(SOURCE, name="scale.py")
        cursor = rename_parameter(server, uri)
        answer = await ask(server, uri, cursor, VERSION_AFTER_RENAME)
        assert answer["edits"], answer  # the suggestion still comes, from scale.py's edit
        # In .env itself: no model call at all.
        inside = await ask(server, env, types.Position(line=0, character=3), 2)
        assert not inside or not inside.get("edits"), inside
    bodies = [request.body.decode() for request in fake_backend.requests_to(CHAT)]
    for body in bodies:
        assert SECRET not in body and "OPENAI_API_KEY" not in body
    assert len(bodies) == 1 and "-def scale(x, factor):" in bodies[0]
