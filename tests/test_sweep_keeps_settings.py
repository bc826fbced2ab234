"""`sweep -- CMD` over num_workers only keeps the script's own batch size and pin_memory, and lists
every value it replaced."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parent / "scripts" / "loader_settings.py"


def test_a_sweep_over_workers_keeps_the_scripts_batch_size_and_pin_memory(tmp_path):
    out = tmp_path / "s"
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "sweep", "--num-workers", "0,1", "--steps", "8",
                        "--warmup", "2", "--out", str(out), "--", sys.executable, str(SCRIPT)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["script_settings"] == {"batch_size": 8, "num_workers": 0, "pin_memory": True, "prefetch_factor": None}
    assert doc["kept"] == {"batch_size": 8, "pin_memory": True, "prefetch_factor": None}
    rows = {r["num_workers"]: r for r in doc["configs"]}
    assert set(rows) == {0, 1} and all(r["status"] == "ok" for r in rows.values())
    assert all(r["batch_size"] == 8 and r["pin_memory"] is True for r in rows.values())
    assert rows[0]["replaced"] is None and rows[1]["replaced"] == "num_workers 0->1"
    # What each configuration's DataLoader really was, as its own run recorded it.
    for i in range(2):
        (ld,) = json.loads((out / f"config{i}" / "run.json").read_text())["loaders"]
        assert ld["batch_size"] == 8 and ld["pin_memory"] is True and ld["num_workers"] == i
    best = next(line for line in p.stdout.splitlines() if line.startswith("best:"))
    assert "batch_size=8" in best and "pin_memory=True" in best
    if doc["best"]["num_workers"] == 0:
        assert "prefetch_factor" not in best
    else:
        assert "prefetch_factor=2 " in best and "(replaced: num_workers 0->1)" in best
    assert "kept as the script sets them: batch_size=8 pin_memory=True" in p.stdout
    assert "replaced: num_workers 0->1" in p.stdout
