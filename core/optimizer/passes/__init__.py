"""Optimizer passes: each module has one job and a `run(ctx) -> bool` (True when it changed
the graph)."""
