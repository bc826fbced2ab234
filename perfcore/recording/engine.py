"""StepTimer: time a training loop you own, with almost no code and almost no overhead.

    timer = perfcore.StepTimer(device="cuda", warmup=5)
    for x, y in timer.load(loader):              # times the wait for each batch
        with timer.transfer():
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        with timer.compute():
            loss = loss_fn(model(x), y); opt.zero_grad(); loss.backward(); opt.step()
        timer.step()
    timer.report()

Host phases go to the native span recorder (per-thread, lock-free). On CUDA, phases labelled
compute/transfer/comm also record CUDA events on the timer's stream, resolved lazily by query,
so no step is ever synchronized; `load` is host waiting and uses the host clock alone. With
kernels=True, CUPTI kernel and memcpy records replace the events (compute = inside a kernel).
"""
from __future__ import annotations

import functools
import os
import threading
import time
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import pandas as pd

from perfcore.analysis import attribution
from perfcore._native import capabilities, native
from perfcore.analysis.store import StepStore, with_columns
from perfcore.capture.activity import device_tables
from perfcore.capture.launches import LaunchPhases
from perfcore.errors import DeviceUnavailable, PerfcoreError, UsageError

__all__ = ["StepTimer", "RunResult"]

LOAD, TRANSFER, COMPUTE, COMM = 0, 1, 2, 3
_BUILTIN = {"load": LOAD, "transfer": TRANSFER, "compute": COMPUTE, "comm": COMM}
_FIRST_CUSTOM = 16
_GPU_LABELS = ("compute", "transfer", "comm")
COMPACT_EVERY = 1024  # settle at most this often (steps) ...
COMPACT_MIN_S = 2.0  # ... and at most every 2 s, so settling costs under 1% of the run,
COMPACT_MAX = 4096  # ... but always by this many steps, which bounds the raw intervals held (and settling's peak)
SETTLE_LAG = 2  # the newest steps stay unsettled: their GPU work may still be arriving
FOLLOW_UNTIL = 8  # the first steps (and every settle) check which GPU holds the work
KEEP_ENDS = 1024  # step ends kept after their steps settle (the live view reads the latest 256)


class RunResult(dict):
    """A perfcore.run/1 document (a plain dict) that renders itself in Jupyter and Colab."""

    def _repr_html_(self) -> str:
        from perfcore.report.html import render_html

        return render_html(self)

    def __str__(self) -> str:
        from perfcore.report.terminal import render_text

        return render_text(self)


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
    """Host cost of one phase enter+exit on this machine (median of 5 blocks), for the overhead report."""
    C = native()
    rec = C.SpanRecorder()
    scope = C.phase_scope(_scope_class(), rec, 0)
    n, per = 2000, []
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            with scope:
                pass
        per.append((time.perf_counter_ns() - t0) / n)
        rec.drain()
    return float(np.median(per))


class _TimedLoader:
    """Wraps an iterable; each __next__ is timed as `load` (the host waiting for the batch)."""

    __slots__ = ("_timer", "_src", "_it")

    def __init__(self, timer: "StepTimer", src: Iterable):
        self._timer, self._src, self._it = timer, src, None

    def __iter__(self) -> "_TimedLoader":
        self._it = iter(self._src)
        return self

    def __next__(self):
        if self._it is None:
            self._it = iter(self._src)
        rec = self._timer._rec
        if LOAD in rec.open_phases():
            raise UsageError("nested timer.load(): a batch is fetched while another fetch is being timed; "
                             "wrap only the outermost loader")
        self._timer._fetch_started()
        rec.begin(LOAD)
        try:
            return next(self._it)
        finally:
            rec.end(LOAD)

    def __len__(self) -> int:
        return len(self._src)  # type: ignore[arg-type]


class StepTimer:
    """Per-step attribution of a custom loop to load / transfer / compute / comm / host.

    device: "cuda", "cpu" or "auto" (cuda when a GPU is usable). warmup: the first steps,
    reported apart. kernels: trace kernels and copies with CUPTI (CUDA only), through
    kernel_backend "native", "cupti-python", or "auto" (native, else cupti-python, else CUDA
    events; what was used is `backend`, why in `notes`). stream: the CUDA
    stream phases are timed on (default: the current stream when the timer is made).
    step_on: what ends a step. "step" (default): each timer.step(). "batch": each batch fetched
    through timer.load() after the first ends the step before it, so the loop needs no
    timer.step(). "optimizer": each torch.optim optimizer step (the first optimizer to step is the
    clock; a GAN's second optimizer is part of the same step).
    """

    STEP_ON = ("step", "batch", "optimizer")

    def __init__(self, device: str = "auto", warmup: int = 5, kernels: bool = False, stream: Any = None,
                 step_on: str = "step", kernel_backend: str = "auto"):
        if warmup < 0:
            raise UsageError(f"warmup must be >= 0, got {warmup}")
        if step_on not in self.STEP_ON:
            raise UsageError(f"step_on must be one of {', '.join(self.STEP_ON)}, got {step_on!r}")
        caps = capabilities()
        if device == "auto":
            device = "cuda" if caps["features"]["cuda_events"] else "cpu"
        if device not in ("cuda", "cpu") and not str(device).startswith("cuda:"):
            raise UsageError(f"device must be 'cuda', 'cpu' or 'auto', got {device!r}")
        self.device = "cuda" if str(device).startswith("cuda") else "cpu"
        if self.device == "cuda" and not caps["features"]["cuda_events"]:
            raise DeviceUnavailable(f"StepTimer(device='cuda'): {caps['reasons'].get('cuda_events', 'no GPU')}; "
                                    "use device='cpu' or 'auto'")
        self.warmup = int(warmup)
        self._C = native()
        self._rec = self._C.SpanRecorder()
        self._events = None
        self._follow = False
        self._stream = 0
        if self.device == "cuda":
            import torch

            self._stream = int(stream.cuda_stream if hasattr(stream, "cuda_stream") else
                               stream if stream is not None else torch.cuda.current_stream().cuda_stream)
            self._events = self._C.EventTimer()
            # Follow the GPU the work is on, unless the caller named a device or a stream.
            self._follow = stream is None and not str(device).startswith("cuda:")
        self._names: dict[int, str] = {v: k for k, v in _BUILTIN.items()}
        self._labels: dict[int, str] = {v: k for k, v in _BUILTIN.items()}
        self._scopes: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._boundaries = self._C.StepEnds()  # int64 ends; settled ones are let go
        self._t_created = self._C.now_ns()
        self._last_compact_ns = self._t_created
        self._t_first: int | None = None
        self.backend = "events" if self.device == "cuda" else "host"
        self.notes: list[str] = []
        self._tracer = None
        self._launches = LaunchPhases()  # CUPTI correlation id -> launching phase, kept across drains
        self.upkeep_errors = 0
        self._settle_ns = 0  # time spent settling inside the loop (the final settle runs after it)
        if kernels:
            self._start_kernels(kernel_backend)
        self._store = StepStore(self._labels, _FIRST_CUSTOM, on_gpu=self.device == "cuda",
                                use_kernels=self._tracer is not None, warmup=self.warmup)
        # The built-in phases are attributes holding native scopes: timer.compute() returns the
        # scope itself (one C call), and `with` enters it in C.
        self.transfer = self._make_scope("transfer", TRANSFER, "transfer")
        self.compute = self._make_scope("compute", COMPUTE, "compute")
        self.comm = self._make_scope("comm", COMM, "comm")
        self.step_on = step_on
        self._fetches = 0
        self._opt_hook = None
        self._clock_opt: int | None = None
        if step_on == "optimizer":
            self._opt_hook = self._hook_optimizer()

    # -- phases -------------------------------------------------------------------------------
    def _make_scope(self, name: str, phase_id: int, label: str):
        events = self._events if (self._events is not None and label in _GPU_LABELS) else None
        tag = self._tracer is not None and label in _GPU_LABELS
        scope = self._C.phase_scope(_scope_class(), self._rec, phase_id, events, self._stream, tag)
        self._scopes[name] = scope
        return scope

    def phase(self, name: str, label: str = "host"):
        """A custom phase, reported under its own name and counted in `label` (default host).

        Use as `with timer.phase("augment"):` or as a decorator `@timer.phase("augment")`.
        """
        if label not in attribution.LABELS:
            raise UsageError(f"phase label must be one of {attribution.LABELS}, got {label!r}")
        scope = self._scopes.get(name)
        if scope is not None:
            pid = scope.phase_id
            if self._labels[pid] != label:
                raise UsageError(f"phase {name!r} was declared with label {self._labels[pid]!r}, not {label!r}")
            return scope
        if name in _BUILTIN:
            raise UsageError(f"{name!r} is a built-in phase: use timer.{name}()")
        with self._lock:
            pid = _FIRST_CUSTOM + len([p for p in self._names if p >= _FIRST_CUSTOM])
            self._names[pid] = name
            self._labels[pid] = label
            return self._make_scope(name, pid, label)

    def load(self, iterable: Iterable) -> Iterator:
        """Wrap a DataLoader (or any iterable): each batch fetch is timed as `load`."""
        return _TimedLoader(self, iterable)

    def _fetch_started(self) -> None:
        if self._t_first is None:
            self._t_first = self._C.now_ns()
        self._fetches += 1
        if self.step_on == "batch" and self._fetches > 1:
            self.end_step()

    def _hook_optimizer(self):
        from torch.optim.optimizer import register_optimizer_step_post_hook

        def ended(opt, args, kwargs) -> None:
            if self._clock_opt is None:
                self._clock_opt = id(opt)
            if id(opt) == self._clock_opt:
                # At the optimizer's end, by time: a phase still open (the step inside `with
                # timer.compute():`) is split at the boundary by the attribution, not refused.
                self.end_step(at_ns=self._C.now_ns())

        return register_optimizer_step_post_hook(ended)

    # -- steps --------------------------------------------------------------------------------
    def step(self) -> None:
        """End the current step. Every phase opened on this thread must be closed by now."""
        t = self._rec.boundary()  # one native call: checks open phases, stamps, moves the step on
        if t < 0:
            names = ", ".join(self._names.get(p, str(p)) for p in self._rec.open_phases())
            raise UsageError(f"timer.step() while phase(s) {names} are still open; close them before the step ends")
        self._boundaries.append(t)
        n = len(self._boundaries)
        if n % COMPACT_EVERY == 0:
            self.upkeep(n)
        elif n <= FOLLOW_UNTIL and self._follow:
            self.follow_device()

    def upkeep(self, n: int) -> None:
        """After boundary n, every COMPACT_EVERY steps: settle all but the last few steps into rows
        and aggregates, so memory stays flat. On a GPU this waits for the work of steps already
        ended (once per COMPACT_EVERY steps; never a per-step sync). Whoever appends to
        `boundaries` directly (perfcore run's native step clock) calls this itself."""
        if n <= FOLLOW_UNTIL or n % COMPACT_EVERY == 0:
            self.follow_device()
        t = self._boundaries[-1]  # boundary n, the latest (the ends before it may be let go)
        if t - self._last_compact_ns >= COMPACT_MIN_S * 1e9 or n - self._store.settled >= COMPACT_MAX:
            self._last_compact_ns = t
            t0 = self._C.now_ns()
            try:
                self._compact(final=False)
            except Exception as e:  # never into the user's loop: counted, noted, retried next time
                self.upkeep_errors += 1
                if self.upkeep_errors == 1:
                    self.notes.append(f"settling steps failed ({type(e).__name__}: {e}); retried at the next "
                                      "settle and at the end")
            finally:
                self._settle_ns += self._C.now_ns() - t0

    # -- the interface of step sources outside the loop (perfcore run's hooks, the notebook magic) --
    @property
    def boundaries(self):
        """Step end times (ns, perfcore clock), in order: a native StepEnds, which a native step clock
        may append to directly. len() counts every step; the ends of settled steps older than the
        latest KEEP_ENDS are let go (indexing them raises IndexError)."""
        return self._boundaries

    def end_step(self, at_ns: int | None = None) -> bool:
        """End the current step now (as step(), but False instead of an error when a phase is
        still open on this thread), or at `at_ns`, a time already past that a hook observed (a
        batch fetch's start, a backward's end): then the per-thread phase state is left alone."""
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
        if n % COMPACT_EVERY == 0:
            self.upkeep(n)
        return True

    def set_boundaries(self, times: Iterable[int]) -> None:
        """Replace the step ends before any step is settled: a step source chosen after the run
        began (perfcore run picks the optimizer, else backward, else batch, else forward)."""
        if self._store.settled:
            raise UsageError("set_boundaries: steps are already settled; choose the step source earlier")
        self._boundaries.replace(sorted(int(t) for t in times))

    def fetch_scope(self):
        """The native scope that times a batch fetch as `load` (what timer.load() times inside)."""
        return self._scopes.get("load") or self._make_scope("load", LOAD, "load")

    def record(self, label: str, start_ns: int, end_ns: int) -> None:
        """A span measured elsewhere (e.g. a collective's completion on another thread), in `label`."""
        self._rec.record(_BUILTIN[label], int(start_ns), int(end_ns))

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
        return self._store.trace_tables()

    def settled_rows(self, since: int = 0, upto: int | None = None) -> pd.DataFrame:
        """The settled steps in [since, upto) (upto: all settled so far), ns columns, without
        settling more or waiting (a checkpoint reads only the rows it has not written, in slices)."""
        return self._store.table(since, upto)

    def settled_totals(self) -> dict[str, Any]:
        """Settled and measured step counts and their summed ns per label: O(1), for a live view."""
        return self._store.totals()

    def phase_names(self) -> dict[int, str]:
        """Phase id -> name, the built-in phases and the custom ones."""
        return dict(self._names)

    @property
    def kernels_traced(self) -> bool:
        """Whether CUPTI records kernels and copies for this timer (else CUDA events, or host only)."""
        return self._tracer is not None

    @property
    def steps(self) -> int:
        return len(self._boundaries)

    # -- collection ---------------------------------------------------------------------------
    def follow_device(self) -> None:
        """Record phase events on the GPU that holds this process's tensors. A script that moves
        its model with model.to(rank) and never calls torch.cuda.set_device leaves the current
        device at 0 while its work runs on `rank`; the events must follow the work. Called at the
        first steps and at every settle; a no-op on CPU or when the device or stream was given."""
        if not self._follow:
            return
        try:
            import torch

            n = torch.cuda.device_count()
            if n < 2:
                self._follow = False  # nothing to follow
                return
            cur = torch.cuda.current_device()
            used = [torch.cuda.memory_allocated(i) for i in range(n)]
            best = max(range(n), key=lambda i: (used[i], i == cur))
            if used[best] > 0 and best != self._events.device and self._events.set_device(best):
                self.notes.append(f"phases timed on GPU {best}, which holds this process's tensors "
                                  f"(the current device is {cur}: torch.cuda.set_device was not called)")
        except Exception as e:  # never into the user's loop
            self._follow = False
            self.notes.append(f"could not check which GPU holds the work ({type(e).__name__}: {e})")

    def _start_kernels(self, backend: str = "auto") -> None:
        """Trace with the native CUPTI tracer, else (auto) with cupti-python, else CUDA events.
        backend: "auto", "native" or "cupti-python". Never raises: what failed goes to notes."""
        if self.device != "cuda":
            self.notes.append("kernels=True ignored: no GPU timing on device='cpu'")
            return
        from perfcore.capture.cupti_python import CuptiPythonTracer
        from perfcore.capture.native_cupti import CuptiTracer

        order = {"auto": (CuptiTracer, CuptiPythonTracer), "native": (CuptiTracer,),
                 "cupti-python": (CuptiPythonTracer,)}.get(backend)
        if order is None:
            raise UsageError(f"kernel backend must be 'auto', 'native' or 'cupti-python', got {backend!r}")
        failed = []
        for cls in order:
            try:
                self._tracer = cls().start()
                self.backend = cls.name
                break
            except PerfcoreError as e:  # CUPTI held (by a profiler, or a timer not closed), no device, no package
                self._tracer = None
                failed.append(f"{cls.name}: {e}")
        if failed:
            done = f"using {self.backend}" if self._tracer is not None else "timing with CUDA events instead"
            self.notes.append(f"CUPTI tracing unavailable ({'; '.join(failed)}); {done}")

    def capture_stats(self) -> dict[str, Any]:
        """What the GPU capture recorded and lost (run.json `capture`): records, drops, buffers,
        flush time, clock sync, and how kernels were tied to phases."""
        out: dict[str, Any] = {"backend": self.backend}
        if self._tracer is not None:
            st = dict(self._tracer.stats)
            out.update(records=int(st.get("records", 0)), dropped=int(st.get("dropped_records", 0)),
                       overflow=int(st.get("overflow_records", 0)),
                       invalid_timestamps=int(st.get("invalid_timestamps", 0)),
                       buffers=int(st.get("buffers_completed", 0)), buffers_denied=int(st.get("buffers_denied", 0)),
                       flushes=int(st.get("flushes", 0)), flush_ms=st.get("flush_ns", 0) / 1e6,
                       forced_flush_ms=st.get("forced_flush_ns", 0) / 1e6,
                       clock_drift_ns=int(st.get("clock_drift_ns", 0)),
                       kernels_by_external_id=self._launches.by_external,
                       kernels_by_launch_time=self._launches.by_window,
                       kernels_unattributed=self._launches.unattributed,
                       tag_errors=int(self._C.tag_errors()) if hasattr(self._C, "tag_errors") else 0)
        if self._events is not None:
            cs = self._events.clock_sync()
            out.update(event_clock_syncs=int(cs["syncs"]), event_clock_drift_ns=int(cs["max_abs_drift_ns"]),
                       event_clock_uncertainty_ns=int(cs["uncertainty_ns"]))
            out.setdefault("clock_drift_ns", out["event_clock_drift_ns"])  # events place the GPU work
        out["upkeep_errors"] = self.upkeep_errors
        return out

    def _drain(self, wait: bool) -> None:
        """Move what the recorder, the event timer and CUPTI have into the store's pending tables."""
        part = self._rec.drain()
        self._store.add("spans", pd.DataFrame(part))
        if self._events is not None:
            ev = self._events.resolve(wait)
            self._store.add("events", pd.DataFrame({"phase_id": ev["phase_id"], "step": ev["step"],
                                                    "start_ns": ev["gpu_start_ns"], "end_ns": ev["gpu_end_ns"]}))
        if self._tracer is not None:
            self._add_activity(self._tracer.take(), part)

    def _add_activity(self, frames: dict[str, pd.DataFrame], spans: dict | None = None) -> None:
        # Each kernel's phase: the external id its launch carried, else the phase open when it was
        # launched (work from autograd's threads); entries outlive first use (graph launches).
        self._launches.add(frames, pd.DataFrame(spans) if spans is not None else None)
        for table, df in device_tables(frames, self._launches).items():
            self._store.add(table, df)

    def _compact(self, final: bool) -> None:
        self._drain(wait=final or self.device == "cuda")
        ends, done = self._boundaries, self._store.settled
        upto = len(ends) - (0 if final else SETTLE_LAG)
        if upto > done:
            since = np.frombuffer(ends.since(done), dtype=np.int64)
            self._store.settle(since, upto, self._t_first or self._t_created, first=done)
        ends.trim(min(self._store.settled, len(ends) - KEEP_ENDS))

    def _check_closed(self) -> None:
        open_now = self._rec.open_phases()
        if open_now:
            names = ", ".join(self._names.get(p, str(p)) for p in open_now)
            raise UsageError(f"phase(s) {names} never closed; close them before summary()")

    def summary(self) -> pd.DataFrame:
        """One row per completed step: step, wall_ms, load_ms, transfer_ms, compute_ms, comm_ms,
        host_ms (the five sum to wall_ms), warmup, and <custom phase>_ms for custom phases."""
        self._check_closed()
        self._compact(final=True)
        df = self._store.table()
        new = {"wall_ms": df["wall_ns"] / 1e6, **{f"{lb}_ms": df[f"{lb}_ns"] / 1e6 for lb in attribution.LABELS}}
        for pid, name in self._names.items():
            if pid >= _FIRST_CUSTOM:
                col = f"_phase{pid}_ns"
                new[f"{name}_ms"] = (df[col] if col in df else pd.Series(0, index=df.index)) / 1e6
            gcol = f"_gpu{pid}_ns"
            if gcol in df:  # kernel time launched inside this phase (CUPTI external correlation)
                new[f"{name}_gpu_ms"] = df[gcol] / 1e6
        df = with_columns(df, new)
        cols = ["step", "wall_ms"] + [f"{lb}_ms" for lb in attribution.LABELS] + ["warmup"]
        extra = [c for c in df.columns if c not in cols and not c.endswith("_ns") and not c.startswith("_")]
        self._last_table = df
        return df[cols + extra].reset_index(drop=True)

    def result(self, top_kernels: int = 10) -> RunResult:
        """The perfcore.run/1 document for the steps so far."""
        self.summary()
        full = self._last_table
        store = self._store
        evidence: dict[str, Any] = {"cpu_count": os.cpu_count()}
        kernels, memcpy, categories = [], {}, {}
        if self._tracer is not None:
            kernels = store.top_kernels(top_kernels)
            categories = store.kernel_categories()
            memcpy = store.memcpy_summary()
            h2d = memcpy.get("by_direction", {}).get("h2d", {})
            evidence["pageable_h2d_bytes_per_step"] = h2d.get("pageable_bytes", 0) / max(1, len(full))
            evidence["pageable_h2d_ms_per_step"] = h2d.get("pageable_ms", 0.0) / max(1, len(full))
        measured = full[~full["warmup"]]
        phases_per_step = store.span_count / max(1, len(full))
        per_phase = phase_cost_ns()
        mean_wall_ns = float(measured["wall_ns"].mean()) if len(measured) else 0.0
        # Settling runs inside the loop (in the step that reaches it), so it is the user's time too.
        settle_ms = self._settle_ns / max(1, len(full)) / 1e6
        overhead_ms = phases_per_step * per_phase / 1e6 + settle_ms
        overhead = {"per_phase_ns": per_phase, "phases_per_step": phases_per_step, "settle_ms_per_step": settle_ms,
                    "ms_per_step": overhead_ms, "fraction": (overhead_ms * 1e6 / mean_wall_ns) if mean_wall_ns else 0.0,
                    "method": "phases per step x the measured cost of one phase, plus the time spent settling steps "
                              "during the loop"}
        doc = attribution.summarize(full, on_gpu=self.device == "cuda", backend=self.backend,
                                    device=self._device_name(), evidence=evidence, kernels=kernels, memcpy=memcpy,
                                    overhead=overhead)
        if categories:
            doc["kernel_categories"] = categories
        doc["capture"] = self.capture_stats()
        lost = doc["capture"].get("dropped", 0) + doc["capture"].get("overflow", 0)
        if lost:
            self.notes.append(f"{lost} CUPTI records were dropped (buffers full or drained too slowly): kernel "
                              "and copy times are undercounted; see capture in run.json")
        if self.notes:
            doc["notes"] = list(dict.fromkeys(self.notes))
        doc["step_source"] = "timer.step()" if self.step_on == "step" else self.step_on
        return RunResult(doc)

    def report(self, file=None) -> RunResult:
        """Print the terminal report (per-label mean, share, bar; verdict; advice) and return the result."""
        res = self.result()
        print(str(res), file=file)
        return res

    def close(self) -> None:
        """Stop CUPTI tracing if this timer started it (also done by `with StepTimer(...)`)."""
        if self._tracer is not None and self._tracer.active:
            self._add_activity(self._tracer.stop())
        if self._opt_hook is not None:
            self._opt_hook.remove()
            self._opt_hook = None

    def __enter__(self) -> "StepTimer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _device_name(self) -> str:
        if self.device != "cuda":
            return "cpu"
        import torch

        return torch.cuda.get_device_name(torch.cuda.current_device())
