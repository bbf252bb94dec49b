"""The `anthropic` provider: the Messages API."""
