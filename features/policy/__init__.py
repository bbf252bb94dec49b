"""The approval policy: confinement, protected and secret paths, the user's rules."""
