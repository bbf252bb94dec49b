"""Built-in model providers (entry-point group `agentls.providers`)."""
