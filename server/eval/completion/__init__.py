"""`agentls eval`: inline completion and next edit quality on real code and HumanEval."""
