"""Zero-code instrumentation for `perfcore run`, active inside the profiled interpreter only.

run/child/_boot/sitecustomize.py calls activate() when PERFCORE_RUN_DIR is set. Nothing is imported or
patched until the script itself imports torch; then run/hooks.py patches torch, run/steps.py
decides where steps end, run/loaders.py follows the DataLoaders, and a perfcore.StepTimer (same
clock, same attribution) does the timing through its public interface. At exit (normal, crash,
Ctrl-C, SIGTERM, os._exit, or --steps reached) run/part.py writes this process's part to
PERFCORE_RUN_DIR/parts/.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from perfcore.run import protocol
from perfcore.run.child.hooks import TorchHooks, TorchImportHook
from perfcore.run.child.loaders import Loaders
from perfcore.run.child.steps import StepSources

__all__ = ["activate", "STATE", "Instrumentation"]

STATE: "Instrumentation | None" = None


def _env_int(name: str, default: int) -> int:
    """A whole number >= 0 from perfcore's environment. A bad value (a child Python inheriting a
    stale or hand-set variable) never raises into the script: one line, and the default."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
        if value >= 0:
            return value
    except ValueError:
        pass
    sys.stderr.write(f"perfcore: {name}={raw!r} is not a whole number >= 0 (set in the environment?); "
                     f"using {default}\n")
    return default


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
        if value >= 0 and value == value:
            return value
    except ValueError:
        pass
    sys.stderr.write(f"perfcore: {name}={raw!r} is not a number of seconds >= 0; using {default:g}\n")
    return default


def _env_json(name: str) -> dict:
    raw = os.environ.get(name) or "{}"
    try:
        value = json.loads(raw)
        if isinstance(value, dict):
            return value
    except ValueError:
        pass
    sys.stderr.write(f"perfcore: {name}={raw!r} is not a JSON object of DataLoader settings; ignored\n")
    return {}


def _env_step_on() -> str | None:
    raw = os.environ.get(protocol.ENV_STEP_ON) or None
    if raw is None or raw in protocol.STEP_SOURCES:
        return raw
    sys.stderr.write(f"perfcore: {protocol.ENV_STEP_ON}={raw!r} is not one of {', '.join(protocol.STEP_SOURCES)}; "
                     "choosing the step source automatically\n")
    return None


class MemorySamples:
    """(step, bytes) memory samples, one a step on a GPU: the newest in two short lists, the rest in
    settled int64 columns (analysis.store.Columns, spilled to a temporary file), so a million
    steps hold no million Python tuples."""

    FLUSH = 1024

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.values: list[int] = []
        self.columns = None  # made at the first flush: importing numpy is not for the script's start

    def add(self, step: int, value: int) -> None:
        self.steps.append(step)
        self.values.append(value)
        if len(self.steps) >= self.FLUSH:
            self._flush()

    def _flush(self) -> None:
        if not self.steps:
            return
        import numpy as np

        from perfcore.analysis.store import Columns

        if self.columns is None:
            self.columns = Columns()
        self.columns.append({"step": np.asarray(self.steps, dtype=np.int64),
                             "bytes": np.asarray(self.values, dtype=np.int64)}, len(self.steps))
        self.steps, self.values = [], []

    def arrays(self):
        """(steps, bytes) as int64 arrays, every sample so far."""
        import numpy as np

        self._flush()
        if self.columns is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return self.columns.column("step"), self.columns.column("bytes")

    def __len__(self) -> int:
        return (self.columns.n if self.columns is not None else 0) + len(self.steps)


class Instrumentation:
    def __init__(self) -> None:
        self.run_dir = Path(os.environ[protocol.ENV_RUN_DIR])
        self.pid = os.getpid()
        self.now_ns = time.perf_counter_ns  # the perfcore clock (same CLOCK_MONOTONIC)
        self.set_steps(_env_int(protocol.ENV_STEPS, 0), _env_int(protocol.ENV_WARMUP, 5))
        self.backend = os.environ.get(protocol.ENV_BACKEND, "auto")
        self.kernels = os.environ.get(protocol.ENV_KERNELS, "1") == "1"
        self.rank = os.environ.get("RANK")
        self.progress = None  # run.child.progress.ProgressWriter, made with the timer
        self.watch_s = _env_float(protocol.ENV_NO_STEP_WARN_S, 30.0)
        self.timer = None
        self.disabled = False
        self.torch_hooks = TorchHooks(self)
        self.sources = StepSources(self, _env_step_on())
        self.loaders = Loaders(self.now_ns)
        self.mem_samples = MemorySamples()
        self.eval_rows: list[int] = []  # rows that are an evaluation pass, not a training step
        self.mem_every = 8
        self.mem_kind = "none"
        self.exit_reason = "finished"
        self.exception: str | None = None
        self.stop_requested = False
        self.stop_signal: type[BaseException] = SystemExit  # the notebook magic ends a cell its own way
        self.t_stop = 0
        self.steps_after_stop = 0
        # Interpreter start, when the launcher passed it (time to first step counts imports too).
        self.t_start = _env_int(protocol.ENV_T_LAUNCH_NS, 0) or self.now_ns()
        self.t_activate = self.now_ns()
        self.t_timer: int | None = None
        self.worker_file = None  # this DataLoader worker's batch lines (run/batches.py)
        self.main_fetches: list[tuple[int, int, int, int]] = []
        self._lock = threading.Lock()
        self._finalized = False
        self.notes: list[str] = []
        self.overrides = _env_json(protocol.ENV_DL_OVERRIDES)
        self.overrides_applied = 0
        self.synthetic = _env_int(protocol.ENV_SYNTHETIC, 0)
        self.replay_kept: list = []
        self.replayed = 0

    # bench/bench_hooks.py and tests read these tables.
    @property
    def hooks(self) -> dict[str, Any]:
        return self.torch_hooks.installed

    @property
    def patched(self) -> dict[str, tuple[Any, str]]:
        return self.torch_hooks.patched

    def set_steps(self, steps: int, warmup: int) -> None:
        """--steps / --warmup: stop once `steps` steps are measured after `warmup` (0: never)."""
        self.steps_wanted, self.warmup = steps, warmup
        self.stop_at = warmup + steps if steps else sys.maxsize

    def new_cell(self, steps: int, warmup: int) -> None:
        """The notebook magic: a fresh timer and step source per cell, nothing carried over."""
        self.timer = None
        self.mem_samples, self.eval_rows = MemorySamples(), []
        self.sources = StepSources(self, self.sources.forced)
        if self.torch_hooks.timed:
            self.torch_hooks.backward_ends(True)
        self.set_steps(steps, warmup)
        self.stop_requested, self._finalized, self.disabled = False, False, False
        self.steps_after_stop = 0
        if getattr(self, "_after_stop", None) is not None:
            self._after_stop.remove()
            self._after_stop = None

    # -- activation ---------------------------------------------------------------------------
    def patch_torch(self) -> None:
        self.torch_hooks.install()
        # Pay the import and probe costs now, while the script is still importing, so that making
        # the timer at the first batch takes microseconds and no script-side meter sees perfcore.
        import pandas  # noqa: F401
        import psutil  # noqa: F401

        import perfcore.timing  # noqa: F401
        from perfcore import capabilities

        capabilities()

    # -- main-process side ---------------------------------------------------------------------
    def ensure_timer(self):
        """The StepTimer, made on first use in the main process (never in a DataLoader worker)."""
        if self.timer is not None or self.disabled:
            return self.timer
        from torch.utils.data import get_worker_info

        if get_worker_info() is not None:
            return None
        with self._lock:
            if self.timer is not None or self.disabled:
                return self.timer
            try:
                return self._make_timer()
            except Exception as e:  # never raised into the script's call: its hooks call straight through
                self.disabled = True
                self.disarm()
                sys.stderr.write(f"perfcore: not timing this process ({type(e).__name__}: {e}); "
                                 "the script runs on untimed\n")
                return None

    def _make_timer(self):
        import perfcore
        import psutil
        import torch

        caps = perfcore.capabilities()
        on_gpu = torch.cuda.is_available() and caps["features"]["cuda_events"]
        kernels = on_gpu and self.kernels and self.backend in ("auto", "native", "cupti-python")
        if self.backend in ("native", "cupti-python") and not kernels and not on_gpu:
            self.notes.append(f"--backend {self.backend} needs a GPU: {caps['reasons'].get('cupti', '')}; "
                              "host backend used")
        timer = perfcore.StepTimer(device="cuda" if on_gpu else "cpu", warmup=self.warmup, kernels=kernels,
                                   kernel_backend=self.backend if self.backend != "host" else "auto")
        self.fwd = timer.phase("forward", label="compute")
        self.bwd = timer.phase("backward", label="compute")
        self.opt = timer.phase("optimizer", label="compute")
        self.on_gpu = on_gpu
        _watch_memory(self, on_gpu)
        psutil.cpu_percent(None)  # primes the system-wide CPU counter for the run
        self.t_timer = self.now_ns()
        self.timer = timer
        from perfcore.run.child.progress import ProgressWriter

        self.progress = ProgressWriter.for_process(self.run_dir, self.rank, self.steps_wanted, self.warmup, on_gpu)
        self.arm(timer)
        return timer

    def arm(self, timer) -> None:
        from perfcore.recording.engine import COMPACT_EVERY

        self._is_grad_enabled = __import__("torch").is_grad_enabled
        scopes = {"load": timer.engine.fetch_scope(), "forward": self.fwd, "backward": self.bwd,
                  "autograd.backward": self.bwd, "to": timer.transfer, "cuda": timer.transfer}
        self.torch_hooks.arm(timer, scopes)
        self.compact_every = COMPACT_EVERY
        chosen = self.sources.chosen
        self.torch_hooks.timed["load"].on_enter = self.on_fetch_start
        if chosen in (None, "forward"):
            self.torch_hooks.timed["forward"].on_enter = self.on_forward_start
        # The optimizer clock appends its step ends straight into the timer's list unless another
        # source was forced (then the optimizer is timed, its steps are not step ends).
        ends = timer.engine.boundaries if chosen in (None, "optimizer") else None
        # Held here too: a stop inside the callback disarms the clock, which drops its reference.
        self._on_step_cb = self.on_step
        self.torch_hooks.clock.arm(self.opt, ends, self._on_step_cb, self.mem_every, COMPACT_EVERY, self.stop_at)

    def disarm(self) -> None:
        self.torch_hooks.disarm()

    def forked(self) -> None:
        self.disarm()
        self.timer = None
        self.disabled = True

    def on_fetch_start(self) -> None:
        self.sources.fetch_started(self.now_ns(), self._is_grad_enabled())

    def on_forward_start(self) -> None:
        self.sources.forward_started(self.now_ns())

    def source_chosen(self, source: str) -> None:
        # No Python on the hot path for what cannot be the step source any more.
        if source != "forward":
            self.torch_hooks.timed["forward"].on_enter = None
        if source in ("optimizer", "backward"):
            self.torch_hooks.timed["load"].on_enter = None
        if source != "backward":
            self.torch_hooks.backward_ends(False)
        if source != "optimizer" and self.timer is not None:
            from perfcore.recording.engine import COMPACT_EVERY

            # An optimizer that steps later still times its phase, but no longer ends steps.
            self.torch_hooks.clock.arm(self.opt, None, None, 1, COMPACT_EVERY, sys.maxsize)

    def boundary_count(self) -> int:
        return len(self.timer.engine.boundaries) if self.timer is not None else 0

    def step_ended(self, t: int) -> None:
        """A step end from a Python-side source (backward, batch, forward)."""
        if self.timer is not None and not self.stop_requested and self.timer.engine.end_step(at_ns=t):
            self.after_step(len(self.timer.engine.boundaries))

    def eval_ended(self, t0: int, t1: int) -> None:
        """An evaluation pass between two training steps becomes a row of its own (reported apart)."""
        engine = self.timer.engine if self.timer is not None and not self.stop_requested else None
        if engine is not None and engine.boundaries and engine.boundaries[-1] <= t0 and engine.end_step(at_ns=t1):
            self.eval_rows.append(len(engine.boundaries) - 1)

    def scaler_stepped(self, optimizer, stepped: bool) -> None:
        if self.sources.scaler_stepped(optimizer, stepped) and self.timer is not None and not self.stop_requested:
            if self.timer.engine.end_step():
                self.after_step(len(self.timer.engine.boundaries))

    def sample_memory(self, step: int) -> None:
        if self.mem_kind == "cuda_allocated":
            self.mem_samples.add(step, self.peak_memory.step_peak())
        elif self.mem_kind == "peak_rss":
            # Peak RSS so far: one getrusage call (reading /proc/self/statm cost ~11 us a step in a
            # real training process); a leak shows as a peak that keeps rising.
            self.mem_samples.add(step, self._getrusage(self._rusage_self).ru_maxrss * 1024)

    def on_step(self, n: int) -> None:
        """Called by the native StepClock after optimizer step end n when upkeep is due."""
        if n == 1:
            self.sources.optimizer_stepped()
        self.after_step(n)

    def after_step(self, n: int) -> None:
        """Upkeep after step end n: settling, memory samples (every step on a GPU: two cheap
        counters; every 8th on CPU, where one syscall costs ~8 us after an optimizer step), --steps."""
        if n == 0:
            return
        if n == 1:
            self.torch_hooks.first_step_done()
        if n % self.compact_every == 0 and self.sources.chosen is not None:
            self.timer.engine.upkeep(n)
        elif n <= 8:
            self.timer.engine.follow_device()  # the GPU the work is on (model.to(rank) without set_device)
        if (n - 1) % self.mem_every == 0:
            self.sample_memory(n - 1)
        if self.sources.chosen is not None and self.progress is not None:
            self.progress.tick(self.timer)  # one clock read unless the live view or a checkpoint is due
        # Evaluation rows are not training steps: --steps counts the training ones.
        if n - len(self.eval_rows) >= self.stop_at and (self.sources.chosen is not None
                                                         or self.sources.optimizers_made == 0):
            self.request_stop()

    def request_stop(self) -> None:
        """--steps reached: stop recording at once (nothing after this is counted, whatever the script
        does next), then end the script as sys.exit(0) would, at this safe point between steps. The
        thread that reached N raises the stop signal; on another thread the main thread gets it too,
        and every other thread at its next optimizer step, so no training thread runs on alone."""
        if self.stop_requested:
            return
        self.stop_requested = True
        self.exit_reason = "steps reached"
        self.t_stop = self.now_ns()
        self.disarm()
        sys.stderr.write(f"perfcore: {self.steps_wanted} steps measured after {self.warmup} warm-up; "
                         "stopping the script (--steps)\n")
        signal_type = self.stop_signal
        stopped = {threading.get_ident()}
        if threading.get_ident() != self.torch_hooks.main_ident and signal_type is SystemExit:
            import ctypes

            stopped.add(self.torch_hooks.main_ident)
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self.torch_hooks.main_ident),
                                                       ctypes.py_object(SystemExit))
        from torch.optim.optimizer import register_optimizer_step_post_hook

        def after_stop(optimizer, args, kwargs):
            # Another training thread: stopped at its first step after the stop. A thread already
            # stopped that steps again caught the stop (the script or a library): counted, for the note.
            if signal_type is SystemExit and threading.get_ident() not in stopped:
                stopped.add(threading.get_ident())
                raise SystemExit(0)
            self.steps_after_stop += 1

        self._after_stop = register_optimizer_step_post_hook(after_stop)
        raise signal_type(0)

    def stop_note(self) -> str | None:
        """What the script did after perfcore stopped it at --steps, when it did not simply end."""
        if not self.stop_requested or self.stop_signal is not SystemExit:
            return None
        ran_s = (self.now_ns() - self.t_stop) / 1e9
        if self.steps_after_stop == 0 and ran_s < 2.0:
            return None
        more = f" and {self.steps_after_stop} more optimizer step(s)" if self.steps_after_stop else ""
        return (f"the script ran on for {ran_s:.1f} s{more} after perfcore stopped it at --steps "
                f"{self.steps_wanted} (it caught the SystemExit): nothing after the stop "
                f"is measured; the {self.steps_wanted} measured steps are the result")

    # -- the end -------------------------------------------------------------------------------
    def finalize(self) -> None:
        if os.getpid() != self.pid and self.timer is None:
            return  # a forked child: not the loop
        from perfcore.run.child.batches import flush_main_fetches

        flush_main_fetches(self)
        if self._finalized or self.disabled and self.timer is None:
            return
        self._finalized = True
        if threading.current_thread() is threading.main_thread():
            # A launcher (torchrun) that saw another rank fail sends SIGTERM now: finish writing first.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            from perfcore.run.child.part import write_part

            write_part(self)
        except Exception as e:  # say so, but never mask the script's own exit
            sys.stderr.write(f"perfcore: could not write results: {type(e).__name__}: {e}\n")
        if self.exit_reason == "interrupted":
            from perfcore.run.child.exits import die_of_sigint

            die_of_sigint()


def _watch_memory(inst: Instrumentation, on_gpu: bool) -> None:
    """Memory per step: the CUDA allocator's peak on a GPU (every step), else the peak RSS."""
    if on_gpu:
        from perfcore.capture.memory import PeakMemory

        inst.mem_kind, inst.mem_every = "cuda_allocated", 1
        # Per-step peaks, while the script's own max_memory_allocated() keeps its meaning.
        inst.peak_memory = PeakMemory().install()
        inst.peak_memory.step_peak()
    else:
        import resource

        inst.mem_kind = "peak_rss"
        inst._getrusage, inst._rusage_self = resource.getrusage, resource.RUSAGE_SELF


def _install(inst: Instrumentation, process_hooks: bool) -> None:
    """Patch torch now, or right after the script imports it; then the exit and no-step watchers."""
    if "torch" in sys.modules:
        inst.patch_torch()
    else:
        sys.meta_path.insert(0, TorchImportHook(inst))
    if not process_hooks:
        return
    inst.sources.start_watch(inst.watch_s)
    from perfcore.run.child.exits import install_exit_hooks

    install_exit_hooks(inst)


def activate(process_hooks: bool = True) -> None:
    """Install the hooks (idempotent). Called by perfcore's sitecustomize; the notebook magic
    passes process_hooks=False (no exit, excepthook or SIGTERM handlers in a kernel)."""
    global STATE
    if STATE is None:
        STATE = Instrumentation()
        _install(STATE, process_hooks)
