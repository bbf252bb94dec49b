"""The kernel's data types: messages, the conversation, errors, hook event names."""
