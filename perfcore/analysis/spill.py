"""Columns: settled per-step int64 columns whose full blocks spill to an anonymous temporary file, so a
recording holds one block per column however many steps it settles (the StepStore's rows, `perfcore
run`'s memory samples)."""

from __future__ import annotations

import os

import numpy as np

__all__ = ["Columns", "BLOCK_ROWS"]

BLOCK_ROWS = 16384  # rows per block of a settled column (128 KiB of int64)


class Columns:
    """Settled per-step columns of int64. The newest rows sit in one block per column; each full
    block goes to an anonymous temporary file (the OS removes it when the process ends), so memory
    holds one block per column however many steps are settled, and reading a column back (at the
    end, or a checkpoint's new rows) costs a read of its blocks. Where no temporary file can be
    made or written (no writable temp dir, a full disk) the blocks stay in memory instead. A column
    first seen late (a custom phase used from step 5000 on) reads 0 for the earlier rows."""

    def __init__(self) -> None:
        self.tail: dict[str, np.ndarray] = {}  # name -> the block being filled
        self.spilled: dict[str, dict[int, int | np.ndarray]] = {}  # name -> block -> file offset, or the block
        self.n = 0
        self._file = None
        self._end = 0  # bytes written to the file
        self.spill_error: str | None = None

    @property
    def names(self) -> list[str]:
        return list(self.tail)

    def append(self, values: dict[str, np.ndarray], k: int) -> None:
        for name in values:
            if name not in self.tail:
                self.tail[name] = np.zeros(BLOCK_ROWS, dtype=np.int64)
                self.spilled[name] = {}
        i = 0
        while i < k:
            b, off = divmod(self.n, BLOCK_ROWS)
            take = min(k - i, BLOCK_ROWS - off)
            for name, block in self.tail.items():
                v = values.get(name)
                block[off : off + take] = v[i : i + take] if v is not None else 0
            self.n, i = self.n + take, i + take
            if off + take == BLOCK_ROWS:
                for name, block in self.tail.items():
                    self.spilled[name][b] = self._spill(block)
                    self.tail[name] = np.zeros(BLOCK_ROWS, dtype=np.int64)

    def _spill(self, block: np.ndarray) -> int | np.ndarray:
        if self.spill_error is None:
            try:
                if self._file is None:
                    import tempfile

                    self._file = tempfile.TemporaryFile(prefix="perfcore-steps-")
                # Positional writes: a forked child sharing the descriptor moves no offset of ours.
                if os.pwrite(self._file.fileno(), block, self._end) != block.nbytes:
                    raise OSError("short write")
                at, self._end = self._end, self._end + block.nbytes
                return at
            except OSError as e:
                self.spill_error = f"{type(e).__name__}: {e}"
        return block.copy()

    def _block(self, name: str, b: int) -> np.ndarray:
        where = self.spilled.get(name, {}).get(b)
        if where is None:  # the column did not exist yet
            return np.zeros(BLOCK_ROWS, dtype=np.int64)
        if isinstance(where, np.ndarray):
            return where
        raw = os.pread(self._file.fileno(), BLOCK_ROWS * 8, where)
        return np.frombuffer(raw, dtype=np.int64)

    def column(self, name: str, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Rows [start, stop) of a column (stop: n by default; zeros for a column never seen)."""
        stop = self.n if stop is None else min(max(stop, 0), self.n)
        start = min(max(start, 0), stop)
        out = np.zeros(stop - start, dtype=np.int64)  # filled block by block: the column once, not twice
        last = self.n // BLOCK_ROWS
        for b in range(start // BLOCK_ROWS, (stop - 1) // BLOCK_ROWS + 1 if stop > start else 0):
            block = self._block(name, b) if b < last else self.tail.get(name)
            if block is None:
                continue  # a column first seen later: zeros
            lo, hi = max(start, b * BLOCK_ROWS), min(stop, (b + 1) * BLOCK_ROWS)
            out[lo - start : hi - start] = block[lo - b * BLOCK_ROWS : hi - b * BLOCK_ROWS]
        return out
