"""Experiments on workloads and scripts: health, diagnose, sweep, transfer, CUDA Graphs, the demo."""
