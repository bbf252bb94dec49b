"""The agent kernel: types, hooks, plugins, the turn loop, sessions, settings.

`core` imports neither pygls nor httpx (docs/architecture.md, "Dependency direction").
"""
