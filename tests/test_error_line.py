"""Errors in one line: the script's exception is reported as its type and its message's first line,
at most 200 characters; the whole traceback is in the run folder (`perfcore run` on a loop whose
error message is ~1,500 characters over many lines)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "scripts" / "long_error.py"


def test_the_scripts_error_is_one_short_line_and_the_rest_is_in_the_run_folder(tmp_path):
    out = tmp_path / "r"
    cmd = [
        sys.executable,
        "-m",
        "perfcore.cli",
        "run",
        "--out",
        str(out),
        "--warmup",
        "1",
        "--",
        sys.executable,
        str(SCRIPT),
        "6",
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stderr[-3000:]
    doc = json.loads((out / "run.json").read_text())
    exc = doc["exit"]["exception"]
    assert exc.startswith("RuntimeError: mat1 and mat2 shapes cannot be multiplied") and len(exc) <= 200
    assert "\n" not in exc and "frame 3" not in exc
    # perfcore's own lines quote that one line, never the flattened message.
    ours = [line for line in p.stderr.splitlines() if line.startswith("perfcore") or "crashed" in line]
    assert any(exc in line for line in ours), p.stderr[-3000:]
    assert not any("frame 3" in line for line in ours)
    trace = (out / doc["exit"]["traceback"]).read_text()
    assert "Traceback (most recent call last)" in trace and "frame 14: " in trace and "long_error.py" in trace


def test_under_torchrun_the_error_is_the_failing_ranks_own(tmp_path):
    # Rank 1 raises; rank 0 then fails on the closed connection and torchrun prints its banner. The
    # job's error is rank 1's own exception, the first to reach the top.
    torchrun = Path(sys.executable).parent / "torchrun"
    if not torchrun.is_file():
        import pytest

        pytest.skip("torchrun not installed next to this Python")
    out = tmp_path / "r"
    ddp = Path(__file__).resolve().parent / "scripts" / "ddp_train.py"
    cmd = [sys.executable, "-m", "perfcore.cli", "run", "--warmup", "2", "--out", str(out), "--",
           str(torchrun), "--nproc_per_node=2", str(ddp), "--crash-rank", "1", "--crash-at", "10"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    assert p.returncode != 0
    doc = json.loads((out / "run.json").read_text())
    assert doc["exit"]["exception"] == "rank 1: RuntimeError: rank 1 crashed on purpose"
    assert "the script crashed (rank 1: RuntimeError: rank 1 crashed on purpose; exit 1)" in p.stderr
    assert "rank 1 crashed on purpose" in (out / doc["exit"]["traceback"]).read_text()


def test_terminal_colours_in_a_message_are_no_part_of_its_line():
    from perfcore.run.child.stop import first_line

    err = ValueError("\x1b[31m\x1b[1mconfig.json has no vocab_size\x1b[0m\n\nsee the docs")
    assert first_line(ValueError, err) == "ValueError: config.json has no vocab_size …"
    assert first_line(ValueError, ValueError("\x1b[1m\nthe message")) == "ValueError: the message"
