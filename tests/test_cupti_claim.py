"""The tracer's two hand-shakes with other CUPTI clients, driven by fake CUPTI answers (no GPU):
taking the subscriber slot when CUPTI may let several clients in, and the hand-over's finalize
that another thread may be running when the asking thread wants its answer."""

from __future__ import annotations

import threading
import time

import pytest

pytestmark = pytest.mark.cupti

SUCCESS, MULTIPLE = 0, 39  # CUPTI_SUCCESS, CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED


def test_a_subscription_granted_beside_another_client_is_given_back(C):
    # CUPTI >= 13.3 lets a second subscriber in and names the first: torch.profiler's kineto
    # would lose its buffer callbacks to ours, so perfcore refuses as if CUPTI had.
    r = C._claim_subscriber(SUCCESS, "CUPTI for kineto")
    assert r == {"status": MULTIPLE, "other": "CUPTI for kineto", "kept": False, "unsubscribed": 1}


def test_alone_or_named_as_ourselves_the_slot_is_kept(C):
    assert C._claim_subscriber(SUCCESS, "") == {"status": SUCCESS, "other": "", "kept": True, "unsubscribed": 0}
    r = C._claim_subscriber(SUCCESS, "CUPTI for perfcore")
    assert r["status"] == SUCCESS and r["kept"] and r["unsubscribed"] == 0


def test_a_refusal_keeps_its_status_and_names_the_holder(C):
    r = C._claim_subscriber(MULTIPLE, "Nsight Systems")
    assert r == {"status": MULTIPLE, "other": "Nsight Systems", "kept": False, "unsubscribed": 0}


def test_the_asking_thread_waits_for_a_finalize_another_thread_took(C):
    # Thread B's runtime call reaches its exit callsite first and runs cuptiFinalize (50 ms here);
    # the asking thread, back from its own call, must not unsubscribe meanwhile: close() waits
    # and reports the detach.
    g = C._DetachGate()
    g.open()
    took = threading.Event()

    def other_thread():
        assert g.take()
        took.set()
        time.sleep(0.05)
        g.finished(True)

    t = threading.Thread(target=other_thread)
    t.start()
    took.wait(5)
    t0 = time.perf_counter()
    assert g.close() is True
    waited = time.perf_counter() - t0
    t.join()
    assert waited > 0.02  # it waited for the finalize (50 ms) rather than answering at once
    assert not g.take()  # closed: a later callsite does nothing


def test_nobody_took_it_means_not_detached_and_later_callsites_do_nothing(C):
    g = C._DetachGate()
    g.open()
    assert g.close() is False
    assert not g.take()
    g.open()
    assert g.take() and not g.take()  # exactly one callsite finalizes
    g.finished(False)
    assert g.close() is False
