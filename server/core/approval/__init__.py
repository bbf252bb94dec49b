"""The approval gate, the one place a tool call is allowed, asked or refused,
and its long questions as documents."""
