"""File changes a model writes in its reply, turned into approved edits."""
