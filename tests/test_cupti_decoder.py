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
    buf.add_memcpy(0, 10, 100, 1, 1, 3, 0, 1, 1)  # HtoD from pageable
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
