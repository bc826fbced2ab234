"""Loader sites name the user's own line, never a library's, and perfcore's own code is told apart
by the package's location, not by a folder called perfcore."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def test_loaders_made_inside_a_library_name_the_users_line_from_a_folder_named_perfcore(tmp_path):
    checkout = tmp_path / "perfcore"  # a user's project cloned as .../perfcore
    checkout.mkdir()
    script = checkout / "train.py"
    shutil.copy(SCRIPTS / "library_loaders.py", script)
    lines = script.read_text().splitlines()
    train_line = next(i for i, t in enumerate(lines, 1) if "TRAIN_SITE" in t)
    eval_line = next(i for i, t in enumerate(lines, 1) if "EVAL_SITE" in t)
    env = dict(os.environ, PYTHONPATH=str(SCRIPTS / "site-packages"))
    out = tmp_path / "r"
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--out", str(out), "--warmup", "1", "--",
                        sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300, cwd=checkout)
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "run.json").read_text())
    assert doc["steps"] + doc["warmup_steps"] == 16
    sites = sorted(ld["site"] for ld in doc["loaders"])
    assert sites == sorted([f"train.py:{train_line}", f"train.py:{eval_line}"])
    assert "__init__.py" not in p.stdout  # the library's own line is never the advice's site
