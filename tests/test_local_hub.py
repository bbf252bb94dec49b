"""`hf:` models for the local provider: references, choosing the file, and
downloads through the real huggingface_hub client against a loopback fake
hub (tests/fakes/hf_hub.py) speaking the hub's wire format: progress,
resume after a cut connection, checksum mismatch, 401 (gated), 404, no
network, cancel, and the background manager's progress reports."""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from agentls.core.types.errors import ModelError
from tests.fakes.hf_hub import FakeHub

hub = pytest.importorskip(
    "agentls.providers.local.models.hub", reason="the local provider package is not importable"
)
pytest.importorskip("huggingface_hub", reason="huggingface_hub (agentls[local]) not installed")

from agentls.providers.local.models.downloads import DownloadManager  # noqa: E402

REPO = "test-org/tiny-GGUF"
FILE = "tiny.Q4_K_M.gguf"
GGUF_SIZE = 1_500_008  # the gguf fixture's size


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    """A 1.5 MB file that starts like a GGUF (magic + version 3)."""
    path = tmp_path / "src" / FILE
    path.parent.mkdir()
    path.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + os.urandom(GGUF_SIZE - 8))
    return path


@pytest.fixture
def hf_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty HF cache and agentls cache; no token from the environment."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    return tmp_path / "hf" / "hub"


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """huggingface_hub reads 10 MiB per chunk: a test file would be one
    chunk, so no progress between its first and last byte and no resume
    point before a cut. 64 KiB chunks show both on a 1.5 MB file."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 64 * 1024)


def serve(monkeypatch: pytest.MonkeyPatch, fake: FakeHub) -> None:
    monkeypatch.setenv("HF_ENDPOINT", fake.url)


def download(tmp_path: Path, spec: str, **kwargs: Any) -> Path:
    return hub.download(hub.parse_hf_reference(spec), hf_cache=tmp_path / "hf" / "hub", **kwargs)


def complete_files(cache: Path) -> list[Path]:
    """Files in the HF cache that look complete (no .incomplete name)."""
    return [p for p in cache.rglob("*") if p.is_file() and ".incomplete" not in p.name
            and ".lock" not in p.name and p.name != "CACHEDIR.TAG" and "refs" not in p.parts]


# --------------------------------------------------------------------------- references


@pytest.mark.parametrize(
    ("text", "repo", "selector"),
    [
        ("hf:bartowski/Qwen2.5-Coder-1.5B-GGUF", "bartowski/Qwen2.5-Coder-1.5B-GGUF", None),
        ("hf:owner/repo:Q8_0", "owner/repo", "Q8_0"),
        ("hf.co/owner/repo:model.Q5_K_M.gguf", "owner/repo", "model.Q5_K_M.gguf"),
    ],
)
def test_references_parse(text: str, repo: str, selector: str | None) -> None:
    ref = hub.parse_hf_reference(text)
    assert (ref.repo_id, ref.selector) == (repo, selector)


@pytest.mark.parametrize("text", ["hf:", "hf:just-a-name", "hf:a/b:c:d", "hf:/repo"])
def test_bad_references_say_the_form(text: str) -> None:
    with pytest.raises(ModelError) as caught:
        hub.parse_hf_reference(text)
    assert caught.value.code == "bad_request" and "hf:<owner>/<repo>" in caught.value.message


def files(*names: str) -> list[Any]:
    return [hub.RemoteFile(name, 100 + i, None) for i, name in enumerate(names)]


def test_choose_file_prefers_q4_k_m_and_honours_the_selector() -> None:
    repo = files("m.Q8_0.gguf", "m.Q4_K_M.gguf", "m.Q2_K.gguf", "mmproj-m.Q4_K_M.gguf", "README.md")
    ref = hub.parse_hf_reference("hf:o/r")
    assert hub.choose_file(ref, repo).filename == "m.Q4_K_M.gguf"
    assert hub.choose_file(hub.parse_hf_reference("hf:o/r:q8_0"), repo).filename == "m.Q8_0.gguf"
    assert hub.choose_file(hub.parse_hf_reference("hf:o/r:m.Q2_K.gguf"), repo).filename == (
        "m.Q2_K.gguf"
    )
    with pytest.raises(ModelError) as caught:
        hub.choose_file(hub.parse_hf_reference("hf:o/r:Q3_K_L"), repo)
    assert "Q3_K_L" in caught.value.message and "m.Q8_0.gguf" in caught.value.message
    with pytest.raises(ModelError, match=r"no \.gguf file"):
        hub.choose_file(ref, files("model.safetensors"))
    with pytest.raises(ModelError, match="split GGUF"):
        hub.choose_file(ref, files("m.Q4_K_M-00001-of-00002.gguf"))


def test_too_large_for_memory_says_what_to_pick() -> None:
    with pytest.raises(ModelError) as caught:
        hub.check_fits_memory("hf:o/big", 20 << 30, available=8 << 30)
    assert "hf:o/big" in caught.value.message and "smaller quant" in caught.value.message
    hub.check_fits_memory("hf:o/small", 200 << 20, available=8 << 30)  # fits: no error


def test_disk_full_is_named() -> None:
    error = hub.translate_error(hub.parse_hf_reference("hf:o/r"), OSError(errno.ENOSPC, "full"))
    assert "no disk space" in error.message and "hf:o/r" in error.message


# --------------------------------------------------------------------------- downloads


def test_download_reports_progress_verifies_and_is_remembered(
    tmp_path: Path, gguf: Path, hf_env: Path, monkeypatch: pytest.MonkeyPatch, small_chunks: None
) -> None:
    seen: list[tuple[int, int | None]] = []
    with FakeHub() as fake:
        fake.add(REPO, FILE, gguf)
        fake.add(REPO, "tiny.Q8_0.gguf", gguf)
        serve(monkeypatch, fake)
        path = download(tmp_path, f"hf:{REPO}", on_progress=lambda d, t: seen.append((d, t)))
        assert path.read_bytes() == gguf.read_bytes() and path.name == FILE
        assert seen[-1] == (gguf.stat().st_size, gguf.stat().st_size)
        assert [d for d, _ in seen] == sorted(d for d, _ in seen) and len(seen) > 10
        # the endpoints huggingface_hub used: model info, HEAD, GET
        assert [r.method for r in fake.requests][:1] == ["GET"]
        assert any(r.method == "HEAD" and r.path.endswith(f"/resolve/main/{FILE}")
                   for r in fake.requests)
        gets = len(fake.downloads())
        # the same reference again: the HF cache answers, nothing is downloaded
        assert download(tmp_path, f"hf:{REPO}") == path
        assert len(fake.downloads()) == gets
    ref = hub.parse_hf_reference(f"hf:{REPO}")
    assert hub.cached_path(ref, hf_env) == path  # offline: no hub needed
    assert hub.cached_path(hub.parse_hf_reference(f"hf:{REPO}:Q8_0"), hf_env) is None


def test_a_xet_backed_file_downloads_over_http_with_progress(
    tmp_path: Path, gguf: Path, hf_env: Path, monkeypatch: pytest.MonkeyPatch, small_chunks: None
) -> None:
    """Xet storage (hf_xet) reports through two progress bars and cannot be
    stopped from a progress callback, so downloads take the Hub's HTTP path,
    the one whose progress, resume and cancel are tested here."""
    seen: list[tuple[int, int | None]] = []
    with FakeHub(xet=True) as fake:
        fake.add(REPO, FILE, gguf)
        serve(monkeypatch, fake)
        path = download(tmp_path, f"hf:{REPO}", on_progress=lambda d, t: seen.append((d, t)))
        assert path.read_bytes() == gguf.read_bytes()
        assert seen[-1] == (gguf.stat().st_size, gguf.stat().st_size)
        assert [d for d, _ in seen] == sorted(d for d, _ in seen)
        assert not any("xet" in r.path for r in fake.requests)  # no Xet token asked for


def test_a_cut_connection_resumes_with_a_range_request(
    tmp_path: Path, gguf: Path, hf_env: Path, monkeypatch: pytest.MonkeyPatch, small_chunks: None
) -> None:
    with FakeHub(cut_after=400_000) as fake:
        fake.add(REPO, FILE, gguf)
        serve(monkeypatch, fake)
        path = download(tmp_path, f"hf:{REPO}:Q4_K_M")
        assert path.read_bytes() == gguf.read_bytes()
        first, second = fake.downloads()
        assert "range" not in first.headers
        assert second.headers["range"].startswith("bytes=") and second.headers["range"] != (
            "bytes=0-"
        )


def test_checksum_mismatch_leaves_no_file(
    tmp_path: Path, gguf: Path, hf_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeHub(wrong_sha256=True) as fake:
        fake.add(REPO, FILE, gguf)
        serve(monkeypatch, fake)
        with pytest.raises(ModelError) as caught:
            download(tmp_path, f"hf:{REPO}")
    assert caught.value.code == "invalid_response"
    assert "SHA-256" in caught.value.message and f"hf:{REPO}" in caught.value.message
    assert complete_files(tmp_path / "hf" / "hub") == []
    assert hub.cached_path(hub.parse_hf_reference(f"hf:{REPO}"), hf_env) is None


def test_not_a_gguf_is_removed(
    tmp_path: Path, hf_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    html = tmp_path / "page.gguf"
    html.write_bytes(b"<html>not a model</html>" * 100)
    with FakeHub() as fake:
        fake.add(REPO, FILE, html)
        serve(monkeypatch, fake)
        with pytest.raises(ModelError, match="not a GGUF"):
            download(tmp_path, f"hf:{REPO}")
    assert complete_files(tmp_path / "hf" / "hub") == []


def test_gated_repo_needs_a_token(
    tmp_path: Path, gguf: Path, hf_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeHub(gated={REPO}) as fake:
        fake.add(REPO, FILE, gguf)
        serve(monkeypatch, fake)
        with pytest.raises(ModelError) as caught:
            download(tmp_path, f"hf:{REPO}")
        assert caught.value.code == "auth" and "HF_TOKEN" in caught.value.message
        assert "gated" in caught.value.message and fake.token not in caught.value.message
        monkeypatch.setenv("HF_TOKEN", fake.token)
        assert download(tmp_path, f"hf:{REPO}").read_bytes() == gguf.read_bytes()


def test_unknown_repo_and_file_are_404s_that_say_so(
    tmp_path: Path, gguf: Path, hf_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeHub() as fake:
        fake.add(REPO, FILE, gguf)
        serve(monkeypatch, fake)
        with pytest.raises(ModelError) as caught:
            download(tmp_path, "hf:nobody/nothing-GGUF")
        assert caught.value.code == "not_found" and "nobody/nothing-GGUF" in caught.value.message
        with pytest.raises(ModelError) as caught:
            download(tmp_path, f"hf:{REPO}:other.gguf")
        assert caught.value.code == "not_found" and "other.gguf" in caught.value.message
        # the file listed but missing from the store (the hub answers 404 on resolve)
        remote = hub.RemoteFile("gone.Q4_K_M.gguf", 10, None)
        with pytest.raises(ModelError) as caught:
            download(tmp_path, f"hf:{REPO}", remote=remote)
        assert caught.value.code == "not_found" and "gone.Q4_K_M.gguf" in caught.value.message


def test_no_network_says_the_hub_is_unreachable(
    tmp_path: Path, hf_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(ModelError) as caught:
        download(tmp_path, f"hf:{REPO}")
    assert caught.value.code == "connection" and "cannot reach" in caught.value.message


def test_cancel_stops_the_download_and_keeps_nothing(
    tmp_path: Path, gguf: Path, hf_env: Path, monkeypatch: pytest.MonkeyPatch, small_chunks: None
) -> None:
    cancel = threading.Event()

    def on_progress(done: int, total: int | None) -> None:
        if done > 100_000:
            cancel.set()

    with FakeHub(delay=0.05) as fake:
        fake.add(REPO, FILE, gguf)
        serve(monkeypatch, fake)
        with pytest.raises(hub.DownloadCancelled):
            download(tmp_path, f"hf:{REPO}", on_progress=on_progress, cancel=cancel)
    assert complete_files(tmp_path / "hf" / "hub") == []


# --------------------------------------------------------------------------- background manager


class RecordingSink:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self.cancel: Any = None

    def begin(self, title: str, *, message: str = "", on_cancel: Any = None) -> Any:
        self.events.append(("begin", title))
        self.cancel = on_cancel
        sink = self

        class Task:
            def report(self, **fields: Any) -> None:
                sink.events.append(("report", fields))

            def end(self, message: str = "", *, error: str | None = None) -> None:
                sink.events.append(("end", error or message))

        return Task()


async def test_manager_downloads_in_the_background_with_progress(
    tmp_path: Path, gguf: Path, hf_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = RecordingSink()
    manager = DownloadManager()
    with FakeHub() as fake:
        fake.add(REPO, FILE, gguf)
        serve(monkeypatch, fake)
        ref = hub.parse_hf_reference(f"hf:{REPO}")
        size = GGUF_SIZE
        job = manager.start(ref, sink=sink, hf_cache=hf_env)
        assert manager.start(ref, sink=sink) is job  # one download per reference
        await asyncio.wait_for(job.finished.wait(), 60)
    assert job.state == "ready" and job.path is not None and job.percentage == 100
    assert sink.events[0] == ("begin", f"Downloading hf:{REPO}")
    reports = [fields for kind, fields in sink.events if kind == "report"]
    assert reports and reports[-1]["total_bytes"] == size
    assert "MB" in reports[-1]["message"]
    assert sink.events[-1][0] == "end" and "downloaded" in sink.events[-1][1]


async def test_manager_cancel_from_the_sink_and_retry(
    tmp_path: Path, gguf: Path, hf_env: Path, monkeypatch: pytest.MonkeyPatch, small_chunks: None
) -> None:
    sink = RecordingSink()
    manager = DownloadManager()
    with FakeHub(delay=0.05) as fake:
        fake.add(REPO, FILE, gguf)
        serve(monkeypatch, fake)
        ref = hub.parse_hf_reference(f"hf:{REPO}")
        job = manager.start(ref, sink=sink, hf_cache=hf_env)
        while not any(kind == "report" for kind, _ in sink.events):
            await asyncio.sleep(0.02)
        sink.cancel()  # what window/workDoneProgress/cancel calls
        await asyncio.wait_for(job.finished.wait(), 30)
        assert job.state == "cancelled" and "cancelled" in sink.events[-1][1]
        assert manager.start(ref, sink=sink) is job  # not retried unless asked
        fake.delay = 0.0
        again = manager.start(ref, sink=sink, hf_cache=hf_env, retry=True)
        await asyncio.wait_for(again.finished.wait(), 60)
    assert again is not job and again.state == "ready"
