"""Hugging Face Trainer: per-step attribution of the training loop, in the Trainer's own step numbers,
with perfcore's figures in the Trainer's logs (so wandb, mlflow, TensorBoard ... get them).

    from perfcore.integrations.huggingface import PerfcoreCallback
    PerfcoreCallback.attach(trainer)        # or Trainer(..., callbacks=[PerfcoreCallback()])

attach() puts the callback before the Trainer's report_to loggers, so they see perfcore's keys in
the same log call; in callbacks=[...] it comes after them (the keys reach log_history and later
callbacks). After train(): `.result` (perfcore.run/1), `.steps` (per step, with `trainer_step`),
`.summary` (the flat dict that was logged).
"""

from __future__ import annotations


from transformers import TrainerCallback

from perfcore.integrations.session import CallbackState

__all__ = ["PerfcoreCallback"]


class PerfcoreCallback(CallbackState, TrainerCallback):
    """PerfcoreCallback.attach(trainer): per-step attribution of the Trainer's loop, logged through its loggers."""

    @classmethod
    def attach(cls, trainer, **kwargs) -> "PerfcoreCallback":
        """Adds a new callback to `trainer`, first in line (before its loggers); returns it."""
        cb = cls(**kwargs)
        trainer.callback_handler.callbacks.insert(0, cb)
        return cb

    def on_train_begin(self, args, state, control, **kwargs):
        self.session.start()

    def on_step_end(self, args, state, control, **kwargs):
        self.session.mark(state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs is None:
            return
        if "train_runtime" in logs:  # the Trainer's last log of train(): the whole run's figures
            self.finish_session()
            logs.update(self.summary)
        else:
            logs.update({f"{self.prefix}{k}": v for k, v in self.session.live().items()})
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            state.log_history[-1].update({k: v for k, v in logs.items() if k.startswith(self.prefix)})

    def on_train_end(self, args, state, control, **kwargs):
        self.finish_session()
