"""`agentls eval`: measure inline completion on real code (tasks.py cuts
the tasks, runner.py runs them through the language server, report.py
scores them). bench/eval_completions.py runs it on installed packages."""
