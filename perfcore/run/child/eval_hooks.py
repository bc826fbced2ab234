"""Evaluation passes seen from outside the loop: model.eval() ... model.train(), and the trainers
that end a pass without calling train()."""

from __future__ import annotations

import sys
import threading

__all__ = ["patch_train_eval", "follow_mode_restores", "MODE_RESTORERS"]

# Where trainers keep the code that ends an evaluation pass without calling train().
MODE_RESTORERS = ("lightning.pytorch.utilities.model_helpers", "pytorch_lightning.utilities.model_helpers")


def patch_train_eval(hooks, torch) -> None:
    """model.eval() ... model.train(): an evaluation pass. Only the outermost call is seen: while
    it runs, the class holds the original again, so the recursion over submodules (eval() calls
    train(False) on each; the HF Trainer calls model.train() every step) costs nothing extra."""
    inst, Module = hooks.inst, torch.nn.Module
    orig = Module.train

    def train(module, mode: bool = True):
        if threading.get_ident() != hooks.main_ident:
            return orig(module, mode)
        Module.train = orig
        try:
            return orig(module, mode)
        finally:
            Module.train = train
            inst.on_mode_change(bool(mode))
            if not mode:
                follow_mode_restores(hooks)

    train.__wrapped__ = orig
    Module.train = train


def follow_mode_restores(hooks) -> None:
    """Lightning ends its validation loop by writing each submodule's `training` flag back
    (_ModuleMode.restore), never calling train(): without this the evaluation pass never ends
    and the training step it sits in carries it. Looked for when an evaluation starts, so a
    script without Lightning pays nothing; patched once, and put back with the rest."""
    inst = hooks.inst
    for name in MODE_RESTORERS:
        cls = getattr(sys.modules.get(name), "_ModuleMode", None)
        orig = vars(cls).get("restore") if cls is not None else None
        if orig is None or getattr(orig, "__perfcore__", False):
            continue

        def restore(mode, module, *args, __orig=orig, **kwargs):
            r = __orig(mode, module, *args, **kwargs)
            if threading.get_ident() == hooks.main_ident:
                inst.on_mode_change(bool(getattr(module, "training", True)))
            return r

        restore.__wrapped__, restore.__perfcore__ = orig, True
        hooks.saved.append((cls, "restore", orig))
        cls.restore = restore
