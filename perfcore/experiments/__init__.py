"""Experiments: health, diagnose, sweep (and, on a GPU, transfer and graph)."""
