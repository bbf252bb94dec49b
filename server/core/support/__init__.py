"""Small shared mechanisms: log redaction, process groups, size caps, the state folder."""
