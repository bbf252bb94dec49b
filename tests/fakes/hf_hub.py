"""A loopback fake of the Hugging Face hub, for HF_ENDPOINT.

It speaks what huggingface_hub's download path calls:

- `GET /api/models/<owner>/<repo>[/revision/<rev>]` (model_info, with
  `blobs=True`): `{id, sha, siblings: [{rfilename, size, blobId, lfs:
  {size, sha256, pointerSize}}]}`;
- `HEAD /<owner>/<repo>/resolve/<rev>/<file>`: the file's metadata in
  `X-Repo-Commit`, `ETag` / `X-Linked-Etag` (the LFS sha256) and
  `X-Linked-Size`;
- `GET` of the same path, whole or ranged (`Range: bytes=N-` -> 206 with
  `Content-Range`), which is how a cut download is resumed;
- errors as the hub sends them: 404 with `X-Error-Code: RepoNotFound` or
  `EntryNotFound`, 401 with `X-Error-Code: GatedRepo` for a gated repo
  without the right token.

Faults for tests: `cut_after` (the first GET of a file drops the connection
after that many bytes), `wrong_sha256` (the metadata announces a digest the
bytes do not have), `delay` (seconds per 64 KiB chunk, so a download lasts
long enough to watch or cancel), `etag` / `commit` (a hostile hub's ETag or
X-Repo-Commit, e.g. an absolute path or a `../` path, sent instead of the
real ones). Stops by itself after `hard_timeout`.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = ["FakeHub", "HubFile", "HubRequest"]

COMMIT = "0123456789abcdef0123456789abcdef01234567"
_CHUNK = 64 * 1024


@dataclass
class HubFile:
    path: Path
    size: int = 0
    sha256: str = ""

    def __post_init__(self) -> None:
        self.size = self.path.stat().st_size
        if not self.sha256:
            digest = hashlib.sha256()
            with self.path.open("rb") as handle:
                while block := handle.read(1 << 20):
                    digest.update(block)
            self.sha256 = digest.hexdigest()


@dataclass(frozen=True)
class HubRequest:
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class FakeHub:
    repos: dict[str, dict[str, HubFile]] = field(default_factory=dict)
    gated: set[str] = field(default_factory=set)
    token: str = "hf_test_token"
    cut_after: int | None = None
    wrong_sha256: bool = False
    delay: float = 0.0
    hard_timeout: float = 120.0
    # Announce every file as Xet-backed (the headers the Hub sends for Xet
    # storage); this fake serves no Xet endpoint, so only HTTP works.
    xet: bool = False
    etag: str | None = None  # sent as ETag and X-Linked-Etag instead of the sha256
    commit: str | None = None  # sent as X-Repo-Commit instead of COMMIT
    requests: list[HubRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._cut_done: set[str] = set()
        self._server: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()

    # -- set-up ------------------------------------------------------------------
    def add(self, repo_id: str, filename: str, path: Path) -> HubFile:
        entry = HubFile(path)
        self.repos.setdefault(repo_id, {})[filename] = entry
        return entry

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeHub:
        hub = self

        class Handler(_Handler):
            fake = hub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        timer = threading.Timer(self.hard_timeout, self._server.shutdown)
        timer.daemon = True
        timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def downloads(self) -> list[HubRequest]:
        return [r for r in self.requests if r.method == "GET" and "/resolve/" in r.path]

    # -- answers -----------------------------------------------------------------
    def announced_sha(self, entry: HubFile) -> str:
        return ("0" * 64) if self.wrong_sha256 else entry.sha256

    def authorised(self, repo_id: str, headers: dict[str, str]) -> bool:
        if repo_id not in self.gated:
            return True
        return headers.get("authorization", "") == f"Bearer {self.token}"

    def should_cut(self, key: str) -> bool:
        with self._lock:
            if self.cut_after is None or key in self._cut_done:
                return False
            self._cut_done.add(key)
            return True


_INFO = re.compile(r"^/api/models/([^/]+/[^/]+?)(?:/revision/([^/]+))?/?$")
_RESOLVE = re.compile(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")


class _Handler(BaseHTTPRequestHandler):
    fake: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _record(self) -> tuple[str, dict[str, str]]:
        path = unquote(urlsplit(self.path).path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.fake.requests.append(HubRequest(self.command, path, headers))
        return path, headers

    def _error(self, status: int, code: str, message: str, *, body: bool = True) -> None:
        data = json.dumps({"error": message}).encode() if body else b""
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data and self.command != "HEAD":
            self.wfile.write(data)

    def do_GET(self) -> None:
        path, headers = self._record()
        info = _INFO.match(path)
        if info is not None:
            self._model_info(info.group(1))
            return
        self._resolve(path, headers, send_body=True)

    def do_HEAD(self) -> None:
        path, headers = self._record()
        self._resolve(path, headers, send_body=False)

    def _model_info(self, repo_id: str) -> None:
        files = self.fake.repos.get(repo_id)
        if files is None:
            self._error(404, "RepoNotFound", "Repository not found")
            return
        siblings = [
            {
                "rfilename": name,
                "size": entry.size,
                "blobId": entry.sha256[:40],
                "lfs": {"size": entry.size, "sha256": self.fake.announced_sha(entry),
                        "pointerSize": 134},
            }
            for name, entry in files.items()
        ]
        data = json.dumps({"id": repo_id, "sha": COMMIT, "siblings": siblings,
                           "gated": repo_id in self.fake.gated}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _resolve(self, path: str, headers: dict[str, str], *, send_body: bool) -> None:
        match = _RESOLVE.match(path)
        if match is None:
            self._error(404, "RepoNotFound", "Not found", body=send_body)
            return
        repo_id, _rev, filename = match.groups()
        files = self.fake.repos.get(repo_id)
        if files is None:
            self._error(404, "RepoNotFound", "Repository not found", body=send_body)
            return
        if not self.fake.authorised(repo_id, headers):
            self._error(401, "GatedRepo", "Access to this model is restricted", body=send_body)
            return
        entry = files.get(filename)
        if entry is None:
            self._error(404, "EntryNotFound", "Entry not found", body=send_body)
            return
        sha = self.fake.announced_sha(entry)
        start = 0
        ranged = re.match(r"bytes=(\d+)-", headers.get("range", ""))
        if send_body and ranged:
            start = int(ranged.group(1))
        self.send_response(206 if start else 200)
        etag = self.fake.etag if self.fake.etag is not None else sha
        self.send_header("X-Repo-Commit", self.fake.commit or COMMIT)
        self.send_header("ETag", f'"{etag}"')
        self.send_header("X-Linked-Etag", f'"{etag}"')
        self.send_header("X-Linked-Size", str(entry.size))
        if self.fake.xet:
            self.send_header("X-Xet-Hash", sha)
            self.send_header("X-Xet-Refresh-Route",
                             f"/api/models/{repo_id}/xet-read-token/{COMMIT}")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")
        if start:
            self.send_header("Content-Range", f"bytes {start}-{entry.size - 1}/{entry.size}")
        self.send_header("Content-Length", str(entry.size - start))
        self.end_headers()
        if not send_body:
            return
        cut = self.fake.cut_after if self.fake.should_cut(f"{repo_id}/{filename}") else None
        sent = 0
        with entry.path.open("rb") as handle:
            handle.seek(start)
            while block := handle.read(_CHUNK):
                if cut is not None and sent + len(block) > cut:
                    self.wfile.write(block[: max(0, cut - sent)])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                try:
                    self.wfile.write(block)
                except (BrokenPipeError, ConnectionResetError):
                    return
                sent += len(block)
                if self.fake.delay:
                    time.sleep(self.fake.delay)
