"""The recording engine underneath StepTimer and `perfcore run`: spans, CUDA events, CUPTI, step
ends, settling and device following.

Host phases go to the native span recorder (per-thread, lock-free). On CUDA, phases labelled
compute/transfer/comm also record CUDA events on the recording's stream, resolved lazily by query,
so no step is ever synchronized; `load` is host waiting and uses the host clock alone. With
kernels=True, CUPTI kernel and memcpy records replace the events (compute = inside a kernel).
StepTimer gives the user's methods over one Recording; run/ and the integrations drive it directly.
"""

from __future__ import annotations

import functools
import itertools
import time
from typing import Any, Callable, Iterable

import numpy as np

from perfcore._lazy import lazy_module
from perfcore.analysis import attribution
from perfcore._native import native
from perfcore.analysis.run_parts import Capture
from perfcore.analysis.store import StepStore
from perfcore.errors import UsageError
from perfcore.recording import document, gpu, phase_cost
from perfcore.recording.device_capture import DeviceCapture
from perfcore.recording.document import run_document
from perfcore.recording.phase_names import PhaseNames
from perfcore.recording.own_work import OwnWork
from perfcore.recording.settling import SettleSchedule
from perfcore.recording.tracing import kernel_mode

pd = lazy_module("pandas")  # imported on first use: settling needs it, recording does not

__all__ = ["Recording", "upkeep_due", "TimedLoader", "phase_cost_ns"]

LOAD, TRANSFER, COMPUTE, COMM = 0, 1, 2, 3
BUILTIN = {"load": LOAD, "transfer": TRANSFER, "compute": COMPUTE, "comm": COMM}
FIRST_CUSTOM = 16
GPU_LABELS = ("compute", "transfer", "comm")
STEP_ON = ("step", "batch", "optimizer")
COMPACT_EVERY = 1024  # settle at most this often (steps); when, in time, is the SettleSchedule's
SETTLE_LAG = 2  # the newest steps stay unsettled: their GPU work may still be arriving
FOLLOW_UNTIL = 8  # the first steps (and every settle) check which GPU holds the work
KEEP_ENDS = 1024  # step ends kept after their steps settle (the live view reads the latest 256)


def _decorate(scope, fn: Callable) -> Callable:
    """`@timer.phase("x")` / `@timer.compute`: fn runs inside the phase."""

    @functools.wraps(fn)
    def timed(*args, **kwargs):
        with scope:
            return fn(*args, **kwargs)

    return timed


@functools.lru_cache(maxsize=None)
def _scope_class():
    # The native PhaseScope itself (a Python subclass would cost ~13 ns more per `with`).
    C = native()
    C._set_scope_decorator(_decorate)
    return C.PhaseScope


@functools.lru_cache(maxsize=None)
def phase_cost_ns() -> float:
    """Host cost of one phase's enter+exit on this machine, as a training step leaves the caches (each
    timed phase after a small autograd step: phase_cost.py), for the overhead report. Once a process."""
    C = native()
    rec = C.SpanRecorder()
    scope = C.phase_scope(_scope_class(), rec, 0)

    def enter_exit() -> None:
        with scope:
            pass

    cost = phase_cost.calibrated_cost_ns(enter_exit)
    rec.drain()
    return cost


def _hook_optimizer(engine: "Recording"):
    from torch.optim.optimizer import register_optimizer_step_post_hook

    def ended(opt, args, kwargs) -> None:
        if engine._clock_opt is None:
            engine._clock_opt = id(opt)
        if id(opt) == engine._clock_opt:
            # At the optimizer's end, by time: a phase still open (the step inside `with
            # timer.compute():`) is split at the boundary by the attribution, not refused.
            engine.end_step(at_ns=engine._C.now_ns())

    return register_optimizer_step_post_hook(ended)


class TimedLoader:
    """Wraps an iterable; each __next__ is timed as `load` (the host waiting for the batch)."""

    __slots__ = ("_engine", "_src", "_it")

    def __init__(self, engine: "Recording", src: Iterable):
        self._engine, self._src, self._it = engine, src, None

    def __iter__(self) -> "TimedLoader":
        self._it = iter(self._src)
        return self

    def __next__(self):
        if self._it is None:
            self._it = iter(self._src)
        rec = self._engine._rec
        if LOAD in rec.open_phases():
            raise UsageError(
                "nested timer.load(): a batch is fetched while another fetch is being timed; "
                "wrap only the outermost loader"
            )
        self._engine.fetch_started()
        rec.begin(LOAD)
        try:
            return next(self._it)
        finally:
            rec.end(LOAD)

    def __len__(self) -> int:
        return len(self._src)  # type: ignore[arg-type]


class Recording:
    """One run's recording: the native span recorder, the CUDA event timer or CUPTI tracer, the
    step ends, and the StepStore the steps settle into. Arguments as StepTimer's."""

    def __init__(
        self,
        device: str = "auto",
        warmup: int = 5,
        kernels: bool = False,
        stream: Any = None,
        step_on: str = "step",
        kernel_backend: str = "auto",
    ):
        if warmup < 0:
            raise UsageError(f"warmup must be >= 0, got {warmup}")
        if step_on not in STEP_ON:
            raise UsageError(f"step_on must be one of {', '.join(STEP_ON)}, got {step_on!r}")
        mode = kernel_mode(kernels)  # True: "lean"; or a mode by name (recording/tracing.py)
        self._C = native()
        self._assemble(
            DeviceCapture.open(device, stream),
            self._C.SpanRecorder(),
            self._C.StepEnds(),  # int64 ends; settled ones are let go
            self._C.now_ns,
            phases=None,
            warmup=warmup,
            step_on=step_on,
        )
        if mode is not None:
            self.start_kernels(kernel_backend, mode)
        self.store = self._new_store()
        if step_on == "optimizer":
            self._opt_hook = _hook_optimizer(self)

    @classmethod
    def assembled(
        cls,
        capture: DeviceCapture,
        spans,
        ends,
        phases: PhaseNames,
        *,
        warmup: int,
        step_on: str,
        created_ns: int,
    ) -> "Recording":
        """A Recording of parts made elsewhere (recording/replay.py: a recording carried to another
        process): the capture, a span recorder (drain, open_phases, record), the step ends (len,
        since, trim) and the phase names. Everything else is set up as for a new recording; nothing
        native is loaded, and no optimizer is hooked."""
        rec = cls.__new__(cls)
        rec._assemble(capture, spans, ends, lambda: created_ns, phases=phases, warmup=warmup, step_on=step_on)
        rec.store = rec._new_store()
        return rec

    def restore(self, *, backend: str, first_ns: int | None, settle_ns: int, upkeep_errors: int, notes: list[str]):
        """What an assembled recording's own process knew of its run: the backend, the first batch
        fetch's time, the time spent settling there, its upkeep errors and notes."""
        self.backend, self._t_first, self.settle_ns = backend, first_ns, int(settle_ns)
        self.upkeep_errors, self.notes = int(upkeep_errors), list(notes)

    def _assemble(
        self, capture: DeviceCapture, spans, ends, clock, *, phases: PhaseNames | None, warmup: int, step_on: str
    ) -> None:
        self.gpu = capture  # the GPU side: events, CUPTI tracer, device following
        self.device = capture.kind
        self.warmup = int(warmup)
        self._rec = spans
        self.own = OwnWork(spans, clock)  # perfcore's own work: left out of every step
        self.phases = phases or PhaseNames(
            {v: k for k, v in BUILTIN.items()} | {attribution.OWN_PHASE_ID: attribution.OWN},
            {v: k for k, v in BUILTIN.items()},
            FIRST_CUSTOM,
        )
        self._boundaries = ends
        self._t_created = clock()
        self.settling = SettleSchedule(self._t_created)
        self._t_first: int | None = None
        self.backend = "events" if self.device == "cuda" else "host"
        self.notes: list[str] = []
        self.upkeep_errors = 0
        self.settle_ns = 0  # time spent settling inside the loop (the final settle runs after it; read-only)
        self.step_on = step_on
        self._fetches = 0
        self._opt_hook = None
        self._clock_opt: int | None = None

    def _new_store(self) -> StepStore:
        # The settled steps and the kept detail (read by the document and the raw part; fed only from
        # here). Made once the tracer is known: with CUPTI, kernels label the GPU rather than events.
        store = StepStore(
            self.phases.labels,
            FIRST_CUSTOM,
            on_gpu=self.device == "cuda",
            use_kernels=self.gpu.tracer is not None,
            warmup=self.warmup,
        )
        store.tracing = self.gpu.tracing if self.gpu.tracer is not None else None  # its cost, kept out of the steps
        return store

    # -- phases -------------------------------------------------------------------------------
    def make_scope(self, name: str, phase_id: int, label: str):
        """The native scope of one phase: entering and leaving it is one C call each."""
        cap = self.gpu
        events = cap.events if (cap.events is not None and label in GPU_LABELS) else None
        tag = cap.tracer is not None and (cap.tracing is None or cap.tracing.tags_phases) and label in GPU_LABELS
        return self.phases.add(name, self._C.phase_scope(_scope_class(), self._rec, phase_id, events, cap.stream, tag))

    def phase(self, name: str, label: str = "host"):
        """The scope of phase `name`, declared on first use with its label."""
        if label not in attribution.LABELS:
            raise UsageError(f"phase label must be one of {attribution.LABELS}, got {label!r}")
        scope = self.phases.scope(name)
        if scope is not None:
            declared = self.phases.labels[scope.phase_id]
            if declared != label:
                raise UsageError(f"phase {name!r} was declared with label {declared!r}, not {label!r}")
            return scope
        if name in BUILTIN:
            raise UsageError(f"{name!r} is a built-in phase: use timer.{name}()")
        return self.phases.declare(name, label, self.make_scope, self.notes, self.store.shared_phase_ids)

    def _open_names(self) -> str:
        return ", ".join(self.phases.names.get(p, str(p)) for p in self._rec.open_phases())

    def fetch_started(self) -> None:
        if self._t_first is None:
            self._t_first = self._C.now_ns()
        self._fetches += 1
        if self.step_on == "batch" and self._fetches > 1:
            self.end_step()

    # -- steps --------------------------------------------------------------------------------
    def step(self) -> None:
        t = self._rec.boundary()  # one native call: checks open phases, stamps, moves the step on
        if t < 0:
            names = self._open_names()
            raise UsageError(f"timer.step() while phase(s) {names} are still open; close them before the step ends")
        self._boundaries.append(t)
        n = len(self._boundaries)
        if n % COMPACT_EVERY == 0 or gpu.volume_due(self, n):
            self.upkeep(n)
        elif n <= FOLLOW_UNTIL and self.gpu.follow:
            self.follow_device()

    def upkeep(self, n: int) -> None:
        """After boundary n, every COMPACT_EVERY steps: settle all but the last few steps into rows
        and aggregates, so memory stays flat. On a GPU this waits for the work of steps already
        ended (once per COMPACT_EVERY steps; never a per-step sync). Whoever appends to
        `boundaries` directly (perfcore run's native step clock) calls this itself. Its time is own work."""
        if n <= FOLLOW_UNTIL or n % COMPACT_EVERY == 0:
            self.follow_device()
        t = self._boundaries[-1]  # boundary n, the latest (the ends before it may be let go)
        # by time or count (the schedule), or by the volume of decoded records waiting in the tracer
        if self.settling.due(t, n - self.store.settled, self.store.settled > 0) or gpu.records_due(self):
            t0 = self._C.now_ns()
            try:
                self._compact(final=False)
            except Exception as e:  # never into the user's loop: counted, noted, retried next time
                self.upkeep_errors += 1
                if self.upkeep_errors == 1:
                    self.notes.append(
                        f"settling steps failed ({type(e).__name__}: {e}); retried at the next settle and at the end"
                    )
            finally:
                self.settle_ns += self.own.record(t0)

    # -- the interface of step sources outside the loop (perfcore run's hooks, the notebook magic) --
    @property
    def boundaries(self):
        """Step end times (ns, perfcore clock), in order: a native StepEnds, which a native step clock
        may append to directly. len() counts every step; the ends of settled steps older than the
        latest KEEP_ENDS are let go (indexing them raises IndexError)."""
        return self._boundaries

    def end_step(self, at_ns: int | None = None, upkeep: bool = True) -> bool:
        """End the current step now (as step(), but False instead of an error when a phase is
        still open on this thread), or at `at_ns`, a time already past that a hook observed (a
        batch fetch's start, a backward's end). upkeep=False: the caller upkeeps after it."""
        if at_ns is None:
            t = self._rec.boundary()
            if t < 0:
                return False
        else:
            t = int(at_ns)
            if self._boundaries and t < self._boundaries[-1]:
                return False
        self._boundaries.append(t)
        n = len(self._boundaries)
        if upkeep and upkeep_due(self, n):
            self.upkeep(n)
        return True

    def set_boundaries(self, times: Iterable[int]) -> None:
        """Replace the step ends before any step is settled (a step source chosen after the run began)."""
        if self.store.settled:
            raise UsageError("set_boundaries: steps are already settled; choose the step source earlier")
        self._boundaries.replace(sorted(int(t) for t in times))

    def drop_steps_after(self, n: int) -> int:
        """Forget the steps ended after step n that are not settled yet (--steps: another training thread
        ended one between the stop and the clock's disarm); returns how many. Settled steps stay."""
        keep = max(int(n), self.store.settled)
        extra = len(self._boundaries) - keep
        if extra > 0:
            self._boundaries = first_ends(self._boundaries, keep)  # the clock that appended to them is disarmed
        return max(extra, 0)

    def fetch_scope(self):
        """The native scope that times a batch fetch as `load` (what timer.load() times inside)."""
        return self.phases.scope("load") or self.make_scope("load", LOAD, "load")

    def record(self, label: str, start_ns: int, end_ns: int) -> None:
        """A span measured elsewhere (e.g. a collective's completion on another thread), in `label`."""
        self._rec.record(BUILTIN[label], int(start_ns), int(end_ns))

    def close_open_phases(self) -> int:
        """Close every phase still open on this thread at now (a crash or a stop inside one)."""
        open_now = self._rec.open_phases()
        for pid in reversed(open_now):
            self._rec.end(pid)
        return len(open_now)

    def step_table(self) -> pd.DataFrame:
        """Every completed step with its ns columns (start_ns, wall_ns, <label>_ns), after summary()."""
        if not hasattr(self, "_last_table"):
            self.summary()
        return self._last_table

    def trace_tables(self) -> dict[str, pd.DataFrame]:
        """The kept steps' raw spans, kernels, copies and events (bounded however long the run)."""
        return self.store.trace_tables()

    def settled_rows(self, since: int = 0, upto: int | None = None) -> dict[str, np.ndarray]:
        """The settled steps in [since, upto) (upto: all settled so far), ns columns as plain arrays,
        without settling more or waiting (a checkpoint reads only the rows it has not written, in
        slices, on the training thread: no pandas)."""
        return self.store.columns(since, upto)

    def settled_totals(self) -> dict[str, Any]:
        """Settled and measured step counts and their summed ns per label: O(1), for a live view."""
        return self.store.totals()

    def phase_names(self) -> dict[int, str]:
        """Phase id -> name, the built-in phases and the custom ones."""
        return dict(self.phases.names)

    @property
    def kernels_traced(self) -> bool:  # CUPTI records kernels and copies (else CUDA events, or host only)
        return self.gpu.tracer is not None

    # Read-only views for the GPU check and the benchmarks, which measure these parts themselves.
    @property
    def tracer(self):  # the CUPTI tracer (native or cupti-python) when kernels are traced, else None
        return self.gpu.tracer

    @property
    def event_timer(self):  # the CUDA event timer of GPU-label phases, else None
        return self.gpu.events

    @property
    def spans(self):  # the native span recorder the phases write to
        return self._rec

    @property
    def steps(self) -> int:
        return len(self._boundaries)

    @property
    def started_ns(self) -> tuple[int | None, int]:
        """(the first batch fetch's time, None before one; the recording's creation), ns: the first
        step starts at the earlier of them (what a carried recording's assembled() and restore() take)."""
        return self._t_first, int(self._t_created)

    # -- collection ---------------------------------------------------------------------------
    def follow_device(self) -> None:
        """Record phase events on the GPU that holds this process's tensors (see gpu.follow_device)."""
        with self.own:
            gpu.follow_device(self)

    def start_kernels(self, backend: str = "auto", mode: str = "lean") -> None:
        """Trace kernels and copies with CUPTI (gpu.start_kernels; mode: tracing.py); else CUDA events."""
        started = gpu.start_kernels(self, backend, mode)
        if started is not None:
            self.backend = started

    def capture_stats(self) -> Capture:  # run.json "capture": what the GPU capture recorded and lost
        return self.gpu.capture_stats(self)

    def device_name(self) -> str:  # as run.json names it: "cpu", or the GPU's name
        return self.gpu.device_name()

    def _drain(self, wait: bool) -> None:
        """Move what the recorder, the event timer and CUPTI have into the store's pending tables."""
        part = self._rec.drain()
        self.store.add("spans", part)
        self.gpu.drain(self.store, part, wait)

    def add_activity(self, frames: dict[str, pd.DataFrame], spans: dict | None = None) -> None:
        """CUPTI's kernel, copy and launch frames into the store (DeviceCapture.add_activity)."""
        self.gpu.add_activity(self.store, frames, spans)

    def _compact(self, final: bool) -> None:
        self._drain(wait=final or self.device == "cuda")
        ends, done = self._boundaries, self.store.settled
        upto = len(ends) - (0 if final else SETTLE_LAG)
        if upto > done:
            since = np.frombuffer(ends.since(done), dtype=np.int64)
            self.store.settle(since, upto, self._t_first or self._t_created, first=done)
        ends.trim(min(self.store.settled, len(ends) - KEEP_ENDS))

    def settle_all(self) -> None:
        """Settle every step (all phases must be closed); the rows are the store's (store.column)."""
        if self._rec.open_phases():
            raise UsageError(f"phase(s) {self._open_names()} never closed; close them before summary()")
        self._compact(final=True)

    def summary(self) -> pd.DataFrame:
        """Settle every step (all phases must be closed) and return the per-step ms table."""
        self.settle_all()
        self._last_table, view = document.ms_table(self.store.table(), self.phases.names, FIRST_CUSTOM)
        return view

    def ms_sources(self) -> dict[str, str | None]:
        """The steps table's ms columns -> the store's ns column each is made of (None: zeros)."""
        return document.ms_sources(self.store.column_names(), self.phases.names, FIRST_CUSTOM)

    def document(
        self, top_kernels: int = 10, *, settle: bool = True, evaluation_rows=None, table=None
    ) -> dict[str, Any]:
        """The run/1 document of the steps so far; settle=False: summary() or settle_all() just settled
        them. table: the settled rows' summary columns (document.summary_columns; ns alone will do),
        instead of the whole table summary() built."""
        if settle:
            self.summary()
        return run_document(
            self,
            self._last_table if table is None else table,
            self.gpu.phase_cost(self, phase_cost_ns),
            top_kernels,
            evaluation_rows,
        )

    def close(self) -> None:
        """Stop CUPTI tracing if this recording started it, and the optimizer hook."""
        if self.gpu.tracer is not None and self.gpu.tracer.active:
            self.add_activity(self.gpu.tracer.stop())
        if self._opt_hook is not None:
            self._opt_hook.remove()
            self._opt_hook = None


def upkeep_due(rec: Recording, n: int) -> bool:
    """Whether rec.upkeep(n) is due after step end n: every COMPACT_EVERY steps, or sooner for the volume of
    records the tracer has decoded (what Recording.step asks inline, for a caller that appends the ends
    itself: perfcore run's native step clock, between whose settles a loop of microsecond kernels fills the
    tracer's cap)."""
    return n % COMPACT_EVERY == 0 or gpu.volume_due(rec, n)


def first_ends(ends, n: int):
    """The native step ends of the first n steps. Ends let go after settling cannot come back, so a
    fresh StepEnds of the same base holds the kept ones (the let-go ones, never read, are zeros)."""
    if ends.base == 0:
        ends.replace(ends[:n])
        return ends
    kept = np.frombuffer(ends.since(ends.base), dtype=np.int64)[: n - ends.base].tolist()
    fresh = type(ends)()
    fresh.replace(itertools.chain(itertools.repeat(0, ends.base), kept))
    fresh.trim(ends.base)
    return fresh


def label_intervals(rec: Recording) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The kept steps' labelled intervals (kernels, copies, phase spans), as attribution takes them."""
    return rec.store.intervals(rec.trace_tables())


def detail_steps(rec: Recording) -> dict[str, Any]:
    """Which settled steps rec.trace_tables() holds in full: every one below `through`, then `window`
    (analysis.detail). A function, not a method: the class stays the interface step sources use."""
    return rec.store.detail_steps()
