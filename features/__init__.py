"""Built-in feature, tool and hook plugins (entry-point groups `agentls.features`, `agentls.tools`)."""
