"""Per-step peak GPU memory without wiping the user's own peak-memory statistics.

torch's caching allocator keeps one peak per statistic since the last
torch.cuda.reset_peak_memory_stats(); reading a per-step peak means resetting it every step,
which would also reset the peak a user's script reads (max_memory_allocated() for its own logs).
So while installed, perfcore keeps, per device, the highest value of every ".peak" statistic it
reset since the user last reset theirs, and torch.cuda.memory_stats() (hence
max_memory_allocated() and max_memory_reserved(), which read it) reports the larger of that and
the allocator's own: the user sees the peaks they would have seen without perfcore. A
reset_peak_memory_stats() by the user clears what perfcore kept for that device.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["PeakMemory"]

_PEAK = ".peak"
_STAT = "allocated_bytes.all.peak"


class PeakMemory:
    """step_peak() -> bytes allocated at most since the last step_peak() (on `device`)."""

    def __init__(self, device: int | None = None, cuda: Any = None, cuda_memory: Any = None):
        if cuda is None:
            import torch

            cuda, cuda_memory = torch.cuda, torch.cuda.memory
        self._cuda, self._mem = cuda, cuda_memory
        self.device = device
        self._held: dict[int, dict[str, int]] = {}  # device -> peaks perfcore reset away
        self._orig: dict[str, Callable] = {}
        self.installed = False

    def _index(self, device: Any) -> int:
        if device is None:
            return int(self._cuda.current_device())
        if isinstance(device, int):
            return device
        idx = getattr(device, "index", None)
        if idx is not None:
            return int(idx)
        if isinstance(device, str) and ":" in device:
            return int(device.split(":")[1])
        return int(self._cuda.current_device())

    # -- the user's view --------------------------------------------------------------------
    def _memory_stats(self, device: Any = None) -> dict[str, Any]:
        stats = self._orig["memory_stats"](device=device)
        held = self._held.get(self._index(device))
        if held:
            stats = dict(stats)
            for k, v in held.items():
                if stats.get(k, 0) < v:
                    stats[k] = v
        return stats

    def _reset_peak_memory_stats(self, device: Any = None) -> None:
        self._held.pop(self._index(device), None)
        self._orig["reset_peak_memory_stats"](device=device)

    # -- perfcore's side --------------------------------------------------------------------
    def install(self) -> "PeakMemory":
        if self.installed:
            return self
        for name in ("memory_stats", "reset_peak_memory_stats"):
            self._orig[name] = getattr(self._mem, name)
        patched = {"memory_stats": self._memory_stats, "reset_peak_memory_stats": self._reset_peak_memory_stats}
        for mod in (self._mem, self._cuda):
            for name, fn in patched.items():
                if getattr(mod, name, None) is self._orig[name]:
                    setattr(mod, name, fn)
        self.installed = True
        return self

    def uninstall(self) -> None:
        if not self.installed:
            return
        for mod in (self._mem, self._cuda):
            for name, orig in self._orig.items():
                if getattr(mod, name, None) in (self._memory_stats, self._reset_peak_memory_stats):
                    setattr(mod, name, orig)
        self.installed = False

    def step_peak(self) -> int:
        """The allocator's peak since the last call, then reset, keeping the user's view whole."""
        if not self.installed:
            self.install()
        dev = self._index(self.device)
        stats = self._orig["memory_stats"](device=dev)
        held = self._held.setdefault(dev, {})
        for k, v in stats.items():
            if k.endswith(_PEAK) and isinstance(v, int) and v > held.get(k, 0):
                held[k] = v
        self._orig["reset_peak_memory_stats"](device=dev)
        return int(stats.get(_STAT, 0))
