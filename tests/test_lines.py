"""Host time to the user's lines: the stack sampler, the call counter and their join to steps and labels,
on hand-built samples (exact figures) and on a real host-bound loop with a measured truth."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from perfcore.analysis import line_timeline
from perfcore.analysis.line_timeline import host_timeline
from perfcore.analysis.lines import calls_per_step, fold, join_lines, label_at, sample_weights
from perfcore.capture.line_sampler import Frame, LineSampler, LineSamples, is_library, library_prefixes
from perfcore.capture.sync_calls import MAX_CALLS, METHODS, SyncCalls, SyncCounter
from perfcore.errors import UsageError

LIB = ("/lib/python3/",)
SCRIPTS = Path(__file__).parent / "scripts"


def _samples(t, stack, stacks, interval=10, cap=15):
    return LineSamples(np.array(t, np.int64), np.array(stack, np.int32), tuple(stacks), interval, cap, 1, 0, 0, 0)


def test_library_frames_fold_into_the_users_calling_line():
    user = Frame("/home/u/train.py", "metrics", 31)
    stacks = (
        (
            Frame("/lib/python3/site-packages/torch/_tensor.py", "item", 9),
            Frame("/lib/python3/json.py", "x", 2),
            user,
            Frame("/home/u/train.py", "main", 50),
        ),
        (Frame("/lib/python3/threading.py", "wait", 3), Frame("<frozen importlib._bootstrap>", "load", 1)),
    )
    site_of, sites, users = fold(stacks, LIB)
    assert sites[site_of[0]] == user and users[site_of[0]]
    assert sites[site_of[1]] == stacks[1][0] and not users[site_of[1]]  # no user frame: the innermost stands in


def test_what_counts_as_library():
    assert is_library("/opt/x/site-packages/torch/nn/modules/module.py", ())
    assert is_library("/usr/lib/python3/dist-packages/numpy/core.py", ())
    assert is_library("<frozen runpy>", ())
    assert not is_library("<string>", ()) and not is_library("<stdin>", ())
    assert is_library("/lib/python3/json/__init__.py", LIB) and not is_library("/home/u/lib/python3x.py", LIB)
    prefixes = library_prefixes()
    assert is_library(threading.__file__, prefixes)
    assert is_library(str(Path(__file__).parents[1] / "perfcore" / "timing.py"), prefixes)
    assert not is_library(__file__, prefixes)


def test_label_at_takes_the_highest_precedence_and_overlaps():
    t = np.array([5, 15, 25, 35, 45])
    got = label_at(
        t,
        {"load": ([0, 10], [20, 30]), "compute": ([12], [18]), "comm": ([40], [50])},
        ("comm", "compute", "transfer", "load"),
    )
    assert [["load", "transfer", "compute", "comm", "host"][i] for i in got] == [
        "load",
        "compute",
        "load",
        "host",
        "comm",
    ]


def test_weights_are_time_since_the_previous_sample_capped():
    assert list(sample_weights(np.array([100, 110, 140, 141]), 10, 15)) == [10, 10, 15, 1]
    assert len(sample_weights(np.array([], np.int64), 10, 15)) == 0


def test_join_gives_exact_ms_per_step_and_shares_per_label():
    a, b = Frame("/u/t.py", "metrics", 31), Frame("/u/t.py", "main", 12)
    lib = Frame("/lib/python3/site-packages/torch/x.py", "item", 1)
    stacks = ((lib, a, b), (b,))
    # Two steps [0, 100e6) and [100e6, 200e6); samples every 10 ms. The one at 5e6 is before a step starts
    # with the steps below, and the one at 250e6 after the last: both left out.
    t = [x * 10_000_000 for x in range(1, 20)] + [250_000_000]
    stack = [0 if x % 4 else 1 for x in range(1, 20)] + [0]
    load = (np.array([150_000_000]), np.array([200_000_000]))  # samples at 150..190e6 are load
    r = join_lines(
        _samples(t, stack, stacks, interval=10_000_000, cap=15_000_000),
        [0, 100_000_000],
        [100_000_000, 200_000_000],
        {"load": load},
        prefixes=LIB,
    )
    assert r.steps == 2 and r.samples == 19
    host, ld = r.label("host"), r.label("load")
    assert [lb.label for lb in r.labels] == ["host", "load"]
    # host: samples 1..14 (14 x 10 ms over 2 steps); stack 1 at 4, 8, 12 -> main; the rest metrics via torch.
    assert host.samples == 14 and host.ms_per_step == pytest.approx(70.0)
    assert (host.lines[0].function, host.lines[0].line, host.lines[0].ms_per_step) == ("metrics", 31, 55.0)
    assert host.lines[0].share == pytest.approx(11 / 14) and host.lines[0].user
    assert host.functions[1].function == "main" and host.functions[1].ms_per_step == pytest.approx(15.0)
    assert ld.samples == 5 and ld.ms_per_step == pytest.approx(25.0)
    assert join_lines(_samples([], [], ()), [0], [1], prefixes=LIB).labels == ()


def test_host_timeline_puts_each_functions_samples_in_its_steps_bin(monkeypatch):
    a, b, c = Frame("/u/t.py", "metrics", 31), Frame("/u/t.py", "main", 12), Frame("/u/t.py", "log", 40)
    stacks = ((a, b), (b,), (c, b))
    # Four steps of 100 ms numbered 10..13, samples every 10 ms: step 10 all metrics, step 11 all main,
    # step 12 metrics then log, step 13 load (not host). Bins of two steps.
    t = [x * 10_000_000 for x in range(1, 40)]
    stack = [0] * 9 + [1] * 10 + [0] * 5 + [2] * 5 + [1] * 10
    s0 = np.arange(4) * 100_000_000
    load = (np.array([300_000_000]), np.array([400_000_000]))
    monkeypatch.setattr(line_timeline, "TIMELINE_BINS", 2)
    tl = host_timeline(
        _samples(t, stack, stacks, interval=10_000_000, cap=15_000_000),
        s0,
        s0 + 100_000_000,
        [10, 11, 12, 13],
        {"load": load},
        prefixes=LIB,
        top=2,
    )
    assert tl.first_step == (10, 12) and tl.last_step == (11, 13) and tl.steps == (2, 2)
    # metrics: 9 + 5 samples of 10 ms = 140 ms; main: 10 (step 11) + the one at 300e6 is load -> 100 ms; log: 50.
    assert [f[1] for f in tl.functions] == ["metrics", "main"] and tl.functions[0][2] == 31
    assert tl.ms_per_step[0] == pytest.approx((45.0, 25.0))  # 90 ms over steps 10-11, 50 over 12-13
    assert tl.ms_per_step[1] == pytest.approx((50.0, 0.0))
    assert tl.other_ms_per_step == pytest.approx((0.0, 25.0))  # log, drawn as the rest of host time
    assert host_timeline(_samples([], [], ()), [0], [1], [0], prefixes=LIB) is None


def test_calls_per_step_counts_only_inside_steps():
    site = Frame("/u/t.py", "metrics", 31)
    calls = SyncCalls(
        np.array([5, 15, 16, 25, 99]),
        np.array([0, 0, 0, 0, 0], np.int32),
        np.array([0, 0, 1, 0, 0], np.int8),
        (site,),
        METHODS,
        0,
        1,
    )
    got = calls_per_step(calls, [10, 20], [20, 30])
    assert [(c.method, c.total, c.per_step, c.line) for c in got] == [("item", 2, 1.0, 31), ("cpu", 1, 0.5, 31)]


def test_past_the_caps_only_the_steps_the_kept_samples_and_calls_cover_count():
    site = Frame("/u/t.py", "metrics", 31)
    calls = SyncCalls(np.array([5, 15, 16]), np.zeros(3, np.int32), np.zeros(3, np.int8), (site,), METHODS, 7, 1)
    (got,) = calls_per_step(calls, [0, 10, 20, 30], [10, 20, 30, 40])  # kept calls end at 16: only step 0 ends by then
    assert (got.total, got.per_step) == (1, 1.0)
    s = LineSamples(np.array([10, 20, 30]), np.zeros(3, np.int32), ((site,),), 10, 10, 1, 0, 99, 0)
    r = join_lines(s, [0, 10, 20, 30, 40], [10, 20, 30, 40, 50], prefixes=LIB)
    assert r.steps == 3 and r.label("host").ms_per_step == pytest.approx(20 / 1e6 / 3)


def test_counter_restores_tensor_methods_and_counts_only_its_thread():
    torch = pytest.importorskip("torch")
    before = {m: torch.Tensor.__dict__.get(m) for m in METHODS}
    x = torch.arange(3.0)
    with SyncCounter(torch) as c:
        x.sum().item()
        x.tolist()
        th = threading.Thread(target=lambda: x.sum().item())
        th.start()
        th.join()
        assert x.cpu().numpy().tolist() == [0.0, 1.0, 2.0]
    got = c.result()
    # The last tolist is numpy's, not a tensor's.
    assert [got.methods[i] for i in got.method] == ["item", "tolist", "cpu", "numpy"]
    assert {s.function for s in got.sites} == {"test_counter_restores_tensor_methods_and_counts_only_its_thread"}
    assert {m: torch.Tensor.__dict__.get(m) for m in METHODS} == before
    x.sum().item()
    assert len(c.result().t_ns) == 4  # disarmed: nothing more counted


@pytest.mark.parametrize("native", [True, False])
def test_the_counters_cap_doubles_while_too_few_steps_are_covered_then_ends_counting(native):
    import time

    torch = pytest.importorskip("torch")
    clock = time.perf_counter_ns if native else (lambda: time.perf_counter_ns())  # another clock: the Python wrapper
    steps, asked = [0], []

    def more():
        asked.append(steps[0])
        return steps[0] < 3

    c = SyncCounter(torch, methods=("item",), clock=clock, max_calls=8, more=more).start()
    assert (c._log is not None) is native
    t = torch.zeros(())
    for _ in range(6):  # 5 calls a step: at 8 calls one step is covered (doubled), at 16 three (the end)
        for _ in range(5):
            t.item()
        steps[0] += 1
    r = c.stop()
    assert asked == [1, 3] and len(r.t_ns) == 16 and r.dropped == 1 and c._max == 16
    # Without a question, the cap ends counting where it is; a question that fails is a no.
    assert len(SyncCounter(torch, methods=("item",), clock=clock, max_calls=8).start().stop().t_ns) == 0
    c = SyncCounter(torch, methods=("item",), clock=clock, max_calls=8, more=lambda: 1 / 0).start()
    for _ in range(20):
        t.item()
    assert len(c.stop().t_ns) == 8 and c._max == 8


def test_counter_leaves_a_wrapper_put_over_its_own():
    torch = pytest.importorskip("torch")
    c = SyncCounter(torch, methods=("item",)).start()
    ours = torch.Tensor.item

    def theirs(t):
        return ours(t)

    torch.Tensor.item = theirs
    try:
        c.stop()
        assert torch.Tensor.__dict__["item"] is theirs and torch.ones(1).item() == 1.0
    finally:
        del torch.Tensor.item
    assert "item" not in torch.Tensor.__dict__
    with pytest.raises(ValueError):
        SyncCounter(torch, methods=("backward",))


def test_sampler_reads_the_thread_on_perfcore_clock():
    with pytest.raises(UsageError):
        LineSampler(interval_s=float("nan"))
    t0 = time.perf_counter_ns()
    # A fixed rate: on a loaded machine the budget would space a few samples out over the 0.2 s.
    with LineSampler(interval_s=0.001, budget=None) as s:
        end = time.perf_counter() + 0.2
        while time.perf_counter() < end:
            sum(range(200))
    t1 = time.perf_counter_ns()
    r = s.result()
    assert len(r.t_ns) > 5 and (r.t_ns >= t0).all() and (r.t_ns <= t1).all() and (np.diff(r.t_ns) > 0).all()
    here = {f.function for st in r.stacks for f in st}
    assert "test_sampler_reads_the_thread_on_perfcore_clock" in here
    gone = LineSampler(thread_id=-1, interval_s=0.001).start()
    time.sleep(0.05)
    r = gone.stop()
    assert len(r.t_ns) == 0 and r.missed > 0


def test_a_host_bound_loop_is_traced_to_its_metrics_line():
    """The truth: time measured around per_sample_metrics in each step, and 4 `.item()` calls per sample
    on the line that appends the stats. The join must name that function and line."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(SCRIPTS))
    try:
        import host_metrics
    finally:
        sys.path.remove(str(SCRIPTS))
    src = Path(host_metrics.__file__).read_text().splitlines()
    line = next(i for i, s in enumerate(src, 1) if "stats.append" in s)
    host_metrics.main(3)
    # A fixed rate: this checks the join against the truth, not the rate's budget (tested apart).
    with SyncCounter(torch) as c, LineSampler(interval_s=0.001, budget=None) as s:
        starts, ends, metric_ns = host_metrics.main(200, batch=48)
    r = join_lines(s.result(), starts, ends, prefixes=library_prefixes(), calls=c.result())
    host = r.label("host")
    top = host.functions[0]
    assert (top.function, Path(top.file).name, top.line) == ("per_sample_metrics", "host_metrics.py", line)
    truth = sum(metric_ns) / sum(b - a for a, b in zip(starts, ends))
    # A share from n samples has a binomial spread; 5 of its standard deviations, plus 0.05 for what a loaded
    # machine adds (runs here: within 0.09 of the truth with ~40 samples, no bias either way).
    spread = 5 * (truth * (1 - truth) / max(host.samples, 1)) ** 0.5 + 0.05
    assert host.samples >= 50 and top.share == pytest.approx(truth, abs=spread), (top, truth, host.samples)
    item = next(k for k in host.lines[0].calls if k.method == "item") if host.lines[0].line == line else None
    # The counter's cap (16k calls) covers 85 of the 200 steps: the calls per step are exact over those.
    calls = c.result()
    covered = sum(e <= calls.t_ns[-1] for e in ends) if calls.dropped else 200
    assert calls.dropped == (200 * 4 * 48 > MAX_CALLS)
    assert item is not None and item.per_step == 4 * 48 and item.total == covered * 4 * 48


def test_the_minimum_samples_keep_two_standard_errors_within_half_the_share():
    from perfcore.analysis.lines import MIN_SAMPLES, enough_samples, min_samples

    for p in np.linspace(0.01, 0.99, 99):
        n = min_samples(p)
        assert 2 * np.sqrt(p * (1 - p) / n) <= 0.5 * p + 1e-12  # enough at the bound
        if n > MIN_SAMPLES:
            assert 2 * np.sqrt(p * (1 - p) / (n - 1)) > 0.5 * p  # and not one sample earlier
    assert min_samples(0.5) == 16 and min_samples(1.0) == MIN_SAMPLES == 6 and min_samples(0.0) > 10**9
    assert not enough_samples(0.44, 5) and not enough_samples(0.83, 5) and enough_samples(1.0, 39)


def test_a_line_that_calls_into_a_library_keeps_where_its_time_went():
    """trainer.train() at the script's line 40 holds all host time; 3 of its 4 samples are in the library's
    training_step, 1 in its log (both under train): the line keeps the deepest frame of the library that
    held most of it, and its share. A line running its own code (line 12) has none."""
    call = Frame("/home/u/train.py", "<module>", 40)
    step = Frame("/lib/python3/site-packages/transformers/trainer.py", "training_step", 3900)
    log = Frame("/lib/python3/site-packages/transformers/trainer.py", "log", 3500)
    train = Frame("/lib/python3/site-packages/transformers/trainer.py", "train", 2200)
    own = Frame("/home/u/train.py", "<module>", 12)
    stacks = ((step, train, call), (log, train, call), (own,))
    host = join_lines(_samples([10, 20, 30, 40, 50], [0, 0, 1, 0, 2], stacks), [0], [60], prefixes=LIB).label("host")
    first, second = host.lines
    assert (first.line, first.share) == (40, pytest.approx(0.8))
    assert first.inside == (step.file, "training_step", 3900) and first.inside_share == pytest.approx(0.75)
    assert (second.line, second.inside, second.inside_share) == (12, None, None)


def test_the_library_frame_of_each_sample_crosses_from_the_child_with_its_site():
    """The child folds its stacks to sites; each sample's library frame goes beside its site, so the parent's
    join names where in the library a line's time went (an older part, without them, has none)."""
    from perfcore.analysis.codec import from_doc
    from perfcore.run.lines import LineFacts, _samples

    call, step = ["/home/u/train.py", "main", 29], ["/lib/python3/site-packages/transformers/trainer.py", "step", 9]
    facts = {
        "t_ns": [10, 20, 30, 40],
        "site": [0, 0, 0, 1],
        "sites": [call, ["/home/u/train.py", "main", 12]],
        "entry": [0, 0, -1, -1],
        "entries": [step],
        "interval_ns": 10,
        "cap_ns": 15,
        "missed": 0,
        "dropped": 0,
        "sampler_ns": 0,
    }
    host = join_lines(_samples(from_doc(LineFacts, facts)), [0], [50], prefixes=LIB).label("host")
    first = host.lines[0]
    assert (first.line, first.inside, first.inside_share) == (29, tuple(step), pytest.approx(2 / 3))
    old = from_doc(LineFacts, {k: v for k, v in facts.items() if k not in ("entry", "entries")})
    assert join_lines(_samples(old), [0], [50], prefixes=LIB).label("host").lines[0].inside is None


def test_the_sampling_rate_falls_when_a_sample_costs_more_than_the_budget():
    """Each sample made to look 200 us long (the injected clock adds 100 us a read, and a wake-up reads it
    twice around its work): at a 0.5% budget the wait grows to ~40 ms, where a fixed rate keeps 1 ms."""

    def slow_clock(reads=[0]):
        reads[0] += 1
        return time.perf_counter_ns() + reads[0] * 100_000

    def run(budget):
        s = LineSampler(interval_s=0.001, clock=slow_clock, budget=budget)
        with s:
            end = time.perf_counter() + 0.4
            while time.perf_counter() < end:
                time.sleep(0.0005)
        return s.result(), s

    adaptive, sa = run(0.005)
    fixed, _ = run(None)
    per_wake_ns = adaptive.sampler_ns / adaptive.wakes
    assert per_wake_ns >= 200_000
    assert sa._next_wait_s() == pytest.approx(min(per_wake_ns / 1e9 / 0.005, 0.25), rel=1e-6)
    assert adaptive.wakes <= 0.4 / 0.035 + 2 and fixed.wakes >= 3 * adaptive.wakes, (adaptive.wakes, fixed.wakes)
    # Each sample stands for the time since the one before: the cap follows the longest wait.
    assert adaptive.cap_ns >= 0.035e9 and fixed.cap_ns < 0.035e9
    # The hand-back counts toward the budget too: a costly one slows the rate with no held time at all.
    slow = LineSampler(interval_s=0.001, budget=0.005, handoff_ns=1_000_000)
    slow._wakes = 1
    assert slow._next_wait_s() == pytest.approx(0.2, rel=0.01)


def test_a_sample_stalls_the_sampled_thread_by_its_held_time_and_the_hand_back(monkeypatch):
    from perfcore.capture import line_sampler

    real = LineSampler._sample_once

    def holds_2ms(self):
        end = time.perf_counter_ns() + 2_000_000
        while time.perf_counter_ns() < end:  # the GIL held, as a deep walk would
            pass
        real(self)

    monkeypatch.setattr(LineSampler, "_sample_once", holds_2ms)
    stall_ns, held_ns = line_sampler.sample_stall_ns(samples=6, interval_s=0.001, limit_s=2.0)
    assert held_ns >= 2e6 and stall_ns >= 2e6 * 0.9, (stall_ns, held_ns)
    handoff = line_sampler.handoff_cost_ns(samples=6, interval_s=0.001, limit_s=2.0)
    assert 0 <= handoff < 1e6 * 50  # what is left after the held time: not the 2 ms again


def test_the_extensions_walk_reads_the_stacks_the_python_walk_does():
    from perfcore.capture import line_sampler

    if sys.version_info < (3, 11):
        pytest.skip("the extension's walk needs PyFrame_GetLasti (Python 3.11)")
    assert line_sampler._stack_key() is not None  # the extension built here has it
    ready, done = threading.Event(), threading.Event()

    def deep(n):
        if n:
            return deep(n - 1)
        ready.set()
        done.wait()

    th = threading.Thread(target=deep, args=(30,))
    th.start()
    ready.wait()
    try:
        got = {}
        for native in (True, False):
            s = LineSampler(th.ident, interval_s=0.001, native=native, budget=None)
            assert (s._native is not None) is native
            with s:
                while s._wakes < 5:
                    time.sleep(0.001)
            r = s.result()
            assert len(r.t_ns) >= 5 and len(set(r.stack.tolist())) == 1  # one stack, interned once
            got[native] = r.stacks[r.stack[0]]
        assert got[True] == got[False]
        src = Path(__file__).read_text().splitlines()
        said = [src[f.line - 1].strip() for f in got[True] if f.function == "deep"]
        assert said == ["done.wait()"] + ["return deep(n - 1)"] * 30, said
        assert got[True][-1].function == "_bootstrap"
    finally:
        done.set()
        th.join()
