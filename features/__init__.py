"""Built-in feature, tool and hook plugins.

Entry-point groups: `agentls.features` and `agentls.tools`.
"""
