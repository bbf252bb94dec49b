"""The agent: its bundle, the orchestrator, one turn's loop, its tool calls,
hooks, guards and endings."""
