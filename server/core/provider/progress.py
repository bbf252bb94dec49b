"""Long-running work the user should see: model downloads and loads.

The interface a provider reports through; the LSP layer implements it with
work-done progress (window/workDoneProgress/create + $/progress), the CLI
with a terminal bar. Free of pygls so providers and core can use it.

Called on the event loop's thread only (a download thread hands its byte
counts over with call_soon_threadsafe).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["NullProgress", "ProgressSink", "ProgressTask"]


class ProgressTask(Protocol):
    def report(
        self,
        *,
        message: str | None = None,
        percentage: int | None = None,
        done_bytes: int | None = None,
        total_bytes: int | None = None,
    ) -> None: ...

    def end(self, message: str = "", *, error: str | None = None) -> None:
        """Finish; `error` (shown to the user as one) when the work failed."""
        ...


class ProgressSink(Protocol):
    def begin(
        self,
        title: str,
        *,
        message: str = "",
        on_cancel: Callable[[], None] | None = None,
    ) -> ProgressTask:
        """Start showing work; `on_cancel` set means the user may cancel it."""
        ...


class _NullTask:
    def report(
        self,
        *,
        message: str | None = None,
        percentage: int | None = None,
        done_bytes: int | None = None,
        total_bytes: int | None = None,
    ) -> None:
        return None

    def end(self, message: str = "", *, error: str | None = None) -> None:
        return None


class NullProgress:
    """Shows nothing (tests, `agentls check`)."""

    def begin(
        self,
        title: str,
        *,
        message: str = "",
        on_cancel: Callable[[], None] | None = None,
    ) -> ProgressTask:
        return _NullTask()
