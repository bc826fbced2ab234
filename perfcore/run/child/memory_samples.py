"""Per-step memory samples of the instrumented process."""

from __future__ import annotations

__all__ = ["MemorySamples", "MemoryWatch"]


class MemorySamples:
    """(step, bytes) memory samples, one a step on a GPU: the newest in two short lists, the rest in
    settled int64 columns (analysis.spill.Columns, spilled to a temporary file), so a million
    steps hold no million Python tuples."""

    FLUSH = 1024

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.values: list[int] = []
        self.columns = None  # made at the first flush: importing numpy is not for the script's start

    def add(self, step: int, value: int) -> None:
        self.steps.append(step)
        self.values.append(value)
        if len(self.steps) >= self.FLUSH:
            self._flush()

    def _flush(self) -> None:
        if not self.steps:
            return
        import numpy as np

        from perfcore.analysis.spill import Columns

        if self.columns is None:
            self.columns = Columns()
        self.columns.append(
            {"step": np.asarray(self.steps, dtype=np.int64), "bytes": np.asarray(self.values, dtype=np.int64)},
            len(self.steps),
        )
        self.steps, self.values = [], []

    def arrays(self):
        """(steps, bytes) as int64 arrays, every sample so far."""
        import numpy as np

        self._flush()
        if self.columns is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return self.columns.column("step"), self.columns.column("bytes")

    def __len__(self) -> int:
        return (self.columns.n if self.columns is not None else 0) + len(self.steps)


class MemoryWatch:
    """This process's memory each step, and how it is read: the CUDA allocator's peak on a GPU (every step:
    two cheap counters; per-step peaks, while the script's own max_memory_allocated() keeps its meaning),
    else the peak RSS so far (every 8th step: one getrusage call, ~8 us after an optimizer step; reading
    /proc/self/statm cost ~11 us a step in a real training process); a leak shows as a peak that keeps
    rising. On CPU the optimizer's clock also spaces those steps at least MIN_GAP_NS apart: a peak that only
    rises needs no finer grid, and on a 0.25 ms step every 8th step cost ~3 us a step of upkeep."""

    MIN_GAP_NS = 20_000_000

    def __init__(self) -> None:
        self.kind = "none"
        self.every = 8
        self.min_gap_ns = self.MIN_GAP_NS
        self.samples = MemorySamples()
        self._read = None

    def start(self, on_gpu: bool) -> None:
        if on_gpu:
            from perfcore.capture.peak_memory import PeakMemory

            peak = PeakMemory().install()
            peak.step_peak()
            self.kind, self.every, self.min_gap_ns, self._read = "cuda_allocated", 1, 0, peak.step_peak
        else:
            import resource

            getrusage, me = resource.getrusage, resource.RUSAGE_SELF
            self.kind, self._read = "peak_rss", lambda: getrusage(me).ru_maxrss * 1024

    def sample(self, step: int) -> None:
        if self._read is not None:
            self.samples.add(step, self._read())
