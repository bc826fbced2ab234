"""Kernels tied to the phase that launched them, on record streams laid out the way CUPTI
delivers them (fabricated buffers through the native decoder; no GPU needed).

What CUPTI documents, and each test models:
- cuptiActivityPushExternalCorrelationId: while an id is pushed on a thread, every runtime/driver
  API activity record made on that thread is preceded by an EXTERNAL_CORRELATION record carrying
  the id and the API call's correlation id.
- CUpti_ActivityAPI.correlationId equals the correlationId of the kernel, memcpy and memset
  records the call started; a cudaGraphLaunch's one id is repeated by every kernel of the graph.
- A kernel's record is written when the GPU has run it (buffers have not been per context or
  stream since CUDA 6.0: bufferCompleted's context and stream are always NULL and 0), so it can
  come in another buffer than its launch's API and external records, in any order, and possibly
  in a later flush than the launch.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from perfcore.capture.activity import MEMSET_NAME, device_tables
from perfcore.capture.columns import activity_frames
from perfcore.capture.launches import LaunchPhases

pytestmark = pytest.mark.cupti

COMPUTE, BACKWARD_CUSTOM, TRANSFER = 2, 16, 1
MAIN, AUTOGRAD = 1001, 1002
RUNTIME_LAUNCH = 211  # a cudaLaunchKernel cbid; the value does not matter to attribution


def frames(C, fill):
    b = C._FakeActivityBuffer()
    fill(b)
    return activity_frames(b.decode())


def spans(*rows):
    return pd.DataFrame(rows, columns=["phase_id", "start_ns", "end_ns"])


def test_tagged_launch_kernel_in_another_buffer_before_the_host_buffer(C):
    lp = LaunchPhases()
    # One drain holds both buffers; the device buffer happened to complete first.
    device = frames(C, lambda b: b.add_kernel(500, 900, 0, 7, 41, "gemm", 1, 1))
    host = frames(C, lambda b: (b.add_external_correlation(COMPUTE, 41), b.add_api(False, 100, 110, 41, MAIN, 211)))
    both = {k: pd.concat([device[k], host[k]], ignore_index=True) for k in device}
    lp.add(both)
    assert list(lp.phase_of(both["kernels"]["correlation_id"].to_numpy())) == [COMPUTE]
    assert lp.by_external == 1


def test_graph_launch_kernels_in_later_drains_all_find_the_phase(C):
    # CUPTI documents a graph launch's correlation id as "identical to the correlation ID in the
    # driver API activity record that launched the graph": cudaGraphLaunch (runtime, id 76) makes
    # a cuGraphLaunch (driver, id 77), each preceded by its external record, and every kernel node
    # carries 77. Hence the DRIVER kind is enabled next to RUNTIME.
    lp = LaunchPhases(keep_drains=4)
    # Drain 1: the launch's API + external records, and the first kernels of the graph.
    d1 = frames(C, lambda b: (b.add_external_correlation(COMPUTE, 76), b.add_api(False, 100, 130, 76, MAIN, 311),
                              b.add_external_correlation(COMPUTE, 77), b.add_api(True, 105, 125, 77, MAIN, 514),
                              [b.add_kernel(200 + i, 201 + i, 0, 7, 77, f"node{i}", 1, 1, graph_id=5)
                               for i in range(3)]))
    lp.add(d1)
    got = list(lp.phase_of(d1["kernels"]["correlation_id"].to_numpy()))
    # Drains 2 and 3: the rest of the graph's kernels, same correlation id, no new host record.
    for d in range(2):
        dn = frames(C, lambda b: [b.add_kernel(300 + 10 * d + i, 301 + 10 * d + i, 0, 7, 77, "node", 1, 1, graph_id=5)
                                  for i in range(4)])
        lp.add(dn)
        got += list(lp.phase_of(dn["kernels"]["correlation_id"].to_numpy()))
    assert got == [COMPUTE] * 11  # the entry was not used up by the first kernel


def test_entries_age_out_so_memory_stays_bounded(C):
    lp = LaunchPhases(keep_drains=2)
    lp.add(frames(C, lambda b: (b.add_external_correlation(COMPUTE, 5), b.add_api(False, 10, 11, 5, MAIN, 211))))
    lp.add(frames(C, lambda b: None))
    assert list(lp.phase_of(np.array([5]))) == [COMPUTE]
    lp.add(frames(C, lambda b: None))
    assert list(lp.phase_of(np.array([5]))) == [-1]
    assert len(lp._ext["corr"]) == 0 and len(lp._api["corr"]) == 0


def test_autograd_thread_launches_take_the_phase_open_at_launch_time(C):
    # The backward pass launches from autograd's device thread, where no id is pushed: API records
    # but no external record. The training thread is inside `compute` (and a custom phase in it)
    # meanwhile, so the launch time places the kernel.
    f = frames(C, lambda b: (
        b.add_api(False, 1500, 1510, 90, AUTOGRAD, 211),   # inside compute only
        b.add_api(False, 2500, 2510, 91, AUTOGRAD, 211),   # inside the custom phase nested in compute
        b.add_api(False, 9000, 9010, 92, AUTOGRAD, 211),   # outside every phase
        b.add_kernel(1600, 1700, 0, 7, 90, "bwd0", 1, 1),
        b.add_kernel(2600, 2700, 0, 7, 91, "bwd1", 1, 1),
        b.add_kernel(9100, 9200, 0, 7, 92, "late", 1, 1),
        b.add_kernel(9300, 9400, 0, 7, 93, "no_api_record", 1, 1)))
    lp = LaunchPhases()
    lp.add(f, spans((TRANSFER, 100, 900), (COMPUTE, 1000, 5000), (BACKWARD_CUSTOM, 2000, 3000)))
    assert list(lp.phase_of(f["kernels"]["correlation_id"].to_numpy())) == [COMPUTE, BACKWARD_CUSTOM, -1, -1]
    assert lp.by_window == 2 and lp.unattributed == 2


def test_external_id_wins_over_the_time_window(C):
    # A kernel launched on the training thread inside a custom phase carries that phase's id even
    # though a sibling window would also match by time.
    f = frames(C, lambda b: (b.add_external_correlation(BACKWARD_CUSTOM, 3), b.add_api(False, 1500, 1501, 3, MAIN, 211),
                             b.add_kernel(1600, 1700, 0, 7, 3, "k", 1, 1)))
    lp = LaunchPhases()
    lp.add(f, spans((COMPUTE, 1000, 5000)))
    assert list(lp.phase_of(np.array([3]))) == [BACKWARD_CUSTOM]


def test_only_perfcores_external_kind_is_used(C):
    ext = pd.DataFrame({"external_kind": np.array([1, 3], dtype=np.int32), "external_id": np.array([99, COMPUTE]),
                        "correlation_id": np.array([8, 8], dtype=np.int32)})
    lp = LaunchPhases()
    lp.add({"external_correlation": ext})
    assert list(lp.phase_of(np.array([8]))) == [COMPUTE]


def test_device_copies_and_memsets_are_device_work_not_transfer(C):
    f = frames(C, lambda b: (
        b.add_memcpy(10, 20, 100, 1, 1, 3, 0, 7, 1),   # HtoD from pageable: transfer
        b.add_memcpy(30, 40, 100, 2, 3, 2, 0, 7, 2),   # DtoH to pinned: transfer
        b.add_memcpy(50, 60, 100, 8, 3, 3, 0, 7, 3),   # DtoD: device work
        b.add_memcpy(70, 80, 100, 10, 3, 3, 0, 7, 4),  # peer: device work
        b.add_memset(90, 95, 100, 0, 0, 7, 5),         # memset: device work
        b.add_kernel(100, 200, 0, 7, 6, "k", 1, 1)))
    lp = LaunchPhases()
    lp.add(f)
    t = device_tables(f, lp)
    c = t["copies"]
    assert list(c["direction"]) == ["h2d", "d2h"] and list(c["pageable"]) == [True, False]
    k = t["kernels"]
    assert sorted(k["name"]) == sorted(["k", "Memcpy DtoD (Device -> Device)", "Memcpy PtoP (Device -> Device)",
                                        MEMSET_NAME])
    assert not k["comm"].any() and (k["phase_id"] == -1).all()


# -- graph replays whose kernels reach a drain before their launch call's record --------------------
def _graph_launches(*starts):
    """cudaGraphLaunch API records (runtime cbid 311) on one thread at these host times."""
    return pd.DataFrame({"start_ns": list(starts), "end_ns": [s + 2 for s in starts], "driver": [0] * len(starts),
                         "cbid": [311] * len(starts), "thread_id": [MAIN] * len(starts)})


@pytest.mark.parametrize("nodes", [False, True], ids=["runs of one id", "node ids"])
def test_a_replay_seen_before_its_launch_does_not_shift_the_later_ones(nodes):
    from perfcore.capture.launches import GraphReplays

    # Four launches at 10, 20, 30, 40 of one graph (two kernel nodes); the first replay's kernels
    # complete in a buffer that drains before the buffer with the launch calls. Before the fix the
    # first replay left its launch in the queue and every later one took its predecessor's:
    # [-1, 10, 20, 30] for [10, 20, 30, 40], for the rest of the session.
    g = GraphReplays()
    node = (lambda k: np.array([7, 8] * k)) if nodes else (lambda k: None)
    first = g.launch_of(np.array([90, 90]), np.array([1, 1]), np.array([15, 16]), node(1))
    g.add_launches(_graph_launches(10, 20, 30, 40))
    rest = g.launch_of(np.array([91, 91, 92, 92, 93, 93]), np.array([1] * 6), np.array([25, 26, 35, 36, 45, 46]),
                       node(3))
    assert list(first) == [-1, -1]  # drained before any launch was known
    assert list(rest) == [20, 20, 30, 30, 40, 40]


def test_the_rest_of_a_replay_split_before_its_launch_gets_the_launch():
    from perfcore.capture.launches import GraphReplays

    g = GraphReplays()
    g.launch_of(np.array([0]), np.array([1]), np.array([15]), np.array([7]))  # node 7 of replay 0 only
    g.add_launches(_graph_launches(10))
    assert list(g.launch_of(np.array([0]), np.array([1]), np.array([17]), np.array([8]))) == [10]


# -- without API records: kernels placed by their phases' CUDA events ------------------------------------
def _events(*rows):
    """The event timer's resolved pairs: (phase, GPU start, GPU end) on the perfcore clock."""
    a = np.array(rows, dtype=np.int64).reshape(-1, 3)
    return {"phase_id": a[:, 0], "start_ns": a[:, 1], "end_ns": a[:, 2]}


def test_without_api_records_kernels_take_the_event_window_that_holds_them(C):
    # The lean tracer takes kernels, copies and memsets only: no API or external-correlation record.
    # Each GPU-label phase's event pair brackets its work on the GPU (compute 1000-5000 us with a
    # custom phase 2000-3000 us inside it); a kernel belongs to the innermost window holding its
    # middle, or the nearest within EVENT_SLACK_NS (the event clock is placed through an anchor).
    from perfcore.capture.launches import EVENT_SLACK_NS

    f = frames(C, lambda b: (
        b.add_kernel(1_500_000, 1_600_000, 0, 7, 1, "fwd", 1, 1),
        b.add_kernel(2_500_000, 2_600_000, 0, 7, 2, "inner", 1, 1),
        b.add_kernel(4_990_000, 5_010_000, 0, 7, 3, "at the end", 1, 1),
        b.add_kernel(5_000_000 + EVENT_SLACK_NS // 2, 5_000_000 + EVENT_SLACK_NS, 0, 7, 4, "just after", 1, 1),
        b.add_kernel(9_000_000, 9_100_000, 0, 7, 5, "outside every phase", 1, 1),
        b.add_memset(989_000, 991_000, 100, 0, 0, 7, 6)))  # its middle 10 us before the window
    lp = LaunchPhases()
    lp.add(f, None, _events((COMPUTE, 1_000_000, 5_000_000), (BACKWARD_CUSTOM, 2_000_000, 3_000_000)))
    t = device_tables(f, lp)["kernels"].set_index("name")["phase_id"]
    assert t.to_dict() == {"fwd": COMPUTE, "inner": BACKWARD_CUSTOM, "at the end": COMPUTE, "just after": COMPUTE,
                           "outside every phase": -1, MEMSET_NAME: COMPUTE}
    assert lp.by_event_window == 5 and lp.by_external == 0 and lp.by_window == 0


def test_event_windows_outlive_their_drain_as_the_other_entries_do(C):
    # A kernel's record can come a drain after its phase's events resolved.
    lp = LaunchPhases(keep_drains=2)
    lp.add({}, None, _events((COMPUTE, 1000, 2000)))
    lp.add({})
    f = frames(C, lambda b: b.add_kernel(1200, 1300, 0, 7, 1, "k", 1, 1))
    assert list(device_tables(f, lp)["kernels"]["phase_id"]) == [COMPUTE]
    lp.add({})
    assert list(device_tables(f, lp)["kernels"]["phase_id"]) == [-1]
    assert len(lp._gpu["start"]) == 0


def test_a_kernel_with_an_api_record_keeps_the_host_rule(C):
    # With API records (the full mode) a launch made outside every phase stays unattributed even when
    # it runs inside another phase's GPU window: its launch time says where it came from.
    f = frames(C, lambda b: (b.add_api(False, 100, 110, 9, MAIN, 211), b.add_kernel(1500, 1600, 0, 7, 9, "k", 1, 1)))
    lp = LaunchPhases()
    lp.add(f, spans((COMPUTE, 1000, 2000)), _events((COMPUTE, 1400, 2100)))
    assert list(device_tables(f, lp)["kernels"]["phase_id"]) == [-1]


def test_the_tracing_calibrations_kernels_are_not_the_runs(C):
    from perfcore.capture.activity import PROBE_KERNEL

    f = frames(C, lambda b: (b.add_kernel(10, 20, 0, 7, 1, f"{PROBE_KERNEL}()", 1, 1),
                             b.add_kernel(30, 40, 0, 7, 2, "gemm", 1, 1)))
    lp = LaunchPhases()
    lp.add(f)
    assert list(device_tables(f, lp)["kernels"]["name"]) == ["gemm"]
