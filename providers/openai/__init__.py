"""The `openai` provider: OpenAI-compatible servers (chat, completions, FIM)."""
