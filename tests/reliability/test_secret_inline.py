"""Inline completion never sends a secret file's text (the same rule as
read_file), through the REAL server with the loopback backend:
a completion asked inside `.env` makes no model call, and an open `.env` tab
is never a neighbouring snippet of another file's prompt.
"""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from tests.e2e.test_inline_completion import FIM_SETTINGS, agentls, base_url, fim_reply
from tests.fakes.http_backend import FakeBackend

SECRET = "sk-PLANTED-inline-7d2e91"
ENV = f"OPENAI_API_KEY={SECRET}\nDATABASE_URL=postgres://admin:{SECRET}@db/prod\n"
# Shares the .env's identifiers, so the .env is the best neighbour there is
# (Neovim gives .env the filetype sh: the same language as a shell script).
SCRIPT = "# Settings read at start-up: OPENAI_API_KEY and DATABASE_URL.\nexport OPENAI_API_KEY="


async def test_secret_buffers_never_reach_inline_prompts(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    fake_backend.script("POST", "/v1/completions", fim_reply("your key"))
    async with agentls(tmp_path, {**FIM_SETTINGS, "baseUrl": base_url(fake_backend)}) as server:
        env = server.open(ENV, name=".env", language="shellscript")
        inside = await server.inline(env, types.Position(line=0, character=15))
        assert not inside.get("items"), inside  # TMP
        script = server.open(SCRIPT, name="start.sh", language="shellscript")
        answer = await server.inline(script, types.Position(line=1, character=22))
        assert answer["items"], answer  # other files still complete
    bodies = [r.body.decode() for r in fake_backend.requests_to("/v1/completions")]
    assert len(bodies) == 1, bodies  # the request inside .env never reached the model
    assert SECRET not in bodies[0]
    assert "Settings read at start-up" in bodies[0]
