"""Patching torch inside the profiled interpreter (and unpatching for A/B benches): which calls are
timed, and which events are reported to the instrumentation.

  DataLoader iterators' __next__      -> load (the main process waiting for a batch)
  optimizer step pre/post hooks       -> the `optimizer` phase and its step ends (native StepClock)
  outermost nn.Module.__call__        -> the `forward` phase (its start: a forward step source)
  module.forward(x) called directly   -> the `forward` phase too (run/child/direct_forward.py)
  Tensor.backward / autograd.backward -> the `backward` phase (its end: a backward step source)
  Tensor.to / .cuda outside those     -> transfer
  DataLoader construction and iter()  -> the call site and settings; each epoch's worker start-up
  GradScaler.step that skips          -> still ends the step it belongs to
  torch.compile                       -> counted; Module.__call__ made traceable (run/child/compile_hooks.py)
  nn.Module.eval() ... .train()       -> an evaluation pass, reported apart from training steps
  top-level no_grad/inference_mode    -> the same, when it calls a module and no optimizer steps
  dataset fetch in each worker        -> __getitem__ and collate_fn time per batch (run/batches.py)
  torch.distributed collectives, DDP  -> comm (run/comm_hooks.py)

The per-call hooks are native (perfcore._C.TimedCall, StepClock): only the outermost one open on a
thread is timed. Python runs on the hot path only for backward's end (once a step) and, while
the step source is undecided, at batch and forward starts.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from perfcore.run.child.compile_hooks import CompileWatch
from perfcore.run.child.direct_forward import DirectForwards
from perfcore.run.child.eval_hooks import GradOffPasses, grad_off_contexts, patch_train_eval

__all__ = ["TorchHooks", "TorchImportHook", "patched_slots"]


_MISSING = object()


def patched_slots(torch) -> list[tuple[Any, str]]:
    """Every attribute install() replaces (uninstall() puts each original back)."""
    import torch.utils.data._utils.fetch as fetch_mod
    from torch.utils.data import DataLoader
    from torch.utils.data.dataloader import _BaseDataLoaderIter

    slots = [
        (_BaseDataLoaderIter, "__next__"),
        (torch.nn.Module, "__call__"),
        (torch.nn.Module, "__init_subclass__"),
        (torch.nn.Module, "train"),
        (torch.Tensor, "backward"),
        (torch.autograd, "backward"),
        (torch.Tensor, "to"),
        (torch.Tensor, "cuda"),
        (torch.optim.Optimizer, "__init__"),
        (DataLoader, "__init__"),
        (DataLoader, "__iter__"),
        (fetch_mod._MapDatasetFetcher, "fetch"),
        (fetch_mod._IterableDatasetFetcher, "fetch"),
        *grad_off_contexts(torch),
        (torch, "compile"),
    ]
    slots += [(cls, "step") for cls in _grad_scalers(torch)]
    if torch.distributed.is_available():
        from torch.nn.parallel import DistributedDataParallel as DDP

        from perfcore.run.child.comm_hooks import COLLECTIVES

        slots += [(torch.distributed, name) for name in COLLECTIVES] + [(DDP, "forward"), (DDP, "register_comm_hook")]
    return slots


def _grad_scalers(torch) -> list[type]:
    """torch.amp's GradScaler and torch.cuda.amp's, each once (the same class in some torch versions)."""
    cuda_amp = getattr(getattr(torch, "cuda", None), "amp", None)
    found = (getattr(getattr(torch, "amp", None), "GradScaler", None), getattr(cuda_amp, "GradScaler", None))
    return list(dict.fromkeys(cls for cls in found if cls is not None))


class TorchHooks:
    """Installs the hooks on torch and reports events to `inst` (the Instrumentation)."""

    def __init__(self, inst) -> None:
        self.inst = inst
        self.timed: dict[str, Any] = {}  # name -> perfcore._C.TimedCall
        self.installed: dict[str, Any] = {}  # name -> what sits on the owner (a TimedCall, or a wrapper of it)
        self.patched: dict[str, tuple[Any, str]] = {}  # name -> (owner, attribute)
        self.clock = None  # perfcore._C.StepClock
        self._first_step = None  # the optimizer pre-hook that makes the timer
        self.saved: list[tuple[Any, str, Any]] = []  # (owner, attribute, original) of each patch
        self.handles: list[Any] = []  # the optimizer hooks' handles
        self.main_ident = threading.main_thread().ident
        self.compile_watch = None  # CompileWatch: torch.compile's calls
        self.direct = None  # DirectForwards: module.forward(x) called directly
        self._passed_off = 0  # calls that passed through hooks since taken off (uninstall)

    _fork_hook = False  # os.register_at_fork has no removal: registered once a process

    # -- install ----------------------------------------------------------------------------------
    def install(self) -> None:
        import torch

        # What each replaced attribute was, as the owner held it itself (_MISSING: inherited).
        self.saved = [(owner, attr, vars(owner).get(attr, _MISSING)) for owner, attr in patched_slots(torch)]
        from torch.utils.data.dataloader import _BaseDataLoaderIter

        from perfcore._C import StepClock, TimedCall

        inst = self.inst
        orig_next = inst.loader_changes.replaying(_BaseDataLoaderIter.__next__)

        def first_use(orig, name):
            def make_timer_then_call(*args, **kwargs):
                if inst.ensure_timer() is None or self.timed[name].scope is None:
                    return orig(*args, **kwargs)
                return self.timed[name](*args, **kwargs)

            return make_timer_then_call

        # bench/bench_hooks.py swaps these same attributes in and out.
        self.patched = {
            "load": (_BaseDataLoaderIter, "__next__"),
            "forward": (torch.nn.Module, "__call__"),
            "backward": (torch.Tensor, "backward"),
            "autograd.backward": (torch.autograd, "backward"),
            "to": (torch.Tensor, "to"),
            "cuda": (torch.Tensor, "cuda"),
        }
        for name, (owner, attr) in self.patched.items():
            orig = orig_next if name == "load" else getattr(owner, attr)
            # The first batch fetch, module call, backward or optimizer step makes the timer (a loop on
            # plain tensors has no module and no DataLoader); transfers wait for it.
            hook = TimedCall(orig, first_use(orig, name)) if name not in ("to", "cuda") else TimedCall(orig)
            self.timed[name] = hook
            self.installed[name] = hook
            setattr(owner, attr, hook)
        self._ends = {name: self._backward_end(self.timed[name]) for name in ("backward", "autograd.backward")}
        self.backward_ends(True)
        if not TorchHooks._fork_hook:
            # A forked child (a DataLoader worker, a user's Pool) is not the training loop.
            TorchHooks._fork_hook = True
            os.register_at_fork(after_in_child=inst.forked)

        self.clock = StepClock()
        self._hook_optimizers(self._make_timer_at_first_step)
        self._patch_optimizer_init(torch)
        self._patch_loaders(torch)
        self._patch_scaler(torch)
        patch_train_eval(self, torch)
        GradOffPasses(self, torch).install()
        self.compile_watch = CompileWatch(self, torch)
        self.compile_watch.install()
        self.direct = DirectForwards(self, torch)
        self.direct.install()
        import torch.utils.data._utils.fetch as fetch_mod

        from perfcore.run.child.batches import timed_fetch

        for cls in (fetch_mod._MapDatasetFetcher, fetch_mod._IterableDatasetFetcher):
            cls.fetch = timed_fetch(inst, cls.fetch)
        if torch.distributed.is_available():
            from perfcore.run.child.comm_hooks import patch_distributed

            patch_distributed(inst, torch)

    def _make_timer_at_first_step(self, optimizer, args, kwargs) -> None:
        self.inst.ensure_timer()

    def after_fork(self) -> None:
        """In a forked child: its first optimizer step (Hogwild by fork, an optimizer carried across fork)
        makes it a training process, from a hook ahead of the clock's so that step finds the clock armed."""
        for h in self.handles:
            h.remove()
        self.first_step_done()
        self.main_ident = threading.get_ident()  # the thread that forked: the child's only one
        self._hook_optimizers(self._adopt_at_first_step)

    def _hook_optimizers(self, first_step) -> None:
        """The clock's optimizer step hooks, with first_step registered ahead of them, so the first step
        finds the clock armed."""
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        self._first_step = register_optimizer_step_pre_hook(first_step)
        self.handles = [
            register_optimizer_step_pre_hook(self.clock.pre),
            register_optimizer_step_post_hook(self.clock.post),
        ]

    def _adopt_at_first_step(self, optimizer, args, kwargs) -> None:
        if self.inst.timer is None and self.inst.pid != os.getpid():
            self.inst.adopt_fork()

    def first_step_done(self) -> None:
        """After the first step end: the native clock alone from now on. (Not removed from inside the
        pre-hook itself: torch is iterating over the hooks then.)"""
        if self._first_step is not None:
            self._first_step.remove()
            self._first_step = None

    def _backward_end(self, hook):
        """Backward timed natively; its end on the main thread, outside other hooks, is reported
        (the backward step source). One Python frame per backward: once a step."""
        from perfcore._C import hook_depth

        inst, get_ident, main, orig = self.inst, threading.get_ident, self.main_ident, hook.__wrapped__

        def backward(*args, **kwargs):
            outer = hook_depth() == 0 and get_ident() == main
            r = hook(*args, **kwargs)
            if outer and inst.timer is not None:
                inst.on_backward_end()
            return r

        backward.__wrapped__ = orig
        backward.__name__, backward.__doc__ = getattr(orig, "__name__", "backward"), getattr(orig, "__doc__", None)
        return backward

    def backward_ends(self, on: bool) -> None:
        """Report backward ends (a Python frame per backward) only while they may be the step source;
        otherwise the bare native hook sits on torch again."""
        for name, wrapper in self._ends.items():
            owner, attr = self.patched[name]
            self.installed[name] = wrapper if on else self.timed[name]
            setattr(owner, attr, self.installed[name])

    def arm(self, timer, scopes: dict[str, Any]) -> None:
        for name, hook in self.timed.items():
            hook.scope = scopes[name]
        if self.direct is not None:
            self.direct.arm(scopes["forward"])

    def disarm(self) -> None:
        for hook in self.timed.values():
            hook.scope = None
            hook.on_enter = None
        if self.direct is not None:
            self.direct.arm(None)
        if self.clock is not None:
            self.clock.disarm()

    def uninstall(self) -> None:
        """Put every original attribute and hook back (a trainer callback's session ends, the A/B
        benches): torch is as it was before install(), so torch.compile and other tracers see
        plain functions again."""
        self.disarm()
        self._passed_off = self.passed_calls()
        if self.direct is not None:
            self.direct.uninstall()
        for owner, attr, orig in reversed(self.saved):
            if orig is _MISSING:
                if attr in vars(owner):
                    delattr(owner, attr)
            elif vars(owner).get(attr, _MISSING) is not orig:
                setattr(owner, attr, orig)
        for h in self.handles:
            h.remove()
        self.first_step_done()
        self.saved, self.handles = [], []
        self.timed, self.installed, self._ends = {}, {}, {}
        self.clock = None

    def passed_calls(self) -> int:
        """Hooked calls that only went through a hook's call layer, untimed (TimedCall.passed: a submodule
        inside the timed forward), those of hooks already taken off included."""
        return self._passed_off + sum(h.passed for h in self.timed.values())

    # -- construction-time patches (rare calls: plain Python) -------------------------------------
    def _patch_optimizer_init(self, torch) -> None:
        from perfcore.run.child.loaders import call_site

        inst = self.inst
        orig = torch.optim.Optimizer.__init__

        def __init__(opt, *args, **kwargs):
            n = inst.sources.optimizer_made()
            made = orig(opt, *args, **kwargs)
            if n == 1:
                # Where the user made it: the line the faster form's keyword goes on.
                inst.sources.first_optimizer(opt, call_site()[0])
            return made

        __init__.__wrapped__ = orig
        torch.optim.Optimizer.__init__ = __init__

    def _patch_loaders(self, torch) -> None:
        """Each DataLoader's call site and settings when made (and settings changed from outside:
        perfcore sweep / diagnose on a script); each iter() (an epoch): the worker start-up."""
        from torch.utils.data import DataLoader

        from perfcore.run.child.loaders import call_site

        inst = self.inst
        orig_init, orig_iter = DataLoader.__init__, DataLoader.__iter__

        def __init__(loader, dataset, *args, **kwargs):
            args, kwargs = inst.loader_changes.apply(args, kwargs)
            orig_init(loader, dataset, *args, **kwargs)
            try:
                inst.loaders.made(loader, *call_site())
            except Exception as e:  # never fail the user's DataLoader
                inst.notes.append(f"a DataLoader's settings were not recorded: {type(e).__name__}: {e}")

        def __iter__(loader):
            t0 = inst.now_ns()
            rec = inst.loaders.epoch_started(loader, t0, torch.is_grad_enabled())
            it = orig_iter(loader)
            if rec is not None:
                try:
                    inst.loaders.watch_first_batch(it, rec)
                except Exception as e:  # never fail the user's iter(): this epoch goes unwatched
                    inst.notes.append(f"a DataLoader epoch was not watched: {type(e).__name__}: {e}")
            return it

        __init__.__wrapped__, __iter__.__wrapped__ = orig_init, orig_iter
        DataLoader.__init__, DataLoader.__iter__ = __init__, __iter__

    def _patch_scaler(self, torch) -> None:
        """GradScaler.step skips optimizer.step() when gradients are inf/nan; the iteration is still a
        step, so it ends one (counted as skipped)."""
        inst = self.inst
        for cls in (c for c in _grad_scalers(torch) if "step" in vars(c)):
            orig = vars(cls)["step"]

            def step(scaler, optimizer, *args, __orig=orig, **kwargs):
                before = inst.boundary_count()
                r = __orig(scaler, optimizer, *args, **kwargs)
                inst.scaler_stepped(optimizer, stepped=inst.boundary_count() != before)
                return r

            step.__wrapped__ = orig
            cls.step = step


class TorchImportHook:
    """Runs inst.patch_torch() once torch's own module has finished executing, however torch is
    imported: `import torch`, importlib.import_module, an import inside a thread or a library.

    It stays on sys.meta_path until then, and wraps the loader of every spec it hands out for
    "torch": a probe (importlib.util.find_spec("torch"), which transformers, datasets and
    accelerate make before importing torch) gets a spec that is never executed, so it must not use
    the hook up. As a safety net, any later import seen while torch sits complete in sys.modules
    without the hooks (a finder ahead of this one loaded it) patches it then."""

    def __init__(self, inst):
        self.inst = inst
        self.done = False

    def find_spec(self, name, path, target=None):
        if self.done:
            return None
        if name != "torch":
            torch = sys.modules.get("torch")
            if torch is not None and not getattr(getattr(torch, "__spec__", None), "_initializing", True):
                self.patch()
            return None
        for finder in list(sys.meta_path):
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        orig_exec = loader.exec_module

        def exec_module(module):
            orig_exec(module)
            self.patch()

        try:
            loader.exec_module = exec_module
        except (AttributeError, TypeError):  # a loader that takes no attributes: the safety net patches later
            pass
        return spec

    def patch(self) -> None:
        if self.done:
            return
        self.done = True
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        try:
            self.inst.patch_torch()
        except Exception as e:
            self.inst.stand_down(f"could not instrument torch: {type(e).__name__}: {e}")
