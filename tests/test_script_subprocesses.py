"""Pythons a script starts itself (subprocess.call([sys.executable, ...]), a spawned Pool) are not
ranks: the run stays one process's, with the others listed apart."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent / "scripts"


@pytest.mark.parametrize("how,others", [("subprocess", 1), ("pool", 2)])
def test_a_scripts_own_pythons_are_not_ranks(tmp_path, how, others):
    out = tmp_path / "r"
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--out", str(out), "--warmup", "1", "--",
                        sys.executable, str(SCRIPTS / "helper_python.py"), how, "12"],
                       capture_output=True, text=True, timeout=300,
                       # A marker left by a session in the launching process belongs to another run.
                       env=dict(os.environ, PERFCORE_OUTER_PID=f"{os.getpid()}@/another/run"))
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "run.json").read_text())
    assert doc["steps"] + doc["warmup_steps"] == 12  # the script's own loop, not its helper's
    assert not doc.get("world_size") and not doc.get("ranks") and not doc.get("stragglers")
    (note,) = [n for n in doc["notes"] if "measured apart" in n]
    assert note.startswith(f"{others} other Python process(es) the script started")


def test_merge_of_two_unrelated_runs_says_they_are_not_one_job(tmp_path):
    outs = []
    for k in range(2):
        out = tmp_path / f"r{k}"
        p = subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--out", str(out), "--warmup", "1", "--",
                            sys.executable, str(SCRIPTS / "plain_tensors.py"), "autograd", "12"],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        outs.append(str(out))
    m = subprocess.run([sys.executable, "-m", "perfcore.cli", "merge", *outs, "--out", str(tmp_path / "m")],
                       capture_output=True, text=True, timeout=120)
    assert m.returncode == 2, (m.stdout, m.stderr)
    assert "not a rank of one distributed job" in m.stderr and len(m.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "m").exists()


def test_hogwild_processes_that_train_are_the_run_and_the_evaluating_parent_is_not(tmp_path):
    # pytorch/examples mnist_hogwild's shape: two spawned processes train the shared model, then the
    # parent only runs test() under no_grad. The training processes are the run (merged), the
    # parent's forward passes are no steps of it, and a note says which process only evaluated.
    out = tmp_path / "r"
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--out", str(out), "--warmup", "1", "--",
                        sys.executable, str(SCRIPTS / "hogwild.py"), "2"],
                       capture_output=True, text=True, timeout=400)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.count("TRAINED 24") == 2 and "TESTED" in p.stdout
    doc = json.loads((out / "run.json").read_text())
    assert doc["step_source"] == "optimizer"
    assert sorted(r["steps"] for r in doc["ranks"]) == [23, 23]  # each child's 24 steps, 1 of them warm-up
    assert doc["steps"] + doc["warmup_steps"] == 24
    assert any("stepped no optimizer while other processes trained (evaluation only)" in n for n in doc["notes"])
    assert not any("measured apart" in n for n in doc["notes"])
