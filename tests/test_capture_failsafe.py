"""GPU capture never hurts the user's program: a CUPTI that cannot start (held by a profiler, by a
StepTimer not closed, or missing) falls back with a note; upkeep failures are counted, not raised."""
from __future__ import annotations

import perfcore.recording.engine as recording
import perfcore.recording.settling as settling
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
    monkeypatch.setattr(t.engine, "device", "cuda")
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
    t.engine.start_kernels("auto")  # must not raise
    assert t.engine.tracer is None and t.backend == "host"
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
    t.engine.start_kernels("auto")
    assert t.backend == "cupti-python" and "using cupti-python" in t.notes[0]


def test_upkeep_failure_is_counted_not_raised(monkeypatch):
    monkeypatch.setattr(recording, "COMPACT_EVERY", 1)
    monkeypatch.setattr(settling, "COMPACT_MIN_S", 0.0)
    monkeypatch.setattr(settling, "FIRST_COMPACT_S", 0.0)
    t = timing.StepTimer(device="cpu", warmup=0)

    def broken(final):
        raise RuntimeError("disk full")

    monkeypatch.setattr(t.engine, "_compact", broken)
    for _ in range(3):
        with t.compute():
            pass
        t.step()  # would raise RuntimeError into the loop before
    assert t.engine.upkeep_errors == 3 and t.steps == 3
    assert len([n for n in t.notes if "disk full" in n]) == 1
    assert t.engine.capture_stats().count("upkeep_errors") == 3


def test_capture_stats_reach_the_result():
    t = timing.StepTimer(device="cpu", warmup=0)
    for _ in range(2):
        with t.compute():
            pass
        t.step()
    doc = t.result()
    assert doc.capture.backend == "host" and doc.capture.stats["upkeep_errors"] == 0


class _Events:
    def __init__(self, device, busy=False):
        self.device, self.busy = device, busy

    def set_device(self, d):
        if self.busy:  # a phase is open: the native timer refuses and nothing changes
            return False
        self.device = d
        return True


def _fake_gpus(monkeypatch, allocated, current=0):
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(allocated))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda i: allocated[i])


def test_events_follow_the_gpu_that_holds_the_work(monkeypatch):
    # model.to(rank) without torch.cuda.set_device: current device 0, every tensor on GPU 2.
    _fake_gpus(monkeypatch, [0, 0, 4096, 0])
    t = timing.StepTimer(device="cpu", warmup=0)
    t.engine.gpu.follow, t.engine.gpu.events = True, _Events(0)
    t.engine.follow_device()
    assert t.engine.gpu.events.device == 2 and any("GPU 2" in n for n in t.notes)
    t.engine.follow_device()  # already there: nothing more to say
    assert len([n for n in t.notes if "GPU 2" in n]) == 1


def test_follow_waits_while_a_phase_is_open_and_keeps_the_current_device_on_ties(monkeypatch):
    _fake_gpus(monkeypatch, [0, 4096])
    t = timing.StepTimer(device="cpu", warmup=0)
    t.engine.gpu.follow, t.engine.gpu.events = True, _Events(0, busy=True)
    t.engine.follow_device()
    assert t.engine.gpu.events.device == 0 and not t.notes  # retried at the next check
    _fake_gpus(monkeypatch, [4096, 4096], current=0)
    t.engine.gpu.events.busy = False
    t.engine.follow_device()
    assert t.engine.gpu.events.device == 0


def test_follow_is_off_when_the_device_was_named():
    t = timing.StepTimer(device="cpu", warmup=0)
    t.engine.gpu.events = _Events(0)
    t.engine.follow_device()  # follow is False: a CPU timer, or cuda:N / an explicit stream
    assert t.engine.gpu.events.device == 0
