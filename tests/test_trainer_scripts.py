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
    # The Trainer's loader and accelerate's shard of it, made over the same dataset inside the
    # libraries: one loader, where the script made it, with every batch.
    (loader,) = doc["loaders"]
    assert loader["made"] == 2 and loader["role"] == "train" and loader["batch_size"] == 8
    assert 8 * accum <= loader["batches"] <= 8 * accum + 1


def test_the_hf_trainers_eval_loader_is_its_own_entry_with_its_own_batches(tmp_path):
    # The Trainer makes its train and eval loaders on one line with one set of settings; 40 held-out
    # rows at 8 a batch are 5 batches a pass, 3 passes in 12 steps.
    pytest.importorskip("transformers")
    p, doc = perfcore_run(tmp_path / "r", sys.executable, str(SCRIPTS / "hf_trainer.py"),
                          "--output_dir", str(tmp_path / "hf"), "--max_steps", "12", "--eval_steps", "4")
    assert p.returncode == 0, p.stderr[-2000:]
    assert doc["steps"] + doc["warmup_steps"] == global_step(p.stdout) == 12
    train, ev = sorted(doc["loaders"], key=lambda ld: ld["role"] != "train")
    assert train["role"] == "train" and 12 <= train["batches"] <= 13 and train["made"] == 2
    assert ev["role"] == "eval" and ev["batches"] == 3 * 5 and ev["made"] == 3 * 2
    assert 1.0 <= doc["batches_per_step"] <= 13 / 12
    assert doc["evaluation"]["passes"] == 3


@pytest.mark.parametrize("accum", [1, 3])
def test_lightning_script(tmp_path, accum):
    pytest.importorskip("lightning.pytorch")
    p, doc = perfcore_run(tmp_path / "r", sys.executable, str(SCRIPTS / "lightning_train.py"),
                          "--max-steps", "9", "--accumulate", str(accum))
    assert p.returncode == 0, p.stderr[-2000:]
    assert doc["step_source"] == "optimizer"
    assert doc["steps"] + doc["warmup_steps"] == global_step(p.stdout) == 9
    assert doc["batches_per_step"] == pytest.approx(accum)


def split_and_labels(out: Path):
    """The per-step forward/backward/optimizer means of the measured steps, and whether each step's
    labels sum to its wall time."""
    import pandas as pd

    steps = pd.read_csv(out / "steps.csv")
    measured = steps[~steps["warmup"].astype(bool)]
    labels = measured[["load_ms", "transfer_ms", "compute_ms", "comm_ms", "host_ms"]].sum(axis=1)
    split = {ph: float(measured[f"{ph}_ms"].mean()) for ph in ("forward", "backward", "optimizer")}
    parts = measured[["forward_ms", "backward_ms", "optimizer_ms"]].sum(axis=1)
    return split, bool((abs(labels - measured["wall_ms"]) < 1e-6).all()), bool((parts <= measured["wall_ms"] + 1e-6).all())


def test_an_lbfgs_closure_times_forward_and_backward_as_themselves(tmp_path):
    # LBFGS runs forward and backward inside optimizer.step(closure), once or more a step; each call
    # sleeps 6 ms in forward and 4 ms in backward, so their share has a floor the script counts.
    p, doc = perfcore_run(tmp_path / "r", sys.executable, str(SCRIPTS / "lbfgs_closure.py"), "--steps", "12")
    assert p.returncode == 0, p.stderr[-2000:]
    assert doc["step_source"] == "optimizer" and doc["steps"] + doc["warmup_steps"] == 12
    calls = int(next(line for line in p.stdout.splitlines() if line.startswith("CLOSURE_CALLS")).split()[1])
    split, labels_sum, parts_fit = split_and_labels(tmp_path / "r")
    assert calls >= 12 and labels_sum and parts_fit
    # At least one closure call a step (the measured steps may hold fewer than the mean).
    assert split["forward"] >= 6.0 and split["backward"] >= 4.0
    assert split["optimizer"] < min(split["forward"], split["backward"])  # its own work only


def test_a_lightning_closure_gives_forward_and_backward_their_share_and_names_train_dataloader(tmp_path):
    pytest.importorskip("lightning.pytorch")
    script = SCRIPTS / "lightning_closure.py"
    # Forward 6 ms, backward 4 ms, and a batch of 16 items at 1.5 ms each: load-bound.
    p, doc = perfcore_run(tmp_path / "r", sys.executable, str(script), "--max-steps", "12", "--item-ms", "1.5")
    assert p.returncode == 0, p.stderr[-2000:]
    assert doc["step_source"] == "optimizer" and doc["steps"] + doc["warmup_steps"] == global_step(p.stdout) == 12
    split, labels_sum, parts_fit = split_and_labels(tmp_path / "r")
    assert labels_sum and parts_fit
    assert split["forward"] >= 6.0 and split["backward"] >= 4.0
    assert split["optimizer"] < min(split["forward"], split["backward"])
    # The loader is the user's train_dataloader line, not Lightning's wrapper around DataLoader.__init__.
    line = next(i for i, t in enumerate(script.read_text().splitlines(), 1) if "TRAIN_DATALOADER" in t)
    (ld,) = doc["loaders"]
    path, _, at = ld["site"].rpartition(":")
    assert Path(path).resolve() == script.resolve() and at == str(line) and ld["role"] == "train"
    from run_docs import run_of_json

    from perfcore.report.words.advice import text_of

    run = run_of_json(doc)
    load_advice = text_of(next(f for f in run.findings if f.cause == "load"), run.loader_plan)
    assert ld["site"] in load_advice and "data.py" not in load_advice


def test_lightnings_validation_loop_is_set_apart_from_training_steps(tmp_path):
    # Lightning ends validation by writing each submodule's `training` flag back, without train():
    # the pass must still end there, or the training step it sits in carries all of it.
    pytest.importorskip("lightning.pytorch")
    import pandas as pd

    p, doc = perfcore_run(tmp_path / "r", sys.executable, str(SCRIPTS / "lightning_closure.py"), "--max-steps", "12",
                          "--item-ms", "1", "--val-every", "4", "--val-batches", "8")
    assert p.returncode == 0, p.stderr[-2000:]
    assert doc["steps"] + doc["warmup_steps"] == global_step(p.stdout) == 12
    ev = doc["evaluation"]
    assert ev["apart"] and ev["passes"] >= 3, ev  # Lightning's sanity check, then after steps 4 and 8
    steps = pd.read_csv(tmp_path / "r" / "steps.csv")
    eval_ms = steps.loc[steps["evaluation"].astype(bool), "wall_ms"]
    # 8 batches of 16 items at >= 1 ms, each through a 6 ms forward: >= 176 ms a pass; a training
    # step is one such batch plus its backward (~26 ms). The pass after the last step has no row.
    assert 3 <= len(eval_ms) <= ev["passes"] and (eval_ms >= 8 * (16 + 6) * 0.9).all(), eval_ms
    assert doc["step_time_ms"]["p90"] < eval_ms.min()
