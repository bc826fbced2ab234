"""GPU capture never hurts the user's program: a CUPTI that cannot start (held by a profiler, by a
StepTimer not closed, or missing) falls back with a note; upkeep failures are counted, not raised."""
from __future__ import annotations

import pytest

import perfcore.timing as timing
from perfcore.errors import CuptiError, DeviceUnavailable


class _Refuses:
    name = "fake"

    def __init__(self, exc):
        self.exc = exc

    def start(self):
        raise self.exc


def _cuda_timer_without_gpu(monkeypatch):
    # The fallback logic runs before any GPU call, so a CPU timer told it is on CUDA exercises it.
    t = timing.StepTimer(device="cpu", warmup=0)
    monkeypatch.setattr(t, "device", "cuda")
    return t


def test_second_tracer_and_missing_cupti_python_fall_back_to_events(monkeypatch):
    import perfcore.capture.cupti_python as cp
    import perfcore.capture.native_cupti as nc

    held = CuptiError("perfcore's CUPTI tracer is already running in this process", 17)
    monkeypatch.setattr(nc, "CuptiTracer", type("N", (_Refuses,), {"name": "native-cupti", "__init__":
                                                                   lambda self: _Refuses.__init__(self, held)}))
    missing = DeviceUnavailable("the cupti-python backend needs the cupti-python package")
    monkeypatch.setattr(cp, "CuptiPythonTracer", type("P", (_Refuses,), {"name": "cupti-python", "__init__":
                                                                         lambda self: _Refuses.__init__(self, missing)}))
    t = _cuda_timer_without_gpu(monkeypatch)
    t._start_kernels("auto")  # must not raise
    assert t._tracer is None and t.backend == "host"
    (note,) = t.notes
    assert "already running" in note and "cupti-python package" in note and "CUDA events" in note


def test_auto_uses_cupti_python_when_native_cannot_start(monkeypatch):
    import perfcore.capture.cupti_python as cp
    import perfcore.capture.native_cupti as nc

    class Works:
        name = "cupti-python"
        stats: dict = {}

        def start(self):
            return self

    monkeypatch.setattr(nc, "CuptiTracer", type("N", (_Refuses,), {
        "name": "native-cupti", "__init__": lambda self: _Refuses.__init__(self, CuptiError("held by nsys", 1))}))
    monkeypatch.setattr(cp, "CuptiPythonTracer", Works)
    t = _cuda_timer_without_gpu(monkeypatch)
    t._start_kernels("auto")
    assert t.backend == "cupti-python" and "using cupti-python" in t.notes[0]


def test_upkeep_failure_is_counted_not_raised(monkeypatch):
    monkeypatch.setattr(timing, "COMPACT_EVERY", 1)
    monkeypatch.setattr(timing, "COMPACT_MIN_S", 0.0)
    t = timing.StepTimer(device="cpu", warmup=0)

    def broken(final):
        raise RuntimeError("disk full")

    monkeypatch.setattr(t, "_compact", broken)
    for _ in range(3):
        with t.compute():
            pass
        t.step()  # would raise RuntimeError into the loop before
    assert t.upkeep_errors == 3 and t.steps == 3
    assert len([n for n in t.notes if "disk full" in n]) == 1
    assert t.capture_stats()["upkeep_errors"] == 3


def test_capture_stats_reach_the_result():
    t = timing.StepTimer(device="cpu", warmup=0)
    for _ in range(2):
        with t.compute():
            pass
        t.step()
    doc = t.result()
    assert doc["capture"]["backend"] == "host" and doc["capture"]["upkeep_errors"] == 0
