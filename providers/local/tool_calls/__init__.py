"""Tool calls of the local models: the GGUF's native format, its chat template,
and a JSON grammar for models without one."""
