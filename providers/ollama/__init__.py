"""The `ollama` provider: Ollama's native API."""
