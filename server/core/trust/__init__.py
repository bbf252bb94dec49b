"""Workspace trust: what a workspace file asks for, the question, and the answers kept."""
