"""GPU capture on the device's own terms, where it can be modelled without a device: the record
walk against the real libcupti (fabricated buffers), what the run reports losing, the named
device, torch.profiler's state, graph kernels when CUPTI's ids cannot be trusted, copy kinds."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from perfcore.errors import UsageError


# -- the record walk (real libcupti, fabricated buffers) ---------------------------------------
_KEEP = []  # kernel records point at their names, which must outlive the decode


def kernels_buffer(C, n, first=0):
    b = C._FakeActivityBuffer()
    for i in range(n):
        b.add_kernel(1000 + i, 1001 + i, 0, 7, first + i, "k", 1, 1)
    _KEEP.append(b)
    return b


@pytest.mark.cupti
def test_walk_stops_at_an_incomplete_record_and_keeps_what_came_before(C):
    # cuptiActivityGetNextRecord returns CUPTI_ERROR_INVALID_KIND for an "incomplete or invalid"
    # record (what a forced flush hands over for work still running). The records before it are
    # real and kept, and the stop is counted by cause.
    head = kernels_buffer(C, 3)
    full = kernels_buffer(C, 6)
    pool = C._ActivityBuffers(buffer_bytes=64 << 10, max_buffers=2)
    assert pool.deliver(full, invalid_at=head.size_bytes)
    pool.decode_ready()
    got = pool.take()
    assert list(got["kernels"]["correlation_id"]) == [0, 1, 2]
    st = pool.stats()
    assert st["records"] == 3
    assert st["buffers_undecodable"] == 1 and st["buffers_incomplete"] == 1
    # at most the bytes from the last record decoded on; at least the three records not walked
    assert full.size_bytes - head.size_bytes <= st["bytes_unwalked"] <= full.size_bytes
    # the pool goes on: the next buffer decodes whole
    assert pool.deliver(kernels_buffer(C, 2, first=10))
    pool.decode_ready()
    assert list(pool.take()["kernels"]["correlation_id"]) == [10, 11]


@pytest.mark.cupti
def test_zero_timestamps_are_counted_apart_from_broken_ones(C):
    b = C._FakeActivityBuffer()
    b.add_kernel(0, 50, 0, 7, 1, "not_collected", 1, 1)
    b.add_kernel(100, 0, 0, 7, 2, "cut_off", 1, 1)
    b.add_kernel(300, 200, 0, 7, 3, "backwards", 1, 1)
    b.add_kernel(400, 410, 0, 7, 4, "fine", 1, 1)
    got = b.decode()
    assert got["invalid_timestamps"] == 3 and got["zero_timestamps"] == 2
    _KEEP.append(b)
    pool = C._ActivityBuffers(buffer_bytes=64 << 10, max_buffers=1)
    pool.deliver(b)
    pool.decode_ready()
    st = pool.stats()
    assert st["invalid_timestamps"] == 3 and st["zero_timestamps"] == 2


@pytest.mark.cupti
def test_known_cupti_bugs_are_guarded_by_version(C):
    # Graph correlation ids are wrong after the first session before the fix; disabling
    # CONCURRENT_KERNEL may deadlock before its fix. The first API version known to carry each.
    # 13.0 GA deadlocks; 13.0 Update 1 (API 130001 in cupti_version.h, nvidia-cuda-cupti 13.0.85) does not
    guards = lambda v, s: {k: g for k, g in C.cupti_guards(v, s).items() if k != "null_buffer_unsafe"}  # noqa: E731
    assert guards(130000, 1) == {"graph_ids_untrusted": False, "concurrent_kernel_left_on": True}
    assert guards(130001, 1) == {"graph_ids_untrusted": False, "concurrent_kernel_left_on": False}
    assert guards(130001, 2) == {"graph_ids_untrusted": True, "concurrent_kernel_left_on": False}
    twelve = guards(24, 3)  # a 12.x CUPTI: wrong graph ids, but the deadlock is 13.0's
    assert twelve == {"graph_ids_untrusted": True, "concurrent_kernel_left_on": False}
    assert guards(130200, 5) == {"graph_ids_untrusted": False, "concurrent_kernel_left_on": False}


# -- copies ------------------------------------------------------------------------------------
def test_pageable_reads_the_host_side_of_array_to_host_copies_too():
    from perfcore.capture.columns import activity_frames

    raw = {"names": [], "memcpy": {
        "start_ns": np.array([0, 10, 20, 30]), "end_ns": np.array([5, 15, 25, 35]),
        "size_bytes": np.array([1, 1, 1, 1]), "device_id": np.zeros(4, np.int32), "stream_id": np.zeros(4, np.int32),
        "correlation_id": np.arange(4, dtype=np.int32),
        # a2h into pageable, a2h into pinned, d2h into pageable, h2a from pageable
        "copy_kind": np.array([4, 4, 2, 3], np.uint8), "src_kind": np.array([4, 4, 3, 1], np.uint8),
        "dst_kind": np.array([1, 2, 1, 4], np.uint8), "flags": np.zeros(4, np.uint8)}}
    m = activity_frames(raw)["memcpy"]
    assert list(m["pageable"]) == [True, False, True, True]


# -- what the run reports losing -----------------------------------------------------------------
class _Tracer:
    def __init__(self, stats, synced=True):
        self.stats, self.synced_at_stop = stats, synced


def _engine(stats):
    from perfcore.recording.device_capture import DeviceCapture

    class E:
        backend = "native-cupti"
        upkeep_errors = 0
        notes: list = []
    e = E()
    e.gpu = DeviceCapture("cuda")
    e.gpu.tracer = _Tracer(stats)
    return e


def test_run_json_capture_reports_every_loss_by_cause():
    from perfcore.recording.gpu import capture_stats

    cap = capture_stats(_engine({"records": 90, "dropped_records": 4, "overflow_records": 1, "invalid_timestamps": 3,
                                 "zero_timestamps": 2, "buffers_undecodable": 2, "buffers_incomplete": 1,
                                 "bytes_unwalked": 4096, "api_calls_filtered": 29, "session": 2,
                                 "graph_ids_untrusted": True, "device_buffer_bytes": 8 << 20}))
    st = cap.stats
    assert (st["dropped"], st["overflow"], st["invalid_timestamps"], st["zero_timestamps"]) == (4, 1, 3, 2)
    assert (st["buffers_undecodable"], st["buffers_incomplete"], st["bytes_unwalked"]) == (2, 1, 4096)
    assert st["device_synced_at_stop"] is True and st["api_calls_filtered"] == 29
    assert cap.guards == ("graph_ids_untrusted",) and st["cupti_session"] == 2
    assert cap.to_doc()["guards"] == ["graph_ids_untrusted"]



def test_a_tracer_without_the_native_counts_reads_as_zeros_and_its_file_is_the_same():
    # The cupti-python tracer keeps its own counts (no session, no guards) and a key of its own: the
    # typed stats read what they name, zeros for the rest, and run.json's capture holds plain numbers.
    from perfcore.analysis.run_parts import Capture
    from perfcore.recording.gpu import capture_stats

    cap = capture_stats(_engine({"records": 12, "flush_ns": 2_500_000, "timestamp_callback": False,
                                 "clock_drift_ns": -40}))
    assert (cap.count("records"), cap.count("dropped"), cap.count("cupti_session")) == (12, 0, 0)
    assert cap.stats["flush_ms"] == 2.5 and cap.stats["clock_drift_ns"] == -40 and cap.guards == ()
    assert "timestamp_callback" not in cap.stats
    doc = cap.to_doc()
    assert Capture.from_doc(doc, "capture") == cap  # what the part writes reads back the same


def test_events_the_runtime_refused_are_said_with_its_error():
    from perfcore.recording.gpu import capture_stats

    class Ev:
        def stream_stats(self):
            return {"followed": 4, "unreadable": 2, "last_unreadable_error": "cudaErrorLaunchFailure"}

        def clock_sync(self):
            return {"syncs": 3, "max_abs_drift_ns": 70, "uncertainty_ns": 5}

    e = _cuda_engine()
    e.gpu.events, e.upkeep_errors = Ev(), 0
    cap = capture_stats(e)
    assert cap.stats["event_pairs_unreadable"] == 2 and cap.stats["phases_stream_unseen"] == 0
    assert (cap.stats["event_clock_syncs"], cap.stats["clock_drift_ns"]) == (3, 70)  # no tracer: the events' drift
    assert any("2 GPU phase(s) could not be timed" in n and "cudaErrorLaunchFailure" in n for n in e.notes)


def test_a_later_cupti_session_places_graph_kernels_by_launch_order(monkeypatch):
    # The native stats of the second session in the process, on a CUPTI whose graph ids are wrong then:
    # with correlation records (the full mode) graph kernels go by the launches' order, and the note names
    # the session; the lean mode places every kernel by its phase's events and needs no guard.
    import perfcore.recording.gpu as g
    from perfcore.capture.native_cupti import CuptiTracer
    from perfcore.recording.tracing import Tracing

    fake = type("N", (), {"cupti_stats": staticmethod(lambda: {"graph_ids_untrusted": True, "session": 2})})
    monkeypatch.setattr(g, "native", lambda: fake)
    for mode, trusted in (("full", False), ("lean", True)):
        e = _cuda_engine()
        e.gpu.tracer, e.gpu.tracing = CuptiTracer.__new__(CuptiTracer), Tracing(mode, "native-cupti", None, None)
        g.trust_graph_ids(e)
        assert e.gpu.launches.trust_graph_ids is trusted
        assert any("CUPTI tracing session 2 in this process" in n for n in e.notes) is not trusted

# -- cuda:N ------------------------------------------------------------------------------------
def test_a_named_device_makes_its_events_there(monkeypatch):
    # The event timer takes the index (it sets that device current around each record): a
    # "cuda:1" timer must not be made on whatever device is current.
    import torch

    import perfcore.recording.gpu as g

    made = []

    class Timer:
        def __init__(self, device=-1):
            made.append(device)

    class Stream:
        cuda_stream = 77

    sources = []
    fake = type("N", (), {"EventTimer": Timer, "FOLLOW_CURRENT_STREAM": 2 ** 64 - 1,
                          "_set_current_stream_source": staticmethod(sources.append)})
    monkeypatch.setattr(g, "capabilities", lambda: {"features": {"cuda_events": True}, "reasons": {}})
    monkeypatch.setattr(g, "native", lambda: fake)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    kind, handle, timer, follow = g.open_device("cuda:1", Stream())
    assert (kind, handle, made, follow) == ("cuda", 77, [1], False)
    g.open_device("cuda", None)
    assert made[-1] == -1
    with pytest.raises(UsageError, match="sees 2 GPU"):
        g.open_device("cuda:2", None)
    with pytest.raises(UsageError, match="cuda:N"):
        g.open_device("cuda:x", None)


# -- torch.profiler ------------------------------------------------------------------------------
def _cuda_engine():
    from perfcore.recording.device_capture import DeviceCapture

    class E:
        device = "cuda"
        backend = "events"
        notes: list = []
    e = E()
    e.notes = []
    e.gpu = DeviceCapture("cuda")
    return e


def test_kernels_are_declined_while_torch_profiler_records():
    # A profiler recording now holds CUPTI's buffer callbacks: taking them would cost it its GPU
    # trace, so perfcore declines, and says so (a real torch.profiler, CPU activity).
    from torch.profiler import ProfilerActivity, profile

    from perfcore.capture.native_cupti import kineto_state
    from perfcore.recording.gpu import start_kernels

    e = _cuda_engine()
    with profile(activities=[ProfilerActivity.CPU]):
        assert kineto_state()["active"]
        start_kernels(e)
    assert e.gpu.tracer is None and e.backend == "events"
    assert len(e.notes) == 1 and "declined" in e.notes[0] and "torch.profiler is recording" in e.notes[0]
    assert e.gpu.kineto["active"]


def test_a_profiler_recording_on_another_thread_is_seen():
    # torch's C flag is thread-local: a torch.profiler opened by another thread (a trainer thread,
    # a monitoring thread) reads as off from this one, and newer kineto or CUPTI >= 13.3 no longer
    # refuse a second subscriber. torch's process-wide Python flag says it.
    import threading

    from torch.profiler import ProfilerActivity, profile

    from perfcore.capture.native_cupti import kineto_state
    from perfcore.recording.gpu import start_kernels

    ready, done = threading.Event(), threading.Event()

    def other():
        with profile(activities=[ProfilerActivity.CPU]):
            ready.set()
            done.wait(30)

    t = threading.Thread(target=other)
    t.start()
    try:
        assert ready.wait(30)
        assert kineto_state()["active"]
        e = _cuda_engine()
        start_kernels(e)
        assert e.gpu.tracer is None and "declined" in e.notes[0]
    finally:
        done.set()
        t.join()
    assert not kineto_state()["active"]


def test_after_torch_profiler_ran_the_advice_is_to_restart():
    # Kineto keeps CUPTI for the rest of the process once it ran: "stop it" would be false.
    from torch.profiler import ProfilerActivity, profile

    from perfcore.capture.native_cupti import kineto_state, watch_torch_profiler
    from perfcore.recording.gpu import start_kernels

    assert watch_torch_profiler()
    with profile(activities=[ProfilerActivity.CPU]):
        pass
    assert kineto_state()["used"] and not kineto_state()["active"]
    e = _cuda_engine()
    start_kernels(e)  # no GPU here: CUPTI cannot start, as when kineto holds it
    assert e.gpu.tracer is None
    assert "restart the kernel" in e.notes[-1] and "stop it" not in e.notes[-1]


# -- graph kernels when CUPTI's correlation ids are wrong -----------------------------------------
def test_graph_kernels_are_placed_by_launch_order_when_ids_are_untrusted():
    from perfcore.capture.launches import LaunchPhases

    # Two phases, each launching a graph (cudaGraphLaunch, runtime cbid 311) whose kernels run
    # after it; the kernels carry a correlation id that matches neither launch.
    api = pd.DataFrame({"start_ns": [100, 1100], "end_ns": [110, 1110], "thread_id": [1, 1],
                        "correlation_id": [5, 6], "cbid": [311, 311], "driver": [0, 0]})
    ext = pd.DataFrame({"external_kind": [3, 3], "external_id": [16, 17], "correlation_id": [5, 6]})
    spans = pd.DataFrame({"start_ns": [50, 1050], "end_ns": [900, 1900], "phase_id": [16, 17]})
    corr = np.array([99, 99, 99, 99])  # wrong ids
    graph = np.array([1, 1, 2, 2])
    start = np.array([200, 300, 1200, 1300])
    lp = LaunchPhases()
    lp.add({"api": api, "external_correlation": ext}, spans)
    assert list(lp.phase_of(corr, graph, start)) == [-1, -1, -1, -1]  # trusted ids: nothing matches
    lp.trust_graph_ids = False
    assert list(lp.phase_of(corr, graph, start)) == [16, 16, 17, 17]
    assert lp.by_graph_order == 4
    # kernels outside graphs keep the correlation id path
    assert list(lp.phase_of(np.array([5]), np.array([0]), np.array([150]))) == [16]


def test_graph_replays_go_to_their_launch_in_order_when_the_cpu_runs_ahead():
    from perfcore.capture.launches import LaunchPhases

    # Phase 16 launches the graph at 100 and phase 17 again at 1100; the GPU is behind, so both
    # replays run after the second launch call (1200.. and 1400..). Each launch is a runtime
    # cudaGraphLaunch with its driver cuGraphLaunch inside it on the same thread (one launch).
    api = pd.DataFrame({"start_ns": [100, 102, 1100, 1102], "end_ns": [110, 108, 1110, 1108],
                        "thread_id": [1, 1, 1, 1], "correlation_id": [5, 6, 7, 8],
                        "cbid": [311, 514, 311, 514], "driver": [0, 1, 0, 1]})
    spans = pd.DataFrame({"start_ns": [50, 1050], "end_ns": [900, 1900], "phase_id": [16, 17]})
    corr = np.array([99, 99, 100, 100])  # wrong ids, one per launch
    graph = np.array([1, 1, 1, 1])
    start = np.array([1200, 1300, 1400, 1500])
    lp = LaunchPhases()
    lp.trust_graph_ids = False
    lp.add({"api": api}, spans)
    # The latest launch before each kernel would give [17, 17, 17, 17].
    assert list(lp.phase_of(corr, graph, start)) == [16, 16, 17, 17]


def test_graph_replays_split_across_drains_keep_their_launch():
    from perfcore.capture.launches import LaunchPhases

    api = pd.DataFrame({"start_ns": [100, 1100, 1150], "end_ns": [110, 1110, 1160], "thread_id": [1, 1, 2],
                        "correlation_id": [5, 7, 9], "cbid": [311, 311, 311], "driver": [0, 0, 0]})
    spans = pd.DataFrame({"start_ns": [50, 1050, 1140], "end_ns": [900, 1900, 1170], "phase_id": [16, 17, 18]})
    lp = LaunchPhases()
    lp.trust_graph_ids = False
    lp.add({"api": api}, spans)
    # Drain 1 ends inside the first replay of graph 1; phase 17 launched graph 2, phase 18 graph 1
    # again (on another thread).
    first = lp.phase_of(np.array([99, 99, 50]), np.array([1, 1, 2]), np.array([1200, 1300, 1250]))
    lp.add({})
    rest = lp.phase_of(np.array([99, 100, 100]), np.array([1, 1, 1]), np.array([1350, 1400, 1500]))
    assert list(first) == [16, 16, 17] and list(rest) == [16, 18, 18]


def _two_graph_launches_ids_untrusted():
    """Phase 16 launches a graph at 100, phase 17 at 1100 (cudaGraphLaunch); ids untrusted."""
    from perfcore.capture.launches import LaunchPhases

    api = pd.DataFrame({"start_ns": [100, 1100], "end_ns": [110, 1110], "thread_id": [1, 1],
                        "correlation_id": [5, 7], "cbid": [311, 311], "driver": [0, 0]})
    spans = pd.DataFrame({"start_ns": [50, 1050], "end_ns": [900, 1900], "phase_id": [16, 17]})
    lp = LaunchPhases()
    lp.trust_graph_ids = False
    lp.add({"api": api}, spans)
    return lp


def test_graph_node_ids_tell_replays_apart_when_the_wrong_ids_are_all_alike():
    # The same CPU-ahead pair of launches, but CUPTI's wrong ids are one value for every replay:
    # only the node ids (each node runs once a replay) split the two replays of graph 1.
    lp = _two_graph_launches_ids_untrusted()
    corr, graph = np.array([0, 0, 0, 0]), np.array([1, 1, 1, 1])
    start, node = np.array([1200, 1300, 1400, 1500]), np.array([71, 72, 71, 72])
    assert list(lp.phase_of(corr, graph, start, node)) == [16, 16, 17, 17]


def test_graph_node_ids_keep_a_replay_split_across_drains():
    lp = _two_graph_launches_ids_untrusted()
    # Three nodes a replay; the first drain ends after two kernels of the first replay.
    first = lp.phase_of(np.array([0, 0]), np.array([1, 1]), np.array([1200, 1250]), np.array([71, 72]))
    lp.add({})
    rest = lp.phase_of(np.array([0] * 4), np.array([1] * 4), np.array([1300, 1400, 1450, 1500]),
                       np.array([73, 71, 72, 73]))
    assert list(first) == [16, 16] and list(rest) == [16, 17, 17, 17]


# -- side streams --------------------------------------------------------------------------------
def test_phases_follow_the_stream_current_when_they_open(monkeypatch):
    # Without a stream given, the event timer is told to read the current stream at each phase's
    # start (torch's, via its C accessor), not to use the one current when the timer was made:
    # work under `with torch.cuda.stream(side):` is then ordered with its phase's events.
    import torch

    import perfcore.recording.gpu as g

    sources = []
    fake = type("N", (), {"EventTimer": lambda device=-1: object(), "FOLLOW_CURRENT_STREAM": 2 ** 64 - 1,
                          "_set_current_stream_source": staticmethod(sources.append)})
    monkeypatch.setattr(g, "capabilities", lambda: {"features": {"cuda_events": True}, "reasons": {}})
    monkeypatch.setattr(g, "native", lambda: fake)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    kind, handle, _, follow = g.open_device("cuda", None)
    assert handle == 2 ** 64 - 1 and follow
    assert sources == [torch._C._cuda_getCurrentRawStream]


@pytest.mark.cupti
def test_the_native_module_knows_the_follow_current_stream_value(C):
    assert C.FOLLOW_CURRENT_STREAM == 2 ** 64 - 1
    C._set_current_stream_source(lambda device: 0)
    C._set_current_stream_source(None)


def test_a_phase_that_switched_streams_inside_is_said(monkeypatch):
    from perfcore.recording.gpu import capture_stats

    class Ev:
        def stream_stats(self):
            return {"followed": 10, "unseen": 0, "switched_inside": 3}

        def clock_sync(self):
            return {"syncs": 1, "max_abs_drift_ns": 0, "uncertainty_ns": 0}

    e = _cuda_engine()
    e.gpu.events, e.upkeep_errors = Ev(), 0
    cap = capture_stats(e)
    assert cap.stats["phases_switched_stream_inside"] == 3 and cap.stats["phases_on_current_stream"] == 10
    assert any("3 GPU phase(s) moved their work to another stream" in n for n in e.notes)


def test_the_stop_sync_waits_only_for_gpus_that_have_a_context(monkeypatch):
    # torch.cuda.synchronize(i) on a GPU the run never used would create a context there.
    import sys
    import types

    from perfcore.capture.native_cupti import synchronize_devices

    synced = []
    cuda = types.SimpleNamespace(is_initialized=lambda: True, device_count=lambda: 3, synchronize=synced.append)
    fake = types.SimpleNamespace(cuda=cuda, _C=types.SimpleNamespace(_cuda_hasPrimaryContext=lambda i: i == 1))
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert synchronize_devices() is True and synced == [1]


# -- API records of calls that launch nothing ---------------------------------------------------
def _cbid_names() -> dict[str, dict[int, str]]:
    """callback id -> call name, from the cbid headers of the CUPTI the extension was built against."""
    import json
    import re
    from pathlib import Path

    import perfcore

    info = json.loads((Path(perfcore.__file__).parent / "_build_info.json").read_text())
    include = Path(info["cupti"]["include"])
    out = {}
    for domain, header, prefix in (("runtime", "cupti_runtime_cbid.h", "CUPTI_RUNTIME_TRACE_CBID_"),
                                   ("driver", "cupti_driver_cbid.h", "CUPTI_DRIVER_TRACE_CBID_")):
        text = (include / header).read_text()
        out[domain] = {int(v): n for n, v in re.findall(prefix + r"(\w+)\s*=\s*(\d+)", text)}
    return out


@pytest.mark.cupti
def test_the_api_records_turned_off_are_calls_that_launch_nothing(C):
    names = _cbid_names()
    quiet = C._cupti_quiet_api()
    runtime = [names["runtime"][i] for i in quiet["runtime"]]
    driver = [names["driver"][i] for i in quiet["driver"]]
    assert len(set(runtime)) == len(runtime) and len(set(driver)) == len(driver)
    # torch's constant queries are off ...
    for call in ("cudaGetDevice_v3020", "cudaGetLastError_v3020", "cudaStreamIsCapturing_v10000"):
        assert call in runtime
    for call in ("cuCtxGetCurrent", "cuDevicePrimaryCtxGetState", "cuGetProcAddress_v2"):
        assert call in driver
    # ... and nothing that launches, copies, sets, waits or runs a graph: those records tag kernels
    # with their phase and place graph kernels (a graph's kernels carry the driver call's id)
    work = ("Launch", "Memcpy", "Memset", "Graph", "Synchronize", "EventRecord", "StreamWait")
    assert not [n for n in runtime + driver if any(w in n for w in work)]
    ids = {d: {n: i for i, n in names[d].items()} for d in names}
    for call in ("cudaLaunchKernel_v7000", "cudaMemcpyAsync_v3020", "cudaGraphLaunch_v10000"):
        assert ids["runtime"][call] not in quiet["runtime"]
    for call in ("cuLaunchKernel", "cuGraphLaunch"):
        assert ids["driver"][call] not in quiet["driver"]


# -- torch.profiler started while perfcore traces -------------------------------------------------
class _HeldTracer:
    """Stands in for a running CUPTI tracer (no GPU here): what hand-over asks of it."""
    name = "native-cupti"

    def __init__(self):
        self.active = True
        self.handed = 0
        self.stats = {"records": 7, "finalized": True}
        self.synced_at_stop = True

    def start(self):
        return self

    def hand_over(self):
        self.handed += 1
        self.active = False
        return {}

    def take(self):
        return {}


def test_torch_profiler_starting_mid_run_gets_cupti_and_the_run_says_so(monkeypatch, capsys):
    # Kineto subscribes to CUPTI when a profiler first prepares and keeps it: perfcore lets go
    # first (real torch.profiler, CPU activity), keeps what it traced, and labels the GPU with
    # its CUDA events from then on.
    from torch.profiler import ProfilerActivity, profile

    import perfcore.capture.native_cupti as nc
    import perfcore.recording.gpu as g
    from perfcore.analysis.store import StepStore

    monkeypatch.setattr(nc, "CuptiTracer", _HeldTracer)
    e = _cuda_engine()
    e.steps = 3  # three steps ended
    e.gpu.now_ns = lambda: 12345
    e.store = StepStore({}, 16, on_gpu=True, use_kernels=True, warmup=0)
    e.upkeep_errors = 0
    added = []
    e.add_activity = added.append
    monkeypatch.setattr(g, "trust_graph_ids", lambda engine: None)
    g.start_kernels(e, "native")
    tracer = e.gpu.tracer
    assert isinstance(tracer, _HeldTracer)
    with profile(activities=[ProfilerActivity.CPU]):
        pass
    assert tracer.handed == 1 and e.gpu.tracer is None and added == [{}]
    assert e.store.events_from_ns == 12345
    assert "until step 3, then from CUDA events: torch.profiler started" in e.notes[-1]
    assert "until step 3" in capsys.readouterr().err
    cap = g.capture_stats(e)
    assert cap.handed_over["note"] == "kernels until step 3, then events, because torch.profiler started"
    assert cap.handed_over["finalized"] and cap.count("records") == 7
    with profile(activities=[ProfilerActivity.CPU]):  # once: CUPTI is the profiler's now
        pass
    assert tracer.handed == 1


def _store_with_hand_over_at(events_from_ns):
    from perfcore.analysis.store import StepStore

    st = StepStore({16: "compute"}, 17, on_gpu=True, use_kernels=True, warmup=0)
    st.add("spans", pd.DataFrame({"phase_id": np.array([16, 16], np.int32), "step": [0, 1],
                                  "start_ns": [0, 1000], "end_ns": [900, 1900], "thread_id": [1, 1]}))
    # CUPTI saw the first step's kernel; the events saw both steps' phases (recorded all along)
    st.add("kernels", pd.DataFrame({"start_ns": [100], "end_ns": [500], "stream_id": np.array([7], np.int32),
                                    "name": ["k"], "comm": [False], "phase_id": np.array([16], np.int32)}))
    st.add("events", pd.DataFrame({"phase_id": np.array([16, 16], np.int32), "step": [0, 1],
                                   "start_ns": [50, 1100], "end_ns": [700, 1700]}))
    st.events_from_ns = events_from_ns
    st.settle(np.array([1000, 2000]), 2, 0)
    return list(st.table()["compute_ns"])


def test_after_a_hand_over_events_label_the_gpu():
    # Kernels label the time before the hand-over, the phases' CUDA events the time after it.
    assert _store_with_hand_over_at(1000) == [400, 600]
    assert _store_with_hand_over_at(None) == [400, 0]  # kernels only: the later work is unseen


class FillingTracer:
    """A tracer whose decoded records fill a share of the cap each step (a step of ~3,200 kernels, 3
    records a kernel, against the 8M-record cap) until a settle takes them."""

    per_step = 3 * 3200 / 8_000_000  # of the cap, each step
    backend = "native-cupti"
    stats: dict = {}

    def __init__(self):
        self.share, self.takes, self.most = 0.0, 0, 0.0

    def pending_share(self):
        return self.share

    def take(self):
        from perfcore.capture.native_cupti import _merge

        self.takes += 1
        self.share = 0.0
        return _merge([])

    def fill(self):
        self.share += self.per_step
        self.most = max(self.most, self.share)


def test_a_tracer_filling_faster_than_settles_is_taken_by_volume():
    # A step of ~3,200 kernels fills the tracer's 8M-record cap in ~850 steps (3 records a
    # kernel); settles came every 1,024 steps at most, so the H200 run kept 1.85M of 3.52M
    # kernels. The step end now asks how full the tracer is and settles by volume.
    import perfcore

    t = perfcore.StepTimer(device="cpu", warmup=0)
    tr = FillingTracer()
    t.engine.gpu.tracer = tr
    for _ in range(2000):
        with t.compute():
            tr.fill()
        t.step()
    assert tr.takes >= 4 and tr.most < 0.5, (tr.takes, tr.most)  # never near the cap (1.0)
    t.engine.gpu.tracer = None
    t.close()


def test_perfcore_runs_step_clock_takes_the_tracer_by_volume_too():
    # perfcore run's native step clock appends the step ends itself and calls the upkeep back (every step
    # on a GPU); the upkeep settled only every 1,024 steps, so a loop of microsecond kernels (a CUDA Graph
    # replay, which perfcore graph advises) overflowed the decode cap between settles.
    import perfcore
    from perfcore.run.child.upkeep import Upkeep

    t = perfcore.StepTimer(device="cpu", warmup=0)
    tr = FillingTracer()
    t.engine.gpu.tracer = tr
    up = Upkeep()
    up.start(False, None)
    first = type("Hooks", (), {"first_step_done": lambda self: None})()
    for n in range(1, 2001):
        with t.compute():
            tr.fill()
        t.engine.boundaries.append(t.engine.spans.boundary())  # as the native clock appends its ends
        up.after(n, t, True, first)
    assert tr.takes >= 4 and tr.most < 0.5, (tr.takes, tr.most)
    t.engine.gpu.tracer = None
    t.close()


# -- a driver older than the CUPTI perfcore loads --------------------------------------------------
def test_a_driver_older_than_cupti_is_found_with_both_versions():
    from perfcore.capture.environment import driver_cupti_gap

    assert driver_cupti_gap(12040, "12.8") == ("12.4", "12.8")
    assert driver_cupti_gap(12080, "12.8") is None and driver_cupti_gap(13000, "12.8") is None
    assert driver_cupti_gap(None, "12.8") is None and driver_cupti_gap(12040, None) is None


def test_cupti_failing_on_an_old_driver_says_so(monkeypatch):
    # Colab: torch's kernels run on the driver (minor-version compatibility), CUPTI refuses it.
    import perfcore.capture.environment as env
    import perfcore.capture.native_cupti as nc
    from perfcore.errors import CuptiError

    def start(*a, **k):
        raise CuptiError("cuptiSubscribe failed: CUPTI_ERROR_NOT_INITIALIZED; no usable CUDA device or driver", 15)

    fake = type("C", (), {"cupti_start": staticmethod(start), "cupti_active": staticmethod(lambda: False)})
    monkeypatch.setattr(nc, "require_cupti", lambda what: fake)
    monkeypatch.setattr(env, "driver_cuda_version", lambda: 12040)
    monkeypatch.setattr(env, "cupti_release", lambda: "12.8")
    with pytest.raises(CuptiError) as ei:
        nc.CuptiTracer().start()
    msg = str(ei.value)
    assert ei.value.code == 15 and "\n" not in msg
    assert msg.startswith("cuptiSubscribe failed: CUPTI_ERROR_NOT_INITIALIZED: the NVIDIA driver supports CUDA 12.4")
    monkeypatch.setattr(env, "driver_cuda_version", lambda: 12080)  # a driver new enough: CUPTI's own words
    with pytest.raises(CuptiError, match="no usable CUDA device"):
        nc.CuptiTracer().start()
    checks = {c.name: c for c in env.check_gpu()}
    assert "driver.cupti" not in checks
    monkeypatch.setattr(env, "driver_cuda_version", lambda: 12040)
    checks = {c.name: c for c in env.check_gpu()}
    assert checks["driver.cupti"].status == "warn" and checks["driver.cupti"].code == "driver_older"
    assert checks["driver.cupti"].figures == {"driver_cuda": "12.4", "cupti_cuda": "12.8"}
