"""Hook event names (`namespace:action`, exactly one colon).

Every payload carries `session_id` and `timestamp`; tool:pre carries
`tool_name` and `tool_input`, tool:post adds `result`, tool:error adds `error`.
"""

from __future__ import annotations

SESSION_START = "session:start"
SESSION_END = "session:end"
SESSION_RESUME = "session:resume"

PROMPT_SUBMIT = "prompt:submit"
PROMPT_COMPLETE = "prompt:complete"

PROVIDER_REQUEST = "provider:request"
PROVIDER_RESPONSE = "provider:response"
PROVIDER_ERROR = "provider:error"

CONTENT_BLOCK_START = "content_block:start"
CONTENT_BLOCK_DELTA = "content_block:delta"
CONTENT_BLOCK_END = "content_block:end"

THINKING_DELTA = "thinking:delta"
THINKING_FINAL = "thinking:final"

TOOL_PRE = "tool:pre"
TOOL_POST = "tool:post"
TOOL_ERROR = "tool:error"

CONTEXT_PRE_COMPACT = "context:pre_compact"
CONTEXT_POST_COMPACT = "context:post_compact"

ORCHESTRATOR_COMPLETE = "orchestrator:complete"

USER_NOTIFICATION = "user:notification"

APPROVAL_REQUIRED = "approval:required"
APPROVAL_GRANTED = "approval:granted"
APPROVAL_DENIED = "approval:denied"

CANCEL_REQUESTED = "cancel:requested"
CANCEL_COMPLETED = "cancel:completed"

ALL_EVENTS: frozenset[str] = frozenset(
    value for name, value in dict(globals()).items() if name.isupper() and isinstance(value, str)
)


def is_valid_event_name(name: str) -> bool:
    """`namespace:action` with one colon and both parts non-empty."""
    namespace, sep, action = name.partition(":")
    return bool(sep) and bool(namespace) and bool(action) and ":" not in action
