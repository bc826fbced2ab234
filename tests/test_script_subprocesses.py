"""Pythons a script starts itself (subprocess.call([sys.executable, ...]), a spawned Pool) are not
ranks: the run stays one process's, with the others listed apart."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
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
    # run.json keeps the fact (which processes, their steps); the report says it.
    (note,) = [n for n in doc["notes"] if n["code"] == "measured_apart"]
    assert len(note["figures"]["processes"]) == others
    explain = subprocess.run([sys.executable, "-m", "perfcore.cli", "report", str(out), "--explain"],
                             capture_output=True, text=True, timeout=120)
    assert f"{others} other Python process(es) the script started" in explain.stdout, explain.stdout


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


def check_trainers_merged(p, out, n=2, steps=24, evaluating=True):
    """Hogwild's trainers are the run, together: the headline steps are their sum, the table holds every
    trainer's rows, and nothing says ranks or stragglers (no collective makes one wait for another)."""
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.count(f"TRAINED {steps}") == n
    doc = json.loads((out / "run.json").read_text())
    assert doc["step_source"] == "optimizer"
    assert doc["steps"] + doc["warmup_steps"] == n * steps  # every trainer's steps, 1 warm-up each
    assert [r["steps"] for r in doc["processes"]["training"]] == [steps - 1] * n
    assert not doc.get("ranks") and not doc.get("stragglers") and not doc.get("world_size")
    table = pd.read_csv(out / "steps.csv")
    assert len(table) == n * steps and table["pid"].nunique() == n
    assert (table.groupby("pid")["warmup"].sum() == 1).all()
    assert doc["workers"]["batches"] == n * steps  # the trainers' batches, not the evaluating parent's
    assert [(ld["role"], ld["batches"], ld["made"]) for ld in doc["loaders"]] == [("train", n * steps, n)]
    explain = subprocess.run([sys.executable, "-m", "perfcore.cli", "report", str(out), "--explain"],
                             capture_output=True, text=True, timeout=120)
    assert explain.returncode == 0, explain.stderr[-2000:]
    html = (out / "report.html").read_text()
    for said in (p.stderr, explain.stdout + explain.stderr):
        assert f"{n * steps - n} steps" in said and f"in {n} training processes" in said, said
        assert "rank" not in said.lower() and "straggler" not in said.lower(), said
    assert f"{n} training processes" in html and "straggler" not in html.lower() and "rank " not in html.lower()
    # run.json keeps facts: the evaluating parent is a note's code with its pid; the words are the report's.
    codes = [n["code"] for n in doc.get("notes") or []]
    assert ("evaluation_only" in codes) == evaluating, codes
    assert ("stepped no optimizer while other processes trained (evaluation only)" in explain.stdout) == evaluating
    assert "measured apart" not in explain.stdout
    # The parent's test pass is the run's evaluation, apart from the steps.
    ev = doc.get("evaluation") or {}
    assert (ev.get("passes") == 1 and 0 < ev["share_of_wall"] < 1) == evaluating, ev
    return doc


@pytest.mark.parametrize("evaluating", [True, False])
def test_hogwild_processes_that_train_are_the_run_and_the_evaluating_parent_is_not(tmp_path, evaluating):
    # pytorch/examples mnist_hogwild's shape: two spawned processes train the shared model, then the
    # parent only runs test() under no_grad (or nothing). The training processes are the run, merged;
    # the parent's forward passes are no steps of it, and a note says which process only evaluated.
    out = tmp_path / "r"
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--out", str(out), "--warmup", "1", "--",
                        sys.executable, str(SCRIPTS / "hogwild.py"), "2", "spawn",
                        *(() if evaluating else ("notest",))],
                       capture_output=True, text=True, timeout=400)
    check_trainers_merged(p, out, evaluating=evaluating)
    assert ("TESTED" in p.stdout) == evaluating
