"""The ids of suggestions served (inline completions, next edits), so that
an accept command is counted once per served suggestion. Bounded: an id
older than the last `limit` served is forgotten and its accept not counted."""

from __future__ import annotations

import itertools
from collections import OrderedDict


class ServedIds:
    def __init__(self, prefix: str = "", limit: int = 512) -> None:
        self._accepted: OrderedDict[str, bool] = OrderedDict()  # id -> accepted
        self._ids = itertools.count(1)
        self._prefix = prefix
        self._limit = limit

    def new(self) -> str:
        served_id = f"{self._prefix}{next(self._ids)}"
        self._accepted[served_id] = False
        if len(self._accepted) > self._limit:
            self._accepted.popitem(last=False)
        return served_id

    def accept(self, served_id: str) -> bool:
        """True the first time a served id is accepted."""
        if self._accepted.get(served_id) is not False:
            return False
        self._accepted[served_id] = True
        return True
