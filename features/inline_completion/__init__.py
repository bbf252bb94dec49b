"""Inline completion (ghost text while typing): the `inline-completion`
feature plugin. See feature.py for the path a request takes."""

from agentls.core.editor.inline_completion import InlineAnswer, InlineRequest, OpenDocument
from agentls.features.inline_completion.feature import InlineCompletionFeature

__all__ = ["InlineAnswer", "InlineCompletionFeature", "InlineRequest", "OpenDocument"]
