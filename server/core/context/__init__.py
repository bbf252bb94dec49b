"""A request that fits the model's window: token counts, project instructions,
the system prompt, compaction."""
