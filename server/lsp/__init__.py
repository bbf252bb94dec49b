"""pygls handlers: translate LSP <-> core calls."""
