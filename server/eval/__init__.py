"""`agentls eval`: completion quality on real code (completion/) and agent
turns on small repository tasks (agent/), both through the real language
server. bench/eval_completions.py runs it on installed packages."""
