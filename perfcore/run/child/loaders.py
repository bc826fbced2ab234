"""Every DataLoader the script makes: where (the user's file:line), with which settings, how many
batches it gave, and how long each epoch waited for its workers to start (worker start-up)."""
from __future__ import annotations

import glob
import os
from typing import Any

__all__ = ["Loaders"]

SETTINGS = ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers", "batch_size")


class Loaders:
    def __init__(self, now_ns) -> None:
        self.now_ns = now_ns
        self.records: list[dict[str, Any]] = []
        self._by_loader: dict[int, dict[str, Any]] = {}
        self._by_dataset: dict[int, int] = {}  # id(dataset) -> loader index (a forked worker shares the ids)

    def made(self, loader, site: str) -> None:
        rec: dict[str, Any] = {"site": site, **{k: getattr(loader, k, None) for k in SETTINGS},
                               "worker_startup_ms": [], "batches": 0, "worker_batch_ms": None,
                               "training": False, "_yielded": 0, "_it": None, "_t_iter": None}
        if not rec["num_workers"]:
            rec["prefetch_factor"] = None  # torch keeps a default that no worker uses
        self._by_loader[id(loader)] = rec
        self._by_dataset[id(loader.dataset)] = len(self.records)
        self.records.append(rec)

    def index_of_dataset(self, dataset) -> int:
        return self._by_dataset.get(id(dataset), -1)

    def epoch_started(self, loader, t0: int, grad_enabled: bool) -> dict[str, Any] | None:
        rec = self._by_loader.get(id(loader))
        if rec is None:
            return None
        self._count(rec)  # a persistent iterator is reset in place: count its batches first
        rec["training"] = rec["training"] or grad_enabled
        rec["_t_iter"] = t0
        return rec

    def watch_first_batch(self, it, rec: dict[str, Any]) -> None:
        """Times iter() -> first batch of this epoch (worker start-up when there are workers)."""
        rec["_it"] = it
        rec["_yielded"] = getattr(it, "_num_yielded", 0)
        if not rec["num_workers"] or not hasattr(it, "_next_data"):
            return
        orig = it._next_data
        now = self.now_ns

        def first_batch():
            # One call per epoch: the instance attribute goes away after it, back to the class's.
            it.__dict__.pop("_next_data", None)
            data = orig()
            rec["worker_startup_ms"].append((now() - rec["_t_iter"]) / 1e6)
            return data

        it._next_data = first_batch

    def _count(self, rec: dict[str, Any]) -> None:
        it = rec["_it"]
        if it is not None:
            rec["batches"] += max(0, getattr(it, "_num_yielded", 0) - rec["_yielded"])
            rec["_yielded"] = getattr(it, "_num_yielded", 0)

    def training_batches(self) -> int:
        for rec in self.records:
            self._count(rec)
        return sum(r["batches"] for r in self.records if r["training"])

    def summary(self, workers_dir) -> list[dict[str, Any]]:
        """The loaders as written to run.json (worker time per batch from the workers' files)."""
        per_loader = _worker_batch_ms(workers_dir)
        out = []
        for i, rec in enumerate(self.records):
            self._count(rec)
            doc = {k: v for k, v in rec.items() if not k.startswith("_")}
            doc["worker_batch_ms"] = per_loader.get(i)
            starts = doc["worker_startup_ms"]
            if rec["num_workers"] and not rec["persistent_workers"] and len(starts) > 1:
                # Every epoch after the first starts its workers again; kept alive, an epoch would
                # still wait about one batch's making for its first batch.
                per_batch = doc["worker_batch_ms"] or 0.0
                doc["persistent_workers_would_save_ms"] = float(sum(max(0.0, s - per_batch) for s in starts[1:]))
            out.append(doc)
        return out


def _worker_batch_ms(workers_dir) -> dict[int, float]:
    """Mean time a worker took per batch, per loader index (files workers/<pid>.L<index>.csv)."""
    sums: dict[int, list[float]] = {}
    for f in glob.glob(os.path.join(str(workers_dir), "*.L*.csv")):
        try:
            idx = int(f.rsplit(".L", 1)[1].split(".")[0])
            with open(f) as fh:
                for line in fh:
                    cols = line.split(",")
                    if len(cols) >= 4:
                        a = sums.setdefault(idx, [0.0, 0])
                        a[0] += (int(cols[3]) - int(cols[2])) / 1e6
                        a[1] += 1
        except (OSError, ValueError):
            continue
    return {i: s / n for i, (s, n) in sums.items() if n}
