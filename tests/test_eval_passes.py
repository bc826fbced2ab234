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


@pytest.mark.parametrize("how", ["no_grad", "inference_mode", "plain", "plain_break"])
def test_a_pass_without_eval_is_evaluation(tmp_path, how):
    # no_grad / inference_mode: module calls under it with no optimizer step. plain: neither eval() nor
    # no_grad, grad on; the held-out loader's batches come with no step between them while the
    # training loader trains. plain_break: such a pass that leaves its loader after 4 batches ends there.
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
    batches = 4 if how == "plain_break" else 6  # of 16 items, 4 ms each
    assert len(eval_ms) == 4 and (eval_ms >= batches * 16 * 4 * 0.9).all(), eval_ms.tolist()
    assert doc["step_time_ms"]["p90"] < eval_ms.min()
    assert {ld["role"] for ld in doc["loaders"]} == {"train", "eval"}, doc["loaders"]


def test_an_evaluation_pass_that_nothing_ends_ends_with_the_run(tmp_path):
    # model.eval() after the last step and no train() after it (the HF Trainer's last evaluation).
    p, doc, out = perfcore_run(tmp_path, sys.executable, str(SCRIPTS / "eval_every.py"), "--final-eval")
    assert p.returncode == 0, p.stderr
    assert doc["steps"] + doc["warmup_steps"] == 32
    ev = doc["evaluation"]
    assert ev["passes"] == 5 and len(ev["rows"]) == 5, ev
    steps = pd.read_csv(out / "steps.csv")
    assert bool(steps["evaluation"].iloc[-1])  # the last row is that pass


def test_the_step_time_histogram_counts_training_steps_only():
    from perfcore.report.charts import histogram

    steps = pd.DataFrame(
        {
            "wall_ms": [50.0, 10.0, 11.0, 400.0, 12.0, 10.5, 390.0, 11.5],
            "warmup": [True] + [False] * 7,
            "evaluation": [False, False, False, True, False, False, True, False],
        }
    )
    hist = histogram(steps, {"p50": 11.0, "p90": 12.0}, "h")
    assert sum(hist["counts"]) == 5  # not the warm-up step, not the two evaluation passes
    assert hist["edges"][-1] < 13
