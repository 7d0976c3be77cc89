"""Execution providers: the interface, the CPU provider, and discovery through entry points."""
