"""Evaluation passes seen from outside the loop: model.eval() ... model.train(), the trainers
that end a pass without calling train(), and module calls under a top-level torch.no_grad() or
inference_mode() with no optimizer step."""

from __future__ import annotations

import sys
import threading

__all__ = ["patch_train_eval", "follow_mode_restores", "MODE_RESTORERS", "GradOffPasses", "grad_off_contexts"]

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


def grad_off_contexts(torch) -> list[tuple[type, str]]:
    """The context managers whose top-level use may hold an evaluation pass without model.eval()."""
    return [(cls, attr) for cls in (torch.no_grad, torch.inference_mode) for attr in ("__enter__", "__exit__")]


class GradOffPasses:
    """A top-level `with torch.no_grad()` / `torch.inference_mode()` on the training thread (grad on
    before it, no perfcore hook open) that calls a module and runs no optimizer step is an evaluation
    pass, as model.eval() ... train() is: a validation loop, sampling, predict-and-plot written
    without eval(). One that calls no module (an EMA update, clip_grad_norm_'s decorator) is not.
    Whether a module ran is seen by borrowing the forward hook's on_enter for the region: the first
    call flags it and hands on_enter back, so a region costs two Python frames and a pass three."""

    def __init__(self, hooks, torch) -> None:
        self.hooks, self.inst, self.torch = hooks, hooks.inst, torch
        self.open: tuple[object, int, int] | None = None  # (context, start ns, step ends at start)
        self.called = False
        self._before = None  # the forward hook's own on_enter while one is borrowed
        # Looked up once: an import statement in entering() cost ~0.6 us a region (an inference loop has one a step).
        from perfcore._native import native

        self._hook_depth = native().hook_depth

    def install(self) -> None:
        for cls in (self.torch.no_grad, self.torch.inference_mode):
            enter, exit_ = cls.__enter__, cls.__exit__

            def __enter__(ctx, __orig=enter):
                self.entering(ctx)
                return __orig(ctx)

            def __exit__(ctx, *exc, __orig=exit_):
                try:
                    return __orig(ctx, *exc)
                finally:
                    self.exited(ctx)

            __enter__.__wrapped__, __exit__.__wrapped__ = enter, exit_
            cls.__enter__, cls.__exit__ = __enter__, __exit__

    def entering(self, ctx) -> None:
        inst, torch = self.inst, self.torch
        if (
            self.open is not None
            or inst.timer is None
            or inst.disabled
            or threading.get_ident() != self.hooks.main_ident
            or not getattr(ctx, "mode", True)  # inference_mode(False)
            or not torch.is_grad_enabled()
            or inst.sources.chosen in ("forward", "batch")  # an inference loop: every call is under it
            or torch.compiler.is_compiling()
        ):
            return
        if self._hook_depth():
            return
        forward = self.hooks.timed.get("forward")
        if forward is None:
            return
        self.open, self.called = (ctx, inst.now_ns(), inst.boundary_count()), False
        self._before = forward.on_enter
        forward.on_enter = self._module_called

    def _module_called(self) -> None:
        self.called = True
        before, self._before = self._before, None
        forward = self.hooks.timed["forward"]
        if forward.on_enter == self._module_called:
            forward.on_enter = before
        if before is not None:
            before()

    def exited(self, ctx) -> None:
        if self.open is None or self.open[0] is not ctx:
            return
        (_, t0, steps), self.open = self.open, None
        forward = self.hooks.timed.get("forward")
        if not self.called and forward is not None and forward.on_enter == self._module_called:
            forward.on_enter = self._before  # unless the source was chosen meanwhile: it set its own
        self._before = None
        inst = self.inst
        if self.called and inst.timer is not None and inst.boundary_count() == steps:
            inst.apply(inst.sources.grad_off_pass(t0, inst.now_ns()))
