"""agentls: a language server that hosts an AI agent core inside the editor."""

__version__ = "0.1.0"
