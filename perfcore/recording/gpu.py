"""The GPU side of a Recording (its DeviceCapture, engine.gpu): which device and stream its events time,
following the GPU the work is on, starting CUPTI (native, else cupti-python, else CUDA events),
handing it over, and what the capture lost. Functions of the engine's public interface."""

from __future__ import annotations

import dataclasses
import sys
import time
import warnings
import weakref
from typing import Any, Callable

from perfcore._native import ClockSync, StreamStats, TracerStats, capabilities, native
from perfcore.analysis.run_parts import Capture
from perfcore.errors import DeviceUnavailable, PerfcoreError, UsageError
from perfcore.recording.tracing import Tracing, kernel_mode, probe
from perfcore.recording.tracing import facts as tracing_facts

KERNEL_BACKENDS = ("auto", "native", "cupti-python")


@dataclasses.dataclass(frozen=True)
class HandOver:
    """CUPTI given up mid-run (hand_over): the tracer it was taken from, the step, why, and when."""

    tracer: Any
    step: int
    why: str
    at_ns: int

    def facts(self, finalized: bool) -> dict[str, Any]:
        """run.json capture.handed_over (finalized: whether CUPTI could be finalized for the next client)."""
        note = f"kernels until step {self.step}, then events, because {self.why}"
        return {"at_step": self.step, "why": self.why, "finalized": finalized, "note": note}


def open_device(device: str, stream: Any) -> tuple[str, int, Any, bool]:
    """(device "cuda"/"cpu", stream handle, native EventTimer or None, follow the work's GPU)."""
    caps = capabilities()
    if device == "auto":
        device = "cuda" if caps["features"]["cuda_events"] else "cpu"
    if device not in ("cuda", "cpu") and not str(device).startswith("cuda:"):
        raise UsageError(f"device must be 'cuda', 'cpu' or 'auto', got {device!r}")
    kind = "cuda" if str(device).startswith("cuda") else "cpu"
    if kind == "cuda" and not caps["features"]["cuda_events"]:
        raise DeviceUnavailable(
            f"StepTimer(device='cuda'): {caps['reasons'].get('cuda_events', 'no GPU')}; use device='cpu' or 'auto'"
        )
    if kind == "cpu":
        return kind, 0, None, False
    import torch

    from perfcore.capture.native_cupti import watch_torch_profiler

    watch_torch_profiler()  # from here on, a torch.profiler run is known to a later kernels=True

    index = device_index(device)
    if index is not None and index >= torch.cuda.device_count():
        raise UsageError(
            f"StepTimer(device={device!r}): this process sees {torch.cuda.device_count()} GPU(s); "
            "use an index below that (CUDA_VISIBLE_DEVICES renumbers them)"
        )
    C = native()
    if stream is None:
        # Phases time the stream current when each opens (a side stream under
        # `with torch.cuda.stream(s):` included), read from torch natively at the phase's start.
        from torch._C import _cuda_getCurrentRawStream  # torch's own C function (not perfcore's _C)

        C._set_current_stream_source(_cuda_getCurrentRawStream)
        handle = int(C.FOLLOW_CURRENT_STREAM)
    else:
        handle = int(stream.cuda_stream if hasattr(stream, "cuda_stream") else stream)
    # The events live on the named GPU (the timer sets it current around each record); else on
    # the current one, following the GPU the work is on unless a stream was given.
    timer = C.EventTimer(device=-1 if index is None else index)
    return kind, handle, timer, stream is None and index is None


def device_index(device: str) -> int | None:
    """The N of "cuda:N" (None for "cuda"/"cpu"); bad input is a UsageError."""
    d = str(device)
    if not d.startswith("cuda:"):
        return None
    try:
        n = int(d[len("cuda:") :])
    except ValueError:
        n = -1
    if n < 0:
        raise UsageError(f"device must be 'cuda', 'cuda:N' (N >= 0), 'cpu' or 'auto', got {device!r}")
    return n


def follow_device(engine) -> None:
    """Record phase events on the GPU that holds this process's tensors. A script that moves
    its model with model.to(rank) and never calls torch.cuda.set_device leaves the current
    device at 0 while its work runs on `rank`; the events must follow the work. Called at the
    first steps and at every settle; a no-op on CPU or when the device or stream was given."""
    cap = engine.gpu
    if not cap.follow:
        return
    try:
        import torch

        n = torch.cuda.device_count()
        if n < 2:
            cap.follow = False  # nothing to follow
            return
        cur = torch.cuda.current_device()
        used = [torch.cuda.memory_allocated(i) for i in range(n)]
        best = max(range(n), key=lambda i: (used[i], i == cur))
        if used[best] > 0 and best != cap.events.device and cap.events.set_device(best):
            engine.notes.append(
                f"phases timed on GPU {best}, which holds this process's tensors "
                f"(the current device is {cur}: torch.cuda.set_device was not called)"
            )
    except Exception as e:  # never into the user's loop
        cap.follow = False
        engine.notes.append(f"could not check which GPU holds the work ({type(e).__name__}: {e})")


def start_kernels(engine, backend: str = "auto", mode: str = "lean") -> str | None:
    """Trace with the native CUPTI tracer, else (auto) with cupti-python, else CUDA events.
    backend: "auto", "native" or "cupti-python"; mode: which records (recording/tracing.py). The
    name of the tracer started (None: none was). Never raises (but on a bad backend name or mode):
    what failed goes to notes."""
    kernel_mode(mode)
    if backend not in KERNEL_BACKENDS:
        raise UsageError(f"kernel backend must be 'auto', 'native' or 'cupti-python', got {backend!r}")
    cap = engine.gpu
    if engine.device != "cuda":
        why = capabilities()["reasons"].get("cuda_events") or "device='cpu' was asked for"
        cap.note = (
            f"kernels=True (kernel_backend {backend!r}) needs a GPU ({why}): timing host phases instead (backend host)"
        )
        engine.notes.append(cap.note)
        try:  # once, at the timer's construction: stacklevel 5 is the user's StepTimer(...)
            warnings.warn(f"perfcore: {cap.note}", RuntimeWarning, stacklevel=5)
        except Warning:  # warnings made errors: the note says it, the timer works on
            pass
        return None
    from perfcore.capture.cupti_python import CuptiPythonTracer
    from perfcore.capture.native_cupti import CuptiTracer, before_torch_profiler, kineto_state, watch_torch_profiler

    watch_torch_profiler()
    kin = kineto_state()
    cap.kineto = kin
    if kin["active"]:
        # torch.profiler is recording now: taking CUPTI would replace its buffer callbacks and
        # cost it the GPU trace it is taking. Declined, so both stay true.
        engine.notes.append(
            "kernels=True declined: torch.profiler is recording in this process and holds "
            "CUPTI; timing with CUDA events instead (use kernels=True outside the profiler's "
            "`with` block, or read its trace)"
        )
        return None

    order = {"auto": (CuptiTracer, CuptiPythonTracer), "native": (CuptiTracer,), "cupti-python": (CuptiPythonTracer,)}[
        backend
    ]
    failed, started = [], None
    device = getattr(cap.events, "device", None)
    untraced = probe(device) if device is not None else None  # a launch's cost before tracing
    for cls in order:
        try:
            tracer = cls()
            tracer.api_records = mode == "full"
            cap.tracer = tracer.start()
            started = cls.name
            cap.tracing = Tracing(mode, started, untraced, probe(device) if untraced else None)
            trust_graph_ids(engine)
            before_torch_profiler(_handing_over(engine))
            break
        except PerfcoreError as e:  # CUPTI held (by a profiler, or a timer not closed), no device, no package
            cap.tracer, cap.tracing, started = None, None, None
            failed.append(f"{cls.name}: {e}")
    if failed:
        done = f"using {started}" if started is not None else "timing with CUDA events instead"
        why = "; ".join(failed)
        if kin["used"] and started is None:
            # Kineto keeps its CUPTI subscription for the life of the process once torch.profiler
            # has run: only a new process frees it.
            why += (
                "; torch.profiler ran earlier in this process and keeps CUPTI until the process "
                "ends: restart the kernel (or the script) to trace kernels with perfcore"
            )
        engine.notes.append(f"CUPTI tracing unavailable ({why}); {done}")
    return started


def _handing_over(engine) -> Callable[[], None]:
    ref = weakref.ref(engine)  # a closed or collected timer hands nothing over

    def run() -> None:
        e = ref()
        if e is not None:
            hand_over(e, "torch.profiler started")

    return run


def hand_over(engine, why: str) -> None:
    """Give CUPTI up for the rest of the run so another client can take it (torch.profiler:
    kineto subscribes on its first use and keeps it; finding CUPTI held then, it would trace no
    GPU activity for the rest of the process). What was traced so far is kept; CUDA events,
    recorded all along, label the GPU from this instant on. Never raises."""
    cap = engine.gpu
    t = cap.tracer
    if t is None or not getattr(t, "active", False):
        return
    step = engine.steps
    frames = None
    try:
        frames = t.hand_over() if hasattr(t, "hand_over") else t.stop()
    except Exception as e:  # CUPTI is released whatever failed; the loss is said
        engine.notes.append(f"handing CUPTI over lost its last records ({type(e).__name__}: {e})")
    cap.tracer = None
    cap.handed_over = HandOver(t, step, why, int((cap.now_ns or native().now_ns)()))
    if frames is not None:
        engine.add_activity(frames)
    engine.store.events_from_ns = cap.handed_over.at_ns
    note = (
        f"GPU time from CUPTI kernels until step {step}, then from CUDA events: {why} in this process, "
        "and perfcore handed CUPTI over to it"
    )
    engine.notes.append(note)
    print(f"perfcore: {note}", file=sys.stderr)


# Decoded CUPTI records wait in the tracer, under a cap past which they are counted and dropped,
# until a settle takes them; settles come every 1,024 steps at most, which a step of ~2,600
# kernels outruns. So every VOLUME_EVERY steps the step end asks how full the tracer is, and
# settles once it is TAKE_AT_SHARE full.
VOLUME_EVERY = 32
TAKE_AT_SHARE = 0.25


def volume_due(engine, n: int) -> bool:
    """At step end n: whether to settle now for the tracer's volume (checked every VOLUME_EVERY)."""
    return engine.gpu.tracer is not None and n % VOLUME_EVERY == 0 and records_due(engine)


def records_due(engine) -> bool:
    """Whether the tracer's decoded records should be taken now, by their volume."""
    share = getattr(engine.gpu.tracer, "pending_share", None)
    try:
        return share is not None and share() >= TAKE_AT_SHARE
    except Exception:  # a question about perfcore's own upkeep never reaches the user's loop
        return False


def phase_cost(engine, cpu_cost: Callable[[], float], n: int = 500) -> float:
    """Host cost (ns) of one phase's enter+exit on the path this run's phases take: cpu_cost() (the
    span), plus on the CUDA-events path the event pair (two records, the current stream read from
    torch), measured once per run on a scratch timer. The CPU path alone, which a run timed by
    events reported before, is ~1/20 of it (218 ns against 5.1 us on the H200)."""
    cap = engine.gpu
    if cap.events is None:
        return cpu_cost()
    if cap.events_pair_ns is None:
        ev, stream = native().EventTimer(device=int(cap.events.device)), cap.stream
        t0 = time.perf_counter_ns()
        for _ in range(n):
            ev.begin(0, 0, stream)
            ev.end(0, stream)
        cap.events_pair_ns = (time.perf_counter_ns() - t0) / n
        ev.resolve(wait=True)
    return cpu_cost() + cap.events_pair_ns


def trust_graph_ids(engine) -> None:
    """Place graph kernels by launch time where this CUPTI's graph correlation ids are wrong
    (a second tracing session in the process, before the fix), and say so."""
    from perfcore.capture.native_cupti import CuptiTracer

    # Only the native tracer runs in perfcore's own CUPTI session, whose statistics say so.
    st = TracerStats.of(native().cupti_stats() if isinstance(engine.gpu.tracer, CuptiTracer) else None)
    # Graph launches are known only from API records: without them every kernel is placed by its phase's
    # events, whatever its correlation id.
    if st.graph_ids_untrusted and engine.gpu.tracing is not None and engine.gpu.tracing.tags_phases:
        engine.gpu.launches.trust_graph_ids = False
        engine.notes.append(
            f"CUPTI tracing session {st.session} in this process: this CUPTI gives graph "
            "kernels wrong correlation ids after the first, so they are placed by "
            "the order of the graph launches"
        )


def capture_stats(engine) -> Capture:
    """What the GPU capture recorded and lost (run.json `capture`): records, drops, buffers,
    flush time, clock sync, and how kernels were tied to phases."""
    cap = engine.gpu
    stats: dict[str, Any] = {"backend": engine.backend}
    if cap.note:  # kernels asked for and not traced: what was used and why
        stats["note"] = cap.note
    handed = cap.handed_over
    tracer = cap.tracer if cap.tracer is not None else (handed.tracer if handed else None)
    st = TracerStats.of(getattr(tracer, "stats", None))
    if tracer is not None:
        stats.update(_tracer_stats(st, tracer, cap.launches))
    if cap.events is not None:
        ss = StreamStats.of(cap.events.stream_stats())
        stats.update(
            phases_on_current_stream=ss.followed,
            phases_stream_unseen=ss.unseen,
            phases_switched_stream_inside=ss.switched_inside,
            phases_under_graph_capture=ss.capturing,
            event_pairs_unreadable=ss.unreadable,
        )
        _missed_by_events(engine.notes, ss, cap.tracer is None)
        cs = ClockSync.of(cap.events.clock_sync())
        stats.update(
            event_clock_syncs=cs.syncs,
            event_clock_drift_ns=cs.max_abs_drift_ns,
            event_clock_uncertainty_ns=cs.uncertainty_ns,
        )
        stats.setdefault("clock_drift_ns", cs.max_abs_drift_ns)  # events place the GPU work
    stats["upkeep_errors"] = engine.upkeep_errors
    return Capture(
        stats=stats,
        handed_over=handed.facts(st.finalized) if handed else None,
        guards=tuple(g for g in ("graph_ids_untrusted", "concurrent_kernel_left_on") if getattr(st, g)),
        torch_profiler=dict(cap.kineto) if cap.kineto is not None else None,
        tracing=tracing_facts(cap.tracing, steps_traced(engine)),
    )


def _tracer_stats(st: TracerStats, tracer: Any, launches: Any) -> dict[str, Any]:
    """Every record lost, by cause: dropped by CUPTI (no buffer), over the decode cap, in buffers whose
    walk stopped early (at an incomplete record: work still running at the forced flush), and records
    decoded but unplaceable (a timestamp CUPTI left at 0); then buffers, flushes and kernel placement."""
    return dict(
        records=st.records,
        dropped=st.dropped_records + st.discarded_records,
        overflow=st.overflow_records,
        invalid_timestamps=st.invalid_timestamps,
        zero_timestamps=st.zero_timestamps,
        buffers_undecodable=st.buffers_undecodable,
        buffers_incomplete=st.buffers_incomplete,
        bytes_unwalked=st.bytes_unwalked,
        device_synced_at_stop=bool(getattr(tracer, "synced_at_stop", False)),
        device_buffer_bytes=st.device_buffer_bytes,
        api_calls_filtered=st.api_calls_filtered,
        cupti_session=st.session,
        buffers=st.buffers_completed,
        buffers_denied=st.buffers_denied,
        flushes=st.flushes,
        flush_ms=st.flush_ns / 1e6,
        forced_flush_ms=st.forced_flush_ns / 1e6,
        clock_drift_ns=st.clock_drift_ns,
        kernels_by_external_id=launches.by_external,
        kernels_by_launch_time=launches.by_window,
        kernels_by_event_window=launches.by_event_window,
        kernels_by_graph_launch_order=launches.by_graph_order,
        kernels_unattributed=launches.unattributed,
        stale_dropped=st.stale_dropped,
        captures_seen=st.captures_seen,
        flushes_held_for_capture=st.flushes_held,
        tag_errors=native().tag_errors(),
    )


def _missed_by_events(notes: list[str], ss: StreamStats, untraced: bool) -> None:
    """A note for each kind of phase the CUDA events missed (untraced: no CUPTI tracer sees that work)."""
    if ss.capturing and untraced:
        notes.append(
            f"{ss.capturing} GPU phase(s) ran while their stream was being captured into a "
            "CUDA graph (torch.cuda.graph, make_graphed_callables): not timed, since the "
            "capture records work rather than running it; the graph's replays, which run outside the "
            "capture, are timed as the phases they run in"
        )
    if ss.unreadable:
        notes.append(
            f"{ss.unreadable} GPU phase(s) could not be timed: the runtime refused their "
            f"events ({ss.last_unreadable_error}); the phases after them were timed"
        )
    if ss.switched_inside and untraced:
        notes.append(
            f"{ss.switched_inside} GPU phase(s) moved their work to another stream inside "
            "the phase (`with torch.cuda.stream(...)` inside `with timer.compute():`); CUDA events "
            "on the phase's first stream do not see it: open the stream outside the phase, or "
            "use kernels=True (CUPTI sees every stream)"
        )
    if ss.unseen:
        notes.append(
            f"{ss.unseen} GPU phase(s) could not read the current stream and were timed on "
            "the legacy default stream; work on non-blocking streams is not seen by them"
        )


def steps_traced(engine) -> int:
    """The steps whose kernels were traced: every one from the tracer's start, until a hand-over."""
    if engine.gpu.tracing is None:
        return 0
    handed = engine.gpu.handed_over
    return handed.step if handed else int(engine.steps)


def device_name(device: str) -> str:
    if device != "cuda":
        return "cpu"
    import torch

    return torch.cuda.get_device_name(torch.cuda.current_device())
