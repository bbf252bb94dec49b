"""Settings: the schema, the keys as sources spell them, the sources, validation and loading."""
