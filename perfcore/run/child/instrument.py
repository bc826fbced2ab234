"""Zero-code instrumentation for `perfcore run`, active inside the profiled interpreter only.

run/child/_boot/sitecustomize.py calls activate_from_file() with the configuration `perfcore run` wrote
for this process (protocol.ChildConfig); the notebook magic and the trainer callbacks build one and call
activate(). Nothing is imported or
patched until the script itself imports torch; then run/hooks.py patches torch, run/steps.py
decides where steps end, run/loaders.py follows the DataLoaders, and a perfcore.StepTimer (same
clock, same attribution) does the timing through its public interface. At exit (normal, crash,
Ctrl-C, SIGTERM, os._exit, or --steps reached) run/part.py writes this process's part to
<run dir>/parts/.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

from perfcore.run import protocol
from perfcore.run.child.batches import BatchLines, LoaderChanges
from perfcore.run.child.hooks import TorchHooks, TorchImportHook
from perfcore.run.child.loaders import Loaders
from perfcore.run.child.steps import EvalEnded, SourceChosen, StepEnded, StepSources
from perfcore.run.child.stop import Ending
from perfcore.run.child.upkeep import Upkeep

__all__ = ["activate", "activate_from_file", "STATE", "Instrumentation"]

STATE: "Instrumentation | None" = None


class Instrumentation:
    def __init__(self, config: protocol.ChildConfig) -> None:
        self.config = config
        self.run_dir = Path(config.run_dir)
        self.pid = os.getpid()
        self.now_ns = time.perf_counter_ns  # the perfcore clock (same CLOCK_MONOTONIC)
        self.set_steps(config.steps, config.warmup)
        self.backend = config.backend
        self.backend_note: str | None = None  # the backend asked for could not be used: why, and what was
        self.kernels = config.kernels
        # The problems were said by the parent; the script's own are noted. RANK is None where it is not an
        # integer (perfcore run says so).
        launcher, self.launcher_problems = protocol.launcher_env()
        self.rank: int | None = launcher["RANK"]
        self.nested_in: int | None = None  # a Python the script started: its part is kept apart from the job's
        self.world_size: int | None = None  # the job's size where the parent said it (a Slurm task)
        if config.launcher_pid:  # started by perfcore run (not a notebook's or a trainer's own process)
            outer = config.claim_outer()
            if self.rank is None and outer is None and config.task_rank is not None:
                # srun's task, no launcher: the script's own process is the rank Slurm gave it (its
                # subprocesses are not).
                self.rank, self.world_size = config.task_rank, config.task_world_size
            self.nested_in = outer if self.rank is None else None
        self.watch_s = config.no_step_warn_s
        self.timer = None
        self.disabled = False
        self.torch_hooks = TorchHooks(self)
        self.sources = StepSources(self, config.step_on)
        self.loaders = Loaders(self.now_ns, lambda: self.sources.loop_state(), self.on_loader_eval)
        self.upkeep = Upkeep()  # own work after each step end: settling, memory, the progress file
        self.eval_rows: list[int] = []  # rows that are an evaluation pass, not a training step
        self.ending = Ending(self.now_ns)  # how this process's run ends (exit handlers, --steps)
        self.in_cell = False  # the notebook magic runs a cell: --steps stops only the cell's threads
        # Interpreter start, when the launcher passed it (time to first step counts imports too).
        self.t_start = config.t_launch_ns or self.now_ns()
        self.batch_lines = BatchLines(self.rank)  # one line per batch, in <run dir>/workers/
        self._lock = threading.Lock()
        self._finalized = False
        self.notes: list[str] = []
        self.lines = None  # run.lines.LineCapture of the training thread, made with the timer
        self.loader_changes = LoaderChanges(config.dl_overrides, config.synthetic)  # what triage changes

    def set_steps(self, steps: int, warmup: int) -> None:
        """--steps / --warmup: stop once `steps` steps are measured after `warmup` (0: never)."""
        self.steps_wanted, self.warmup = steps, warmup
        self.stop_at = warmup + steps if steps else sys.maxsize

    def new_cell(self, config: protocol.ChildConfig, in_cell: bool = False) -> None:
        """The notebook magic (in_cell: --steps then stops only the cell's threads) and a trainer session: a
        fresh timer and step source per cell, in its own folder, with its own steps and warm-up."""
        self.config, self.run_dir, self.in_cell = config, Path(config.run_dir), in_cell
        self.timer = None
        self.ending.release()
        self._afresh()
        if self.torch_hooks.timed:
            self.torch_hooks.backward_ends(True)
        self.set_steps(config.steps, config.warmup)

    def _afresh(self) -> None:
        """A new recording's state: step sources, upkeep, evaluation rows, ending (the timer is made later)."""
        self.upkeep, self.eval_rows = Upkeep(), []
        self.sources = StepSources(self, self.sources.forced)
        self._finalized, self.disabled = False, False
        self.ending = Ending(self.now_ns)

    def end_cell(self):
        """The cell (or session) is over: the hooks call straight through until the next one, and a later
        cell's threads are not this one's. Returns its timer (None if it made none) and the stop note."""
        self.disabled = True
        self.torch_hooks.disarm()
        note = self.stop_note()  # the cell caught the stop and ran on
        self.in_cell = False
        self.ending.release()
        timer, self.timer = self.timer, None
        return timer, note

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
        from perfcore._native import capabilities

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
                self.torch_hooks.disarm()
                self.stand_down(f"not timing this process ({type(e).__name__}: {e}); the script runs on untimed")
                return None

    def stand_down(self, why: str) -> None:
        """Nothing more is timed in this process (the script runs on), with one line saying why."""
        self.disabled = True
        sys.stderr.write(f"perfcore: {why}\n")

    def arm(self, timer) -> None:
        from perfcore.recording.engine import COMPACT_EVERY

        self._is_grad_enabled = __import__("torch").is_grad_enabled
        scopes = {
            "load": timer.engine.fetch_scope(),
            "forward": self.fwd,
            "backward": self.bwd,
            "autograd.backward": self.bwd,
            # Without a GPU no .to() moves data between devices (x.to("cpu", torch.float64) is a cast
            # on the host): only a run on a GPU times them as transfer.
            "to": timer.transfer if self.on_gpu else None,
            "cuda": timer.transfer if self.on_gpu else None,
        }
        self.torch_hooks.arm(timer, scopes)
        chosen = self.sources.chosen
        self.torch_hooks.timed["load"].on_enter = self.on_fetch_start
        if chosen in (None, "forward"):
            self.torch_hooks.timed["forward"].on_enter = self.on_forward_start
        # The optimizer clock appends its step ends straight into the timer's list unless another
        # source was forced (then the optimizer is timed, its steps are not step ends).
        ends = timer.engine.boundaries if chosen in (None, "optimizer") else None
        # Held here too: a stop inside the callback disarms the clock, which drops its reference.
        self._on_step_cb = self.on_step
        self.torch_hooks.clock.arm(
            self.opt,
            ends,
            self._on_step_cb,
            self.upkeep.memory.every,
            COMPACT_EVERY,
            self.stop_at,
            self.upkeep.memory.min_gap_ns,
        )

    def forked(self) -> None:
        """A forked child (a DataLoader worker, a user's Pool, Hogwild by fork) is not this loop; it
        becomes a training process of its own if it steps an optimizer (TorchHooks.after_fork)."""
        self.torch_hooks.disarm()
        self.timer = None
        self.disabled = True
        if self.torch_hooks.clock is not None:
            self.torch_hooks.after_fork()

    def adopt_fork(self) -> None:
        """This forked child steps an optimizer: it trains, measured as a process the script started
        (its own part; the parent merges those that train), from a fresh timer."""
        from torch.utils.data import get_worker_info

        if get_worker_info() is not None or self.timer is not None:
            return
        if self.rank is None:
            self.nested_in = self.nested_in or self.pid
        self.pid, self.notes = os.getpid(), []
        self.t_start = self.now_ns()
        self._lock = threading.Lock()  # a lock held by another thread at the fork stays held in the child
        self._afresh()
        self.ensure_timer()

    # -- what the step sources see, and the events it implies ----------------------------------
    def on_fetch_start(self) -> None:
        events = self.sources.fetch_started(self.now_ns(), self._is_grad_enabled())
        if events:
            self.apply(events)

    def on_forward_start(self) -> None:
        events = self.sources.forward_started(self.now_ns())
        if events:
            self.apply(events)

    def on_backward_end(self) -> None:
        self.apply(self.sources.backward_ended(self.now_ns()))

    def on_mode_change(self, training: bool) -> None:
        self.apply(self.sources.mode_changed(training, self.now_ns()))

    def on_loader_eval(self, t0: int, t1: int) -> None:
        if not self.disabled and threading.get_ident() == self.torch_hooks.main_ident:
            self.apply(self.sources.grad_off_pass(t0, t1))

    def finish_sources(self) -> str | None:
        """The step source at the end, chosen now if it was not yet (None: nothing looked like a step)."""
        self.apply(self.sources.finish())
        return self.sources.chosen

    def apply(self, events) -> None:
        """The one place where the step sources' events change the timer (StepSources only decides)."""
        for event in events:
            if isinstance(event, StepEnded):
                # From a Python-side source (backward, batch, forward), which is always the chosen one:
                # after_step does the upkeep (settling, following the device) once.
                self._end_step(at_ns=event.t_ns, upkeep=False)
            elif isinstance(event, EvalEnded):
                self._eval_ended(event.t0_ns, event.t1_ns)
            elif isinstance(event, SourceChosen):
                self._source_chosen(event)

    def _source_chosen(self, event: SourceChosen) -> None:
        source = event.source
        if event.ends is not None and self.timer is not None:
            self.timer.engine.set_boundaries(event.ends)
        if event.eval_rows is not None:
            self.eval_rows = event.eval_rows
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
        if event.upkeep and self.timer is not None:
            self.after_step(len(self.timer.engine.boundaries))

    def boundary_count(self) -> int:
        return len(self.timer.engine.boundaries) if self.timer is not None else 0

    def _end_step(self, **how) -> None:
        if self.timer is not None and not self.ending.stop_requested and self.timer.engine.end_step(**how):
            self.after_step(len(self.timer.engine.boundaries))

    def _eval_ended(self, t0: int, t1: int) -> None:
        """An evaluation pass between two training steps becomes a row of its own (reported apart)."""
        engine = self.timer.engine if self.timer is not None and not self.ending.stop_requested else None
        if engine is not None and engine.boundaries and engine.boundaries[-1] <= t0 and engine.end_step(at_ns=t1):
            self.eval_rows.append(len(engine.boundaries) - 1)

    def scaler_stepped(self, optimizer, stepped: bool) -> None:
        if self.sources.scaler_stepped(optimizer, stepped):
            self._end_step()

    def on_step(self, n: int) -> None:
        """Called by the native StepClock after optimizer step end n when upkeep is due."""
        if n == 1:
            self.apply(self.sources.optimizer_stepped())
        self.after_step(n)

    def after_step(self, n: int) -> None:
        """After step end n: the upkeep, then --steps."""
        if n == 0 or self.timer is None or self.ending.stop_requested:
            return
        # Evaluation rows are not training steps: --steps counts the training ones. The stop comes
        # before the upkeep: the upkeep lets other threads run, and a second training thread must
        # not end a step past the stop while this one settles.
        if n - len(self.eval_rows) >= self.stop_at and (
            self.sources.chosen is not None or self.sources.optimizers_made == 0
        ):
            self.ending.request_stop(self)
        self.upkeep.after(n, self.timer, self.sources.chosen is not None, self.torch_hooks)

    def stop_note(self) -> str | None:
        return self.ending.stop_note(self.steps_wanted, "the cell" if self.in_cell else "the script")

    # -- the end -------------------------------------------------------------------------------
    def finalize(self) -> None:
        if os.getpid() != self.pid and self.timer is None:
            return  # a forked child: not the loop
        self.batch_lines.flush(self.run_dir)
        if self._finalized or self.disabled and self.timer is None:
            return
        self._finalized = True
        if threading.current_thread() is threading.main_thread():
            # A launcher (torchrun) that saw another rank fail sends SIGTERM now: finish writing first.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            from perfcore.run.child.part_writer import write_part

            write_part(self)
        except Exception as e:  # say so, but never mask the script's own exit
            sys.stderr.write(f"perfcore: could not write results: {type(e).__name__}: {e}\n")
        if self.ending.reason == "interrupted":
            from perfcore.run.child.exits import die_of_sigint

            die_of_sigint()


def _make_timer(inst):
    """The StepTimer on the device the run uses, its phases, memory watch and progress file; armed."""
    import psutil
    import torch

    from perfcore._native import capabilities
    from perfcore.timing import StepTimer

    caps = capabilities()
    on_gpu = torch.cuda.is_available() and caps["features"]["cuda_events"]
    kernels = on_gpu and inst.kernels and inst.backend in ("auto", "native", "cupti-python")
    if inst.backend in ("native", "cupti-python") and not on_gpu:
        why = caps["reasons"].get("cuda_events") or caps["reasons"].get("cupti") or "no GPU"
        inst.backend_note = f"--backend {inst.backend} needs a GPU ({why}): timed host phases instead (backend host)"
        inst.notes.append(inst.backend_note)
        sys.stderr.write(f"perfcore: {inst.backend_note}\n")
    timer = StepTimer(
        device="cuda" if on_gpu else "cpu",
        warmup=inst.warmup,
        kernels=kernels,
        kernel_backend=inst.backend if inst.backend != "host" else "auto",
    )
    inst.fwd = timer.phase("forward", label="compute")
    inst.bwd = timer.phase("backward", label="compute")
    inst.opt = timer.phase("optimizer", label="compute")
    inst.on_gpu = on_gpu
    psutil.cpu_percent(None)  # primes the system-wide CPU counter for the run
    inst.timer = timer
    from perfcore.run.child.progress import ProgressWriter

    # Keyed as its part is (rank<N> or pid<P>); tests shorten the checkpoint interval (0: the default) and
    # slow each write through the child's configuration.
    inst.upkeep.start(
        on_gpu,
        ProgressWriter(
            inst.run_dir,
            protocol.part_key(inst.rank),
            steps_wanted=inst.steps_wanted,
            warmup=inst.warmup,
            on_gpu=on_gpu,
            checkpoint_s=inst.config.checkpoint_s or protocol.CHECKPOINT_EVERY_S,
            extra_s=inst.config.tick_extra_s,
        ),
    )
    inst.arm(timer)
    if inst.config.lines:
        from perfcore.run.lines import MIN_COUNTED_STEPS, start as start_lines

        # Every step end counts (the native step clock calls the upkeep only every few steps). The sync-call
        # counter stops at its cap once MIN_COUNTED_STEPS steps past warm-up are covered.
        wanted = inst.warmup + MIN_COUNTED_STEPS

        def steps() -> int:
            return inst.timer.engine.steps if inst.timer is not None else 0

        inst.lines, why = start_lines(torch, more=lambda: steps() < wanted)  # the training thread makes the timer
        if inst.lines is not None:
            inst.upkeep.lines = inst.lines
            if inst.lines.counter is not None:
                inst.lines.counter.steps_now = steps
        if why:
            inst.notes.append(why)
            sys.stderr.write(f"perfcore: {why}\n")
    return timer


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


def activate(config: protocol.ChildConfig, process_hooks: bool = True) -> None:
    """Install the hooks (idempotent). The notebook magic and the trainer callbacks pass
    process_hooks=False (no exit, excepthook or SIGTERM handlers in a process someone else owns)."""
    global STATE
    if STATE is None:
        STATE = Instrumentation(config)
        _install(STATE, process_hooks)


def activate_from_file(path: str) -> None:
    """perfcore run's child: the configuration its launcher wrote (protocol.ConfigError on anything else)."""
    activate(protocol.ChildConfig.load(path))
