"""Sessions and their messages in SQLite, and the statuses of the sessions this process runs."""
