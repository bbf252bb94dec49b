"""Agent turns over LSP: chat, its prompt, approvals and edits through the
editor, checkpoints, compaction, code actions."""
