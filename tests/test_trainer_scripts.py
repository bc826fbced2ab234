"""perfcore run on unmodified Hugging Face Trainer and Lightning scripts: both step through
torch.optim underneath, so the optimizer is the step source and one step is one trainer step
(also with gradient accumulation). Skipped, with the reason, where the library is not installed."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def perfcore_run(out: Path, *script: str):
    cmd = [sys.executable, "-m", "perfcore.cli", "run", "--quiet", "--out", str(out), "--warmup", "2", "--", *script]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    doc = json.loads((out / "run.json").read_text()) if (out / "run.json").is_file() else None
    return p, doc


def global_step(stdout: str) -> int:
    return int(next(line for line in stdout.splitlines() if line.startswith("GLOBAL_STEP")).split()[1])


@pytest.mark.parametrize("accum", [1, 2])
def test_huggingface_trainer_script(tmp_path, accum):
    pytest.importorskip("transformers")
    p, doc = perfcore_run(tmp_path / "r", sys.executable, str(SCRIPTS / "hf_trainer.py"),
                          "--output_dir", str(tmp_path / "hf"), "--max_steps", "8", "--grad_accum", str(accum))
    assert p.returncode == 0, p.stderr[-2000:]
    assert doc["step_source"] == "optimizer"
    assert doc["steps"] + doc["warmup_steps"] == global_step(p.stdout) == 8
    # accelerate's loader (under the Trainer) fetches one batch ahead of the loop: 8 steps of
    # `accum` batches fetch 8 * accum + 1, and perfcore counts fetches, so the ratio is at most one
    # batch over the whole run above accum.
    assert 8 * accum <= round(doc["batches_per_step"] * 8) <= 8 * accum + 1


@pytest.mark.parametrize("accum", [1, 3])
def test_lightning_script(tmp_path, accum):
    pytest.importorskip("lightning.pytorch")
    p, doc = perfcore_run(tmp_path / "r", sys.executable, str(SCRIPTS / "lightning_train.py"),
                          "--max-steps", "9", "--accumulate", str(accum))
    assert p.returncode == 0, p.stderr[-2000:]
    assert doc["step_source"] == "optimizer"
    assert doc["steps"] + doc["warmup_steps"] == global_step(p.stdout) == 9
    assert doc["batches_per_step"] == pytest.approx(accum)
