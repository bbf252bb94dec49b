"""Model downloads in the background, one per Hugging Face reference.

Process-wide on purpose: a settings change rebuilds the provider, and a
download half done must survive that (the new provider finds the same job).
Each job runs hub.download() in its own thread, so the editor never waits
on the network; its byte counts reach the progress sink on the event loop
(call_soon_threadsafe), at most every 0.2 s or each whole percent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import agentls.providers.local.models.hub as hub
from agentls.core.provider.progress import NullProgress, ProgressSink, ProgressTask
from agentls.core.types.errors import ModelError

logger = logging.getLogger("agentls.providers.local")

JobState = Literal["downloading", "verifying", "ready", "failed", "cancelled"]
_REPORT_EVERY = 0.2  # seconds between progress notifications


@dataclass
class DownloadJob:
    ref: hub.HfReference
    state: JobState = "downloading"
    done_bytes: int = 0
    total_bytes: int | None = None
    filename: str | None = None
    path: Path | None = None
    error: ModelError | None = None
    # the settings that name this model (`model`, `inlineCompletion.model`...)
    settings: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    cancel_event: threading.Event = field(default_factory=threading.Event)
    finished: asyncio.Event = field(default_factory=asyncio.Event)

    def cancel(self) -> None:
        self.cancel_event.set()

    @property
    def percentage(self) -> int | None:
        if not self.total_bytes:
            return None
        return min(100, int(self.done_bytes * 100 / self.total_bytes))

    def to_wire(self) -> dict[str, object]:
        return {
            "model": self.ref.display,
            "file": self.filename,
            "state": self.state,
            "doneBytes": self.done_bytes,
            "totalBytes": self.total_bytes,
            "percentage": self.percentage,
            "path": str(self.path) if self.path else None,
            "error": self.error.message if self.error else None,
        }


class DownloadManager:
    def __init__(self) -> None:
        self.jobs: dict[str, DownloadJob] = {}

    def job(self, ref: hub.HfReference) -> DownloadJob | None:
        return self.jobs.get(ref.display)

    def start(
        self,
        ref: hub.HfReference,
        *,
        settings: Sequence[str] = (),
        sink: ProgressSink | None = None,
        hf_cache: Path | None = None,
        retry: bool = False,
    ) -> DownloadJob:
        """The running (or finished) job for `ref`; a new one when there is
        none, or when the last one failed and `retry` is set. On the loop."""
        current = self.jobs.get(ref.display)
        if current is not None:
            current.settings += [name for name in settings if name not in current.settings]
        gone = current is not None and current.state == "ready" and not (
            current.path is not None and current.path.is_file()
        )  # deleted from the cache since: fetch it again
        if current is not None and not gone and not (
            retry and current.state in ("failed", "cancelled")
        ):
            return current
        job = DownloadJob(ref, settings=list(current.settings if current else settings))
        self.jobs[ref.display] = job
        loop = asyncio.get_running_loop()
        task = (sink or NullProgress()).begin(
            f"Downloading {ref.display}", message="finding the file", on_cancel=job.cancel
        )
        thread = threading.Thread(
            target=self._run,
            args=(job, loop, task, hf_cache),
            name=f"agentls-download-{ref.repo_id}",
            daemon=True,
        )
        thread.start()
        return job

    def _run(
        self,
        job: DownloadJob,
        loop: asyncio.AbstractEventLoop,
        task: ProgressTask,
        hf_cache: Path | None,
    ) -> None:
        last_sent = [0.0, -1]  # time, percentage

        def on_progress(done: int, total: int | None) -> None:
            job.done_bytes, job.total_bytes = done, total or job.total_bytes
            now = time.monotonic()
            percentage = job.percentage
            if now - last_sent[0] < _REPORT_EVERY and percentage == last_sent[1]:
                return
            last_sent[0], last_sent[1] = now, percentage if percentage is not None else -1
            message = _bytes_message(job)
            with contextlib.suppress(RuntimeError):  # loop closed: nobody to tell
                loop.call_soon_threadsafe(
                    lambda: task.report(
                        message=message,
                        percentage=percentage,
                        done_bytes=job.done_bytes,
                        total_bytes=job.total_bytes,
                    )
                )

        path: Path | None = None
        error: ModelError | None = None
        try:
            remote = hub.resolve(job.ref)
            job.filename, job.total_bytes = remote.filename, remote.size
            path = hub.download(
                job.ref,
                hf_cache=hf_cache,
                on_progress=on_progress,
                cancel=job.cancel_event,
                remote=remote,
            )
        except ModelError as exc:
            error = exc
        except Exception as exc:  # never let a thread die silently
            error = hub.translate_error(job.ref, exc)
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._finish, job, task, path, error)

    def _finish(
        self, job: DownloadJob, task: ProgressTask, path: Path | None, error: ModelError | None
    ) -> None:
        if error is None and path is not None:
            job.state, job.path = "ready", path
            size = path.stat().st_size
            job.done_bytes = job.total_bytes = size
            task.end(f"{job.ref.display}: {job.filename} downloaded ({_mb(size)}), loading it")
            logger.info("local: downloaded %s to %s", job.ref.display, path)
        elif isinstance(error, hub.DownloadCancelled) or job.cancel_event.is_set():
            job.state, job.error = "cancelled", error
            task.end(f"Download of {job.ref.display} cancelled; the previous model keeps serving")
            logger.info("local: download of %s cancelled", job.ref.display)
        else:
            error = _naming_settings(job, error)
            job.state, job.error = "failed", error
            message = error.message
            task.end("Download failed", error=message)
            logger.warning("%s", message)
        job.finished.set()


def _naming_settings(job: DownloadJob, error: ModelError | None) -> ModelError:
    """The failure, saying which settings name the model: the user changes
    one of those, not the hub."""
    if error is None:
        error = ModelError(f"local: downloading {job.ref.display} failed", model=job.ref.text)
    if not job.settings:
        return error
    names = " and ".join(f"`{name}`" for name in job.settings)
    plural = "s" if len(job.settings) > 1 else ""
    return ModelError(
        f"{error.message} ({job.ref.display} is the value of the setting{plural} {names}: "
        "change it there.)",
        model=error.model,
        code=error.code,
    )


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def _bytes_message(job: DownloadJob) -> str:
    """Short, percentage first: VS Code's status-bar progress shows only the
    message (cut to the bar's width), not the percentage field."""
    if job.total_bytes:
        return f"{job.percentage}% · {_mb(job.done_bytes)[:-3]} / {_mb(job.total_bytes)}"
    return f"{_mb(job.done_bytes)} of {job.filename}"


# The one manager of this process (see the module docstring).
DOWNLOADS = DownloadManager()
