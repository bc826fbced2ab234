"""Loader starvation in numbers: hand-built steps tables, and a real loader that stalls on known steps."""
from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

from perfcore.analysis.starvation import MIN_WAIT_MS, starvation


def _table(load, wall=10.0, warmup=0, evaluation=()):
    n = len(load)
    return pd.DataFrame({"step": np.arange(n), "load_ms": np.asarray(load, float), "wall_ms": np.full(n, wall),
                         "warmup": np.arange(n) < warmup, "evaluation": np.isin(np.arange(n), evaluation)})


def test_share_percentiles_and_longest_run():
    load = [0.1, 3, 4, 0.2, 5, 6, 7, 0.0, 2, 0.1]
    s = starvation(_table(load))
    assert s.threshold_ms == pytest.approx(max(MIN_WAIT_MS, 0.5))
    assert (s.steps, s.starved, s.share) == (10, 6, 0.6)
    assert s.p50_wait_ms == pytest.approx(np.percentile([3, 4, 5, 6, 7, 2], 50))
    assert s.p95_wait_ms == pytest.approx(np.percentile([3, 4, 5, 6, 7, 2], 95))
    assert (s.longest_run, s.longest_run_first_step) == (3, 4)
    assert s.load_ms_per_step == pytest.approx(np.mean(load))


def test_warmup_and_evaluation_rows_are_left_out_and_threshold_follows_the_step():
    load = [50, 50, 0, 9, 9, 50, 0.1]
    s = starvation(_table(load, wall=100.0, warmup=2, evaluation=(5,)))
    assert s.threshold_ms == pytest.approx(5.0)  # 5% of a 100 ms step
    assert (s.steps, s.starved, s.longest_run, s.longest_run_first_step) == (4, 2, 2, 3)
    none = starvation(_table([0.1, 0.2]))
    assert (none.starved, none.p50_wait_ms, none.longest_run, none.longest_run_first_step) == (0, None, 0, None)
    assert starvation(_table([])).steps == 0
    with pytest.raises(ValueError):
        starvation(_table([1.0]), threshold_ms=float("nan"))


def test_a_loader_that_stalls_on_known_steps():
    """Truth: the loader sleeps 30 ms before batches 3, 4, 5 and 11; every other batch is immediate."""
    import perfcore

    stall = {3, 4, 5, 11}

    def batches():
        for i in range(16):
            if i in stall:
                time.sleep(0.03)
            yield i

    with perfcore.StepTimer(device="cpu", warmup=0) as t:
        for _ in t.load(batches()):
            with t.phase("work", "compute"):
                time.sleep(0.002)
            t.step()
        table = t.summary()
    s = starvation(table)
    starved = set(table.loc[table["load_ms"] > s.threshold_ms, "step"])
    assert starved == stall
    assert (s.longest_run, s.longest_run_first_step) == (3, 3)
    assert 30 <= s.p50_wait_ms < 30 * 3  # a sleep overshoots on a loaded machine, never undershoots
