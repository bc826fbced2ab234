"""Where batches come from, seen from `perfcore run`: each dataset fetch timed (__getitem__ and
collate_fn) in the worker that made it, one line per batch in <run dir>/workers/; and what a triage run
changes in the script's data loading (DataLoader settings, synthetic data that hands the first batches
out again instead of loading)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from perfcore.run.protocol import WORKERS, worker_file

__all__ = ["timed_fetch", "BatchLines", "LoaderChanges", "TimedCollate"]


def timed_fetch(inst, orig):
    now = inst.now_ns
    lines = inst.batch_lines
    main_fetches = lines.main_fetches

    def fetch(fetcher, index):
        cf = fetcher.collate_fn
        if cf.__class__ is not TimedCollate:
            # Once per iterator: which DataLoader it serves rides along with its batches' lines.
            cf = fetcher.collate_fn = TimedCollate(cf, now, inst.loaders.index_of_dataset(fetcher.dataset))
        t0 = now()
        batch = orig(fetcher, index)
        t1 = now()
        n = len(index) if fetcher.auto_collation and hasattr(index, "__len__") else 1
        if inst.timer is not None:
            # The main process (num_workers=0): kept in memory, no formatting per batch.
            main_fetches.append((t0, t1, cf.last_ns, n, cf.loader))
        else:
            lines.record(inst.run_dir, inst.loaders, t0, t1, cf.last_ns, n, cf.loader)
        return batch

    fetch.__wrapped__ = orig
    return fetch


class BatchLines:
    """One line per batch a DataLoader made: a worker's written at once (workers end with os._exit, so
    nothing may wait for exit); the main process's own fetches (num_workers=0) kept in memory while it
    runs, then one file per DataLoader, as the workers' are, so a train and an eval loader keep their
    figures apart."""

    def __init__(self, rank: int | None) -> None:
        self.rank = rank if rank is not None else -1
        self.main_fetches: list[tuple[int, int, int, int, int]] = []  # (t0, t1, collate, items, loader)
        self.worker_file = None  # this DataLoader worker's file, opened at its first batch

    def record(self, run_dir: Path, loaders, t0: int, t1: int, collate_ns: int, n: int, loader: int = -1) -> None:
        """A batch fetched outside the main process's timer: a worker's line, or (a fetch before the
        timer exists) kept in memory like the main process's."""
        from torch.utils.data import get_worker_info

        info = get_worker_info()
        if info is None:
            self.main_fetches.append((t0, t1, collate_ns, n, loader))
            return
        if self.worker_file is None:
            d = Path(run_dir) / WORKERS
            d.mkdir(parents=True, exist_ok=True)
            # The file name carries which DataLoader this worker serves (a forked worker shares ids).
            self.worker_file = open(
                d / worker_file(os.getpid(), loaders.index_of_dataset(info.dataset)), "a", buffering=1
            )
        self.worker_file.write(
            f"{os.getpid()},{info.id},{t0},{t1},{t1 - t0 - collate_ns},{collate_ns},{n},{self.rank}\n"
        )

    def flush(self, run_dir: Path) -> None:
        """The main process's fetches into their files (at the end)."""
        if not self.main_fetches:
            return
        d = Path(run_dir) / WORKERS
        d.mkdir(parents=True, exist_ok=True)
        pid = os.getpid()
        by_loader: dict[int, list[str]] = {}
        for a, b, c, n, loader in self.main_fetches:
            by_loader.setdefault(loader, []).append(f"{pid},-1,{a},{b},{b - a - c},{c},{n},{self.rank}\n")
        for loader, lines in by_loader.items():
            with open(d / worker_file(pid, loader, main=True), "a") as fh:
                fh.writelines(lines)
        self.main_fetches.clear()  # in place: the fetch hook holds this list


class LoaderChanges:
    """What a triage run changes in the script's data loading, from the child's configuration: DataLoader
    settings (asked, and how many DataLoaders took them) and synthetic data (keep the first K batches,
    then hand them out again instead of loading, for as many batches as the epoch would have had)."""

    def __init__(self, overrides: Mapping[str, Any], synthetic: int) -> None:
        self.asked = dict(overrides)
        self.applied = 0
        self.keep = synthetic
        self.kept: list = []
        self.replayed = 0

    def apply(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """A DataLoader's arguments after dataset, with the asked settings in them."""
        if not self.asked:
            return args, kwargs
        # Positional arguments after dataset are batch_size, shuffle, sampler, ...: each folded in under its
        # name, so that an asked setting replaces it (DataLoader(ds, 8, True) with batch_size asked passed
        # True as the batch size and batch_size twice: a TypeError in the user's script).
        if args:
            from perfcore.analysis.loader_patch import POSITIONAL

            named = dict(zip(POSITIONAL[1:], args))
            kwargs = {**named, **kwargs}
            args = args[len(named) :]
        kwargs.update(self.asked)
        if int(kwargs.get("num_workers", 0) or 0) == 0:
            kwargs.pop("prefetch_factor", None)
            kwargs["persistent_workers"] = False
        self.applied += 1
        return args, kwargs

    def replaying(self, orig_next):
        """A DataLoader iterator's __next__ that replays (when synthetic data was asked for)."""
        if not self.keep:
            return orig_next

        def next_batch(it):
            if len(self.kept) < self.keep:
                batch = orig_next(it)
                self.kept.append(batch)
                return batch
            n = getattr(it, "_perfcore_yielded", it._num_yielded)
            try:
                length = len(it)
            except TypeError:
                length = None
            if length is not None and n >= length:
                raise StopIteration
            it._perfcore_yielded = n + 1
            self.replayed += 1
            return self.kept[self.replayed % len(self.kept)]

        return next_batch

    def facts(self) -> dict[str, Any]:
        return {
            "dataloader_overrides": {"asked": self.asked, "applied": self.applied},
            "synthetic": {"keep": self.keep, "replayed": self.replayed},
        }


class TimedCollate:
    """A DataLoader's collate_fn, timed: the fetch hook reads `last_ns` after each batch."""

    __slots__ = ("fn", "now", "last_ns", "loader")

    def __init__(self, fn, now, loader: int = -1):
        self.fn, self.now, self.last_ns, self.loader = fn, now, 0, loader

    def __call__(self, batch):
        t0 = self.now()
        try:
            return self.fn(batch)
        finally:
            self.last_ns = self.now() - t0

    def __reduce__(self):  # a spawned worker gets the plain function (it installs its own hooks)
        return (_identity, (self.fn,))


def _identity(x):
    return x
