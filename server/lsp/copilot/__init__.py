"""The dialect of GitHub's Copilot language server, spoken beside the
standard one to the editor plugins written for it (copilot.lua,
copilot.vim, copilot.el, LSP-copilot; docs/copilot-plugins.md).
`dialect.py` recognises such a client and answers its account and status
methods; `completions.py` serves its completion methods from the same
inline-completion feature; `conversation.py` its chat."""
