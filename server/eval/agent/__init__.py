"""`agentls eval --agent`: small repository tasks run through the real server,
judged by each task's check."""
