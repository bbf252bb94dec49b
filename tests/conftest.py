"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.http_backend import FakeBackend


@pytest.fixture
def fake_backend() -> Iterator[FakeBackend]:
    """A loopback fake model server (tests/fakes/http_backend.py), stopped after the test."""
    with FakeBackend() as backend:
        yield backend
