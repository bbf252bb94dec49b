"""The ids of suggestions served (inline completions, next edits), so that
an accept command (or a shown or partial-accept notice) is counted once per
served suggestion. Bounded: an id older than the last `limit` served is
forgotten and its accept not counted."""

from __future__ import annotations

import itertools
from collections import OrderedDict


class ServedIds:
    def __init__(self, prefix: str = "", limit: int = 512) -> None:
        self._marks: OrderedDict[str, set[str]] = OrderedDict()  # id -> what happened
        self._ids = itertools.count(1)
        self._prefix = prefix
        self._limit = limit

    def new(self) -> str:
        served_id = f"{self._prefix}{next(self._ids)}"
        self._marks[served_id] = set()
        if len(self._marks) > self._limit:
            self._marks.popitem(last=False)
        return served_id

    def accept(self, served_id: str) -> bool:
        """True the first time a served id is accepted."""
        return self.mark(served_id, "accepted")

    def mark(self, served_id: str, event: str) -> bool:
        """True the first time `event` happens to a served id."""
        marks = self._marks.get(served_id)
        if marks is None or event in marks:
            return False
        marks.add(event)
        return True
