"""Bounded memory: settling in chunks gives the same rows as settling at once, and raw detail is
kept for every step up to a cap and then only for a few steps, however long the run."""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

import perfcore
from perfcore.analysis import attribution
from perfcore.analysis.columns import nrows
from perfcore.analysis.store import StepStore
import perfcore.recording.engine as recording
import perfcore.recording.settling as settling
from perfcore.recording.engine import COMPACT_EVERY, detail_steps

LABELS = {0: "load", 1: "transfer", 2: "compute", 3: "comm", 16: "host"}


def synthetic(n_steps: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    bounds = np.cumsum(rng.integers(1000, 5000, size=n_steps)) + 10_000
    spans = []
    for k in range(n_steps):
        lo = bounds[k - 1] if k else 10_000
        for pid in (0, 2, 16):
            a = int(rng.integers(lo, bounds[k]))
            b = int(min(bounds[k] + (500 if pid == 2 else 0), a + rng.integers(0, 2000)))  # compute may spill over
            spans.append((pid, k, a, b, 1))
    df = pd.DataFrame(spans, columns=["phase_id", "step", "start_ns", "end_ns", "thread_id"])
    return list(map(int, bounds)), df


def test_chunked_settlement_matches_one_shot():
    bounds, spans = synthetic(600)
    one = StepStore(LABELS, 16, on_gpu=False, use_kernels=False, warmup=3)
    one.add("spans", spans)
    one.settle(bounds, len(bounds), 10_000)
    chunked = StepStore(LABELS, 16, on_gpu=False, use_kernels=False, warmup=3)
    fed = 0
    for upto in range(50, 601, 50):
        # Spans arrive as they close: those of steps settled now and a few after.
        new = spans[(spans["step"] >= fed) & (spans["step"] < min(upto + 2, 600))]
        chunked.add("spans", new)
        fed = min(upto + 2, 600)
        chunked.settle(bounds, upto - (2 if upto < 600 else 0), 10_000)
    chunked.settle(bounds, 600, 10_000)
    a, b = one.table(), chunked.table()
    cols = ["step", "wall_ns", "load_ns", "transfer_ns", "compute_ns", "comm_ns", "host_ns", "_phase16_ns"]
    pd.testing.assert_frame_equal(a[cols].reset_index(drop=True), b[cols].reset_index(drop=True))
    assert (b[[c for c in cols if c.endswith("_ns") and c not in ("wall_ns", "_phase16_ns")]].sum(axis=1)
            == b["wall_ns"]).all()


def _loop(steps: int):
    timer = perfcore.StepTimer(device="cpu", warmup=2)
    for _ in timer.load(range(steps)):
        with timer.transfer():
            pass
        with timer.compute():
            pass
        timer.step()
    return timer


def test_every_step_keeps_its_detail_below_the_cap(monkeypatch):
    monkeypatch.setattr(settling, "COMPACT_MIN_S", 0.0)  # settle at every COMPACT_EVERY steps, however fast
    monkeypatch.setattr(settling, "FIRST_COMPACT_S", 0.0)
    steps = 3 * COMPACT_EVERY + 17
    timer = _loop(steps)
    timer.summary()
    store = timer.engine.store
    spans = store.trace_tables()["spans"]
    # Nothing let go (the trace also holds perfcore's own settling, which is not a timed phase).
    assert len(spans[spans["phase_id"] != attribution.OWN_PHASE_ID]) == store.span_count
    assert set(spans["step"]) >= set(range(steps))
    kept = detail_steps(timer.engine)
    assert kept["through"] == steps and not kept["capped"] and kept["window"] == []


def test_long_run_keeps_a_prefix_and_then_a_window_of_detail(monkeypatch):
    from perfcore.analysis import detail

    monkeypatch.setattr(settling, "COMPACT_MIN_S", 0.0)
    monkeypatch.setattr(settling, "FIRST_COMPACT_S", 0.0)
    cap = 2 * COMPACT_EVERY + 5  # inside a settled chunk: the prefix ends mid-chunk
    monkeypatch.setattr(detail, "DETAIL_STEPS", cap)
    steps = 6 * COMPACT_EVERY + 17
    timer = _loop(steps)
    store = timer.engine.store
    pending = sum(nrows(p) for parts in store.pending.values() for p in parts)
    assert pending <= (COMPACT_EVERY + 2) * 3  # at most one chunk of spans waits to be settled
    # The prefix's three spans a step (load, transfer, compute), and the window's few steps.
    assert cap * 3 <= nrows(store.detail["spans"]) <= cap * 3 + 4 * 3 + 6
    df = timer.summary()
    assert len(df) == steps and list(df["step"]) == list(range(steps))
    assert np.allclose(df[["load_ms", "transfer_ms", "compute_ms", "comm_ms", "host_ms"]].sum(axis=1), df["wall_ms"],
                       rtol=0, atol=1e-9)
    assert store.span_count == steps * 3 + 1  # and the last fetch, which ends the loop
    kept = detail_steps(timer.engine)
    assert kept["through"] == cap and kept["capped"] and steps - 1 in kept["window"]
    assert all(s >= cap for s in kept["window"]) and len(kept["window"]) <= 3
    in_detail = set(store.detail["spans"]["step"])
    assert set(range(cap)) <= in_detail and steps - 1 in in_detail
    assert not in_detail & set(range(cap + 1, steps - COMPACT_EVERY)) - set(kept["window"])


def test_kernels_are_split_by_the_phase_that_launched_them(C):
    import pytest

    if not C.CUPTI_COMPILED:
        pytest.skip("needs a CUPTI build (fabricated CUPTI records)")
    from perfcore.capture.columns import activity_frames

    timer = perfcore.StepTimer(device="cpu", warmup=0)
    fwd = timer.phase("forward", label="compute")
    bwd = timer.phase("backward", label="compute")
    t0 = timer.engine.started_ns[1]
    buf = C._FakeActivityBuffer()
    # CUPTI writes an external-correlation record before each API record made while a phase's id
    # is pushed; the kernels come later, in their own buffers.
    for corr, phase in ((1, fwd.phase_id), (2, bwd.phase_id), (3, bwd.phase_id)):
        buf.add_external_correlation(phase, corr)
        buf.add_api(False, t0 + 10 * corr, t0 + 10 * corr + 5, corr, 1, 211)
    buf.add_kernel(t0 + 100, t0 + 400, 0, 7, 1, "fwd_kernel", 1, 1)    # step 0, forward: 300 ns
    buf.add_kernel(t0 + 500, t0 + 900, 0, 7, 2, "bwd_kernel", 1, 1)    # step 0, backward: 400 ns
    buf.add_kernel(t0 + 1100, t0 + 1150, 0, 7, 3, "bwd_kernel", 1, 1)  # step 1, backward: 50 ns
    buf.add_kernel(t0 + 1200, t0 + 1300, 0, 7, 99, "untagged", 1, 1)   # launched outside any phase
    timer.engine.add_activity(activity_frames(buf.decode()))
    # A later drain brings another kernel of launch 3 (a graph launch's nodes share its id): the
    # mapping was kept, not used up by the first kernel.
    later = C._FakeActivityBuffer()
    later.add_kernel(t0 + 1400, t0 + 1450, 0, 7, 3, "bwd_kernel", 1, 1)  # step 1, backward: 50 ns more
    timer.engine.add_activity(activity_frames(later.decode()))
    timer.engine.set_boundaries([t0 + 1000, t0 + 2000])
    df = timer.summary()
    assert list(df["forward_gpu_ms"] * 1e6) == [300, 0]
    assert list(df["backward_gpu_ms"] * 1e6) == [400, 100]


def test_settled_columns_span_blocks_and_fill_late_columns_with_zero(monkeypatch):
    import perfcore.analysis.spill as spill_mod
    from perfcore.analysis.spill import Columns

    monkeypatch.setattr(spill_mod, "BLOCK_ROWS", 7)
    c = Columns()
    c.append({"a": np.arange(5)}, 5)
    c.append({"a": np.arange(5, 20), "b": np.full(15, 3)}, 15)  # b first seen at row 5, crosses blocks
    c.append({"b": np.full(4, 9)}, 4)  # a missing in this chunk: zeros
    assert c.n == 24 and c.spill_error is None
    # Full blocks went to the temporary file: memory holds one block per column.
    assert all(isinstance(at, int) for col in c.spilled.values() for at in col.values())
    assert sorted(c.spilled["a"]) == [0, 1, 2] and sorted(c.spilled["b"]) == [0, 1, 2]
    assert c.column("a").tolist() == list(range(20)) + [0] * 4
    assert c.column("b").tolist() == [0] * 5 + [3] * 15 + [9] * 4
    assert c.column("a", 13).tolist() == list(range(13, 20)) + [0] * 4  # only the rows a checkpoint lacks
    assert c.column("a", 24).tolist() == [] and c.column("never", 20).tolist() == [0] * 4
    assert c.column("a", 3, 9).tolist() == list(range(3, 9))  # across a spilled block's end
    assert c.column("b", 14, 21).tolist() == [3] * 6 + [9] and c.column("a", 7, 7).tolist() == []
    assert c.column("a", 20, 99).tolist() == [0] * 4  # stop past the rows: clipped


def test_settled_columns_stay_in_memory_when_no_temporary_file_can_be_written(monkeypatch):
    import tempfile

    import perfcore.analysis.spill as spill_mod
    from perfcore.analysis.spill import Columns

    def full_disk(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(spill_mod, "BLOCK_ROWS", 4)
    monkeypatch.setattr(tempfile, "TemporaryFile", full_disk)
    c = Columns()
    c.append({"a": np.arange(10)}, 10)
    assert "No space left" in c.spill_error
    assert all(isinstance(b, np.ndarray) for b in c.spilled["a"].values())
    assert c.column("a").tolist() == list(range(10))


def test_memory_samples_go_to_the_file_in_blocks(monkeypatch):
    import perfcore.analysis.spill as spill_mod
    from perfcore.run.child.memory_samples import MemorySamples

    monkeypatch.setattr(spill_mod, "BLOCK_ROWS", 256)
    m = MemorySamples()
    for k in range(3000):
        m.add(k, 1000 + k)
    assert len(m) == 3000 and len(m.steps) < MemorySamples.FLUSH  # the rest were flushed
    assert m.columns.spill_error is None and len(m.columns.spilled["step"]) == 2048 // 256
    steps, values = m.arrays()
    assert steps.tolist() == list(range(3000)) and (values == steps + 1000).all()
    assert [a.tolist() for a in MemorySamples().arrays()] == [[], []]


def test_a_long_run_holds_a_bounded_number_of_rows_and_step_ends_in_memory(monkeypatch):
    import perfcore.analysis.spill as spill_mod

    monkeypatch.setattr(spill_mod, "BLOCK_ROWS", 512)
    monkeypatch.setattr(settling, "COMPACT_MIN_S", 0.0)
    monkeypatch.setattr(settling, "FIRST_COMPACT_S", 0.0)
    timer = perfcore.StepTimer(device="cpu", warmup=2)
    steps = 12 * COMPACT_EVERY + 5
    for _ in range(steps):
        with timer.compute():
            pass
        timer.step()
    store = timer.engine.store
    in_memory = sum(len(b) for b in store.rows.tail.values()) + sum(
        len(b) for col in store.rows.spilled.values() for b in col.values() if isinstance(b, np.ndarray))
    assert in_memory == len(store.rows.names) * 512  # one block per column, the rest on disk
    ends = timer.engine.boundaries
    assert len(ends) == steps and ends.base > 0 and len(ends) - ends.base <= recording.KEEP_ENDS + COMPACT_EVERY
    df = timer.summary()  # the rows read back from the file are the steps, in order
    assert df["step"].tolist() == list(range(steps))
    assert np.allclose(df[["load_ms", "transfer_ms", "compute_ms", "comm_ms", "host_ms"]].sum(axis=1), df["wall_ms"],
                       rtol=0, atol=1e-9)
    assert (df["wall_ms"] > 0).all()


def test_table_derives_host_exactly_and_keeps_the_running_sums():
    bounds, spans = synthetic(3000)
    st = StepStore(LABELS, 16, on_gpu=False, use_kernels=False, warmup=3)
    st.add("spans", spans)
    st.settle(bounds, 1500, 10_000)
    st.settle(bounds, 3000, 10_000)
    t = st.table()
    labels = ["load_ns", "transfer_ns", "compute_ns", "comm_ns", "host_ns"]
    assert (t[labels].sum(axis=1) == t["wall_ns"]).all() and (t["host_ns"] >= 0).all()
    assert t["step"].tolist() == list(range(3000)) and t["warmup"].sum() == 3
    m = t[~t["warmup"]]
    tot = st.totals()
    assert tot["measured"] == len(m) and tot["wall_ns"] == int(m["wall_ns"].sum())
    assert tot["ns"]["host"] == int(m["host_ns"].sum())


def test_own_work_spans_settle_out_of_the_steps_and_are_let_go():
    # Hand-built spans: compute in each step, and perfcore's own work (settling, a progress write)
    # recorded after step 1 ended, inside step 2's span, and after step 3 (not settled yet).
    own_id = attribution.OWN_PHASE_ID
    spans = pd.DataFrame([(2, 0, 1_000, 1_400, 1), (2, 1, 2_000, 2_400, 1), (own_id, 2, 2_010, 2_300, 1),
                          (2, 2, 2_300, 2_500, 1), (own_id, 3, 4_005, 4_100, 1)],
                         columns=["phase_id", "step", "start_ns", "end_ns", "thread_id"])
    st = StepStore(LABELS, 16, on_gpu=False, use_kernels=False, warmup=0)
    st.add("spans", spans)
    st.settle([2_000, 2_005, 3_000, 4_000], 3, 1_000)
    t = st.table()
    assert t["perfcore_ns"].tolist() == [0, 0, 290]
    assert t["wall_ns"].tolist() == [1_000, 5, 995 - 290]
    assert t["compute_ns"].tolist() == [400, 5, 5 + 200]  # the own span overrides the compute it overlaps
    assert (t[[f"{lb}_ns" for lb in attribution.LABELS]].sum(axis=1) == t["wall_ns"]).all()
    assert st.totals()["wall_ns"] == int(t["wall_ns"].sum())  # the live view's sums leave it out too
    assert st.span_count == 3  # timed phases only
    # Settled with their rows: only the own span after the settled steps is still held.
    pending = st.pending["spans"][0]
    assert pending["start_ns"][pending["phase_id"] == own_id].tolist() == [4_005]


def test_upkeep_inside_a_step_timer_loop_is_not_the_next_steps_host_time(monkeypatch):
    # StepTimer.step() settles every COMPACT_EVERY steps on the training thread; make that settle
    # slow (as a loaded machine makes it): the step it lands in must not carry it as host.
    monkeypatch.setattr(recording, "COMPACT_EVERY", 8)
    monkeypatch.setattr(settling, "COMPACT_MIN_S", 0.0)
    monkeypatch.setattr(settling, "FIRST_COMPACT_S", 0.0)
    slow_s = 0.3
    compact = recording.Recording._compact

    def slow_compact(self, final):
        if not final:
            time.sleep(slow_s)
        compact(self, final)

    monkeypatch.setattr(recording.Recording, "_compact", slow_compact)
    timer = _loop(20)
    t = timer.engine.step_table()
    stalled = t[t["perfcore_ns"] >= slow_s * 1e9]
    assert stalled["step"].tolist() == [8, 16]  # after boundaries 8 and 16, inside the steps after them
    assert (t["host_ns"] < slow_s * 1e9 / 2).all() and (t["wall_ns"] < slow_s * 1e9 / 2).all()


def test_sorted_unique_is_np_unique_on_settling_columns():
    from perfcore.analysis.columns import sorted_unique

    rng = np.random.default_rng(3)
    ends = np.cumsum(rng.integers(0, 5, 4000)).astype(np.int64)  # repeats (a zero gap) and nearly sorted
    cases = [ends, np.concatenate([ends[::3], ends[1::3], ends]), rng.integers(-9, 9, 500), ends[:1], ends[:0]]
    for x in cases:
        got = sorted_unique(x)
        assert got.dtype == np.unique(x).dtype
        np.testing.assert_array_equal(got, np.unique(x))
