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

from . import attribution
from ._native import capabilities, native
from .errors import CuptiError, DeviceUnavailable, UsageError

__all__ = ["StepTimer", "RunResult"]

LOAD, TRANSFER, COMPUTE, COMM = 0, 1, 2, 3
_BUILTIN = {"load": LOAD, "transfer": TRANSFER, "compute": COMPUTE, "comm": COMM}
_FIRST_CUSTOM = 16
_GPU_LABELS = ("compute", "transfer", "comm")


class RunResult(dict):
    """A perfcore.run/1 document (a plain dict) that renders itself in Jupyter and Colab."""

    def _repr_html_(self) -> str:
        from .export.html import render_html

        return render_html(self)

    def __str__(self) -> str:
        from .export.terminal import render_text

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
        self._timer._mark_started()
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
    reported apart. kernels: trace kernels and copies with CUPTI (CUDA only). stream: the CUDA
    stream phases are timed on (default: the current stream when the timer is made).
    """

    def __init__(self, device: str = "auto", warmup: int = 5, kernels: bool = False, stream: Any = None):
        if warmup < 0:
            raise UsageError(f"warmup must be >= 0, got {warmup}")
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
        self._stream = 0
        if self.device == "cuda":
            import torch

            self._stream = int(stream.cuda_stream if hasattr(stream, "cuda_stream") else
                               stream if stream is not None else torch.cuda.current_stream().cuda_stream)
            self._events = self._C.EventTimer()
        self._names: dict[int, str] = {v: k for k, v in _BUILTIN.items()}
        self._labels: dict[int, str] = {v: k for k, v in _BUILTIN.items()}
        self._scopes: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._span_parts: list[dict[str, np.ndarray]] = []
        self._event_parts: list[dict[str, np.ndarray]] = []
        self._boundaries: list[int] = []
        self._t_created = self._C.now_ns()
        self._t_first: int | None = None
        self.backend = "events" if self.device == "cuda" else "host"
        self.notes: list[str] = []
        self._tracer = None
        if kernels:
            self._start_kernels()
        # The built-in phases are attributes holding native scopes: timer.compute() returns the
        # scope itself (one C call), and `with` enters it in C.
        self.transfer = self._make_scope("transfer", TRANSFER, "transfer")
        self.compute = self._make_scope("compute", COMPUTE, "compute")
        self.comm = self._make_scope("comm", COMM, "comm")

    # -- phases -------------------------------------------------------------------------------
    def _make_scope(self, name: str, phase_id: int, label: str):
        events = self._events if (self._events is not None and label in _GPU_LABELS) else None
        scope = self._C.phase_scope(_scope_class(), self._rec, phase_id, events, self._stream)
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

    def _mark_started(self) -> None:
        if self._t_first is None:
            self._t_first = self._C.now_ns()

    # -- steps --------------------------------------------------------------------------------
    def step(self) -> None:
        """End the current step. Every phase opened on this thread must be closed by now."""
        t = self._C.now_ns()
        open_now = self._rec.open_phases()
        if open_now:
            names = ", ".join(self._names.get(p, str(p)) for p in open_now)
            raise UsageError(f"timer.step() while phase(s) {names} are still open; close them before the step ends")
        self._boundaries.append(t)
        self._rec.step = len(self._boundaries)
        # Lazy upkeep every 64 steps: resolve finished events (a query, never a sync) and drain
        # spans, so memory stays bounded and summary() has little left to do.
        if len(self._boundaries) % 64 == 0:
            self._drain(wait=False)

    @property
    def steps(self) -> int:
        return len(self._boundaries)

    # -- collection ---------------------------------------------------------------------------
    def _start_kernels(self) -> None:
        if self.device != "cuda":
            self.notes.append("kernels=True ignored: no GPU timing on device='cpu'")
            return
        from .capture.native_cupti import CuptiTracer

        try:
            self._tracer = CuptiTracer().start()
            self.backend = "native-cupti"
        except (CuptiError, DeviceUnavailable) as e:
            self._tracer = None
            self.notes.append(f"CUPTI unavailable, timing with CUDA events instead: {e}")

    def _drain(self, wait: bool) -> None:
        part = self._rec.drain()
        if len(part["start_ns"]):
            self._span_parts.append(part)
        if self._events is not None:
            ev = self._events.resolve(wait)
            if len(ev["step"]):
                self._event_parts.append(ev)

    def _check_closed(self) -> None:
        open_now = self._rec.open_phases()
        if open_now:
            names = ", ".join(self._names.get(p, str(p)) for p in open_now)
            raise UsageError(f"phase(s) {names} never closed; close them before summary()")

    def _spans(self) -> pd.DataFrame:
        parts = self._span_parts
        if not parts:
            return pd.DataFrame({k: np.zeros(0, np.int64) for k in ("phase_id", "step", "start_ns", "end_ns", "thread_id")})
        return pd.DataFrame({k: np.concatenate([p[k] for p in parts]) for k in parts[0]})

    def _intervals(self, spans: pd.DataFrame) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Labelled intervals per the one definition: GPU time from events or CUPTI on CUDA,
        host spans for load (and for everything on CPU)."""
        label_of = spans["phase_id"].map(self._labels).to_numpy()
        host_labels = ("load",) if self.device == "cuda" else ("load", "transfer", "compute", "comm")
        iv: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for lb in host_labels:
            sel = label_of == lb
            iv[lb] = (spans["start_ns"].to_numpy()[sel], spans["end_ns"].to_numpy()[sel])
        if self.device == "cuda":
            if self._tracer is not None:
                frames = self._frames()
                k = frames["kernels"]
                if len(k.columns):
                    nccl = k["name"].astype(str).str.contains("nccl", case=False).to_numpy()
                    iv["compute"] = (k["start_ns"].to_numpy()[~nccl], k["end_ns"].to_numpy()[~nccl])
                    iv["comm"] = (k["start_ns"].to_numpy()[nccl], k["end_ns"].to_numpy()[nccl])
                copies = [f for f in (frames["memcpy"], frames["memset"]) if len(f.columns)]
                if copies:
                    iv["transfer"] = (np.concatenate([f["start_ns"].to_numpy() for f in copies]),
                                      np.concatenate([f["end_ns"].to_numpy() for f in copies]))
            elif self._event_parts:
                ev = {k: np.concatenate([p[k] for p in self._event_parts]) for k in self._event_parts[0]}
                ev_label = pd.Series(ev["phase_id"]).map(self._labels).to_numpy()
                for lb in _GPU_LABELS:
                    sel = ev_label == lb
                    iv[lb] = (ev["gpu_start_ns"][sel], ev["gpu_end_ns"][sel])
        return iv

    def _frames(self) -> dict[str, pd.DataFrame]:
        if not hasattr(self, "_frames_cache") or self._tracer.active:
            self._frames_cache = self._tracer.snapshot()
        return self._frames_cache

    def _step_bounds(self, spans: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        b = np.asarray(self._boundaries, dtype=np.int64)
        if len(b) == 0:
            return b, b
        first = spans.loc[spans["step"] == 0, "start_ns"]
        t0 = int(first.min()) if len(first) else (self._t_first or self._t_created)
        if self._t_first is not None:
            t0 = min(t0, self._t_first)
        starts = np.concatenate([[min(t0, b[0])], b[:-1]])
        return starts, b

    def summary(self) -> pd.DataFrame:
        """One row per completed step: step, wall_ms, load_ms, transfer_ms, compute_ms, comm_ms,
        host_ms (the five sum to wall_ms), warmup, and <custom phase>_ms for custom phases."""
        self._check_closed()
        self._drain(wait=True)
        spans = self._spans()
        starts, ends = self._step_bounds(spans)
        prec = attribution.PRECEDENCE if self.device == "cuda" else attribution.CPU_PRECEDENCE
        df = attribution.step_table(starts, ends, self._intervals(spans), warmup=self.warmup, precedence=prec)
        for pid, name in self._names.items():
            if pid < _FIRST_CUSTOM:
                continue
            sel = spans[spans["phase_id"] == pid]
            per_step = (sel["end_ns"] - sel["start_ns"]).groupby(sel["step"]).sum()
            df[f"{name}_ms"] = df["step"].map(per_step).fillna(0).to_numpy() / 1e6
        cols = ["step", "wall_ms"] + [f"{lb}_ms" for lb in attribution.LABELS] + ["warmup"]
        extra = [c for c in df.columns if c not in cols and not c.endswith("_ns")]
        self._last_table = df
        return df[cols + extra].reset_index(drop=True)

    def result(self, top_kernels: int = 10) -> RunResult:
        """The perfcore.run/1 document for the steps so far."""
        table = self.summary()
        full = self._last_table
        on_gpu = self.device == "cuda"
        kernels, memcpy, evidence, categories = [], {}, {"cpu_count": os.cpu_count()}, {}
        measured_steps = max(1, int((~full["warmup"]).sum()))
        if self._tracer is not None:
            frames = self._frames()
            kernels = _top_kernels(frames["kernels"], top_kernels)
            categories = _kernel_categories(frames["kernels"])
            memcpy = _memcpy_summary(frames["memcpy"])
            ph2d = memcpy.get("by_direction", {}).get("h2d", {}).get("pageable_bytes", 0)
            evidence["pageable_h2d_bytes_per_step"] = ph2d / max(1, len(full))
        spans = self._spans()
        phases_per_step = len(spans) / max(1, len(full))
        per_phase = phase_cost_ns()
        mean_wall_ns = float(full.loc[~full["warmup"], "wall_ns"].mean()) if measured_steps else 0.0
        overhead_ms = phases_per_step * per_phase / 1e6
        overhead = {"per_phase_ns": per_phase, "phases_per_step": phases_per_step, "ms_per_step": overhead_ms,
                    "fraction": (overhead_ms * 1e6 / mean_wall_ns) if mean_wall_ns else 0.0}
        doc = attribution.summarize(full, on_gpu=on_gpu, backend=self.backend, device=self._device_name(),
                                    evidence=evidence, kernels=kernels, memcpy=memcpy, overhead=overhead)
        if categories:
            doc["kernel_categories"] = categories
        if self.notes:
            doc["notes"] = list(self.notes)
        del table
        return RunResult(doc)

    def report(self, file=None) -> RunResult:
        """Print the terminal report (per-label mean, share, bar; verdict; advice) and return the result."""
        res = self.result()
        print(str(res), file=file)
        return res

    def close(self) -> None:
        """Stop CUPTI tracing if this timer started it (also done by `with StepTimer(...)`)."""
        if self._tracer is not None and self._tracer.active:
            self._frames_cache = self._tracer.stop()

    def __enter__(self) -> "StepTimer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _device_name(self) -> str:
        if self.device != "cuda":
            return "cpu"
        import torch

        return torch.cuda.get_device_name(torch.cuda.current_device())


def _top_kernels(k: pd.DataFrame, n: int) -> list[dict]:
    if not len(k.columns) or not len(k):
        return []
    g = k.groupby("name", observed=True)["duration_ns"].agg(["count", "sum", "mean"]).sort_values("sum", ascending=False)
    out = []
    for name, row in g.head(n).iterrows():
        out.append({"name": str(name), "count": int(row["count"]), "total_ms": float(row["sum"]) / 1e6,
                    "mean_us": float(row["mean"]) / 1e3, "category": attribution.kernel_category(str(name))})
    return out


def _kernel_categories(k: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Kernel time by category (GEMM/conv, attention, ...) and its share of all kernel time."""
    if not len(k.columns) or not len(k):
        return {}
    per_name = k.groupby("name", observed=True)["duration_ns"].sum()
    cats = pd.Series([attribution.kernel_category(str(n)) for n in per_name.index], index=per_name.index)
    by_cat = per_name.groupby(cats.to_numpy()).sum().sort_values(ascending=False)
    total = float(by_cat.sum())
    return {c: {"ms": float(v) / 1e6, "share": float(v) / total if total else 0.0} for c, v in by_cat.items()}


def _memcpy_summary(m: pd.DataFrame) -> dict:
    if not len(m.columns) or not len(m):
        return {}
    by = {}
    for d, grp in m.groupby(m["direction"].astype(str)):
        by[d] = {"count": int(len(grp)), "bytes": int(grp["size_bytes"].sum()),
                 "ms": float(grp["duration_ns"].sum()) / 1e6,
                 "pageable_bytes": int(grp.loc[grp["pageable"], "size_bytes"].sum())}
    total = sum(v["bytes"] for v in by.values())
    pageable = sum(v["pageable_bytes"] for v in by.values())
    return {"by_direction": by, "bytes": total, "pageable_bytes": pageable,
            "pageable_share": pageable / total if total else 0.0}
