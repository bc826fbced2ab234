"""The row every gpu_check check returns: what was measured, the value that passes and the claim it decides."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Row:
    check: str
    measured: str
    target: str  # the value that passes, in words, with the claim it decides
    ok: bool
    decides: bool = True  # False: the machine, not perfcore, makes it true (shown INFO/SKIP)
    skipped: bool = False  # a deciding row that did not run (the budget): decides nothing, passes nothing
    folder: str | None = None  # the run folder behind a product row, kept under --keep-failed when it fails

    @property
    def verdict(self) -> str:
        if self.skipped:
            return "SKIP"
        if not self.decides:
            return "INFO" if self.ok else "SKIP"
        return "PASS" if self.ok else "FAIL"


def within(a: float, b: float, rel: float) -> bool:
    return abs(a - b) <= rel * abs(b)
