"""Plugins: the protocols, the entry-point registry, feature capabilities and hook dispatch."""
