"""When a recording settles its steps into rows: a schedule on the step ends' own clock."""

from __future__ import annotations

__all__ = ["SettleSchedule", "COMPACT_MIN_S", "COMPACT_MAX", "FIRST_COMPACT_S"]

COMPACT_MIN_S = 2.0  # settle at most every 2 s, so settling costs under 1% of the run,
# ... but always by this many steps, which bounds the raw intervals held (and settling's peak). A pass costs
# mostly a fixed ~25-50 ms of pandas work whatever its length (16384 rows cost what 4096 do: bench/RESULTS.md),
# so a fast loop's passes are made long: at 4096 a 0.25 ms step paid ~10 us a step for settling.
COMPACT_MAX = 16384
# The first settle still comes by 4096 steps: a fast loop killed seconds in keeps settled rows in its checkpoint.
FIRST_COMPACT_MAX = 4096
# The first settle waits longer: a run that ends before it never builds a table in its own process
# (perfcore run's parent settles it; the script never imports pandas), and one that runs on pays
# pandas' import (~0.3 s, own work) once at least this far in.
FIRST_COMPACT_S = 10.0


class SettleSchedule:
    """When upkeep settles, on the step ends' own clock: at least COMPACT_MIN_S apart (FIRST_COMPACT_S
    before the first settle), and always once COMPACT_MAX steps wait (FIRST_COMPACT_MAX before the first),
    which bounds the raw intervals held."""

    def __init__(self, start_ns: int) -> None:
        self.last_ns = start_ns  # the step end the latest settle was decided at

    def due(self, t_ns: int, waiting: int, settled_any: bool) -> bool:
        """Whether to settle at step end t_ns with `waiting` steps unsettled; a yes starts the next wait."""
        wait_s, most = (COMPACT_MIN_S, COMPACT_MAX) if settled_any else (FIRST_COMPACT_S, FIRST_COMPACT_MAX)
        if t_ns - self.last_ns >= wait_s * 1e9 or waiting >= most:
            self.last_ns = t_ns
            return True
        return False

    def make_due(self) -> None:
        """The next upkeep settles, however short the time since the last (for a caller that wants the
        rows now: tests, which would otherwise wait out the interval)."""
        self.last_ns = -(1 << 62)
