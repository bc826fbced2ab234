"""Paths as users type them: `~` left unexpanded by the shell (after `=`, in quotes) means the home
folder in every command that takes a path, and parts, reader and finisher agree on the folder."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = str(Path(__file__).resolve().parent / "scripts" / "exits.py")


def perfcore(*args, cwd, home):
    env = dict(os.environ, HOME=str(home))
    return subprocess.run([sys.executable, "-m", "perfcore.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=180)


def test_tilde_after_equals_is_the_home_folder_in_run_report_and_json(tmp_path):
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    p = perfcore("run", "--warmup", "1", "--out=~/r", "--json=~/r.json", "--", sys.executable, SCRIPT,
                 cwd=cwd, home=home)
    assert p.returncode == 0, p.stderr
    assert json.loads((home / "r" / "run.json").read_text())["steps"] == 7
    assert json.loads((home / "r.json").read_text())["steps"] == 7
    assert not (cwd / "~").exists()
    rep = perfcore("report", "~/r", "--json=~/again.json", cwd=cwd, home=home)
    assert rep.returncode == 0, rep.stderr
    assert (home / "again.json").is_file()
    merged = perfcore("merge", "~/r", "--out=~/m", cwd=cwd, home=home)
    assert merged.returncode == 0, merged.stderr
    assert (home / "m" / "run.json").is_file() and not (cwd / "~").exists()
