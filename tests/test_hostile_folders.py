"""Run folders left behind by runs that did not end well: perfcore killed with its script, Ctrl-C
while it wrote, a script killed before it wrote anything; and files that are not what they seem (a
FIFO as run.json, a folder perfcore may not rewrite). `report` reads what can be read, finishes what
can be finished, and says in one line what cannot."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def perfcore(*args, env=None):
    return subprocess.run([sys.executable, "-m", "perfcore.cli", *args], capture_output=True, text=True,
                          env=env, timeout=180)


def finished_run(out: Path) -> Path:
    p = perfcore("run", "--warmup", "1", "--out", str(out), "--", sys.executable, str(SCRIPTS / "exits.py"))
    assert p.returncode == 0, p.stderr
    return out


def test_report_finishes_a_folder_whose_perfcore_died_after_the_script(tmp_path):
    out = finished_run(tmp_path / "r")
    for f in out.iterdir():  # as perfcore left it when killed before it wrote the run folder
        if f.is_file() and not f.name.startswith("."):
            f.unlink()
    p = perfcore("report", str(out))
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "run.json").read_text())
    notes = [n for n in doc["notes"] if isinstance(n, dict)]  # finishing's notes: codes with their figures
    assert doc["steps"] == 7 and any(n["code"] == "finished_afterwards" for n in notes)
    assert "finished it from the parts" in p.stderr


def test_report_finishes_a_folder_from_the_checkpoint_when_perfcore_and_script_were_killed(tmp_path):
    out = tmp_path / "r"
    proc = subprocess.Popen([sys.executable, "-m", "perfcore.cli", "run", "--warmup", "0", "--out", str(out),
                             "--test-setting", "checkpoint_s=0.2", "--",
                             sys.executable, str(SCRIPTS / "until_stopped.py")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout.readline().strip() == "TRAINING"
    deadline = time.monotonic() + 60
    while not list(out.glob("parts/*/checkpoint/run.json")) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)  # perfcore and its script, at once
    proc.communicate(timeout=30)
    assert not (out / "run.json").exists()
    # What the killed perfcore could not remove: its settings file and the claim beside it; and a file of the
    # user's that only looks like one, which perfcore never listed as its own.
    left = sorted(p.name for p in out.glob(".perfcore-child-*"))
    assert len(left) == 2 and left[0].endswith(".json") and left[1].endswith(".outer"), left
    (out / ".perfcore-child-mine.json").write_text('{"mine": true}')
    compare = perfcore("compare", str(out), str(out))
    assert compare.returncode == 2 and f"perfcore report {out} finishes it" in compare.stderr, compare.stderr
    p = perfcore("report", str(out))
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "run.json").read_text())
    assert doc["steps"] >= 20 and doc["exit_code"] == 137
    assert sorted(p.name for p in out.glob(".perfcore-child-*")) == [".perfcore-child-mine.json"]


def test_report_on_a_marked_folder_whose_script_left_nothing_says_so(tmp_path):
    p = perfcore("run", "--out", str(tmp_path / "r"), "--", sys.executable, str(SCRIPTS / "exits.py"), "signal",
                 "SIGKILL")
    assert p.returncode == 137
    shutil.rmtree(tmp_path / "r" / "parts", ignore_errors=True)  # killed before its first part, as with a SIGKILL early on
    rep = perfcore("report", str(tmp_path / "r"))
    assert rep.returncode == 1, rep.stderr
    (line,) = rep.stderr.strip().splitlines()
    assert "is a perfcore run folder, but its script left no results" in line and "not a perfcore" not in line


def test_a_fifo_as_run_json_is_refused_at_once(tmp_path):
    out = finished_run(tmp_path / "r")
    (out / "run.json").unlink()
    os.mkfifo(out / "run.json")
    p = perfcore("report", str(out))
    assert p.returncode == 2 and "is not a regular file" in p.stderr, p.stderr


def test_report_shows_a_run_whose_plot_cannot_be_rewritten(tmp_path):
    out = finished_run(tmp_path / "r")
    (out / "breakdown.png").unlink()
    (out / "breakdown.png").mkdir()  # a name the plot cannot replace (a read-only copy, for root too)
    (out / "breakdown.png" / "x").write_text("x")
    p = perfcore("report", str(out))
    assert p.returncode == 0, p.stderr
    assert "verdict" in p.stdout.lower() or "step" in p.stdout.lower()
    assert "not rewritten" in p.stderr and "free space" not in p.stderr
