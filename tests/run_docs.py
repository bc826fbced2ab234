"""Synthetic run folders for tests: run.json and steps.csv built by the real attribution from hand-made
intervals (no training, no clock), so readers and commands are tested on exactly what perfcore writes."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from perfcore.analysis.attribution import step_table, summarize
from perfcore.report import jsonio


def run_doc_and_steps(steps: int = 6, warmup: int = 1, load_ms: float = 4.0, compute_ms: float = 6.0):
    """Each step: load_ms waiting for data, then compute_ms computing."""
    n = steps + warmup
    step_ns = int((load_ms + compute_ms) * 1e6)
    s0 = np.arange(n, dtype=np.int64) * step_ns
    s1 = s0 + step_ns
    load_end = s0 + int(load_ms * 1e6)
    table = step_table(s0, s1, {"load": (s0, load_end), "compute": (load_end, s1)}, warmup=warmup)
    doc = summarize(table, on_gpu=False, backend="host", device="cpu")
    doc.update(pid=4242, rank=None, host="testhost")
    return doc, table


def write_run_folder(path: Path, **kw) -> Path:
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    doc, table = run_doc_and_steps(**kw)
    jsonio.write(path / "run.json", doc)
    table.to_csv(path / "steps.csv", index=False)
    return path
