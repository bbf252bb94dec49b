"""Which models the `local` provider runs: the packaged ones, `hf:` downloads,
the GGUF header, the listing."""
