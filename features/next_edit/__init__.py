"""Next edit suggestions (textDocument/copilotInlineEdit): the `next-edit`
feature plugin. See feature.py for the path a request takes."""

from agentls.features.next_edit.feature import NextEditFeature

__all__ = ["NextEditFeature"]
