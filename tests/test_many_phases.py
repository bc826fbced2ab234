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
