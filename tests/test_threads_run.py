"""Threads that outnumber the CPUs a script may run on are diagnosed, in a real run, with their fix:
the child records torch's thread count and the process's CPU affinity, and the try line names
torch.set_num_threads with the count that fits."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent / "scripts"


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity cannot be set on this platform")
def test_four_threads_on_one_cpu_are_told_to_fit_it(tmp_path):
    cpu = min(os.sched_getaffinity(0))
    out = tmp_path / "r"
    cmd = [sys.executable, "-m", "perfcore.cli", "run", "--out", str(out), "--warmup", "2", "--",
           sys.executable, str(SCRIPTS / "threads_spin.py"), "4", "30"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                       preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads((out / "run.json").read_text())
    assert doc["threads"]["torch"] == 4 and doc["threads"]["cpus"] == 1
    over = doc["verdict"]["oversubscribed"]
    assert over["own"] is True and over["fits"] == 1 and over["threads"] == 4
    assert any(f["kind"] == "set_num_threads" for f in doc["findings"])
    assert "try: torch.set_num_threads(1): 4 threads" in p.stderr


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity cannot be set on this platform")
def test_one_thread_on_one_cpu_is_not_told_to_change(tmp_path):
    cpu = min(os.sched_getaffinity(0))
    out = tmp_path / "r"
    cmd = [sys.executable, "-m", "perfcore.cli", "run", "--quiet", "--out", str(out), "--warmup", "2", "--",
           sys.executable, str(SCRIPTS / "threads_spin.py"), "1", "30"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                       preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads((out / "run.json").read_text())
    assert doc["threads"]["torch"] == 1 and doc["verdict"]["oversubscribed"] is None
    assert all(f["kind"] != "set_num_threads" for f in doc["findings"])
