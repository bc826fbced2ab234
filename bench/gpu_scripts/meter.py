"""The truth scripts' own meter: each phase of a step timed by the script itself, summed over the steps
after the warm-up, printed at the end as one JSON line {"truth": {...}}. It knows nothing of perfcore.

Every step ends after a synchronising call (the loop's `loss.item()`), so the GPU is idle at each step
boundary and the step's wall time splits into what the GPU and the loop did inside it:
  load      the loop waiting in next(loader) (the GPU idle: nothing of the step is queued yet);
  transfer  the batch's copy, a CUDA event pair around it (the GPU's time between the events);
  compute   the step's kernels: the GPU time of the same work queued back to back behind a sleep kernel
            (`paced`), measured on warm-up steps. An event pair around host-paced work would hold the
            host's time between launches; paced work holds each kernel and the GPU's own gap before
            it, so the figure is an upper bound: `band` widens it down by one launch floor (the paced
            time of a one-element kernel) per kernel, where the kernels a step are known;
  comm      none in these scripts;
  host      the rest of the wall time.
On the CPU (no GPU here: the dry run) every phase is the host clock around it, and compute is the
script's `part()`s: the module's forward, the backward and the optimizer step, as perfcore labels
them on a CPU (a functional loss and zero_grad are host time there).
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager

import torch

LABELS = ("load", "transfer", "compute", "comm", "host")


def device_of(arg: str) -> torch.device:
    """cuda where there is one (or where asked), else the CPU: the dry run runs every script there."""
    if arg == "auto":
        arg = "cuda" if torch.cuda.is_available() else "cpu"
    if arg == "cpu":
        # One compute thread: on a crowded machine a step of two OpenMP threads stalls at a barrier
        # whenever one is preempted (a 2 ms step read 250 ms), and the dry run only needs the path.
        torch.set_num_threads(1)
    return torch.device(arg)


class Meter:
    """Times the phases of the steps the script marks; `report()` prints the truth."""

    def __init__(self, script: str, device: torch.device, warmup: int = 5):
        self.script = script
        self.cuda = device.type == "cuda"
        self.warmup = int(warmup)
        self.steps = 0  # steps ended so far, warm-up and paced ones included
        self.ms = dict.fromkeys(("load", "transfer", "compute_window", "compute_parts"), 0.0)
        self.events: list[tuple[str, object, object]] = []  # measured steps' event pairs, read at the end
        self.wall_ms = 0.0
        self.paced_ms: list[float] = []
        self.paced_ok: list[bool] = []
        self.floor_us: float | None = None
        self.host_call_ms = 0.0
        self.last_end = time.perf_counter()

    @property
    def measuring(self) -> bool:
        return self.steps >= self.warmup

    def fetch(self, it):
        """next(it), its wait counted as load."""
        t0 = time.perf_counter()
        batch = next(it)
        if self.measuring:
            self.ms["load"] += (time.perf_counter() - t0) * 1e3
        return batch

    @contextmanager
    def part(self):
        """A piece of compute on the CPU (forward, backward, optimizer step); nothing on a GPU, where
        the kernels are the compute."""
        if self.cuda or not self.measuring:
            yield
            return
        t0 = time.perf_counter()
        yield
        self.ms["compute_parts"] += (time.perf_counter() - t0) * 1e3

    @contextmanager
    def phase(self, name: str):
        """transfer or compute_window: an event pair on a GPU, the host clock on the CPU."""
        if self.cuda:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            t0 = time.perf_counter()
            yield
            if name == "compute_window":  # how long the host takes to queue a step's work: sizes the sleep
                self.host_call_ms = (time.perf_counter() - t0) * 1e3
            e1.record()
            if self.measuring:
                self.events.append((name, e0, e1))
        else:
            t0 = time.perf_counter()
            yield
            if self.measuring:
                self.ms[name] += (time.perf_counter() - t0) * 1e3

    def step_end(self) -> None:
        """After the step's synchronising call: the step's wall time ends here."""
        now = time.perf_counter()
        if self.measuring:
            self.wall_ms += (now - self.last_end) * 1e3
        self.last_end = now
        self.steps += 1

    # ---- the GPU time of host-paced work -------------------------------------------------------
    def _cycles_per_ms(self) -> float:
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)  # the sleep kernel's module loaded before it is timed
        e0.record()
        torch.cuda._sleep(5_000_000)
        e1.record()
        e1.synchronize()
        return 5_000_000 / e0.elapsed_time(e1)

    def _behind_sleep(self, fn, host_ms: float) -> tuple[float, bool, float]:
        """fn's GPU time with its work queued behind a sleep kernel long enough for the host to queue
        all of it (3x host_ms, what fn took the host unpaced): the GPU then runs it back to back.
        Returns (GPU ms, ok, the host's ms to queue fn); ok: the sleep was still running when the host
        had queued everything, so no kernel waited for the host."""
        torch.cuda.synchronize()
        torch.cuda._sleep(int(self._cycles * min(max(3 * host_ms, 20.0), 2000.0)))
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        t0 = time.perf_counter()
        fn()
        e1.record()
        queued_ms = (time.perf_counter() - t0) * 1e3
        ok = not e0.query()
        e1.synchronize()
        return e0.elapsed_time(e1), ok, queued_ms

    def paced(self, step_fn, reps: int = 3) -> None:
        """Runs step_fn (one training step's GPU work: forward, backward, optimizer; no synchronising
        call) `reps` times paced, each a warm-up step of its own. Call after one ordinary step, whose
        compute phase's host time sizes the sleep."""
        if not self.cuda:
            return
        if self.measuring:
            raise RuntimeError("paced steps belong to the warm-up: call paced() before step `warmup`")
        self._cycles = self._cycles_per_ms()
        for _ in range(reps):
            ms, ok, queued_ms = self._behind_sleep(step_fn, self.host_call_ms)
            self.host_call_ms = max(self.host_call_ms, queued_ms)
            self.paced_ms.append(ms)
            self.paced_ok.append(ok)
            self.step_end()
        one = torch.ones(1, device="cuda")
        n = 200
        ms, ok, _ = self._behind_sleep(lambda: [one.add_(1.0) for _ in range(n)], 5.0)
        self.floor_us = ms * 1e3 / n if ok else None

    # ---- the truth ------------------------------------------------------------------------------
    def truth(self, launches: int | None = None, **extra) -> dict:
        """The measured steps' phases per step and as shares of the step, with their bands."""
        n = max(self.steps - self.warmup, 0)
        ms = dict(self.ms)
        if self.cuda:
            torch.cuda.synchronize()
            for name, e0, e1 in self.events:
                ms[name] += e0.elapsed_time(e1)
        per = {k: v / n if n else 0.0 for k, v in ms.items()}
        step = self.wall_ms / n if n else 0.0
        window = per["compute_window"]
        if self.cuda and self.paced_ms:
            hi = sorted(self.paced_ms)[len(self.paced_ms) // 2]
            lo = max(hi - launches * self.floor_us / 1e3, 0.0) if launches and self.floor_us else hi
            how = "paced"
        else:
            lo = hi = per["compute_parts"]
            how = "host clock, forward + backward + optimizer step"
        rest = step - per["load"] - per["transfer"]
        out_ms = {"load": per["load"], "transfer": per["transfer"], "compute": hi, "comm": 0.0, "host": rest - hi}
        band_ms = {
            "load": (per["load"],) * 2,
            "transfer": (per["transfer"],) * 2,
            "compute": (lo, hi),
            "comm": (0.0, 0.0),
            "host": (rest - hi, rest - lo),
        }
        share = {k: v / step if step else 0.0 for k, v in out_ms.items()}
        band = {k: [a / step, b / step] if step else [0.0, 0.0] for k, (a, b) in band_ms.items()}
        return {
            "script": self.script,
            "device": "cuda" if self.cuda else "cpu",
            "steps": n,
            "warmup": self.warmup,
            "step_ms": step,
            "ms": out_ms,
            "share": share,
            "band": band,
            "compute_how": how,
            "compute_window_ms": window,
            "compute_paced_ms": list(self.paced_ms),
            "paced_ok": all(self.paced_ok) if self.paced_ok else None,
            "launch_floor_us": self.floor_us,
            "launches": launches,
            **extra,
        }

    def report(self, launches: int | None = None, **extra) -> None:
        print(json.dumps({"truth": self.truth(launches, **extra)}), flush=True)


def common_args(p, steps: int) -> None:
    p.add_argument(
        "--steps", type=int, default=steps, help="the loop's steps (on a GPU 3 paced warm-up steps come on top)"
    )
    p.add_argument("--warmup", type=int, default=5, help="steps left out of the truth (perfcore run's --warmup)")
    p.add_argument("--device", default="auto", help="cuda, cpu or auto (cuda where there is one)")


def trainer(meter: Meter, model, opt, loss_fn):
    """One training step as every script writes it: forward, loss, zero_grad, backward, optimizer step.
    Forward, backward and the step are the compute a CPU run measures (meter.part)."""

    def train(x, *target):
        with meter.part():
            out = model(x)
        loss = loss_fn(out, *target)
        opt.zero_grad(set_to_none=True)
        with meter.part():
            loss.backward()
        with meter.part():
            opt.step()
        return loss

    return train


def train_loop(meter: Meter, steps: int, train, next_batch, to_device=None) -> None:
    """The loop every script runs: the batch (next_batch(step): a fetch from a loader, or a tensor
    already on the device), its copy (to_device, timed as transfer), the step, the loss logged (the
    synchronising call that ends the step). Step 1's batch is also the paced steps' (meter.paced)."""
    batch = None
    for step in range(steps):
        if step == 1:
            meter.paced(lambda: train(*batch))
        batch = next_batch(step)
        if to_device is not None:
            with meter.phase("transfer"):
                batch = to_device(batch)
        with meter.phase("compute_window"):
            loss = train(*batch)
        loss.item()
        meter.step_end()
