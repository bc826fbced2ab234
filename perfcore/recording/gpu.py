"""The GPU side of a Recording: which device and stream its events time, following the GPU the work
is on, starting CUPTI (native, else cupti-python, else CUDA events), and what the capture lost."""
from __future__ import annotations

from typing import Any

from perfcore._native import capabilities, native
from perfcore.errors import DeviceUnavailable, PerfcoreError, UsageError


def open_device(device: str, stream: Any) -> tuple[str, int, Any, bool]:
    """(device "cuda"/"cpu", stream handle, native EventTimer or None, follow the work's GPU)."""
    caps = capabilities()
    if device == "auto":
        device = "cuda" if caps["features"]["cuda_events"] else "cpu"
    if device not in ("cuda", "cpu") and not str(device).startswith("cuda:"):
        raise UsageError(f"device must be 'cuda', 'cpu' or 'auto', got {device!r}")
    kind = "cuda" if str(device).startswith("cuda") else "cpu"
    if kind == "cuda" and not caps["features"]["cuda_events"]:
        raise DeviceUnavailable(f"StepTimer(device='cuda'): {caps['reasons'].get('cuda_events', 'no GPU')}; "
                                "use device='cpu' or 'auto'")
    if kind == "cpu":
        return kind, 0, None, False
    import torch

    handle = int(stream.cuda_stream if hasattr(stream, "cuda_stream") else
                 stream if stream is not None else torch.cuda.current_stream().cuda_stream)
    # Follow the GPU the work is on, unless the caller named a device or a stream.
    return kind, handle, native().EventTimer(), stream is None and not str(device).startswith("cuda:")


def follow_device(engine) -> None:
    """Record phase events on the GPU that holds this process's tensors. A script that moves
    its model with model.to(rank) and never calls torch.cuda.set_device leaves the current
    device at 0 while its work runs on `rank`; the events must follow the work. Called at the
    first steps and at every settle; a no-op on CPU or when the device or stream was given."""
    if not engine._follow:
        return
    try:
        import torch

        n = torch.cuda.device_count()
        if n < 2:
            engine._follow = False  # nothing to follow
            return
        cur = torch.cuda.current_device()
        used = [torch.cuda.memory_allocated(i) for i in range(n)]
        best = max(range(n), key=lambda i: (used[i], i == cur))
        if used[best] > 0 and best != engine._events.device and engine._events.set_device(best):
            engine.notes.append(f"phases timed on GPU {best}, which holds this process's tensors "
                                f"(the current device is {cur}: torch.cuda.set_device was not called)")
    except Exception as e:  # never into the user's loop
        engine._follow = False
        engine.notes.append(f"could not check which GPU holds the work ({type(e).__name__}: {e})")


def start_kernels(engine, backend: str = "auto") -> None:
    """Trace with the native CUPTI tracer, else (auto) with cupti-python, else CUDA events.
    backend: "auto", "native" or "cupti-python". Never raises: what failed goes to notes."""
    if engine.device != "cuda":
        engine.notes.append("kernels=True ignored: no GPU timing on device='cpu'")
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
            engine._tracer = cls().start()
            engine.backend = cls.name
            break
        except PerfcoreError as e:  # CUPTI held (by a profiler, or a timer not closed), no device, no package
            engine._tracer = None
            failed.append(f"{cls.name}: {e}")
    if failed:
        done = f"using {engine.backend}" if engine._tracer is not None else "timing with CUDA events instead"
        engine.notes.append(f"CUPTI tracing unavailable ({'; '.join(failed)}); {done}")


def capture_stats(engine) -> dict[str, Any]:
    """What the GPU capture recorded and lost (run.json `capture`): records, drops, buffers,
    flush time, clock sync, and how kernels were tied to phases."""
    out: dict[str, Any] = {"backend": engine.backend}
    if engine._tracer is not None:
        st = dict(engine._tracer.stats)
        launches = engine._launches
        out.update(records=int(st.get("records", 0)), dropped=int(st.get("dropped_records", 0)),
                   overflow=int(st.get("overflow_records", 0)),
                   invalid_timestamps=int(st.get("invalid_timestamps", 0)),
                   buffers=int(st.get("buffers_completed", 0)), buffers_denied=int(st.get("buffers_denied", 0)),
                   flushes=int(st.get("flushes", 0)), flush_ms=st.get("flush_ns", 0) / 1e6,
                   forced_flush_ms=st.get("forced_flush_ns", 0) / 1e6,
                   clock_drift_ns=int(st.get("clock_drift_ns", 0)),
                   kernels_by_external_id=launches.by_external,
                   kernels_by_launch_time=launches.by_window,
                   kernels_unattributed=launches.unattributed,
                   tag_errors=int(engine._C.tag_errors()) if hasattr(engine._C, "tag_errors") else 0)
    if engine._events is not None:
        cs = engine._events.clock_sync()
        out.update(event_clock_syncs=int(cs["syncs"]), event_clock_drift_ns=int(cs["max_abs_drift_ns"]),
                   event_clock_uncertainty_ns=int(cs["uncertainty_ns"]))
        out.setdefault("clock_drift_ns", out["event_clock_drift_ns"])  # events place the GPU work
    out["upkeep_errors"] = engine.upkeep_errors
    return out


def device_name(device: str) -> str:
    if device != "cuda":
        return "cpu"
    import torch

    return torch.cuda.get_device_name(torch.cuda.current_device())
