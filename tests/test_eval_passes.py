"""Evaluation found without model.eval(): module calls under a top-level torch.no_grad() or
torch.inference_mode() with no optimizer step are an evaluation pass, reported apart from the
training steps (`perfcore run` on a loop that evaluates every N steps)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def perfcore_run(tmp_path, *args, timeout=300):
    out = tmp_path / "r"
    cmd = [sys.executable, "-m", "perfcore.cli", "run", "--out", str(out), "--warmup", "1", "--", *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    doc = json.loads((out / "run.json").read_text()) if (out / "run.json").is_file() else None
    return p, doc, out


@pytest.mark.parametrize("how", ["no_grad", "inference_mode"])
def test_a_pass_under_no_grad_without_eval_is_evaluation(tmp_path, how):
    p, doc, out = perfcore_run(
        tmp_path, sys.executable, str(SCRIPTS / "eval_every.py"), "--how", how, "--val-delay", "0.004"
    )
    assert p.returncode == 0, p.stderr
    train_steps = int(p.stdout.split("TRAIN_STEPS")[1].split()[0])
    assert doc["step_source"] == "optimizer"
    # Every training iteration is a step; the 4 passes are not (the per-step no_grad update that
    # calls no module is no pass).
    assert doc["steps"] + doc["warmup_steps"] == train_steps == 32
    ev = doc["evaluation"]
    assert ev["passes"] == 4 and ev["apart"] and len(ev["rows"]) == 4
    steps = pd.read_csv(out / "steps.csv")
    eval_ms = steps.loc[steps["evaluation"], "wall_ms"]
    assert len(eval_ms) == 4 and (eval_ms >= 96 * 4 * 0.9).all()
    assert doc["step_time_ms"]["p90"] < eval_ms.min()
