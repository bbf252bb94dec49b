"""Exercism's Python practice exercises run through the real server, two
tries each, as Aider's benchmark runs them (bench/bench_exercism.py)."""
