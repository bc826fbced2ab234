"""Every stage that runs the user's command (-- CMD) mirrors a script that crashes after measured
steps as `perfcore run` does: its exit code, and one line saying how it ended (not exit 0 and
numbers that look complete); a sweep records the configuration as crashed, with the script's error."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from perfcore.report.words.runs import config_failure

SCRIPT = str(Path(__file__).resolve().parent / "scripts" / "crash_after.py")
CRASH = "the script crashed (ValueError: bad batch 15; exit 1) after"


def triage(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", *args, "--out", str(out), "--", sys.executable, SCRIPT,
                        "15"], capture_output=True, text=True, timeout=400)
    return p, out


def test_health_of_a_script_that_crashes_exits_with_its_code_and_says_so(tmp_path):
    p, out = triage(tmp_path, "health", "--steps", "30")
    assert p.returncode == 1, p.stderr
    (line,) = [ln for ln in p.stdout.splitlines() if ln.startswith(CRASH)]
    assert "measured steps: these results are partial" in line
    doc = json.loads((out / "health.json").read_text())
    # The document keeps the facts (code, reason); the line is the report's.
    assert doc["script_exit"]["code"] == 1 and doc["script_exit"]["steps"] > 0, doc["script_exit"]


def test_diagnose_of_a_script_that_crashes_exits_with_its_code_and_says_where(tmp_path):
    p, out = triage(tmp_path, "diagnose", "--steps", "30", "--warmup", "2")
    assert p.returncode == 1, p.stderr
    (line,) = [ln for ln in p.stderr.splitlines() if ln.startswith(CRASH)]  # the report is on stderr, as run's
    assert "in the baseline" in line
    assert json.loads((out / "diagnose.json").read_text())["script_exit"]["code"] == 1


def test_sweep_records_a_configuration_whose_script_crashes_as_crashed(tmp_path):
    p, out = triage(tmp_path, "sweep", "--num-workers", "0", "--steps", "30", "--warmup", "2")
    assert p.returncode == 1, p.stderr  # no configuration measured fine
    (cfg,) = json.loads((out / "sweep.json").read_text())["configs"]
    assert cfg["status"] == "crashed" and cfg["reason"] == "failed_partway" and config_failure(cfg).startswith(CRASH)
    assert "no configuration could be measured (first: crashed: the script crashed (ValueError" in p.stderr
