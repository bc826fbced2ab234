"""Lightning: per-step attribution of the training loop, in the Trainer's own step numbers
(global_step), with perfcore's figures logged through every logger of the Trainer.

    from perfcore.integrations.lightning import PerfcoreCallback
    trainer = L.Trainer(..., callbacks=[PerfcoreCallback()])

While training, the settled steps' figures are logged every `log_every_n_steps`; at the end the whole
run's summary. After fit(): `.result` (perfcore.run/1), `.steps` (per step, with `trainer_step`),
`.summary` (the flat dict that was logged).
"""

from __future__ import annotations


try:
    from lightning.pytorch import Callback
except ImportError:  # the older package name
    from pytorch_lightning import Callback

from perfcore.integrations.session import CallbackState

__all__ = ["PerfcoreCallback"]


def _log(trainer, metrics: dict[str, float]) -> None:
    for logger in trainer.loggers:
        logger.log_metrics(metrics, step=trainer.global_step)


class PerfcoreCallback(CallbackState, Callback):
    """Trainer(callbacks=[PerfcoreCallback()]): per-step attribution of the training loop, logged through its loggers."""

    def on_train_start(self, trainer, pl_module):
        self.session.start()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.session.mark(trainer.global_step)
        every = trainer.log_every_n_steps or 50
        if trainer.global_step and trainer.global_step % every == 0:
            live = self.session.live()
            if "step_ms" in live:
                _log(trainer, {f"{self.prefix}{k}": v for k, v in live.items()})

    def on_train_end(self, trainer, pl_module):
        if self.finish_session():
            _log(trainer, self.summary)
