"""Inline completion (ghost text while typing): the `inline-completion`
feature plugin. See feature.py for the path a request takes."""

from .feature import InlineAnswer, InlineCompletionFeature, InlineRequest
from .neighbours import OpenDocument

__all__ = ["InlineAnswer", "InlineCompletionFeature", "InlineRequest", "OpenDocument"]
