"""Where batches come from, seen from `perfcore run`: each dataset fetch timed (__getitem__ and
collate_fn) in the worker that made it, one line per batch in PERFCORE_RUN_DIR/workers/; and the
synthetic mode that hands the first batches out again instead of loading."""
from __future__ import annotations

import os

from perfcore.run.protocol import WORKERS

__all__ = ["timed_fetch", "worker_record", "flush_main_fetches", "replaying", "TimedCollate"]


def timed_fetch(inst, orig):
    now = inst.now_ns
    main_fetches = inst.main_fetches

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
            worker_record(inst, t0, t1, cf.last_ns, n, cf.loader)
        return batch

    fetch.__wrapped__ = orig
    return fetch


def worker_record(inst, t0: int, t1: int, collate_ns: int, n: int, loader: int = -1) -> None:
    """One line per batch from a DataLoader worker, flushed at once (workers end with os._exit,
    so nothing may wait for exit). Outside a worker (a fetch before the timer exists), kept
    in memory like the main process's."""
    from torch.utils.data import get_worker_info

    info = get_worker_info()
    if info is None:
        inst.main_fetches.append((t0, t1, collate_ns, n, loader))
        return
    if inst.worker_file is None:
        d = inst.run_dir / WORKERS
        d.mkdir(parents=True, exist_ok=True)
        # The file name carries which DataLoader this worker serves (a forked worker shares ids).
        inst.worker_file = open(d / f"{os.getpid()}.L{inst.loaders.index_of_dataset(info.dataset)}.csv",
                                 "a", buffering=1)
    inst.worker_file.write(f"{os.getpid()},{info.id},{t0},{t1},{t1 - t0 - collate_ns},{collate_ns},{n},"
                            f"{inst.rank if inst.rank is not None else -1}\n")


def flush_main_fetches(inst) -> None:
    """The main process's own fetches (num_workers=0), kept in memory while it ran: one file per
    DataLoader, as the workers' are, so a train and an eval loader keep their figures apart."""
    if not inst.main_fetches:
        return
    d = inst.run_dir / WORKERS
    d.mkdir(parents=True, exist_ok=True)
    r, pid = inst.rank if inst.rank is not None else -1, os.getpid()
    by_loader: dict[int, list[str]] = {}
    for a, b, c, n, loader in inst.main_fetches:
        by_loader.setdefault(loader, []).append(f"{pid},-1,{a},{b},{b - a - c},{c},{n},{r}\n")
    for loader, lines in by_loader.items():
        with open(d / f"{pid}-main.L{loader}.csv", "a") as fh:
            fh.writelines(lines)
    inst.main_fetches.clear()  # in place: the fetch hook holds this list


def replaying(inst, orig_next):
    """PERFCORE_SYNTHETIC=K: keep the first K batches, then hand them out again instead of
    loading, for as many batches as the epoch would have had (no loading at all)."""

    def next_batch(it):
        if len(inst.replay_kept) < inst.synthetic:
            batch = orig_next(it)
            inst.replay_kept.append(batch)
            return batch
        n = getattr(it, "_perfcore_yielded", it._num_yielded)
        try:
            length = len(it)
        except TypeError:
            length = None
        if length is not None and n >= length:
            raise StopIteration
        it._perfcore_yielded = n + 1
        inst.replayed += 1
        return inst.replay_kept[inst.replayed % len(inst.replay_kept)]

    return next_batch


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
