"""Inline completion (ghost text while typing): the `inline-completion`
feature plugin. See feature.py for the path a request takes."""

from agentls.features.inline_completion.feature import (
    InlineAnswer,
    InlineCompletionFeature,
    InlineRequest,
)
from agentls.features.inline_completion.neighbours import OpenDocument

__all__ = ["InlineAnswer", "InlineCompletionFeature", "InlineRequest", "OpenDocument"]
