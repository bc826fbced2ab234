"""The Hugging Face callback sets the Trainer's evaluations apart as `perfcore run` does: an evaluate()
between steps is its own row, flagged, with no trainer step, and never a training step's statistic."""
from __future__ import annotations

import pytest
import torch
from test_callbacks import Tiny


def test_the_hf_callback_sets_evaluations_apart(tmp_path):
    pytest.importorskip("transformers")
    from transformers import Trainer, TrainingArguments

    from perfcore.integrations.huggingface import PerfcoreCallback

    g = torch.Generator().manual_seed(0)
    rows = [{"x": torch.randn(4, generator=g), "labels": torch.tensor(0.5)} for _ in range(136)]
    args = TrainingArguments(output_dir=str(tmp_path / "hf"), per_device_train_batch_size=4, max_steps=20,
                             logging_steps=5, report_to=[], save_strategy="no", use_cpu=True, disable_tqdm=True,
                             dataloader_num_workers=0, eval_strategy="steps", eval_steps=5)
    trainer = Trainer(model=Tiny(), args=args, train_dataset=rows[:96], eval_dataset=rows[96:])
    cb = PerfcoreCallback.attach(trainer, warmup=2)
    trainer.train()
    res, steps = cb.result, cb.steps
    # Evaluations after steps 5, 10 and 15 sit between steps; the one after step 20 ends the run.
    assert res.steps + res.warmup_steps == 20
    assert res.evaluation.apart and res.evaluation.rows == 3
    ev = steps[steps["evaluation"]]
    assert len(ev) == 3 and (ev["trainer_step"] == -1).all()
    train = steps[~steps["evaluation"]]
    assert train["trainer_step"].tolist() == list(range(1, 21))
    assert cb.summary["perfcore/steps"] == res.steps
