"""Trust for model references, through the REAL server.

- A workspace `.agentls.toml` naming a model (an `hf:` reference, which
  downloads with the user's HF_TOKEN, or a `.gguf` path outside the
  workspace, which llama.cpp loads in process) waits for trust like the
  other dangerous keys: no download starts and the model is not used
  until the user trusts the file.
- A hostile hub (HF_ENDPOINT) answering with an ETag that is an absolute
  path or a `../` path cannot make a download write outside the Hugging
  Face cache: the download fails with a message naming the hub.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.hf_hub import FakeHub
from tests.reliability.harness import LspProcess, wait_until

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX")
pytest.importorskip("huggingface_hub", reason="huggingface_hub (agentls[local]) not installed")

REPO = "attacker/evil-GGUF"
FILE = "evil-Q4_K_M.gguf"
CLIENT = {"window": {"showMessage": {"messageActionItem": {}}}}


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[FakeHub]:
    model = tmp_path / "served.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 4096)  # looks like a GGUF; never a loadable model
    with FakeHub() as fake:
        fake.add(REPO, FILE, model)
        yield fake


def hub_env(tmp_path: Path, fake: FakeHub) -> dict[str, str]:
    return {"HF_ENDPOINT": fake.url, "HF_HOME": str(tmp_path / "hf"),
            "HF_TOKEN": "hf_user_token_5ec7e7", "HF_HUB_DISABLE_TELEMETRY": "1"}


def dismissing(method: str, params: Any) -> Any:
    return None


@pytest.mark.parametrize(("key", "toml"), [
    ("model", f'model = "hf:{REPO}"\n'),
    ("inlineCompletion.model", f'[inlineCompletion]\nmodel = "hf:{REPO}"\n'),
    ("nextEdit.model", f'[nextEdit]\nmodel = "hf:{REPO}"\n'),
    ("model", 'model = "{elsewhere}"\n'),
])
def test_a_workspace_model_reference_waits_for_trust(
    tmp_path: Path, workspace: Path, hub: FakeHub, key: str, toml: str
) -> None:
    elsewhere = tmp_path / "elsewhere" / "evil.gguf"
    elsewhere.parent.mkdir()
    elsewhere.write_bytes(b"GGUF" + b"\0" * 64)
    (workspace / ".agentls.toml").write_text(toml.replace("{elsewhere}", str(elsewhere)))
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          capabilities=CLIENT, env=hub_env(tmp_path, hub)) as lsp:
        lsp.responder = dismissing
        status = lsp.result("agentls/status", {})
        wait_until(lambda: [r for r in lsp.server_requests
                            if r["method"] == "window/showMessageRequest"], "the trust question")
    assert status["workspaceTrust"]["state"] == "pending"
    assert status["workspaceTrust"]["pendingKeys"] == [key]
    assert status.get("downloads", []) == []  # prepared at start-up, before status answers
    assert hub.requests == []  # nothing reached the hub: no HF_TOKEN sent
    assert status["model"] != str(elsewhere) and "hf:" not in str(status["model"])


@pytest.mark.parametrize("etag", ["{outside}", "../../../../outside/evil.pth"])
def test_a_hub_etag_that_is_a_path_writes_nothing_outside_the_cache(
    tmp_path: Path, workspace: Path, hub: FakeHub, etag: str
) -> None:
    pytest.importorskip("agentls.providers.local")
    outside = tmp_path / "outside" / "evil.pth"
    hub.etag = etag.replace("{outside}", str(outside))
    settings = {"provider": "local", "inlineCompletion": {"model": f"hf:{REPO}"}}
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace, settings=settings,
                          capabilities=CLIENT, env=hub_env(tmp_path, hub)) as lsp:
        lsp.responder = dismissing
        jobs = wait_until(lambda: [j for j in lsp.result("agentls/status", {})["downloads"]
                                   if j["state"] not in ("downloading", "verifying")],
                          "the download's end", 60)
    assert not outside.exists() and not (tmp_path / "outside").exists()
    assert [j["state"] for j in jobs] == ["failed"]
    assert "ETag" in jobs[0]["error"] and "HF_ENDPOINT" in jobs[0]["error"]
    written = [p for p in tmp_path.rglob("*") if p.is_file()
               and not p.is_relative_to(tmp_path / "hf") and p.suffix in (".pth", ".gguf")]
    assert written == [tmp_path / "served.gguf"]
