"""Trainer callbacks: a real Hugging Face Trainer and a real Lightning Trainer, each on a tiny model
on CPU, give per-step attribution in the trainer's own step numbers and log perfcore's figures
through the trainer's loggers. Skipped, with the reason, where the library is not installed."""
from __future__ import annotations

import numpy as np
import pytest

from perfcore.integrations.session import trainer_steps

torch = pytest.importorskip("torch")
LABELS = ("load", "transfer", "compute", "comm", "host")


def test_trainer_steps_maps_each_perfcore_step_to_the_mark_after_it():
    # Steps 0,1 ended before the trainer's step 1 was marked; steps 2,3,4 before its step 2; 5 after.
    got = trainer_steps(6, [(2, 1), (5, 2)])
    assert got.tolist() == [1, 1, 2, 2, 2, -1]
    assert trainer_steps(3, []).tolist() == [-1, -1, -1]


class Tiny(torch.nn.Module):
    """A Trainer's model: it takes the batch's keys and returns its loss."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 1)

    def forward(self, x, labels):
        loss = ((self.lin(x).squeeze(-1) - labels) ** 2).mean()
        return {"loss": loss}


def _check_result(cb, total_steps: int, warmup: int) -> None:
    res, steps = cb.result, cb.steps
    assert res is not None, "the callback saw no step"
    assert res.steps + res.warmup_steps == total_steps
    assert res.warmup_steps == warmup
    assert len(steps) == total_steps
    # the trainer's own numbering: one optimizer step per trainer step, 1..N
    assert steps["trainer_step"].tolist() == list(range(1, total_steps + 1))
    parts = steps[[f"{lb}_ms" for lb in LABELS]].sum(axis=1).to_numpy()
    assert np.allclose(parts, steps["wall_ms"].to_numpy(), atol=1e-6)
    assert cb.summary["perfcore/steps"] == res.steps
    assert cb.summary["perfcore/step_ms"] == pytest.approx(res.step_time_ms.mean)
    assert all(isinstance(v, (int, float)) for v in cb.summary.values())  # mlflow.log_metrics takes numbers


def test_huggingface_trainer_callback(tmp_path):
    pytest.importorskip("transformers")
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from perfcore.integrations.huggingface import PerfcoreCallback

    class Logger(TrainerCallback):  # stands in for report_to's wandb / mlflow / tensorboard callbacks
        def __init__(self):
            self.logged = []

        def on_log(self, args, state, control, logs=None, **kwargs):
            self.logged.append(dict(logs or {}))

    g = torch.Generator().manual_seed(0)
    data = [{"x": torch.randn(4, generator=g), "labels": torch.tensor(0.5)} for _ in range(96)]
    args = TrainingArguments(output_dir=str(tmp_path / "hf"), per_device_train_batch_size=4, max_steps=20,
                             logging_steps=5, report_to=[], save_strategy="no", use_cpu=True, disable_tqdm=True,
                             dataloader_num_workers=0)
    logger = Logger()
    trainer = Trainer(model=Tiny(), args=args, train_dataset=data, callbacks=[logger])
    cb = PerfcoreCallback.attach(trainer, warmup=2, out=str(tmp_path / "perfcore"))
    assert trainer.callback_handler.callbacks[0] is cb
    trainer.train()
    _check_result(cb, 20, 2)
    # the last log of train() carries the whole run's figures, and the logger after perfcore saw them
    final = [x for x in logger.logged if "train_runtime" in x]
    assert final and final[-1]["perfcore/steps"] == cb.result.steps
    assert "perfcore/compute_share" in trainer.state.log_history[-1]
    assert (tmp_path / "perfcore" / "report.html").is_file() and (tmp_path / "perfcore" / "run.json").is_file()


def test_lightning_callback(tmp_path):
    L = pytest.importorskip("lightning.pytorch")
    from lightning.pytorch.loggers import CSVLogger

    from perfcore.integrations.lightning import PerfcoreCallback

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return ((self.lin(x).squeeze(-1) - y) ** 2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    g = torch.Generator().manual_seed(0)
    ds = torch.utils.data.TensorDataset(torch.randn(96, 4, generator=g), torch.full((96,), 0.5))
    loader = torch.utils.data.DataLoader(ds, batch_size=4)
    cb = PerfcoreCallback(warmup=3)
    logger = CSVLogger(str(tmp_path), name="lt")
    trainer = L.Trainer(max_steps=16, callbacks=[cb], logger=logger, log_every_n_steps=5, accelerator="cpu",
                        enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False)
    trainer.fit(Tiny(), loader)
    _check_result(cb, 16, 3)
    import pandas as pd

    metrics = pd.read_csv(f"{logger.log_dir}/metrics.csv")
    assert "perfcore/step_ms" in metrics.columns  # through the Trainer's own logger
    assert metrics["perfcore/steps"].dropna().iloc[-1] == cb.result.steps
