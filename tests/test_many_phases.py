"""Hundreds of custom phases give one column each and no warning (each used to cost a pandas
PerformanceWarning for a fragmented frame: 300 phases, hundreds of lines on the user's screen)."""
from __future__ import annotations

import warnings

from perfcore import StepTimer


def test_300_custom_phases_and_not_one_warning():
    t = StepTimer(device="cpu", warmup=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(4):
            for i in range(300):
                with t.phase(f"p{i}"):
                    pass
            t.step()
        table = t.summary()
        t.result()
    assert len(table) == 4 and all(f"p{i}_ms" in table for i in range(300))
    assert (table[[f"p{i}_ms" for i in range(300)]] >= 0).all().all()


def test_a_new_phase_name_every_step_is_bounded_said_once_and_never_raised():
    from perfcore.recording.phase_names import MAX_PHASE_NAMES

    steps = MAX_PHASE_NAMES + 300
    t = StepTimer(device="cpu", warmup=0)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for i in range(steps):
            with t.phase(f"step{i}"):
                with t.phase(f"inner{i}", label="compute"):
                    pass
            t.step()
        table = t.summary()
    said = [w for w in seen if "distinct phase names" in str(w.message)]
    assert len(said) == 1 and "fixed set of names" in str(said[0].message)
    assert said[0].filename == __file__  # it points at the user's `with timer.phase(...)`
    custom = [c for c in table.columns if c.endswith("_ms") and c[:-3] not in ("wall", "load", "transfer", "compute",
                                                                                 "comm", "host", "perfcore")]
    assert len(custom) == MAX_PHASE_NAMES + 2  # the first names, then one shared phase per label
    assert "other_phases_ms" in custom and "other_compute_phases_ms" in custom
    late = table.iloc[MAX_PHASE_NAMES:]
    assert (late["other_phases_ms"] > 0).all() and (late["other_compute_phases_ms"] > 0).all()
    full = t.engine.step_table()  # the labels still add up to each step's wall time, to the nanosecond
    assert (full[[f"{lb}_ns" for lb in ("load", "transfer", "compute", "comm", "host")]].sum(axis=1)
            == full["wall_ns"]).all()
    from perfcore.report.words.runs import notes_of

    assert sum("distinct phase names" in n for n in notes_of(t.result())) == 1


def test_warnings_made_errors_do_not_stop_the_loop():
    from perfcore.recording.phase_names import MAX_PHASE_NAMES

    t = StepTimer(device="cpu", warmup=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(MAX_PHASE_NAMES + 5):
            with t.phase(f"step{i}"):
                pass
            t.step()
    assert t.steps == MAX_PHASE_NAMES + 5
    assert any("distinct phase names" in n for n in t.notes)


def test_names_sharing_a_phase_count_their_nested_time_once():
    # Injected times: the shared id 600 (host) has an outer span [100, 400) holding [150, 250) on
    # thread 1, and [300, 350) on thread 2; step 0 ends at 500.
    import pandas as pd

    from perfcore.analysis.store import StepStore

    labels = {0: "load", 1: "transfer", 2: "compute", 3: "comm", 16: "host", 600: "host"}
    store = StepStore(labels, 16, on_gpu=False, use_kernels=False, warmup=0)
    store.shared_phase_ids.add(600)
    store.add("spans", pd.DataFrame({"phase_id": [600, 600, 600, 16, 16], "step": [0] * 5,
                                     "start_ns": [150, 100, 300, 100, 150], "end_ns": [250, 400, 350, 400, 250],
                                     "thread_id": [1, 1, 2, 1, 1]}))
    store.settle([500], 1, 0)
    row = store.table().iloc[0]
    assert row["_phase600_ns"] == 300 + 50  # nested once, the other thread's apart
    assert row["_phase16_ns"] == 300 + 100  # a name of its own keeps counting each span
