"""The native module: build mode, capabilities, the one clock, clear errors without a GPU."""
from __future__ import annotations

import threading
import time

import pytest

import perfcore
from perfcore import errors


def test_capabilities_match_build(caps, C):
    info = perfcore.build_info()
    assert caps["mode"] == info["mode"]
    assert caps["cuda_compiled"] == (info["mode"] == "cuda") == C.CUDA_COMPILED
    assert caps["features"]["spans"] is True
    # Every missing feature carries a reason a person can act on.
    for name, available in caps["features"].items():
        if not available:
            assert caps["reasons"].get(name), f"{name} unavailable without a reason"


def test_cpu_mode_reports_what_is_left_out(caps):
    if caps["mode"] != "cpu":
        pytest.skip("CUDA-mode build")
    for feature in ("cuda_events", "cupti", "transfer", "calibration"):
        assert caps["features"][feature] is False
        assert "CPU mode" in caps["reasons"][feature]
    assert caps["cupti_version"] is None


def test_cuda_build_compiled_against_loaded_cupti(caps):
    if caps["mode"] != "cuda":
        pytest.skip("CPU-mode build")
    info = perfcore.build_info()
    assert caps["cupti_compiled_version"] == info["cupti"]["api_version"]
    # The check at import: the loaded library is the one whose headers we compiled against.
    assert caps["cupti_version"] == caps["cupti_compiled_version"]
    assert caps["warnings"] == []


def test_one_clock_with_python():
    from perfcore._native import native

    C = native()
    for _ in range(100):
        a = time.perf_counter_ns()
        n = C.now_ns()
        b = time.perf_counter_ns()
        assert a <= n <= b


def test_thread_id_is_os_thread_id(C):
    seen = {}

    def work():
        seen["native"] = C.thread_id()
        seen["python"] = threading.get_native_id()

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen["native"] == seen["python"]
    assert C.thread_id() == threading.get_native_id()


def test_gpu_parts_without_gpu_raise_one_line(caps, C):
    if caps["features"]["cuda_events"] or not caps["cuda_compiled"]:
        pytest.skip("needs a CUDA-mode build on a machine without a GPU")
    for call in (lambda: C.EventTimer(), lambda: C.launch_spin(1000), lambda: C.measure_copies([4096], "h2d", True),
                 lambda: C.measure_launch_overhead(10)):
        with pytest.raises(errors.DeviceUnavailable) as ei:
            call()
        msg = str(ei.value)
        assert "\n" not in msg and "GPU" in msg
        assert "Colab: Runtime > Change runtime type" in msg  # the likely cause, where it is likely


def test_cupti_without_gpu_is_a_clear_cupti_error(caps, C):
    if caps["features"]["cupti"] or not caps["cupti_compiled"]:
        pytest.skip("needs a CUPTI build on a machine without a GPU")
    with pytest.raises(errors.CuptiError) as ei:
        C.cupti_start()
    assert ei.value.code > 0
    assert "failed" in str(ei.value) and "host backend" in str(ei.value)
    assert "Change runtime type" in str(ei.value)  # no device: Colab's likely cause is named
    assert not C.cupti_active()
    # The failed start left nothing half-enabled: the stats are untouched.
    assert C.cupti_stats()["buffers_allocated"] == 0


def test_require_helpers_raise_device_unavailable(caps):
    if caps["features"]["cuda_events"]:
        pytest.skip("a GPU is present")
    from perfcore._native import require_cuda, require_cupti

    with pytest.raises(errors.DeviceUnavailable, match="needs a CUDA GPU"):
        require_cuda("the event timer")
    with pytest.raises(errors.CuptiUnavailable, match="needs CUPTI"):
        require_cupti("kernel tracing")


def test_misuse_maps_to_usage_error(C):
    r = C.SpanRecorder()
    with pytest.raises(errors.UsageError):
        r.end(3)
    assert issubclass(errors.UsageError, errors.PerfcoreError)


def test_a_failed_cupti_tag_never_fails_the_phase(caps, C):
    # Here libcupti has no driver, so every push of a phase's external id fails: the phases must
    # still open, nest and close, the failures counted (their kernels fall back to launch time).
    if not C.CUPTI_COMPILED:
        pytest.skip("needs a CUPTI build")
    if caps["features"]["cuda_events"]:
        pytest.skip("a GPU is present: pushes succeed")
    r = C.SpanRecorder()
    outer = C.phase_scope(C.PhaseScope, r, 5, None, None, True)
    inner = C.phase_scope(C.PhaseScope, r, 6, None, None, True)
    before = C.tag_errors()
    C.cupti_set_tagging(True)
    try:
        with outer:
            with inner:
                pass
    finally:
        C.cupti_set_tagging(False)
    assert C.tag_errors() == before + 2
    assert list(r.drain()["phase_id"]) == [6, 5] and r.open_phases() == []
