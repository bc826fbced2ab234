"""The verdict and advice of `perfcore run` on unmodified scripts, end to end."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def test_a_leak_is_named_with_its_rate_and_onset(tmp_path):
    out = tmp_path / "r"
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--explain", "--warmup", "2", "--out", str(out),
                        "--",
                        sys.executable, str(HERE / "realworld" / "leaky.py")], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "run.json").read_text())
    mem = doc["memory"]
    assert mem["probable_leak"], mem
    # 4 MiB kept per step; peak RSS (sampled every few steps on CPU) rises by about that.
    assert 3.0 * 2**20 <= mem["growth_bytes_per_step"] <= 5.5 * 2**20, mem
    from run_docs import advice_said, run_of_json

    said = advice_said(run_of_json(doc))
    leak = next(evidence for kind, _, evidence in said if kind == "memory_leak")
    assert leak.startswith(f"probable leak: process memory (RSS) rises "
                           f"{mem['growth_bytes_per_step'] / 2**20:.2f} MB per step from step "
                           f"{mem['leak_from_step']}")
    assert "Probable leak: process memory (RSS) rises" in p.stderr
    for _, text, _ in said:
        assert "timer." not in text
