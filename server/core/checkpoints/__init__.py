"""Checkpoints: the files of a turn recorded, stored, and put back."""
