"""One phase's cost as a training loop pays it: timed after a step of real work, clock reads taken off."""

import sys

import pytest

from perfcore.analysis.run_parts import Calibrations
from perfcore.recording import phase_cost
from perfcore.recording.phase_cost import cold_cost_ns, step_like_work


class FakeClock:
    def __init__(self, read_ns=20):
        self.t, self.read_ns, self.log = 0, read_ns, []

    def __call__(self):
        t = self.t
        self.t += self.read_ns
        self.log.append("clock")
        return t


def test_the_cost_is_what_the_call_adds_to_two_clock_reads():
    clock = FakeClock(read_ns=20)

    def timed():
        clock.t += 500
        clock.log.append("timed")

    def between():
        clock.t += 1_000_000  # never inside a timed interval
        clock.log.append("between")

    assert cold_cost_ns(timed, between, n=7, clock=clock) == 500.0
    # Every measurement, with the call and without it, comes right after the work between (the first and
    # last reads time the whole calibration).
    assert clock.log[1:9] == ["between", "clock", "timed", "clock", "between", "clock", "clock", "between"]
    assert clock.log.count("between") == 14 and clock.log.count("timed") == 7


def test_a_time_cap_keeps_the_pairs_made_and_says_it_cut_them_short(monkeypatch):
    monkeypatch.setattr(phase_cost, "_MADE", [])
    clock = FakeClock(read_ns=20)

    def timed():
        clock.t += 500

    def between():
        clock.t += 1_000_000  # a 1 ms step: a pair takes 2 ms

    # 50 ms of pairs, then it stops with what it has: the same cost, from 25 pairs of 150.
    assert cold_cost_ns(timed, between, n=150, clock=clock, cap_s=0.05) == 500.0
    made = phase_cost.calibrations()
    assert made.count == 1 and made.pairs == 25 and made.cut_short
    assert made.seconds == pytest.approx(0.05, rel=0.01)
    # A cap it never reaches cuts nothing.
    cold_cost_ns(timed, lambda: None, n=40, clock=FakeClock(), cap_s=0.05)
    assert phase_cost.calibrations().count == 2 and phase_cost.calibrations().pairs == 25
    monkeypatch.setattr(phase_cost, "_MADE", [])
    cold_cost_ns(timed, lambda: None, n=40, clock=FakeClock(), cap_s=0.05)
    assert phase_cost.calibrations() == Calibrations(count=1, seconds=phase_cost._MADE[0][2], pairs=40, cut_short=False)


def test_a_cap_never_leaves_fewer_than_the_fewest_pairs(monkeypatch):
    # A machine so busy that one step takes a second: still MIN_PAIRS pairs, never a median of one.
    monkeypatch.setattr(phase_cost, "_MADE", [])
    clock = FakeClock()

    def between():
        clock.t += 1_000_000_000

    cold_cost_ns(lambda: None, between, n=150, clock=clock, cap_s=phase_cost.CAP_S)
    assert phase_cost.calibrations().pairs == phase_cost.MIN_PAIRS


def test_a_calibration_runs_torch_on_one_thread_and_gives_the_scripts_back():
    # With the script's threads, each small matrix product of the step between waits on a worker that
    # a busy machine holds off its core (300 steps: 2.8 s against 0.1 s on one thread, two burners).
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    seen = []
    try:
        phase_cost.calibrated_cost_ns(lambda: seen.append(torch.get_num_threads()), n=3)
        phase_cost.added_cost_ns(lambda: seen.append(torch.get_num_threads()), lambda: None, n=3)
        after = torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
    assert seen == [1] * 6 and after == 2


def test_a_cost_below_the_clock_reads_noise_is_zero_not_negative():
    # With the call 10 ns, the clock alone 30 ns (noise): nothing added, not -20 ns.
    reads = iter([0] + [0, 10, 0, 30] * 5 + [0])  # the calibration's own first and last reads around the pairs
    assert cold_cost_ns(lambda: None, lambda: None, n=5, clock=lambda: next(reads)) == 0.0


def test_the_step_between_phases_calls_nothing_perfcore_hooks(monkeypatch):
    # In perfcore run's training process these are hooked (TimedCall, the grad-off watch): the
    # calibration's step must reach none of them, or it would record phases into the run.
    torch = pytest.importorskip("torch")

    def hooked(*a, **k):
        raise AssertionError("the calibration called a hooked entry point")

    for owner, attr in [
        (torch.nn.Module, "__call__"),
        (torch.Tensor, "backward"),
        (torch.autograd, "backward"),
        (torch.Tensor, "to"),
        (torch.Tensor, "cuda"),
        (torch.no_grad, "__enter__"),
        (torch.inference_mode, "__enter__"),
    ]:
        monkeypatch.setattr(owner, attr, hooked)
    step = step_like_work()
    grads = step()
    assert isinstance(grads, tuple) and [tuple(g.shape) for g in grads] == [(64, 32), (1, 64)]


def test_the_step_stays_on_the_cpu_whatever_the_default_device():
    # A script that set another default device: the calibration's tensors stay on the CPU (on a GPU its
    # kernels would land in the run's trace); "meta" stands in for "cuda" on a machine without one.
    torch = pytest.importorskip("torch")
    torch.set_default_device("meta")
    try:
        grads = step_like_work()()
    finally:
        torch.set_default_device(None)
    assert [g.device.type for g in grads] == ["cpu", "cpu"]


def test_without_torch_numpy_work_stands_in(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    out = step_like_work()()
    assert out.shape == (64, 64)


def test_a_phase_after_a_step_costs_more_than_back_to_back():
    # The reason for the calibration: the caches a step leaves. 130 ns back to back against ~650-850 ns
    # after the step on the 2-core VM; this holds with both cores busy (its whole point).
    pytest.importorskip("torch")
    from perfcore._native import native
    from perfcore.recording.engine import _scope_class, phase_cost_ns

    C = native()
    rec = C.SpanRecorder()
    scope = C.phase_scope(_scope_class(), rec, 0)

    def enter_exit():
        with scope:
            pass

    back_to_back = cold_cost_ns(enter_exit, lambda: None, n=300)
    rec.drain()
    assert phase_cost_ns() > back_to_back > 0
