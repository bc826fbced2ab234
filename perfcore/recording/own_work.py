"""perfcore's own work on the training thread, as spans the attribution leaves out of the steps."""

from __future__ import annotations

from typing import Callable

from perfcore.analysis import attribution

__all__ = ["OwnWork"]


class OwnWork:
    """perfcore's own work on the training thread between two step ends (settling, following the
    device, memory samples, a progress file): `with` it, or record(start_ns) a stretch already timed,
    and its time becomes a span the attribution leaves out of the step it falls in, so the user's
    step time and labels never carry it. Nested stretches make one span (the outermost)."""

    __slots__ = ("_rec", "_now", "_depth", "_start_ns")

    def __init__(self, rec, now_ns: Callable[[], int]):
        self._rec, self._now, self._depth, self._start_ns = rec, now_ns, 0, 0

    def __enter__(self) -> "OwnWork":
        if self._depth == 0:
            self._start_ns = self._now()
        self._depth += 1
        return self

    def __exit__(self, *exc) -> bool:
        self._depth -= 1
        if self._depth == 0:
            self._rec.record(attribution.OWN_PHASE_ID, self._start_ns, self._now())
        return False

    def record(self, start_ns: int) -> int:
        """The stretch from start_ns until now (unless inside a `with`, which covers it); its ns."""
        t = self._now()
        if self._depth == 0:
            self._rec.record(attribution.OWN_PHASE_ID, int(start_ns), t)
        return t - int(start_ns)
