"""What the agent and the suggestions need of the editor: edits, positions,
documents, the user's edit history, and the contracts of the editor
features."""
