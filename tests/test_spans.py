"""The span recorder: nesting, misuse, threads, incremental drain, chunk boundaries."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from perfcore import errors


def test_nested_phases_close_in_order(C):
    r = C.SpanRecorder()
    r.step = 7
    r.begin(1)
    r.begin(2)
    assert r.open_phases() == [1, 2]
    inner = r.end(2)
    outer = r.end(1)
    assert 0 <= inner <= outer
    cols = r.drain()
    assert list(cols["phase_id"]) == [2, 1]
    assert list(cols["step"]) == [7, 7]
    # Inner span lies inside the outer one.
    assert cols["start_ns"][1] <= cols["start_ns"][0] <= cols["end_ns"][0] <= cols["end_ns"][1]
    assert r.open_phases() == []


def test_closing_the_wrong_phase_is_refused(C):
    r = C.SpanRecorder()
    r.begin(1)
    r.begin(2)
    with pytest.raises(errors.UsageError, match="innermost"):
        r.end(1)
    assert r.open_phases() == [1, 2]  # nothing was recorded or popped


def test_record_rejects_negative_spans(C):
    r = C.SpanRecorder()
    with pytest.raises(errors.UsageError):
        r.record(0, 10, 5)
    r.record(0, 5, 10)
    cols = r.drain()
    assert list(cols["start_ns"]) == [5] and list(cols["end_ns"]) == [10]


def test_drain_is_incremental(C):
    r = C.SpanRecorder()
    for i in range(5):
        r.record(0, i, i + 1)
    assert len(r.drain()["start_ns"]) == 5
    assert len(r.drain()["start_ns"]) == 0
    r.record(0, 100, 101)
    assert list(r.drain()["start_ns"]) == [100]


def test_many_spans_cross_chunk_boundaries(C):
    r = C.SpanRecorder()
    n = 3 * 4096 + 17  # chunk size is 4096
    for i in range(n):
        r.record(i % 5, i, i + 2)
        if i == 5000:
            first = r.drain()  # drain mid-way frees the full chunks already read
    rest = r.drain()
    starts = np.concatenate([first["start_ns"], rest["start_ns"]])
    assert len(starts) == n
    assert np.array_equal(starts, np.arange(n))
    assert np.array_equal(np.concatenate([first["phase_id"], rest["phase_id"]]), np.arange(n) % 5)
    assert r.dropped == 0


def test_threads_each_get_their_own_spans(C):
    r = C.SpanRecorder()
    per_thread, threads = 2000, 4
    tids = {}
    barrier = threading.Barrier(threads)

    def work(k):
        tids[k] = threading.get_native_id()
        barrier.wait()
        for _ in range(per_thread):
            r.begin(k)
            r.end(k)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    # Drain concurrently with the writers: every span must still arrive exactly once.
    chunks = []
    while any(t.is_alive() for t in ts):
        chunks.append(r.drain())
    for t in ts:
        t.join()
    chunks.append(r.drain())
    phase = np.concatenate([c["phase_id"] for c in chunks])
    tid = np.concatenate([c["thread_id"] for c in chunks])
    start = np.concatenate([c["start_ns"] for c in chunks])
    end = np.concatenate([c["end_ns"] for c in chunks])
    assert len(phase) == threads * per_thread
    assert r.thread_count == threads
    for k in range(threads):
        mine = phase == k
        assert mine.sum() == per_thread
        assert set(tid[mine]) == {tids[k]}
        # Spans of one thread are sequential and non-overlapping.
        order = np.argsort(start[mine])
        assert np.all(start[mine][order][1:] >= end[mine][order][:-1])
    assert np.all(end >= start)


def test_two_recorders_do_not_share_state(C):
    a, b = C.SpanRecorder(), C.SpanRecorder()
    a.begin(1)
    b.begin(2)
    assert a.open_phases() == [1] and b.open_phases() == [2]
    b.end(2)
    a.end(1)
    assert list(a.drain()["phase_id"]) == [1]
    assert list(b.drain()["phase_id"]) == [2]


def test_boundary_moves_the_step_only_with_no_open_phase(C):
    r = C.SpanRecorder()
    r.begin(1)
    assert r.boundary() == -1 and r.step == 0  # refused: nothing changes
    r.end(1)
    t = r.boundary()
    assert t > 0 and r.step == 1
    r.record(2, t, t + 5)
    assert list(r.drain()["step"]) == [0, 1]


def test_cancel_takes_back_only_the_innermost_phase_unrecorded(C):
    # The undo step of an atomic phase open: when the CUDA event or the CUPTI tag cannot open,
    # the host span just opened is taken back, so the thread's stack is as before.
    r = C.SpanRecorder()
    r.begin(1)
    r.begin(2)
    r.cancel(2)
    assert r.open_phases() == [1]
    r.cancel(7)  # not the innermost: nothing changes
    assert r.open_phases() == [1]
    r.end(1)
    assert list(r.drain()["phase_id"]) == [1]


def test_shared_scopes_used_from_many_threads_at_once(C):
    # One cached scope object per phase, entered concurrently by several threads (DataLoader
    # pin-memory threads, autograd threads, the user's own): each thread nests and closes its own.
    r = C.SpanRecorder()
    outer = C.phase_scope(C.PhaseScope, r, 1)
    inner = C.phase_scope(C.PhaseScope, r, 2)
    errors = []
    barrier = threading.Barrier(4)

    def work():
        barrier.wait()
        try:
            for _ in range(3000):
                with outer:
                    with inner:
                        pass
        except Exception as e:  # a shared stack would close another thread's phase: UsageError
            errors.append(e)

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    d = r.drain()
    assert not errors and len(d["phase_id"]) == 4 * 3000 * 2
    for tid in set(d["thread_id"].tolist()):
        mine = d["thread_id"] == tid
        assert (d["phase_id"][mine] == 1).sum() == (d["phase_id"][mine] == 2).sum() == 3000


def test_the_chunk_ring_is_reused_however_many_spans_a_run_records(C):
    # A ring of 2 chunks (8192 spans): undrained, the third chunk's spans are dropped; once the
    # reader has consumed the first chunks their slots take new spans, round after round, so a
    # run of any length records as long as it is drained (before, the 16384th chunk was the last).
    r = C.SpanRecorder(max_chunks=2)
    for i in range(3 * 4096):
        r.record(1, i, i + 1)
    assert r.dropped == 4096
    assert len(r.drain()["start_ns"]) == 2 * 4096
    total = 2 * 4096
    for round_ in range(5):  # 5 more laps around the ring
        for i in range(4096 + 7):
            r.record(2, i, i + 1)
        got = r.drain()
        total += len(got["start_ns"])
        assert len(got["start_ns"]) == 4096 + 7 and (got["phase_id"] == 2).all()
    assert r.dropped == 4096 and total == 2 * 4096 + 5 * (4096 + 7)
