"""The tracer's drain thread and its dropped-record count, driven without CUPTI (no GPU): no flush
while a graph capture is underway anywhere in the process (the capture calls seen through CUPTI's
API callbacks, here fed by the test), and a dropped count CUPTI kept from before the session left
out of the session's losses."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.cupti

# CUPTI callback ids (cupti_runtime_cbid.h, cupti_driver_cbid.h)
RT_BEGIN, RT_END = 315, 319  # cudaStreamBeginCapture_v10000, cudaStreamEndCapture_v10000
DRV_BEGIN, DRV_END = 539, 497  # cuStreamBeginCapture_v2, cuStreamEndCapture
DRV_LAUNCH = 307  # cuLaunchKernel: not a capture call


def _begin(d, ok=True):
    """torch.cuda.graph's capture_begin: the runtime call, with the driver's inside it."""
    for driver, cbid in ((False, RT_BEGIN), (True, DRV_BEGIN)):
        d.on_call(driver, cbid, False, False)  # the enter callback: nothing yet
    for driver, cbid in ((True, DRV_BEGIN), (False, RT_BEGIN)):
        d.on_call(driver, cbid, True, ok)


def _end(d, ok=True):
    for driver, cbid in ((True, DRV_END), (False, RT_END)):
        d.on_call(driver, cbid, True, ok)


def test_no_flush_during_a_long_graph_capture(C):
    # A capture longer than the drain period (200 ms by default; 20 ms here): the drain's periodic
    # flush is a CUPTI call made from another thread while the user's global-mode capture runs.
    # It waits until the capture ends; what CUPTI completed on its own is still decoded, and a
    # collect() asking for a pass is still answered.
    d = C._DrainModel(period_ms=20)
    try:
        time.sleep(0.1)
        assert d.counts()["flushes"] >= 2  # the period's flushes, no capture
        _begin(d)
        assert d.underway()
        before = d.counts()
        time.sleep(0.3)
        d.ask()  # a settle's collect during the capture returns
        during = d.counts()
        assert during["flushes"] == before["flushes"], "a flush ran during the capture"
        assert during["held"] - before["held"] >= 5 and during["decodes"] > before["decodes"]
        _end(d)
        assert not d.underway()
        time.sleep(0.1)
        assert d.counts()["flushes"] >= during["flushes"] + 2  # flushing again
        assert d.counts()["begun"] == 2  # one capture, seen on both sides
    finally:
        d.stop()


def test_a_failed_begin_or_another_call_starts_no_capture(C):
    d = C._DrainModel(period_ms=1000)
    try:
        _begin(d, ok=False)  # the begin call returned an error: nothing is being captured
        d.on_call(True, DRV_LAUNCH, True, True)
        assert not d.underway()
        _end(d)  # an end the watch never saw begin (the tracer started mid-capture): stays at 0
        assert not d.underway()
        _begin(d)
        _end(d, ok=False)  # an invalidated capture's end returns an error, and ends it all the same
        assert not d.underway()
    finally:
        d.stop()


def test_a_stale_dropped_count_is_not_the_sessions_loss(C):
    # CUPTI 13.0 GA keeps a dropped count from before the session until it is first read; every read
    # resets it. start() reads it once and keeps it apart: 7 stale, then 0 and 3 after two flushes.
    assert C._dropped_session([7, 0, 3]) == {"stale": 7, "dropped": 3}
    assert C._dropped_session([0, 2, 2]) == {"stale": 0, "dropped": 4}
