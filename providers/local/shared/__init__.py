"""One set of local models per user: the model host (host.py), the process
every agentls of the user shares the children through, and the agentls side
of it (link.py: finding, checking and starting the host; a child held
through it)."""
