"""The CUPTI record decoder on fabricated activity buffers (no GPU needed): every column must
match what was written, through the loaded libcupti's cuptiActivityGetNextRecord."""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.cupti

NAMES = ["_ZN2at6native29vectorized_elementwise_kernelILi4EEEvv", "sm90_xmma_gemm_bf16bf16_bf16f32", "plain_kernel"]


def build(C, rng, n):
    buf = C._FakeActivityBuffer()
    want = {"kernels": [], "memcpy": [], "memset": [], "sync": [], "external": [], "overhead": []}
    for i in range(n):
        t0 = int(rng.integers(1, 1 << 60))
        t1 = t0 + int(rng.integers(0, 1 << 30))
        kind = i % 6
        if kind == 0:
            row = dict(start_ns=t0, end_ns=t1, device_id=int(rng.integers(0, 8)), stream_id=int(rng.integers(0, 1 << 20)),
                       correlation_id=int(rng.integers(0, 1 << 31)), name=NAMES[(i // 6) % 3],
                       grid_x=int(rng.integers(1, 1 << 16)), block_x=int(rng.integers(1, 1024)))
            buf.add_kernel(**row)
            want["kernels"].append(row)
        elif kind == 1:
            row = dict(start_ns=t0, end_ns=t1, size_bytes=int(rng.integers(0, 1 << 40)), copy_kind=int(rng.integers(1, 11)),
                       src_kind=int(rng.integers(0, 8)), dst_kind=int(rng.integers(0, 8)), device_id=0,
                       stream_id=int(rng.integers(0, 100)), correlation_id=int(rng.integers(0, 1 << 31)))
            buf.add_memcpy(**row)
            want["memcpy"].append(row)
        elif kind == 2:
            row = dict(start_ns=t0, end_ns=t1, size_bytes=int(rng.integers(0, 1 << 40)), value=int(rng.integers(0, 256)),
                       device_id=1, stream_id=3, correlation_id=int(rng.integers(0, 1 << 31)))
            buf.add_memset(**row)
            want["memset"].append(row)
        elif kind == 3:
            row = dict(start_ns=t0, end_ns=t1, sync_type=int(rng.integers(1, 5)), stream_id=int(rng.integers(0, 50)),
                       correlation_id=int(rng.integers(0, 1 << 31)))
            buf.add_sync(**row)
            want["sync"].append(row)
        elif kind == 4:
            row = dict(external_id=int(rng.integers(0, 1 << 62)), correlation_id=int(rng.integers(0, 1 << 31)))
            buf.add_external_correlation(**row)
            want["external"].append(row)
        else:
            row = dict(start_ns=t0, end_ns=t1, overhead_kind=int(rng.choice([1, 2, 4, 8])))
            buf.add_overhead(**row)
            want["overhead"].append(row)
    return buf, want


def test_every_column_matches_what_was_written(C):
    rng = np.random.default_rng(2)
    buf, want = build(C, rng, 600)
    got = buf.decode()
    assert got["records"] == 600 and got["other_records"] == 0
    k = got["kernels"]
    assert len(k["start_ns"]) == len(want["kernels"])
    for col in ("start_ns", "end_ns", "device_id", "stream_id", "correlation_id", "grid_x", "block_x"):
        assert list(k[col]) == [r[col] for r in want["kernels"]], col
    # Names are interned (3 distinct) and demangled where they are mangled.
    assert len(got["names"]) == 3
    names = [got["names"][i] for i in k["name_id"]]
    assert names[0] == "void at::native::vectorized_elementwise_kernel<4>()"
    assert names[1] == NAMES[1] and names[2] == NAMES[2]
    for kind, cols in (("memcpy", ("start_ns", "end_ns", "size_bytes", "copy_kind", "src_kind", "dst_kind", "stream_id",
                                   "correlation_id")),
                       ("memset", ("start_ns", "end_ns", "size_bytes", "value", "device_id", "stream_id", "correlation_id")),
                       ("sync", ("start_ns", "end_ns", "sync_type", "stream_id", "correlation_id")),
                       ("overhead", ("start_ns", "end_ns", "overhead_kind"))):
        for col in cols:
            assert list(got[kind][col]) == [r[col] for r in want[kind]], f"{kind}.{col}"
    ext = got["external_correlation"]
    assert list(ext["external_id"]) == [r["external_id"] for r in want["external"]]
    assert list(ext["correlation_id"]) == [r["correlation_id"] for r in want["external"]]


def test_columns_have_compact_dtypes(C):
    buf, _ = build(C, np.random.default_rng(0), 12)
    got = buf.decode()
    assert got["kernels"]["start_ns"].dtype == np.int64
    assert got["kernels"]["name_id"].dtype == np.int32
    assert got["memcpy"]["copy_kind"].dtype == np.uint8


def test_empty_buffer_decodes_to_empty_tables(C):
    got = C._FakeActivityBuffer().decode()
    assert got["records"] == 0
    assert all(len(v) == 0 for v in got["kernels"].values())


def test_frames_label_pageable_and_pinned_copies(C):
    from perfcore.capture.columns import activity_frames

    buf = C._FakeActivityBuffer()
    buf.add_memcpy(1, 11, 100, 1, 1, 3, 0, 1, 1)  # HtoD from pageable
    buf.add_memcpy(20, 25, 100, 1, 2, 3, 0, 1, 2)  # HtoD from pinned
    buf.add_memcpy(30, 40, 100, 2, 3, 1, 0, 1, 3)  # DtoH to pageable
    buf.add_kernel(50, 80, 0, 1, 4, "k", 1, 1)
    f = activity_frames(buf.decode())
    m = f["memcpy"]
    assert list(m["direction"].astype(str)) == ["h2d", "h2d", "d2h"]
    assert list(m["pageable"]) == [True, False, True]
    assert list(m["duration_ns"]) == [10, 5, 10]
    assert list(f["kernels"]["name"].astype(str)) == ["k"]
    assert list(f["kernels"]["duration_ns"]) == [30]


def test_api_records_decode_with_their_thread_and_kind(C):
    # CUpti_ActivityAPI (RUNTIME / DRIVER kinds): the launch's host interval, thread and the
    # correlation id its kernel and copy records repeat.
    buf = C._FakeActivityBuffer()
    buf.add_api(driver=False, start_ns=100, end_ns=104, correlation_id=7, thread_id=4242, cbid=211)
    buf.add_api(driver=True, start_ns=110, end_ns=113, correlation_id=8, thread_id=4243, cbid=307)
    got = buf.decode()
    a = got["api"]
    assert list(a["start_ns"]) == [100, 110] and list(a["end_ns"]) == [104, 113]
    assert list(a["correlation_id"]) == [7, 8] and list(a["thread_id"]) == [4242, 4243]
    assert list(a["driver"]) == [0, 1] and list(a["cbid"]) == [211, 307]


def test_invalid_timestamps_are_dropped_and_counted(C):
    # CUPTI documents a 0 start/end as "timestamp could not be collected"; end < start cannot be
    # placed either. Such records must not become kernels of made-up length.
    buf = C._FakeActivityBuffer()
    buf.add_kernel(0, 50, 0, 7, 1, "no_start", 1, 1)
    buf.add_kernel(100, 0, 0, 7, 2, "no_end", 1, 1)
    buf.add_kernel(300, 200, 0, 7, 3, "backwards", 1, 1)
    buf.add_kernel(400, 400, 0, 7, 4, "zero_length_is_fine", 1, 1)
    buf.add_memcpy(0, 10, 100, 1, 2, 3, 0, 7, 5)
    buf.add_api(False, 0, 0, 6, 1, 211)
    got = buf.decode()
    assert got["records"] == 6 and got["invalid_timestamps"] == 5
    assert list(got["kernels"]["correlation_id"]) == [4]
    assert len(got["memcpy"]["start_ns"]) == 0 and len(got["api"]["start_ns"]) == 0


def test_graph_kernels_share_the_launch_correlation_id(C):
    # One cudaGraphLaunch API call (one correlation id) runs every kernel node of the graph: each
    # kernel record repeats that correlation id and carries the graph's id.
    buf = C._FakeActivityBuffer()
    for i in range(5):
        buf.add_kernel(1000 + 10 * i, 1005 + 10 * i, 0, 7, 99, f"node{i}", 1, 1, graph_id=3,
                       graph_node_id=(1 << 40) + i)
    k = buf.decode()["kernels"]
    assert list(k["correlation_id"]) == [99] * 5 and list(k["graph_id"]) == [3] * 5
    # graphNodeId is 64-bit: kept whole, it tells one replay's nodes apart
    assert list(k["graph_node_id"]) == [(1 << 40) + i for i in range(5)]


_KEEP = []  # kernel records point at their name, which must outlive the decode (as CUPTI's do)


def one_record_buffer(C, i):
    b = C._FakeActivityBuffer()
    b.add_kernel(1000 + i, 1001 + i, 0, 7, i, "k", 1, 1)
    _KEEP.append(b)
    return b


def test_a_run_split_across_many_buffers_passes_through_a_small_pool(C):
    # CUPTI asks for a buffer, fills it and hands it back; the pool decodes completed buffers and
    # reuses them, so far more buffers than the cap pass through without a single refusal.
    pool = C._ActivityBuffers(buffer_bytes=64 << 10, max_buffers=2)
    for i in range(100):
        assert pool.deliver(one_record_buffer(C, i))
        if i % 2 == 1:
            pool.decode_ready()
    pool.decode_ready()
    got = pool.take()
    assert list(got["kernels"]["correlation_id"]) == list(range(100))
    st = pool.stats()
    assert st["buffers_allocated"] == 2 and st["buffers_completed"] == 100 and st["buffers_denied"] == 0
    assert st["records"] == 100 and pool.take()["records"] == 0  # take() empties


def test_pool_at_its_cap_refuses_and_says_so(C):
    # With every buffer out and none decoded, the next request gets no buffer (CUPTI then drops
    # records and counts them): the refusal is counted, not hidden.
    pool = C._ActivityBuffers(buffer_bytes=64 << 10, max_buffers=2)
    assert pool.deliver(one_record_buffer(C, 0)) and pool.deliver(one_record_buffer(C, 1))
    assert not pool.deliver(one_record_buffer(C, 2))
    assert pool.stats()["buffers_denied"] == 1
    pool.decode_ready()
    assert pool.deliver(one_record_buffer(C, 3))  # decoded buffers are free again


def test_dropped_counts_are_summed(C):
    # cuptiActivityGetNumDroppedRecords resets its count when read, so every read adds.
    pool = C._ActivityBuffers(buffer_bytes=64 << 10, max_buffers=2)
    pool.add_dropped(5)
    pool.add_dropped(7)
    assert pool.stats()["dropped_records"] == 12


def test_decoded_columns_are_bounded(C):
    # Records decoded but not yet taken are capped; past the cap they are counted as overflow.
    pool = C._ActivityBuffers(buffer_bytes=64 << 10, max_buffers=4, max_pending_records=3)
    for i in range(6):
        pool.deliver(one_record_buffer(C, i))
        pool.decode_ready()
    got = pool.take()
    assert len(got["kernels"]["start_ns"]) == 3 and pool.stats()["overflow_records"] == 3
    pool.deliver(one_record_buffer(C, 9))
    pool.decode_ready()
    assert list(pool.take()["kernels"]["correlation_id"]) == [9]  # room again after take()


def test_below_cupti_api_27_a_refused_buffer_is_handed_out_and_discarded(C):
    # Before API 27 (CUDA 12.9) libcupti crashes on a null buffer (kineto #1038, #1275; Colab's
    # T4 stack): at the pool's cap the request gets a buffer whose records are counted as lost,
    # never decoded; from API 27 it gets a null (CUPTI drops and counts the records itself).
    pool = C._ActivityBuffers(buffer_bytes=64 << 10, max_buffers=2, cupti_version=26)
    assert pool.deliver(one_record_buffer(C, 0)) and pool.deliver(one_record_buffer(C, 1))
    assert pool.deliver(one_record_buffer(C, 2))  # a buffer, not a null
    st = pool.stats()
    assert st["buffers_denied"] == 1 and st["discarded_records"] == 1 and st["buffers_allocated"] == 2
    pool.decode_ready()
    assert list(pool.take()["kernels"]["correlation_id"]) == [0, 1]
    assert pool.deliver(one_record_buffer(C, 3))  # the pool's own buffers are free again

    pool = C._ActivityBuffers(buffer_bytes=64 << 10, max_buffers=2, cupti_version=27)
    assert pool.deliver(one_record_buffer(C, 0)) and pool.deliver(one_record_buffer(C, 1))
    assert not pool.deliver(one_record_buffer(C, 2))
    assert pool.stats()["discarded_records"] == 0


def test_the_null_buffer_guard_follows_the_loaded_version(C):
    assert C.cupti_guards(26, 1)["null_buffer_unsafe"] and not C.cupti_guards(27, 1)["null_buffer_unsafe"]
    assert not C.cupti_guards(130001, 1)["null_buffer_unsafe"]


def test_a_buffer_out_across_a_reset_is_decoded_and_never_reused_at_the_new_size(C):
    # A buffer CUPTI took before stop (a kind left on) comes back after the next start's reset()
    # changed the buffer size: reused, CUPTI would be told it holds the new size and write past it.
    pool = C._ActivityBuffers(buffer_bytes=64 << 10, max_buffers=2)
    old, size = pool.lend()
    assert old and size == 64 << 10
    pool.reset(buffer_bytes=256 << 10, max_buffers=2)
    pool.give_back(old, one_record_buffer(C, 7))
    pool.decode_ready()
    assert list(pool.take()["kernels"]["correlation_id"]) == [7]  # its records still count
    lent = [pool.lend() for _ in range(2)]
    assert all(size == 256 << 10 for _, size in lent)
    # both made at the new size: the old one went back to the system, not to the pool
    assert pool.stats()["buffers_allocated"] == 2
