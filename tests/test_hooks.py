"""perfcore._C.TimedCall and StepClock: the native hooks `perfcore run` puts on
nn.Module.__call__, DataLoader iterators, backward and copies."""

from __future__ import annotations

import inspect
import threading

import time

import pytest

from perfcore._native import native

# Through native(), as perfcore loads it: a CUDA-mode _C imported before torch would bind the
# toolkit's libcudart by its RUNPATH, and torch then fails on that older runtime.
C = native()

FORWARD = 7


@pytest.fixture()
def rec():
    return C.SpanRecorder()


def spans(rec):
    d = rec.drain()
    return list(zip(d["phase_id"].tolist(), d["thread_id"].tolist()))


class Model:
    def __call__(self, x, scale=1):
        """Doubles x."""
        return 2 * x * scale

    def inner(self, x):
        return self(x)  # a hooked call inside a hooked call


def hooked(rec, phase=FORWARD, armed=True):
    hook = C.TimedCall(Model.__call__)
    if armed:
        hook.scope = C.phase_scope(C.PhaseScope, rec, phase)
    return hook


def test_calls_through_until_armed_then_times_the_outermost_call_only(rec, monkeypatch):
    hook = hooked(rec, armed=False)
    monkeypatch.setattr(Model, "__call__", hook)
    m = Model()
    assert m(3) == 6 and m(3, scale=2) == 12 and Model.__call__(m, 1) == 2
    assert spans(rec) == []
    hook.scope = C.phase_scope(C.PhaseScope, rec, FORWARD)
    assert m.inner(3) == 6 and m(4) == 8
    got = spans(rec)
    assert [p for p, _ in got] == [FORWARD, FORWARD]  # inner() counted once, not twice
    assert C.hook_depth() == 0


def test_an_exception_passes_through_and_closes_the_phase(rec, monkeypatch):
    def boom(self, x):
        raise KeyError(x)

    hook = C.TimedCall(boom)
    hook.scope = C.phase_scope(C.PhaseScope, rec, FORWARD)
    monkeypatch.setattr(Model, "__call__", hook)
    with pytest.raises(KeyError, match="42"):
        Model()(42)
    assert rec.open_phases() == [] and C.hook_depth() == 0
    assert [p for p, _ in spans(rec)] == [FORWARD]  # the phase ends at the exception


def test_on_enter_runs_before_each_timed_call_and_may_stop_it(rec, monkeypatch):
    hook = hooked(rec)
    monkeypatch.setattr(Model, "__call__", hook)
    seen = []
    hook.on_enter = lambda: seen.append(1)
    m = Model()
    m.inner(1)
    assert seen == [1]  # once: the nested call is not a new timed call

    def stop():
        raise SystemExit(0)

    hook.on_enter = stop
    with pytest.raises(SystemExit):
        m(1)
    assert [p for p, _ in spans(rec)] == [FORWARD] and C.hook_depth() == 0
    hook.on_enter = None
    assert hook.on_enter is None and m(1) == 2


def test_fallback_is_used_while_unarmed(rec):
    calls = []

    def fallback(*args, **kwargs):
        calls.append((args, kwargs))
        return "fallback"

    hook = C.TimedCall(lambda x: x, fallback)
    assert hook(5, k=1) == "fallback" and calls == [((5,), {"k": 1})]
    hook.scope = C.phase_scope(C.PhaseScope, rec, FORWARD)
    assert hook(5) == 5


def test_looks_like_what_it_wraps(rec):
    hook = hooked(rec)
    assert hook.__wrapped__ is Model.__call__
    assert hook.__name__ == "__call__" and hook.__doc__ == "Doubles x."
    assert str(inspect.signature(hook)) == "(self, x, scale=1)"
    with pytest.raises(TypeError):
        hook.scope = object()
    with pytest.raises(TypeError):
        C.TimedCall(42)


def test_depth_is_per_thread(rec, monkeypatch):
    # A phase open on one thread does not stop another thread's calls from being timed.
    gate, release = threading.Event(), threading.Event()

    def slow(self, x):
        if x == "main":
            gate.set()
            release.wait(5)
        return x

    hook = C.TimedCall(slow)
    hook.scope = C.phase_scope(C.PhaseScope, rec, FORWARD)
    monkeypatch.setattr(Model, "__call__", hook)
    m = Model()
    t = threading.Thread(target=m, args=("main",))
    t.start()
    gate.wait(5)
    m("other")
    release.set()
    t.join()
    got = spans(rec)
    assert len(got) == 2 and len({tid for _, tid in got}) == 2


def test_step_clock_opens_only_at_depth_zero(rec):
    # An optimizer stepped inside another hook (inside forward, say) is not timed again.
    clock = C.StepClock()
    clock.arm(C.phase_scope(C.PhaseScope, rec, 9), C.StepEnds(), None, 1, 1, 1 << 60)
    outer = C.TimedCall(lambda opt: (clock.pre(opt, (), {}), C.hook_depth(), clock.post(opt, (), {}))[1])
    outer.scope = C.phase_scope(C.PhaseScope, rec, 10)
    assert outer(Opt()) == 1  # the clock left the depth alone: it did not open its phase
    assert C.hook_depth() == 0 and [p for p, _ in spans(rec)] == [10]


class Opt:
    """Stands in for a torch optimizer: the clock only needs its identity."""


def test_step_clock_times_the_optimizer_and_ends_steps_for_the_first_optimizer_only(rec):
    boundaries, calls = C.StepEnds(), []
    clock = C.StepClock()
    scope = C.phase_scope(C.PhaseScope, rec, 11)
    clock.pre(Opt(), (), {})  # unarmed: nothing
    assert not clock.armed and C.hook_depth() == 0
    clock.arm(scope, boundaries, calls.append, 4, 6, 1 << 60)
    a, b = Opt(), Opt()
    for _ in range(9):
        clock.pre(a, (), {})
        clock.post(a, (), {})
        clock.pre(b, (), {})  # a second optimizer: timed, but it does not end steps
        clock.post(b, (), {})
    assert clock.clocked and len(boundaries) == 9 and list(boundaries) == sorted(boundaries)
    assert calls == [1, 5, 6, 9]  # (n - 1) % 4 == 0 or n % 6 == 0
    assert [p for p, _ in spans(rec)] == [11] * 18 and C.hook_depth() == 0


def test_step_clock_spaces_its_every_calls_by_the_least_gap(rec):
    # On CPU the every-8th-step upkeep is also spaced in time: steps far shorter than the gap call back
    # only when the gap has passed since the last such call (the first step always), the compaction
    # and stop steps whatever the gap; a gap of 0 is the plain every-nth rule.
    def run(gap_ns, sleep_s):
        boundaries, calls = C.StepEnds(), []
        clock = C.StepClock()
        clock.arm(C.phase_scope(C.PhaseScope, rec, 11), boundaries, calls.append, 2, 1 << 20, 1 << 60, gap_ns)
        opt = Opt()
        for _ in range(40):
            clock.pre(opt, (), {})
            clock.post(opt, (), {})
            if sleep_s:
                time.sleep(sleep_s)
        clock.disarm()
        return calls, list(boundaries)

    calls, _ = run(0, 0)
    assert calls == list(range(1, 41, 2))
    calls, _ = run(3_600 * 10**9, 0)  # an hour: only the first step
    assert calls == [1]
    calls, ends = run(20_000_000, 0.004)  # 4 ms steps, 20 ms gap: one call in 5-6 steps, on odd n
    gaps = [ends[b - 1] - ends[a - 1] for a, b in zip(calls, calls[1:])]
    assert calls[0] == 1 and all(n % 2 == 1 for n in calls) and all(g >= 20_000_000 for g in gaps)
    # No more calls than the gaps the run's length holds, and fewer than the plain rule's 20.
    assert 2 <= len(calls) <= (ends[-1] - ends[0]) / 20_000_000 + 1 and len(calls) < 20, calls
    with pytest.raises(ValueError):
        C.StepClock().arm(C.phase_scope(C.PhaseScope, rec, 11), C.StepEnds(), None, 1, 1, 1, -1)


def test_a_slow_spaced_callback_pushes_the_next_one_further(rec):
    # A spaced call that takes long (a checkpoint, or a preempted call on a loaded machine) must not make
    # the next one due the next n-th step: it waits 50x the slow call's own time after its end.
    def run(callback_s):
        boundaries, calls = C.StepEnds(), []

        def upkeep(n):
            calls.append(n)
            if callback_s:
                time.sleep(callback_s)

        clock = C.StepClock()
        clock.arm(C.phase_scope(C.PhaseScope, rec, 11), boundaries, upkeep, 2, 1 << 20, 1 << 60, 1_000_000)
        opt = Opt()
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 0.3:
            clock.pre(opt, (), {})
            clock.post(opt, (), {})
            time.sleep(0.001)
        clock.disarm()
        return calls, list(boundaries)

    fast, _ = run(0)
    slow, ends = run(0.004)  # each call's own 4 ms: the next one >= 200 ms after its end
    gaps = [ends[b - 1] - ends[a - 1] for a, b in zip(slow, slow[1:])]
    assert all(g >= 200_000_000 for g in gaps), gaps
    assert len(slow) <= 2 < len(fast) // 2, (slow, fast)


def test_step_clock_follows_an_optimizer_that_steps_twice_without_the_clock(rec):
    # Sequential stages (layer-wise training, an LR finder then training, one optimizer per epoch):
    # the later optimizer takes the clock over at its second step, and its first step ends a step too.
    # A GAN's second optimizer, once between two clock steps, never does.
    ends, calls = C.StepEnds(), []
    clock = C.StepClock()
    clock.arm(C.phase_scope(C.PhaseScope, rec, 11), ends, calls.append, 1 << 20, 1 << 20, 1 << 60)
    a, b, c = Opt(), Opt(), Opt()

    def step(opt):
        clock.pre(opt, (), {})
        clock.post(opt, (), {})

    for _ in range(3):  # a GAN: a is the clock, b steps once in each of its steps
        step(a)
        step(b)
    assert len(ends) == 3 and clock.handovers == 0 and clock.others == 3
    for _ in range(5):  # then a second stage: b alone. It takes the clock over at its first step
        step(b)  # alone, and its step of the last GAN iteration ends a row too (one row more)
    assert len(ends) == 3 + 1 + 5 and clock.handovers == 1 and list(ends) == sorted(ends)
    for _ in range(4):  # then a GAN of b and c: b stays the clock
        step(b)
        step(c)
    assert len(ends) == 9 + 4 and clock.handovers == 1
    for _ in range(2):  # c alone
        step(c)
    assert len(ends) == 13 + 1 + 2 and clock.handovers == 2 and list(ends) == sorted(ends)
    assert calls == [1]  # the callback once, for the first step: (n - 1) % every == 0
    assert [p for p, _ in spans(rec)] == [11] * 21 and C.hook_depth() == 0

    # A stage after a stage: a alone, then d alone, ends one row per step.
    ends = C.StepEnds()
    clock.arm(C.phase_scope(C.PhaseScope, rec, 11), ends, None, 1 << 20, 1 << 20, 1 << 60)
    d = Opt()
    for opt in [a] * 3 + [d] * 4:
        step(opt)
    assert len(ends) == 7 and clock.handovers == 1 and clock.others == 0


def test_step_clock_times_each_threads_own_optimizer_at_once(rec):
    # Threads that step their own optimizers at the same time: each thread's open step is its own,
    # so one thread's post never closes (or skips) another's phase.
    import threading

    ends = C.StepEnds()
    clock = C.StepClock()
    clock.arm(C.phase_scope(C.PhaseScope, rec, 11), ends, None, 1, 1 << 20, 1 << 60)
    a, b = Opt(), Opt()
    inside, go_on = threading.Event(), threading.Event()
    depth = []

    def other():
        clock.pre(b, (), {})
        inside.set()
        go_on.wait(10)
        clock.post(b, (), {})
        depth.append((C.hook_depth(), rec.open_phases()))

    t = threading.Thread(target=other)
    clock.pre(a, (), {})
    t.start()
    assert inside.wait(10)
    clock.post(a, (), {})  # a's step ends while b's is open on the other thread
    go_on.set()
    t.join(10)
    assert len(ends) == 1 and depth == [(0, [])] and rec.open_phases() == [] and C.hook_depth() == 0
    assert sorted(p for p, _ in spans(rec)) == [11, 11]


def test_step_clock_skips_steps_made_inside_another_phase_and_stops_at_stop_at(rec):
    boundaries, calls = C.StepEnds(), []
    clock = C.StepClock(boundaries)
    clock.arm(C.phase_scope(C.PhaseScope, rec, 11), boundaries, calls.append, 100, 100, 3)
    opt = Opt()
    rec.begin(2)  # e.g. optimizer.step() called inside a user's own phase: not a loop step
    clock.pre(opt, (), {})
    clock.post(opt, (), {})
    rec.end(2)
    assert len(boundaries) == 0 and clock.skipped == 1
    for _ in range(4):
        clock.pre(opt, (), {})
        clock.post(opt, (), {})
    assert calls == [1, 3, 4]  # every 100th from 1, then each step at or past stop_at

    def stop(n):
        raise SystemExit(0)

    clock.arm(C.phase_scope(C.PhaseScope, rec, 11), C.StepEnds(), stop, 1, 1, 1)
    clock.pre(opt, (), {})
    with pytest.raises(SystemExit):
        clock.post(opt, (), {})
    assert rec.open_phases() == [] and C.hook_depth() == 0
    clock.disarm()
    clock.pre(opt, (), {})
    assert C.hook_depth() == 0 and not clock.armed


def closure_step(rec):
    """A clock armed with the optimizer phase (11), a timed forward (7), and the spans in time order."""
    clock, ends = C.StepClock(), C.StepEnds()
    clock.arm(C.phase_scope(C.PhaseScope, rec, 11), ends, None, 1, 1 << 20, 1 << 60)
    fwd = C.TimedCall(lambda x: 2 * x)
    fwd.scope = C.phase_scope(C.PhaseScope, rec, FORWARD)

    def ordered():
        d = rec.drain()
        return [p for _, p in sorted(zip(d["start_ns"].tolist(), d["phase_id"].tolist()))]

    return clock, ends, fwd, ordered


def test_step_clock_steps_aside_while_the_steps_closure_runs(rec):
    # optimizer.step(closure) (LBFGS, Lightning): forward and backward run inside the step. The
    # closure torch calls is the clock's wrapper: inside it the optimizer phase is closed and the
    # depth is 0, so forward is timed as itself; the step still ends at the optimizer's end.
    clock, ends, fwd, ordered = closure_step(rec)
    opt, depths = Opt(), []

    def closure():
        depths.append(C.hook_depth())
        return fwd(3)

    user_args = (opt, closure)
    args, kwargs = clock.pre(opt, user_args, {})
    assert args[0] is opt and args[1] is not closure and args[1].__wrapped__ is closure and kwargs == {}
    assert user_args[1] is closure  # the user's own tuple is untouched
    assert C.hook_depth() == 1
    assert args[1]() == 6 and args[1]() == 6  # LBFGS calls it more than once
    assert depths == [0, 0] and C.hook_depth() == 1
    clock.post(opt, args, kwargs)
    assert C.hook_depth() == 0 and len(ends) == 1 and rec.open_phases() == []
    assert ordered() == [11, FORWARD, 11, FORWARD, 11]
    # closure= as a keyword; a None closure is left alone; a step without one returns nothing.
    args, kwargs = clock.pre(opt, (opt,), {"closure": closure, "lr": 1})
    assert kwargs["lr"] == 1 and kwargs["closure"]() == 6 and args == (opt,)
    clock.post(opt, args, kwargs)
    for plain in ((opt, None), (opt,)):
        assert clock.pre(opt, plain, {}) is None
        clock.post(opt, plain, {})
    assert len(ends) == 4 and ordered() == [11, FORWARD, 11, 11, 11] and C.hook_depth() == 0


def test_a_closure_that_raises_gives_its_step_up_and_leaves_nothing_open(rec):
    clock, ends, fwd, ordered = closure_step(rec)
    opt = Opt()

    def closure():
        fwd(1)
        raise ValueError("nan loss")

    args, _ = clock.pre(opt, (opt, closure), {})
    with pytest.raises(ValueError, match="nan loss"):
        args[1]()
    # The error leaves optimizer.step() without its post hook: nothing stays open on the thread.
    assert C.hook_depth() == 0 and rec.open_phases() == []
    clock.post(opt, (opt,), {})  # a post for the abandoned step (an optimizer that caught it) is ignored
    assert len(ends) == 0 and C.hook_depth() == 0
    clock.pre(opt, (opt,), {})
    clock.post(opt, (opt,), {})
    assert len(ends) == 1 and ordered() == [11, FORWARD, 11]
    # A closure called outside its step (kept and called later) just runs.
    assert args[1].__wrapped__ is closure and C.hook_depth() == 0


def test_timing_trouble_never_fails_the_users_call(rec):
    # The wrapped call leaves a phase of its own open, so the hook's phase cannot close in order:
    # the call still returns its result, and the miss is counted, not raised.
    def leaves_a_phase_open(x):
        rec.begin(5)
        return x * 3

    hook = C.TimedCall(leaves_a_phase_open)
    hook.scope = C.phase_scope(C.PhaseScope, rec, FORWARD)
    before = C.hook_errors()
    assert hook(2) == 6
    assert C.hook_errors() == before + 1 and C.hook_depth() == 0
    assert rec.open_phases() == [FORWARD, 5]
    rec.end(5)
    rec.end(FORWARD)


def test_step_ends_count_every_step_and_let_settled_ones_go():
    import numpy as np

    ends = C.StepEnds()
    for t in range(100, 1100, 100):
        ends.append(t)
    assert len(ends) == 10 and ends[0] == 100 and ends[-1] == 1000 and ends[2:5] == [300, 400, 500]
    assert list(ends) == list(range(100, 1100, 100))
    assert np.frombuffer(ends.since(7), dtype=np.int64).tolist() == [800, 900, 1000]
    ends.trim(6)
    assert len(ends) == 10 and ends.base == 6 and ends[6] == 700 and ends[-4] == 700
    with pytest.raises(IndexError, match="let go once its step was settled"):
        ends[5]
    with pytest.raises(IndexError, match="let go"):
        ends[:7]
    with pytest.raises(IndexError, match="let go"):
        list(ends)  # never a silently shorter list
    with pytest.raises(IndexError, match="let go"):
        ends.since(3)
    with pytest.raises(ValueError, match="already let go"):
        ends.replace([1, 2])
    with pytest.raises(IndexError, match="out of range"):
        ends[10]
    ends.trim(3)  # trimming backwards is a no-op
    ends.trim(99)  # past the end: everything let go, the count stays
    assert len(ends) == 10 and ends.base == 10 and ends.since(10) == b""
    ends.append(1100)
    assert len(ends) == 11 and ends[-1] == 1100
    fresh = C.StepEnds()
    fresh.replace([5, 7])
    assert list(fresh) == [5, 7] and "2 steps" in repr(fresh)
    with pytest.raises(TypeError):
        C.StepClock([])  # the clock appends to a StepEnds (or None), never to a list


def test_timed_call_counts_the_calls_it_only_passes_through(rec):
    # The run's overhead costs each such call's layer: a submodule's call inside the timed forward,
    # and calls made before the timer armed the hook. The timed outermost call is a phase instead.
    inner = C.TimedCall(lambda x: x + 1)
    outer = C.TimedCall(lambda x: inner(inner(x)))
    assert outer(1) == 3 and (outer.passed, inner.passed) == (1, 2)  # unarmed: every call passes through
    outer.scope = C.phase_scope(C.PhaseScope, rec, FORWARD)
    inner.scope = C.phase_scope(C.PhaseScope, rec, FORWARD)
    assert outer(1) == 3
    assert (outer.passed, inner.passed) == (1, 4)  # the outer one was timed; both inner calls went through
    assert len(rec.drain()["phase_id"]) == 1
    assert inner(0) == 1 and inner.passed == 4  # outermost and armed: timed, not passed
