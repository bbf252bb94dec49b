"""What enriches a chat prompt: `@file:` mentions, the files it names, `/` templates."""
