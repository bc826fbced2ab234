"""Zero-code instrumentation for `perfcore run`, active inside the profiled interpreter only.

run/child/_boot/sitecustomize.py calls activate() when PERFCORE_RUN_DIR is set. Nothing is imported or
patched until the script itself imports torch; then run/hooks.py patches torch, run/steps.py
decides where steps end, run/loaders.py follows the DataLoaders, and a perfcore.StepTimer (same
clock, same attribution) does the timing through its public interface. At exit (normal, crash,
Ctrl-C, SIGTERM, os._exit, or --steps reached) run/part.py writes this process's part to
PERFCORE_RUN_DIR/parts/.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from perfcore.run import protocol
from perfcore.run.child.hooks import TorchHooks, TorchImportHook
from perfcore.run.child.env import env_float, env_int, env_json, env_step_on
from perfcore.run.child.loaders import Loaders
from perfcore.run.child.memory import MemorySamples
from perfcore.run.child.steps import StepSources
from perfcore.run.child.stop import release_stop

__all__ = ["activate", "STATE", "Instrumentation"]

STATE: "Instrumentation | None" = None


class Instrumentation:
    def __init__(self) -> None:
        self.run_dir = Path(os.environ[protocol.ENV_RUN_DIR])
        self.pid = os.getpid()
        self.now_ns = time.perf_counter_ns  # the perfcore clock (same CLOCK_MONOTONIC)
        self.set_steps(env_int(protocol.ENV_STEPS, 0), env_int(protocol.ENV_WARMUP, 5))
        self.backend = os.environ.get(protocol.ENV_BACKEND, "auto")
        self.backend_note: str | None = None  # the backend asked for could not be used: why, and what was
        self.kernels = os.environ.get(protocol.ENV_KERNELS, "1") == "1"
        self.rank = protocol.launcher_rank()  # None for a RANK that is not an integer (perfcore run says so)
        # "<pid>@<run dir>": a marker from another run (a notebook or trainer session in the process
        # that launched this run) is not this run's outer process.
        pid, _, outer_dir = (os.environ.get(protocol.ENV_OUTER_PID) or "").partition("@")
        mine = outer_dir == str(self.run_dir) and pid.isdigit()
        # A Python the script started (not a launcher's rank): its part is kept apart from the job's.
        self.nested_in = int(pid) if mine and self.rank is None else None
        if not mine:
            os.environ[protocol.ENV_OUTER_PID] = f"{self.pid}@{self.run_dir}"
        self.progress = None  # run.child.progress.ProgressWriter, made with the timer
        self.watch_s = env_float(protocol.ENV_NO_STEP_WARN_S, 30.0)
        self.timer = None
        self.disabled = False
        self.torch_hooks = TorchHooks(self)
        self.sources = StepSources(self, env_step_on())
        self.loaders = Loaders(self.now_ns, lambda: self.sources.loop_state())
        self.mem_samples = MemorySamples()
        self.eval_rows: list[int] = []  # rows that are an evaluation pass, not a training step
        self.mem_every = 8
        self.mem_kind = "none"
        self.exit_reason = "finished"
        self.exception: str | None = None
        self.stop_requested = False
        self.in_cell = False  # the notebook magic runs a cell: --steps stops only the cell's threads
        self.t_stop = 0
        self.steps_after_stop = 0
        # Interpreter start, when the launcher passed it (time to first step counts imports too).
        self.t_start = env_int(protocol.ENV_T_LAUNCH_NS, 0) or self.now_ns()
        self.t_activate = self.now_ns()
        self.t_timer: int | None = None
        self.worker_file = None  # this DataLoader worker's batch lines (run/batches.py)
        self.main_fetches: list[tuple[int, int, int, int, int]] = []  # (t0, t1, collate, items, loader)
        self._lock = threading.Lock()
        self._finalized = False
        self.notes: list[str] = []
        self.overrides = env_json(protocol.ENV_DL_OVERRIDES)
        self.overrides_applied = 0
        self.synthetic = env_int(protocol.ENV_SYNTHETIC, 0)
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
        release_stop(self)

    # -- activation ---------------------------------------------------------------------------
    def ensure_installed(self) -> None:
        """The hooks on torch again after a session uninstalled them (torch already imported)."""
        if not self.torch_hooks.saved and "torch" in sys.modules:
            self.patch_torch()

    def patch_torch(self) -> None:
        self.torch_hooks.install()
        # Pay the import and probe costs now, while the script is still importing, so that making
        # the timer at the first batch takes microseconds and no script-side meter sees perfcore.
        # Not pandas (~0.3 s): only settling needs it, and a short run's parent settles for it.
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
                return _make_timer(self)
            except Exception as e:  # never raised into the script's call: its hooks call straight through
                self.disabled = True
                self.disarm()
                sys.stderr.write(f"perfcore: not timing this process ({type(e).__name__}: {e}); "
                                 "the script runs on untimed\n")
                return None

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
        """A step end from a Python-side source (backward, batch, forward), which is always the
        chosen one: after_step does the upkeep (settling, following the device) once."""
        if self.timer is not None and not self.stop_requested and self.timer.engine.end_step(at_ns=t, upkeep=False):
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
        if n == 0 or self.timer is None:
            return
        with self.timer.engine.own:  # all of it perfcore's own work, left out of the step it falls in
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
        from perfcore.run.child.stop import request_stop

        request_stop(self)

    def stop_note(self) -> str | None:
        from perfcore.run.child.stop import stop_note

        return stop_note(self)

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


def _make_timer(inst):
    """The StepTimer on the device the run uses, its phases, memory watch and progress file; armed."""
    import perfcore
    import psutil
    import torch

    caps = perfcore.capabilities()
    on_gpu = torch.cuda.is_available() and caps["features"]["cuda_events"]
    kernels = on_gpu and inst.kernels and inst.backend in ("auto", "native", "cupti-python")
    if inst.backend in ("native", "cupti-python") and not on_gpu:
        why = caps["reasons"].get("cuda_events") or caps["reasons"].get("cupti") or "no GPU"
        inst.backend_note = f"--backend {inst.backend} needs a GPU ({why}): timed host phases instead (backend host)"
        inst.notes.append(inst.backend_note)
        sys.stderr.write(f"perfcore: {inst.backend_note}\n")
    timer = perfcore.StepTimer(device="cuda" if on_gpu else "cpu", warmup=inst.warmup, kernels=kernels,
                               kernel_backend=inst.backend if inst.backend != "host" else "auto")
    inst.fwd = timer.phase("forward", label="compute")
    inst.bwd = timer.phase("backward", label="compute")
    inst.opt = timer.phase("optimizer", label="compute")
    inst.on_gpu = on_gpu
    _watch_memory(inst, on_gpu)
    psutil.cpu_percent(None)  # primes the system-wide CPU counter for the run
    inst.t_timer = inst.now_ns()
    inst.timer = timer
    from perfcore.run.child.progress import ProgressWriter

    inst.progress = ProgressWriter.for_process(inst.run_dir, inst.rank, inst.steps_wanted, inst.warmup, on_gpu)
    inst.arm(timer)
    return timer


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
