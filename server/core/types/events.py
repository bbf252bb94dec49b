"""Hook event names (`namespace:action`, exactly one colon).

The names are public (the hooks API the core implements lists them all), so
each is emitted, none is dropped. Every payload carries `session_id` and
`timestamp`; tool:pre carries `tool_name` and `tool_input`, tool:post adds
`result`, tool:error adds `error`.

Where each is emitted, and what else its payload holds:

- session:start / session:resume: a turn begins in a new / stored session.
- session:end: a session this process ran stops being served (the server
  shuts down, or the session is deleted); `reason`.
- prompt:submit (`prompt`), prompt:complete (`usage`).
- provider:request (`iteration`, `model`, `message_count`),
  provider:response (`iteration`, `finish_reason`, `usage`, `tool_calls`),
  provider:error (`error`, `code`, `iteration`).
- content_block:start (`index`, `block_type`: "text" or "thinking"),
  content_block:delta (`delta`, text blocks), content_block:end (`index`,
  `block_type`, `text`): one block per run of streamed text or reasoning of
  a model call; `index` is the assistant message's index in the session,
  as in agentls/messageDelta.
- thinking:delta (`delta`) per streamed reasoning chunk; thinking:final
  (`text`) once per model call that reasoned.
- tool:pre / tool:post / tool:error, as above.
- context:pre_compact / context:post_compact (core/context/fitting.py).
- orchestrator:complete (`status`, `usage`): the turn ended.
- user:notification (`message`, `level`): the turn shows the user a message
  (a hook's user_message, a provider notice, a stream cut short).
- approval:required / granted / denied (`tool_name`, ...).
- cancel:requested / cancel:completed.
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
