"""Suggestions while the user types: inline completion, next edits, `@` and `/` completions."""
