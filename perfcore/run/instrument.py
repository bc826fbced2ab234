"""Zero-code hooks for `perfcore run`, active inside the profiled interpreter only.

run/_boot/sitecustomize.py calls activate() when PERFCORE_RUN_DIR is set. Nothing is
imported or patched until the script itself imports torch; then:

  DataLoader iterators' __next__      -> load (the main process waiting for a batch)
  optimizer step pre/post hooks       -> the `optimizer` phase, and the step boundary (first optimizer
                                         to step is the clock; a loop with no optimizer: each batch
                                         fetch starts a step)
  outermost nn.Module.__call__        -> the `forward` phase
  Tensor.backward / autograd.backward -> the `backward` phase
  Tensor.to / .cuda outside those     -> transfer
  dataset fetch in each worker        -> __getitem__ and collate_fn time per batch, per worker

The per-step hooks are native (perfcore._C.TimedCall, perfcore._C.StepClock; see
docs/ARCHITECTURE.md): only the outermost one open on a thread is timed, and no Python runs on
their path except the occasional upkeep callback.

The step timing itself is a perfcore.StepTimer (same clock, same attribution). At exit (normal,
crash, Ctrl-C, SIGTERM, or --steps reached) the part is written to PERFCORE_RUN_DIR/parts/.
"""
from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any


__all__ = ["activate", "STATE"]

STATE: "_Instrumentation | None" = None


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


class _Instrumentation:
    def __init__(self) -> None:
        self.run_dir = Path(os.environ["PERFCORE_RUN_DIR"])
        self.set_steps(_env_int("PERFCORE_STEPS", 0), _env_int("PERFCORE_WARMUP", 5))
        self.backend = os.environ.get("PERFCORE_BACKEND", "auto")
        self.kernels = os.environ.get("PERFCORE_KERNELS", "1") == "1"
        self.rank = os.environ.get("RANK")
        self.timer = None
        self.disabled = False
        self.now_ns = time.perf_counter_ns  # the perfcore clock (same CLOCK_MONOTONIC)
        self.fetch_starts: list[int] = []
        self.hooks: dict[str, Any] = {}
        self.patched: dict[str, tuple[Any, str]] = {}
        self.clock = None  # perfcore._C.StepClock, once torch is patched
        self.mem_samples: list[tuple[int, int]] = []  # (step index, bytes)
        self.mem_every = 8
        self.mem_kind = "none"
        self.exit_reason = "finished"
        self.exception: str | None = None
        self.stop_requested = False
        self.t_activate = self.now_ns()
        self._worker_file = None
        self._main_fetches: list[tuple[int, int, int, int]] = []
        self._lock = threading.Lock()
        self._finalized = False
        self.notes: list[str] = []
        self.overrides = json.loads(os.environ.get("PERFCORE_DL_OVERRIDES") or "{}")
        self.overrides_applied = 0
        self.synthetic = _env_int("PERFCORE_SYNTHETIC", 0)
        self._replay: list = []
        self.replayed = 0

    def set_steps(self, steps: int, warmup: int) -> None:
        """--steps / --warmup: stop once `steps` steps are measured after `warmup` (0: never)."""
        self.steps_wanted, self.warmup = steps, warmup
        self.stop_at = warmup + steps if steps else sys.maxsize

    # -- activation ---------------------------------------------------------------------------
    def install(self, process_hooks: bool = True) -> None:
        if "torch" in sys.modules:
            self.patch_torch()
        else:
            sys.meta_path.insert(0, _TorchImportHook(self))
        if not process_hooks:
            return
        atexit.register(self.finalize)
        prev_hook = sys.excepthook

        def excepthook(tp, value, tb):
            self.exit_reason = "interrupted" if issubclass(tp, KeyboardInterrupt) else "crashed"
            self.exception = f"{tp.__name__}: {value}"
            prev_hook(tp, value, tb)

        sys.excepthook = excepthook
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            def on_term(signum, frame):
                self.exit_reason = "terminated"
                raise SystemExit(128 + signum)

            signal.signal(signal.SIGTERM, on_term)

    def patch_torch(self) -> None:
        import torch
        import torch.utils.data._utils.fetch as fetch_mod
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
        from torch.utils.data.dataloader import _BaseDataLoaderIter

        from torch.utils.data import get_worker_info

        self._get_worker_info = get_worker_info
        inst = self

        from torch.utils.data import DataLoader

        # The hooks that run many times a step are native (perfcore._C.TimedCall): the outermost
        # one open on a thread is timed as its phase, the ones inside it call straight through.
        # Until the timer exists they call their fallback; arm() gives them their scopes.
        from perfcore._C import StepClock, TimedCall

        orig_next = _BaseDataLoaderIter.__next__
        if self.synthetic:
            orig_next = self._replaying(orig_next)

        def first_use(orig, name):
            def make_timer_then_call(*args, **kwargs):
                if inst.ensure_timer() is None or self.hooks[name].scope is None:
                    return orig(*args, **kwargs)
                return self.hooks[name](*args, **kwargs)

            return make_timer_then_call

        # name -> (owner, attribute) replaced by a TimedCall; bench/bench_hooks.py swaps them too.
        self.patched = {"load": (_BaseDataLoaderIter, "__next__"), "forward": (torch.nn.Module, "__call__"),
                        "backward": (torch.Tensor, "backward"), "autograd.backward": (torch.autograd, "backward"),
                        "to": (torch.Tensor, "to"), "cuda": (torch.Tensor, "cuda")}
        for name, (owner, attr) in self.patched.items():
            orig = orig_next if name == "load" else getattr(owner, attr)
            # The first batch fetch or module call makes the timer; the others wait for it.
            hook = TimedCall(orig, first_use(orig, name)) if name in ("load", "forward") else TimedCall(orig)
            self.hooks[name] = hook
            setattr(owner, attr, hook)
        # A forked child (a DataLoader worker, a user's Pool) is not the training loop: its copy
        # of the timer is dropped and the hooks call through.
        os.register_at_fork(after_in_child=self.forked)

        if self.overrides:
            orig_init = DataLoader.__init__

            def __init__(loader, dataset, *args, **kwargs):
                # Settings changed from outside (perfcore sweep / diagnose on a script). Positional
                # arguments after dataset are batch_size, shuffle, ...: fold the first into kwargs.
                if args:
                    kwargs.setdefault("batch_size", args[0])
                    args = args[1:]
                kwargs.update(inst.overrides)
                if int(kwargs.get("num_workers", 0) or 0) == 0:
                    kwargs.pop("prefetch_factor", None)
                    kwargs["persistent_workers"] = False
                inst.overrides_applied += 1
                orig_init(loader, dataset, *args, **kwargs)

            DataLoader.__init__ = __init__

        # Optimizer steps: the optimizer phase, and the step boundary (the first optimizer to step
        # is the clock). Native hooks; Python is called back only on the steps that need upkeep.
        self.clock = StepClock([])
        register_optimizer_step_pre_hook(self.clock.pre)
        register_optimizer_step_post_hook(self.clock.post)

        for cls in (fetch_mod._MapDatasetFetcher, fetch_mod._IterableDatasetFetcher):
            cls.fetch = self._timed_fetch(cls.fetch)

        if torch.distributed.is_available():
            self._patch_distributed(torch)

        # Pay the import and probe costs now, while the script is still importing, so that making
        # the timer at the first batch takes microseconds and no script-side meter sees perfcore.
        import pandas  # noqa: F401
        import psutil  # noqa: F401

        import perfcore.timing  # noqa: F401
        from perfcore import capabilities

        capabilities()

    COLLECTIVES = ("all_reduce", "all_gather", "broadcast", "reduce_scatter", "barrier", "all_to_all", "reduce",
                   "gather", "scatter", "all_gather_into_tensor", "reduce_scatter_tensor", "all_gather_object",
                   "broadcast_object_list")

    def _patch_distributed(self, torch) -> None:
        """comm on CPU/gloo: time inside torch.distributed collectives, and DDP's gradient all-reduce
        from launch to completion (a comm hook wrapping the default one, or the user's)."""
        import torch.distributed as dist
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        from torch.nn.parallel import DistributedDataParallel as DDP

        inst = self
        now = self.now_ns

        def timed(orig):
            def collective(*args, **kwargs):
                if inst.timer is None:
                    return orig(*args, **kwargs)
                t0 = now()
                try:
                    return orig(*args, **kwargs)
                finally:
                    inst.timer._rec.record(3, t0, now())  # COMM; async_op=True counts the launch only

            return collective

        for name in self.COLLECTIVES:
            if hasattr(dist, name):
                setattr(dist, name, timed(getattr(dist, name)))

        def timed_hook(hook):
            def comm_hook(state, bucket):
                t0 = now()
                fut = hook(state, bucket)
                rec = inst.timer._rec if inst.timer is not None else None
                if rec is None:
                    return fut

                def done(f):
                    rec.record(3, t0, now())  # runs on the comm thread: its own span buffer
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

    def _replaying(self, orig_next):
        """PERFCORE_SYNTHETIC=K: keep the first K batches, then hand them out again instead of
        loading, for as many batches as the epoch would have had (no loading at all)."""
        inst = self

        def next_batch(it):
            if len(inst._replay) < inst.synthetic:
                batch = orig_next(it)
                inst._replay.append(batch)
                return batch
            n = getattr(it, "_perfcore_yielded", it._num_yielded)
            try:
                length = len(it)
            except TypeError:
                length = None
            if length is not None and n >= length:
                raise StopIteration
            it._perfcore_yielded = n + 1
            inst.replayed += 1
            return inst._replay[inst.replayed % len(inst._replay)]

        return next_batch

    # -- main-process side ---------------------------------------------------------------------
    def ensure_timer(self):
        """The StepTimer, made on first use in the main process (never in a DataLoader worker)."""
        if self.timer is not None or self.disabled:
            return self.timer
        from torch.utils.data import get_worker_info

        if get_worker_info() is not None:
            return None
        with self._lock:
            if self.timer is not None:
                return self.timer
            import perfcore
            import psutil
            import torch

            caps = perfcore.capabilities()
            on_gpu = torch.cuda.is_available() and caps["features"]["cuda_events"]
            kernels = on_gpu and self.kernels and self.backend in ("auto", "native")
            if self.backend == "cupti-python":
                self.notes.append("the cupti-python backend is not available in this version; using native CUPTI")
                kernels = on_gpu and self.kernels
            if self.backend in ("native", "cupti-python") and not kernels and not on_gpu:
                self.notes.append(f"--backend {self.backend} needs a GPU: {caps['reasons'].get('cupti', '')}; "
                                  "host backend used")
            timer = perfcore.StepTimer(device="cuda" if on_gpu else "cpu", warmup=self.warmup, kernels=kernels)
            self.fwd = timer.phase("forward", label="compute")
            self.bwd = timer.phase("backward", label="compute")
            self.opt = timer.phase("optimizer", label="compute")
            self.on_gpu = on_gpu
            if on_gpu:
                self.mem_kind, self.mem_every = "cuda_allocated", 1
                torch.cuda.reset_peak_memory_stats()
            else:
                import resource

                self.mem_kind = "peak_rss"
                self._getrusage, self._rusage_self = resource.getrusage, resource.RUSAGE_SELF
            psutil.cpu_percent(None)  # primes the system-wide CPU counter for the run
            self.t_timer = self.now_ns()
            self.timer = timer
            self.arm(timer)
            return timer

    def arm(self, timer) -> None:
        from perfcore.timing import COMPACT_EVERY, LOAD

        scopes = {"load": timer._make_scope("load", LOAD, "load"), "forward": self.fwd, "backward": self.bwd,
                  "autograd.backward": self.bwd, "to": timer.transfer, "cuda": timer.transfer}
        for name, hook in self.hooks.items():
            hook.scope = scopes[name]
        # Batch fetch starts are step boundaries until an optimizer steps (see on_step).
        self.hooks["load"].on_enter = self.on_fetch_start
        self.compact_every = COMPACT_EVERY
        self.clock.arm(self.opt, timer._boundaries, self.on_step, self.mem_every, COMPACT_EVERY, self.stop_at)

    def disarm(self) -> None:
        for hook in self.hooks.values():
            hook.scope = None
            hook.on_enter = None
        if self.clock is not None:
            self.clock.disarm()

    def forked(self) -> None:
        self.disarm()
        self.timer = None
        self.disabled = True

    def on_fetch_start(self) -> None:
        self.fetch_starts.append(self.now_ns())
        if not self.clock.clocked and len(self.fetch_starts) - 1 >= self.stop_at:
            self.request_stop()

    def sample_memory(self, step: int) -> None:
        if self.mem_kind == "cuda_allocated":
            import torch

            self.mem_samples.append((step, int(torch.cuda.max_memory_allocated())))
            torch.cuda.reset_peak_memory_stats()
        else:
            # Peak RSS so far: one getrusage call (reading /proc/self/statm cost ~11 us a step in a
            # real training process); a leak shows as a peak that keeps rising.
            self.mem_samples.append((step, self._getrusage(self._rusage_self).ru_maxrss * 1024))

    def on_step(self, n: int) -> None:
        """Called by the StepClock after boundary n when upkeep is due (see arm())."""
        timer = self.timer
        if n == 1:
            self.hooks["load"].on_enter = None  # the optimizer is the step clock from now on
        if n % self.compact_every == 0:
            timer._upkeep(n, timer._boundaries[-1])
        # Memory every step on a GPU (two cheap counters); every 8th on CPU, where even one
        # syscall costs ~8 us right after an optimizer step has flushed the caches.
        if (n - 1) % self.mem_every == 0:
            self.sample_memory(n - 1)
        if n >= self.stop_at:
            self.request_stop()

    def request_stop(self) -> None:
        if self.stop_requested:
            return
        self.stop_requested = True
        self.exit_reason = "steps reached"
        sys.stderr.write(f"perfcore: {self.steps_wanted} steps measured after {self.warmup} warm-up; "
                         "stopping the script (--steps)\n")
        raise SystemExit(0)

    # -- worker side ---------------------------------------------------------------------------
    def _timed_fetch(self, orig):
        inst = self
        now = self.now_ns
        main_fetches = self._main_fetches

        def fetch(fetcher, index):
            cf = fetcher.collate_fn
            if cf.__class__ is not _TimedCollate:
                cf = fetcher.collate_fn = _TimedCollate(cf, now)
            t0 = now()
            batch = orig(fetcher, index)
            t1 = now()
            n = len(index) if fetcher.auto_collation and hasattr(index, "__len__") else 1
            if inst.timer is not None:
                # The main process (num_workers=0): kept in memory, no formatting per batch.
                # (A worker never has a timer: forked ones drop theirs, spawned ones never make one.)
                main_fetches.append((t0, t1, cf.last_ns, n))
            else:
                inst.worker_record(t0, t1, cf.last_ns, n)
            return batch

        fetch.__wrapped__ = orig
        return fetch

    def worker_record(self, t0: int, t1: int, collate_ns: int, n: int) -> None:
        """One line per batch from a DataLoader worker, flushed at once (workers end with os._exit,
        so nothing may wait for exit). Outside a worker (a fetch before the timer exists), kept
        in memory like the main process's."""
        info = self._get_worker_info()
        if info is None:
            self._main_fetches.append((t0, t1, collate_ns, n))
            return
        if self._worker_file is None:
            d = self.run_dir / "workers"
            d.mkdir(parents=True, exist_ok=True)
            self._worker_file = open(d / f"{os.getpid()}.csv", "a", buffering=1)
        self._worker_file.write(f"{os.getpid()},{info.id},{t0},{t1},{t1 - t0 - collate_ns},{collate_ns},{n},"
                                f"{self.rank if self.rank is not None else -1}\n")

    # -- the end -------------------------------------------------------------------------------
    def finalize(self) -> None:
        if self._main_fetches:
            d = self.run_dir / "workers"
            d.mkdir(parents=True, exist_ok=True)
            r = self.rank if self.rank is not None else -1
            with open(d / f"{os.getpid()}-main.csv", "a") as fh:
                fh.writelines(f"{os.getpid()},-1,{a},{b},{b - a - c},{c},{n},{r}\n" for a, b, c, n in self._main_fetches)
            self._main_fetches.clear()  # in place: the fetch hook holds this list
        if self._finalized or self.timer is None:
            return
        self._finalized = True
        if threading.current_thread() is threading.main_thread():
            # A launcher (torchrun) that saw another rank fail sends SIGTERM now: finish writing first.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            self._write_part()
        except Exception as e:  # say so, but never mask the script's own exit
            sys.stderr.write(f"perfcore: could not write results: {type(e).__name__}: {e}\n")
        if self.exit_reason == "interrupted" and threading.current_thread() is threading.main_thread():
            # Python reports an unhandled Ctrl-C by dying of SIGINT (exit 130 in a shell), but the
            # work above can clear its flag for that; die the same way ourselves. This handler was
            # registered first, so it runs after every other exit handler.
            sys.stdout.flush()
            sys.stderr.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)

    def _write_part(self) -> None:
        import numpy as np
        import psutil

        timer = self.timer
        rec = timer._rec
        for pid in reversed(rec.open_phases()):  # a crash inside a phase: close it at the crash
            rec.end(pid)
        if self.on_gpu:
            import torch

            try:
                torch.cuda.synchronize()
            except Exception:
                pass
        step_source = "optimizer"
        if timer.steps == 0 and len(self.fetch_starts) > 1:
            timer._boundaries = list(self.fetch_starts[1:])
            step_source = "batch fetch"
        cpu_util = psutil.cpu_percent(None)
        table = timer.summary()
        doc = dict(timer.result())
        timer.close()
        full = timer._last_table
        n = len(full)
        mem = np.full(n, -1, dtype=np.int64)  # -1: not sampled at that step
        for i, b in self.mem_samples:
            if i < n:
                mem[i] = b
        table["mem_bytes"] = mem
        doc.update({
            "pid": os.getpid(),
            "rank": int(self.rank) if self.rank is not None else None,
            "world_size": int(os.environ["WORLD_SIZE"]) if os.environ.get("WORLD_SIZE") else None,
            "host": __import__("socket").gethostname(),
            "argv": list(sys.argv),
            "exit": {"reason": self.exit_reason, "exception": self.exception},
            "step_source": step_source,
            "cpu_util_percent": cpu_util,
            "memory": {"kind": self.mem_kind, **_memory_trend(mem[(~full["warmup"].to_numpy()) & (mem >= 0)])},
            "compute_split_ms": {ph: float(table.loc[~table["warmup"], f"{ph}_ms"].mean())
                                 for ph in ("forward", "backward", "optimizer")
                                 if f"{ph}_ms" in table and (~table["warmup"]).any()},
            "compute_split_gpu_ms": {ph: float(table.loc[~table["warmup"], f"{ph}_gpu_ms"].mean())
                                     for ph in ("forward", "backward", "optimizer")
                                     if f"{ph}_gpu_ms" in table and (~table["warmup"]).any()},
            "skipped_boundaries": self.clock.skipped if self.clock is not None else 0,
            "dataloader_overrides": {"asked": self.overrides, "applied": self.overrides_applied},
            "synthetic": {"keep": self.synthetic, "replayed": self.replayed},
        })
        from perfcore._C import hook_errors

        untimed = hook_errors()
        if untimed:
            self.notes.append(f"{untimed} hooked call(s) could not be timed (a phase would not open or "
                              "close there); they ran untimed")
        if doc.get("overhead"):
            # The estimate covers the timer's phases; the zero-code hooks around them cost more.
            doc["overhead"] = dict(doc["overhead"], hooks="not included")
        if self.notes or timer.notes:
            doc["notes"] = list(dict.fromkeys(self.notes + timer.notes))
        key = f"rank{self.rank}" if self.rank is not None else f"pid{os.getpid()}"
        part = self.run_dir / "parts" / key
        part.mkdir(parents=True, exist_ok=True)
        table.to_csv(part / "steps.csv", index=False)
        detail = timer._store.trace_tables()  # the kept steps' detail: bounded however long the run
        spans = detail["spans"]
        names = {pid: name for pid, name in timer._names.items()}
        # Strings go in as fixed-width unicode arrays: np.load(allow_pickle=False) must read them back.
        raw: dict[str, Any] = {
            "span_phase": spans["phase_id"].to_numpy(), "span_start_ns": spans["start_ns"].to_numpy(),
            "span_end_ns": spans["end_ns"].to_numpy(), "span_thread": spans["thread_id"].to_numpy(),
            "span_step": spans["step"].to_numpy(),
            "phase_ids": np.array(list(names), dtype=np.int32), "phase_names": np.array(list(names.values()), dtype=str),
            "step_start_ns": full["start_ns"].to_numpy(), "step_wall_ns": full["wall_ns"].to_numpy(),
        }
        k, c, ev = detail["kernels"], detail["copies"], detail["events"]
        if len(k):
            raw.update(kernel_start_ns=k["start_ns"].to_numpy(), kernel_end_ns=k["end_ns"].to_numpy(),
                       kernel_stream=k["stream_id"].to_numpy(), kernel_name=k["name"].to_numpy(dtype=str))
        m = c[c["kind"] == "memcpy"]
        if len(m):
            raw.update(memcpy_start_ns=m["start_ns"].to_numpy(), memcpy_end_ns=m["end_ns"].to_numpy(),
                       memcpy_stream=m["stream_id"].to_numpy(), memcpy_bytes=m["size_bytes"].to_numpy(),
                       memcpy_direction=m["direction"].to_numpy(dtype=str), memcpy_pageable=m["pageable"].to_numpy())
        if len(ev) and timer._tracer is None:
            raw.update(event_phase=ev["phase_id"].to_numpy(), event_start_ns=ev["start_ns"].to_numpy(),
                       event_end_ns=ev["end_ns"].to_numpy())
        np.savez_compressed(part / "trace.npz", **raw)
        from perfcore.report import jsonio

        jsonio.write(part / "run.json", doc)


def _memory_trend(mem) -> dict:
    """Peak memory per step and its growth: a steady rise over steps is reported as a probable leak."""
    import numpy as np

    if len(mem) < 3:
        return {"peak_bytes": int(mem.max()) if len(mem) else None, "growth_bytes_per_step": 0.0, "probable_leak": False}
    x = np.arange(len(mem), dtype=np.float64)
    y = mem.astype(np.float64)
    slope, intercept = np.polyfit(x, y, 1)
    fit = slope * x + intercept
    ss_res, ss_tot = float(((y - fit) ** 2).sum()), float(((y - y.mean()) ** 2).sum())
    r2 = 1 - ss_res / ss_tot if ss_tot > 0 else 0.0
    total_growth = slope * (len(mem) - 1)
    leak = bool(slope > 0 and r2 > 0.8 and total_growth > max(8 * 2**20, 0.05 * y[0]))
    return {"peak_bytes": int(mem.max()), "first_bytes": int(mem[0]), "last_bytes": int(mem[-1]),
            "growth_bytes_per_step": float(slope), "r2": r2, "probable_leak": leak}


class _TimedCollate:
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


class _TorchImportHook:
    """Runs inst.patch_torch() right after `import torch` finishes (one-shot meta path finder)."""

    def __init__(self, inst: _Instrumentation):
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


def activate(process_hooks: bool = True) -> None:
    """Install the hooks (idempotent). Called by perfcore's sitecustomize; the notebook magic
    passes process_hooks=False (no exit, excepthook or SIGTERM handlers in a kernel)."""
    global STATE
    if STATE is None:
        STATE = _Instrumentation()
        STATE.install(process_hooks)
