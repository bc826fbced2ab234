"""What one phase costs the training thread, measured as a step of real work leaves the caches.

A phase timed back to back in a tight loop finds its code and data in the first-level caches and costs
~130 ns on a 2-core EPYC VM. In a training loop every phase comes after a forward, a backward or an
optimizer step that has pushed them out, and the same enter and exit cost ~650 ns there: the tiny bench
loop (0.22 ms steps, 4 phases a step) ran 2.5 us a step faster with the hooks' timing switched off in the
same process, 0.6 us a phase (bench/RESULTS.md). So the calibration puts a small autograd step of its
own between the phases it times, and takes off the clock reads, timed the same way.

The calibrations run once a process, mostly after the script's last step, so they hold up the finish:
each runs with torch on one intra-op thread (the step between is too small to gain from more, and on a
busy machine the script's threads wait for each other: with two CPU burners on the 2-core VM, 300 steps
took 2.8 s on two threads against 0.1-0.24 s on one, and a run's phase calibration 6.8 s against 0.2 s)
and stops at a time cap, keeping the pairs it has (never fewer than MIN_PAIRS). calibrations() says what
they took and whether a cap cut one short.
"""

from __future__ import annotations

import statistics
import sys
import time
from contextlib import contextmanager
from typing import Callable, Iterator

import numpy as np

from perfcore.analysis.run_parts import Calibrations

__all__ = [
    "PAIRS",
    "MIN_PAIRS",
    "CAP_S",
    "cold_cost_ns",
    "added_cost_ns",
    "calibrated_cost_ns",
    "calibrations",
    "step_like_work",
    "passed_call_ns",
]

# Enough pairs for a stable median (three calibrations of a phase at 150 agreed within a few per cent),
# few enough that each costs ~40 ms (the step between is ~130 us), once a process.
PAIRS = 150
# A calibration stops at CAP_S with the pairs it has, at least MIN_PAIRS: a run makes at most three after
# its script (a phase, a passed call and a fetch, the last two wrapped against bare: five timings, 0.75 s
# at most), so they stay under 1 s together however busy the machine. Quiet, 150 pairs take ~60 ms; with
# two CPU burners on 2 cores 0.1-0.25 s, so the cap cuts them there, rarely on a quiet machine.
CAP_S = 0.15
MIN_PAIRS = 15

# What each calibration of this process took: (pairs made, pairs asked, seconds).
_MADE: list[tuple[int, int, float]] = []


def cold_cost_ns(
    timed: Callable[[], object],
    between: Callable[[], object],
    n: int = PAIRS,
    clock: Callable[[], int] = time.perf_counter_ns,
    cap_s: float | None = None,
) -> float:
    """The median cost (ns) of timed(), each call made right after between(), less the median of the
    clock's two reads with nothing between them, also right after between(): what timed() adds, with
    the caches as between() leaves them. The two are interleaved, so a machine that slows midway slows
    both, and pairs cut short by cap_s (seconds on `clock`, after MIN_PAIRS) are still a fair sample."""
    with_call, clock_only = [], []
    start = clock()
    stop = None if cap_s is None else start + int(cap_s * 1e9)
    for i in range(max(1, n)):
        between()
        t0 = clock()
        timed()
        with_call.append(clock() - t0)
        between()
        t0 = clock()
        t1 = clock()
        clock_only.append(t1 - t0)
        if stop is not None and t1 >= stop and i + 1 >= MIN_PAIRS:
            break
    _MADE.append((len(with_call), max(1, n), (clock() - start) / 1e9))
    return max(0.0, float(statistics.median(with_call) - statistics.median(clock_only)))


@contextmanager
def one_thread() -> Iterator[None]:
    """torch on one intra-op thread while a calibration runs, as it was after."""
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else 1
    if before > 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if before > 1:
            torch.set_num_threads(before)


def calibrated_cost_ns(timed: Callable[[], object], n: int = PAIRS) -> float:
    """cold_cost_ns of timed() after this module's small training step, on one thread, capped at CAP_S."""
    with one_thread():
        return cold_cost_ns(timed, step_like_work(), n, cap_s=CAP_S)


def calibrations() -> Calibrations:
    """What this process's calibrations took: how many, their seconds, their fewest pairs, and whether a
    cap cut any short (its median then stands on fewer pairs than asked)."""
    return Calibrations(
        count=len(_MADE),
        seconds=sum(s for _, _, s in _MADE),
        pairs=min((made for made, _, _ in _MADE), default=0),
        cut_short=any(made < asked for made, asked, _ in _MADE),
    )


def step_like_work() -> Callable[[], object]:
    """A small training step of the calibration's own: a 32-64-1 MLP's forward and gradients on private
    tensors (functional calls and torch.autograd.grad, none of which perfcore hooks, so nothing lands in
    a run's recording). Where torch is not imported or cannot take gradients here, numpy work over a
    buffer larger than a core's L2 cache stands in."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            # On the CPU whatever the script's default device: no kernel of the calibration's may land in a
            # run's GPU trace.
            g = torch.Generator(device="cpu").manual_seed(0)
            w1 = torch.randn(64, 32, generator=g, device="cpu").requires_grad_()
            w2 = torch.randn(1, 64, generator=g, device="cpu").requires_grad_()
            x = torch.randn(16, 32, generator=g, device="cpu")
            F = torch.nn.functional

            def step() -> object:
                with torch.enable_grad():
                    loss = F.linear(F.relu(F.linear(x, w1)), w2).square().mean()
                    return torch.autograd.grad(loss, (w1, w2))

            step()
            return step
        except Exception:  # no autograd here (a build without it, grad-off forced): the numpy stand-in
            pass
    buf = np.zeros(4 << 20, dtype=np.uint8)
    a = np.ones((64, 64), dtype=np.float32)

    def touch() -> object:
        buf[::64] += 1
        return a @ a

    return touch


def added_cost_ns(call: Callable[[], object], plain: Callable[[], object], n: int = PAIRS) -> float:
    """What a wrapper adds: call() (the wrapped thing) against plain() (the same thing bare), each timed
    right after a small training step (on one thread, each timing capped at CAP_S)."""
    with one_thread():
        between = step_like_work()
        return max(0.0, cold_cost_ns(call, between, n, cap_s=CAP_S) - cold_cost_ns(plain, between, n, cap_s=CAP_S))


def passed_call_ns() -> float:
    """What a hook's call layer adds to a call it only passes through (a submodule's call inside the
    timed forward, a hooked call before the timer exists), as a step leaves the caches: an unarmed
    TimedCall around a function that does nothing, against the function called directly."""
    from perfcore._native import native

    def nothing() -> None:
        return None

    return added_cost_ns(native().TimedCall(nothing), nothing)
