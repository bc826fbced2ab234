"""Patching torch inside the profiled interpreter (and unpatching for A/B benches): which calls are
timed, and which events are reported to the instrumentation.

  DataLoader iterators' __next__      -> load (the main process waiting for a batch)
  optimizer step pre/post hooks       -> the `optimizer` phase and its step ends (native StepClock)
  outermost nn.Module.__call__        -> the `forward` phase (its start: a forward step source)
  Tensor.backward / autograd.backward -> the `backward` phase (its end: a backward step source)
  Tensor.to / .cuda outside those     -> transfer
  DataLoader construction and iter()  -> the call site and settings; each epoch's worker start-up
  GradScaler.step that skips          -> still ends the step it belongs to
  nn.Module.eval() ... .train()       -> an evaluation pass, reported apart from training steps
  dataset fetch in each worker        -> __getitem__ and collate_fn time per batch, per worker

The per-call hooks are native (perfcore._C.TimedCall, StepClock): only the outermost one open on a
thread is timed. Python runs on the hot path only for backward's end (once a step) and, while
the step source is undecided, at batch and forward starts.
"""
from __future__ import annotations

import os
import sys
import threading
from typing import Any

__all__ = ["TorchHooks", "TimedCollate", "TorchImportHook", "call_site"]


def call_site(depth: int = 2) -> str:
    """file:line of the first caller outside torch and perfcore (the user's line)."""
    f = sys._getframe(depth)
    while f is not None:
        name = f.f_code.co_filename
        if not any(part in name for part in (f"{os.sep}torch{os.sep}", f"{os.sep}perfcore{os.sep}",
                                              "<frozen ")):
            return f"{os.path.basename(name)}:{f.f_lineno}"
        f = f.f_back
    return "?"


class TorchHooks:
    """Installs the hooks on torch and reports events to `inst` (the Instrumentation)."""

    COLLECTIVES = ("all_reduce", "all_gather", "broadcast", "reduce_scatter", "barrier", "all_to_all", "reduce",
                   "gather", "scatter", "all_gather_into_tensor", "reduce_scatter_tensor", "all_gather_object",
                   "broadcast_object_list")

    def __init__(self, inst) -> None:
        self.inst = inst
        self.timed: dict[str, Any] = {}  # name -> perfcore._C.TimedCall
        self.installed: dict[str, Any] = {}  # name -> what sits on the owner (a TimedCall, or a wrapper of it)
        self.patched: dict[str, tuple[Any, str]] = {}  # name -> (owner, attribute)
        self.clock = None  # perfcore._C.StepClock
        self.main_ident = threading.main_thread().ident

    # -- install ----------------------------------------------------------------------------------
    def install(self) -> None:
        import torch
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
        from torch.utils.data.dataloader import _BaseDataLoaderIter

        from perfcore._C import StepClock, TimedCall

        inst = self.inst
        orig_next = _BaseDataLoaderIter.__next__
        if inst.synthetic:
            orig_next = inst.replaying(orig_next)

        def first_use(orig, name):
            def make_timer_then_call(*args, **kwargs):
                if inst.ensure_timer() is None or self.timed[name].scope is None:
                    return orig(*args, **kwargs)
                return self.timed[name](*args, **kwargs)

            return make_timer_then_call

        # bench/bench_hooks.py swaps these same attributes in and out.
        self.patched = {"load": (_BaseDataLoaderIter, "__next__"), "forward": (torch.nn.Module, "__call__"),
                        "backward": (torch.Tensor, "backward"), "autograd.backward": (torch.autograd, "backward"),
                        "to": (torch.Tensor, "to"), "cuda": (torch.Tensor, "cuda")}
        for name, (owner, attr) in self.patched.items():
            orig = orig_next if name == "load" else getattr(owner, attr)
            # The first batch fetch or module call makes the timer; the others wait for it.
            hook = TimedCall(orig, first_use(orig, name)) if name in ("load", "forward") else TimedCall(orig)
            self.timed[name] = hook
            self.installed[name] = self._backward_end(hook, orig) if "backward" in name else hook
            setattr(owner, attr, self.installed[name])
        # A forked child (a DataLoader worker, a user's Pool) is not the training loop.
        os.register_at_fork(after_in_child=inst.forked)

        self.clock = StepClock([])
        register_optimizer_step_pre_hook(self.clock.pre)
        register_optimizer_step_post_hook(self.clock.post)
        self._patch_optimizer_init(torch)
        self._patch_loaders(torch)
        self._patch_scaler(torch)
        self._patch_train_eval(torch)
        import torch.utils.data._utils.fetch as fetch_mod

        for cls in (fetch_mod._MapDatasetFetcher, fetch_mod._IterableDatasetFetcher):
            cls.fetch = self._timed_fetch(cls.fetch)
        if torch.distributed.is_available():
            self._patch_distributed(torch)

    def _backward_end(self, hook, orig):
        """Backward timed natively; its end on the main thread, outside other hooks, is reported
        (the backward step source). One Python frame per backward: once a step."""
        from perfcore._C import hook_depth

        inst, get_ident, main = self.inst, threading.get_ident, self.main_ident

        def backward(*args, **kwargs):
            outer = hook_depth() == 0 and get_ident() == main
            r = hook(*args, **kwargs)
            if outer and inst.timer is not None:
                inst.sources.backward_ended(inst.now_ns())
            return r

        backward.__wrapped__ = orig
        backward.__name__, backward.__doc__ = getattr(orig, "__name__", "backward"), getattr(orig, "__doc__", None)
        return backward

    def arm(self, timer, scopes: dict[str, Any]) -> None:
        for name, hook in self.timed.items():
            hook.scope = scopes[name]

    def disarm(self) -> None:
        for hook in self.timed.values():
            hook.scope = None
            hook.on_enter = None
        if self.clock is not None:
            self.clock.disarm()

    def uninstall(self) -> None:
        """Put the original attributes back (the A/B benches and tests)."""
        self.disarm()
        for name, (owner, attr) in self.patched.items():
            setattr(owner, attr, self.installed[name].__wrapped__)

    # -- construction-time patches (rare calls: plain Python) -------------------------------------
    def _patch_optimizer_init(self, torch) -> None:
        inst = self.inst
        orig = torch.optim.Optimizer.__init__

        def __init__(opt, *args, **kwargs):
            inst.sources.optimizers_made += 1
            return orig(opt, *args, **kwargs)

        __init__.__wrapped__ = orig
        torch.optim.Optimizer.__init__ = __init__

    def _patch_loaders(self, torch) -> None:
        """Each DataLoader's call site and settings when made (and settings changed from outside:
        perfcore sweep / diagnose on a script); each iter() (an epoch): the worker start-up."""
        from torch.utils.data import DataLoader

        inst = self.inst
        orig_init, orig_iter = DataLoader.__init__, DataLoader.__iter__

        def __init__(loader, dataset, *args, **kwargs):
            if inst.overrides:
                # Positional arguments after dataset are batch_size, shuffle, ...: fold the first in.
                if args:
                    kwargs.setdefault("batch_size", args[0])
                    args = args[1:]
                kwargs.update(inst.overrides)
                if int(kwargs.get("num_workers", 0) or 0) == 0:
                    kwargs.pop("prefetch_factor", None)
                    kwargs["persistent_workers"] = False
                inst.overrides_applied += 1
            orig_init(loader, dataset, *args, **kwargs)
            try:
                inst.loaders.made(loader, call_site())
            except Exception as e:  # never fail the user's DataLoader
                inst.notes.append(f"a DataLoader's settings were not recorded: {type(e).__name__}: {e}")

        def __iter__(loader):
            t0 = inst.now_ns()
            rec = inst.loaders.epoch_started(loader, t0, torch.is_grad_enabled())
            it = orig_iter(loader)
            if rec is not None:
                inst.loaders.watch_first_batch(it, rec)
            return it

        __init__.__wrapped__, __iter__.__wrapped__ = orig_init, orig_iter
        DataLoader.__init__, DataLoader.__iter__ = __init__, __iter__

    def _patch_scaler(self, torch) -> None:
        """GradScaler.step skips optimizer.step() when gradients are inf/nan; the iteration is still a
        step, so it ends one (counted as skipped)."""
        classes = [getattr(getattr(torch, "amp", None), "GradScaler", None)]
        cuda_amp = getattr(getattr(torch, "cuda", None), "amp", None)
        classes.append(getattr(cuda_amp, "GradScaler", None) if cuda_amp is not None else None)
        inst = self.inst
        for cls in dict.fromkeys(c for c in classes if c is not None and "step" in vars(c)):
            orig = vars(cls)["step"]

            def step(scaler, optimizer, *args, __orig=orig, **kwargs):
                before = inst.boundary_count()
                r = __orig(scaler, optimizer, *args, **kwargs)
                inst.scaler_stepped(optimizer, stepped=inst.boundary_count() != before)
                return r

            step.__wrapped__ = orig
            cls.step = step

    def _patch_train_eval(self, torch) -> None:
        """model.eval() ... model.train(): an evaluation pass (outermost calls only; eval() calls
        train(False) on every submodule)."""
        inst = self.inst
        orig = torch.nn.Module.train
        depth = [0]

        def train(module, mode: bool = True):
            depth[0] += 1
            try:
                return orig(module, mode)
            finally:
                depth[0] -= 1
                if depth[0] == 0 and threading.get_ident() == self.main_ident:
                    inst.sources.mode_changed(bool(mode), inst.now_ns())

        train.__wrapped__ = orig
        torch.nn.Module.train = train

    # -- workers --------------------------------------------------------------------------------
    def _timed_fetch(self, orig):
        inst = self.inst
        now = inst.now_ns
        main_fetches = inst.main_fetches

        def fetch(fetcher, index):
            cf = fetcher.collate_fn
            if cf.__class__ is not TimedCollate:
                cf = fetcher.collate_fn = TimedCollate(cf, now)
            t0 = now()
            batch = orig(fetcher, index)
            t1 = now()
            n = len(index) if fetcher.auto_collation and hasattr(index, "__len__") else 1
            if inst.timer is not None:
                # The main process (num_workers=0): kept in memory, no formatting per batch.
                main_fetches.append((t0, t1, cf.last_ns, n))
            else:
                inst.worker_record(t0, t1, cf.last_ns, n)
            return batch

        fetch.__wrapped__ = orig
        return fetch

    # -- distributed ----------------------------------------------------------------------------
    def _patch_distributed(self, torch) -> None:
        """comm on CPU/gloo: time inside torch.distributed collectives, and DDP's gradient all-reduce
        from launch to completion (a comm hook wrapping the default one, or the user's)."""
        import torch.distributed as dist
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        from torch.nn.parallel import DistributedDataParallel as DDP

        inst = self.inst
        now = inst.now_ns

        def timed(orig):
            def collective(*args, **kwargs):
                if inst.timer is None:
                    return orig(*args, **kwargs)
                t0 = now()
                try:
                    return orig(*args, **kwargs)
                finally:
                    inst.timer.record("comm", t0, now())  # async_op=True counts the launch only

            return collective

        for name in self.COLLECTIVES:
            if hasattr(dist, name):
                setattr(dist, name, timed(getattr(dist, name)))

        def timed_hook(hook):
            def comm_hook(state, bucket):
                t0 = now()
                fut = hook(state, bucket)
                timer = inst.timer
                if timer is None:
                    return fut

                def done(f):
                    timer.record("comm", t0, now())  # runs on the comm thread: its own span buffer
                    return f.value()

                return fut.then(done)

            return comm_hook

        orig_register = DDP.register_comm_hook

        def register_comm_hook(ddp, state, hook):
            ddp._perfcore_hooked = True
            return orig_register(ddp, state, timed_hook(hook))

        DDP.register_comm_hook = register_comm_hook
        orig_forward = DDP.forward

        def forward(ddp, *args, **kwargs):
            # Register the timed default hook at the first forward, so a user's own
            # register_comm_hook (made before training starts) still goes through.
            if not getattr(ddp, "_perfcore_hooked", False):
                ddp._perfcore_hooked = True
                try:
                    orig_register(ddp, None, timed_hook(default_hooks.allreduce_hook))
                except Exception as e:
                    inst.notes.append(f"DDP all-reduce not timed: {e}")
            return orig_forward(ddp, *args, **kwargs)

        DDP.forward = forward


class TimedCollate:
    """A DataLoader's collate_fn, timed: the fetch hook reads `last_ns` after each batch."""

    __slots__ = ("fn", "now", "last_ns")

    def __init__(self, fn, now):
        self.fn, self.now, self.last_ns = fn, now, 0

    def __call__(self, batch):
        t0 = self.now()
        try:
            return self.fn(batch)
        finally:
            self.last_ns = self.now() - t0

    def __reduce__(self):  # a spawned worker gets the plain function (it installs its own hooks)
        return (_identity, (self.fn,))


def _identity(x):
    return x


class TorchImportHook:
    """Runs inst.patch_torch() right after `import torch` finishes (one-shot meta path finder)."""

    def __init__(self, inst):
        self.inst = inst

    def find_spec(self, name, path, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        loader, inst = spec.loader, self.inst
        orig_exec = loader.exec_module

        def exec_module(module):
            orig_exec(module)
            try:
                inst.patch_torch()
            except Exception as e:
                inst.disabled = True
                sys.stderr.write(f"perfcore: could not instrument torch: {type(e).__name__}: {e}\n")

        loader.exec_module = exec_module
        return spec
