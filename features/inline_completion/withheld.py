"""Which editor buffers' text may not go to the model for inline completion:
the secret-file rule read_file asks for (features/policy/sensitive.py
`buffer_withheld`: `.env`, keys, credentials, also through a symlink), so
typing in a `.env` sends nothing, and an open `.env` tab is never a
neighbouring snippet for another file.

Each URI is checked once (a buffer's name does not change; a renamed file
is a new URI). The rule's module (wcmatch and the pattern tables, ~35 ms
to import) is loaded in a worker thread on the first check, which runs
while the request debounces, so the keystroke path does not import it on
the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

__all__ = ["WithheldBuffers"]

_LIMIT = 1024  # URIs remembered; forgotten all at once past it


def _withheld(uri: str) -> str | None:
    from agentls.features.policy.sensitive import buffer_withheld

    return buffer_withheld(uri)


class WithheldBuffers:
    def __init__(self) -> None:
        self._known: dict[str, str | None] = {}

    def start(self, uri: str) -> Awaitable[str | None] | str | None:
        """Why `uri` is withheld (None: it is not), or an awaitable of it
        when this URI was never checked: the check runs in a thread."""
        if uri in self._known:
            return self._known[uri]
        return asyncio.ensure_future(self._check(uri))

    async def _check(self, uri: str) -> str | None:
        reason = await asyncio.to_thread(_withheld, uri)
        self._remember(uri, reason)
        return reason

    def now(self, uri: str) -> str | None:
        """The same answer, on the calling thread (for neighbours, after the
        current document's check loaded the rule)."""
        if uri not in self._known:
            self._remember(uri, _withheld(uri))
        return self._known[uri]

    def _remember(self, uri: str, reason: str | None) -> None:
        if len(self._known) >= _LIMIT:
            self._known.clear()
        self._known[uri] = reason
