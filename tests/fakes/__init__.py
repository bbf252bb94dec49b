"""Reusable fakes for tests: `http_backend` is a loopback fake model server."""
