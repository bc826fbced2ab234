"""Every DataLoader the script makes: where (the user's file:line), with which settings, how many
batches it gave, and how long each epoch waited for its workers to start (worker start-up)."""

from __future__ import annotations

import glob
import os
import sys
import weakref
from typing import Any

__all__ = ["Loaders", "call_site", "fetch_cost_ns"]

# perfcore's own code, by where the package lies (a user's checkout in a folder named perfcore is
# still the user's code). capture.line_sampler.OWN_DIR is the same folder; not imported from there, since
# this module loads at boot, before the script's interpreter is known to have numpy.
_PERFCORE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "")


_LIBRARY_DIRS: tuple[str, ...] | None = None


def call_site(depth: int = 2) -> tuple[str, bool]:
    """file:line of the first caller in the user's own code (outside perfcore, torch and installed
    libraries: the user's train_dataloader, not Lightning's or timm's loader code), a library's
    frame only when no user frame calls it; and whether a library's frame came first (the call
    was made inside a library)."""
    global _LIBRARY_DIRS
    if _LIBRARY_DIRS is None:
        from perfcore.capture.line_sampler import library_prefixes

        _LIBRARY_DIRS = library_prefixes()
    f = sys._getframe(depth)
    library = None
    while f is not None:
        name = f.f_code.co_filename
        if name.startswith("<"):  # a notebook cell or `python -c` is the user's; frozen importlib is not
            if not name.startswith("<frozen "):
                return f"{name}:{f.f_lineno}", library is not None
            f = f.f_back
            continue
        path = os.path.realpath(name)
        if not path.startswith(_PERFCORE_DIR) and f"{os.sep}torch{os.sep}" not in path:
            if not path.startswith(_LIBRARY_DIRS):
                return f"{_shown_path(path)}:{f.f_lineno}", library is not None
            library = library or f"{_shown_path(path)}:{f.f_lineno}"
        f = f.f_back
    return library or "?", library is not None


def _shown_path(path: str) -> str:
    """A file as the user would open it: relative to the working directory when it lies under it,
    else in full (a bare file name is ambiguous across a project, or a library's many loader.py)."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if rel.startswith(os.pardir + os.sep) or rel == os.pardir else rel


SETTINGS = ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers", "batch_size")

# An epoch whose batches kept coming with grad on and the model in train mode, yet with no step
# between this many of them, is an evaluation pass written without no_grad or model.eval().
NO_STEP_BATCHES = 3
# Distinct loader entries a run keeps (sites x settings); a loop making loaders without end stays bounded.
MAX_LOADERS = 64


class Loaders:
    """loop(): (training, steps): whether the loop trains now (grad enabled, no model.eval() pass
    open) and the steps it has made so far (optimizer steps, backward ends). It tells each
    loader's role, train or eval, by what happens around its batches; None: grad mode at iter()."""

    def __init__(self, now_ns, loop=None, on_eval=None) -> None:
        self.now_ns = now_ns
        self.loop = loop
        # on_eval(t0, t1): an epoch of a loader that never trained, whose batches came with grad on
        # and no step between them while another loader trains (a test() without eval() or no_grad).
        self.on_eval = on_eval
        self.records: list[dict[str, Any]] = []
        # Each live loader's entry (weak: a loader made every step is let go with its step), and each
        # live loader's dataset by id (a forked worker shares the ids; a dataset may be a plain list).
        self._by_loader: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._by_dataset: dict[int, int] = {}
        self._by_key: dict[tuple, int] = {}  # (site, settings) -> loader index

    def made(self, loader, site: str, in_library: bool = False) -> None:
        """A new DataLoader, made at `site`; in_library: the call came from inside a library."""
        earlier = self._earlier(loader.dataset)
        settings = {k: getattr(loader, k, None) for k in SETTINGS}
        if not settings["num_workers"]:
            settings["prefetch_factor"] = None  # torch keeps a default that no worker uses
        if in_library and earlier is not None:
            # A library re-making a loader over the same dataset (Lightning adding a distributed
            # sampler, accelerate's shard of the HF Trainer's): still the one the user made, where they
            # made it, one entry with the settings of the loader that gives the batches (a batch
            # sampler leaves batch_size None: the user's stays).
            rec = self.records[earlier]
            site = rec["site"]
            settings = {k: rec[k] if v is None and k == "batch_size" else v for k, v in settings.items()}
            rec.update(settings)
        # The dataset tells a trainer's loaders apart: the HF Trainer makes its train and eval loaders on
        # one line with one set of settings. Its class and length, not its id: a loop that wraps new data
        # of one shape every step still makes one loader.
        shape = _dataset_shape(loader.dataset)
        key = (site, *(repr(settings[k]) for k in SETTINGS), shape)
        if in_library and earlier is not None:
            self._by_key[key] = earlier
        # A loop that makes a loader every step (next(iter(DataLoader(...)))) makes one loader, many
        # times: one entry per site and settings, counted, so the list stays as long as the code.
        # Past MAX_LOADERS entries, new ones join their site's first entry, or the last.
        index = self._by_key.get(key)
        if index is None and len(self.records) >= MAX_LOADERS:
            index = next((i for i, r in enumerate(self.records) if r["site"] == site), len(self.records) - 1)
            self.records[index]["folded"] = self.records[index].get("folded", 0) + 1
        if index is not None:
            rec = self.records[index]
            self._count(rec)
            rec["made"] += 1
        else:
            index = len(self.records)
            rec = {
                "site": site,
                **settings,
                # The dataset's class says whether items are decoded images (ImageFolder) or arrays
                # already in memory (MNIST, TensorDataset): decoder advice only fits the first.
                "dataset": shape[0],
                "made": 1,
                "worker_startup_ms": [],
                "batches": 0,
                "_batches": {"train": 0, "eval": 0},  # by the role of the epoch that drew them
                "worker_batch_ms": None,
                "role": None,
                "training": False,
                "_yielded": 0,
                "_it": None,
                "_t_iter": None,
                "_epoch": None,
                "_epochs": {"train": 0, "eval": 0},
            }
            self._by_key[key] = index
            self.records.append(rec)
        try:
            self._by_loader[loader] = index
        except TypeError:  # a loader class that refuses weak references: its epochs go unwatched
            pass
        if len(self._by_dataset) >= 4 * MAX_LOADERS:  # most of them belong to loaders long gone
            self._by_dataset = {id(ld.dataset): i for ld, i in self._by_loader.items()}
        self._by_dataset[id(loader.dataset)] = index

    def _earlier(self, dataset) -> int | None:
        """The entry of a live loader over this very dataset (an id alone may be a dead dataset's, reused:
        the HF Trainer makes a new dataset for each loader it makes)."""
        index = self._by_dataset.get(id(dataset))
        if index is None:
            return None
        live = any(i == index and ld.dataset is dataset for ld, i in list(self._by_loader.items()))
        return index if live else None

    def index_of_dataset(self, dataset) -> int:
        return self._by_dataset.get(id(dataset), -1)

    def epoch_started(self, loader, t0: int, grad_enabled: bool) -> dict[str, Any] | None:
        try:
            index = self._by_loader.get(loader)
        except TypeError:
            index = None
        if index is None:
            return None
        rec = self.records[index]
        self._count(rec)  # a persistent iterator is reset in place: count its batches first
        self._close_epoch(rec)
        # [role or None, steps at its first batch, batches seen]; under no_grad it is evaluation.
        rec["_epoch"] = ["eval" if not grad_enabled else None, None, 0]
        if self.loop is None and grad_enabled:
            rec["_epoch"][0] = "train"
        rec["_t_iter"] = t0
        return rec

    def _epoch_role(self, ep, rec: dict[str, Any] | None = None) -> str | None:
        """An epoch's role when its batches told it, else train (grad on, train mode), but eval in a run
        that steps when many batches came with no step between them, or when no step came after its
        first batch at all from a loader that never trained (`next(iter(test_loader))` after training,
        as forward-forward does); None before any batch."""
        if ep is None or (ep[0] is None and ep[2] == 0):
            return None
        if ep[0] is None:
            steps = self.loop()[1]
            after = rec is not None and steps == ep[1] and not rec["_epochs"]["train"]
            return "eval" if steps > 0 and (ep[2] >= NO_STEP_BATCHES or after) else "train"
        return ep[0]

    def _close_epoch(self, rec: dict[str, Any]) -> None:
        role = self._epoch_role(rec["_epoch"], rec)
        rec["_epoch"] = None
        if role is not None:
            rec["_epochs"][role] += 1
        self._set_role(rec)

    def _set_role(self, rec: dict[str, Any]) -> None:
        """Train when any epoch trained, else eval when any evaluated (the epoch under way counts)."""
        now = self._epoch_role(rec["_epoch"], rec)
        votes = {r: n + (now == r) for r, n in rec["_epochs"].items()}
        rec["role"] = "train" if votes["train"] else "eval" if votes["eval"] else None
        rec["training"] = rec["role"] == "train"

    def watch_first_batch(self, it, rec: dict[str, Any]) -> None:
        """Times iter() -> first batch of this epoch (worker start-up when there are workers), and
        watches the epoch's first batches until they tell its role: one call each, then the instance
        attribute goes away, back to the class's."""
        rec["_it"] = it
        rec["_yielded"] = getattr(it, "_num_yielded", 0)
        if not hasattr(it, "_next_data"):
            return
        vars(it).pop("_next_data", None)  # a persistent iterator may still hold last epoch's
        ep = rec["_epoch"]
        startup = [bool(rec["num_workers"])]
        if not startup[0] and ep[0] is not None:
            return
        # Weakly held, and the class's function rather than a bound method: an iterator the loop lets go
        # (a `break`) is freed at once, which ends an evaluation pass there.
        ref, orig_next, now, loop = weakref.ref(it), type(it)._next_data, self.now_ns, self.loop
        passing = [None]  # the evaluation pass this epoch is, once its batches tell it: its end, once

        def next_data():
            target = ref()
            if ep[0] is None:
                training, steps = loop()
                if not training:
                    ep[0] = "eval"
                elif ep[1] is None:
                    ep[1] = steps
                elif steps > ep[1]:
                    ep[0] = "train"  # a step between two of its batches
                ep[2] += 1
                if ep[0] is None and self._evaluates(rec, ep, steps):
                    ep[0] = "eval"
                    self._count(rec)  # its batches from here are counted below: the entry lets it go
                    rec["_it"] = None
                    passing[0] = self._pass(target, rec["_t_iter"])
            try:
                data = orig_next(target)
            except StopIteration:
                if passing[0] is not None:
                    passing[0]()
                raise
            if startup[0]:
                startup[0] = False
                rec["worker_startup_ms"].append((now() - rec["_t_iter"]) / 1e6)
            if passing[0] is not None:
                rec["_batches"]["eval"] += 1
            elif ep[0] is not None:
                vars(target).pop("_next_data", None)
            return data

        it._next_data = next_data

    def _evaluates(self, rec: dict[str, Any], ep, steps: int) -> bool:
        """This epoch, under way, is an evaluation pass: NO_STEP_BATCHES batches and no step between them,
        from a loader that never trained, while another one has (so a training loader's gradient
        accumulation, or its first epoch, is never taken for one)."""
        return (
            self.on_eval is not None
            and ep[2] >= NO_STEP_BATCHES
            and steps == ep[1]
            and steps > 0
            and not rec["_epochs"]["train"]
            and any(
                r["_epochs"]["train"] or self._epoch_role(r["_epoch"], r) == "train"
                for r in self.records
                if r is not rec
            )
        )

    def _pass(self, it, t0: int):
        """The evaluation pass from iter() at t0; it ends when the epoch does, or when the loop lets its
        iterator go (a `break` after some batches): whichever comes first."""
        done = []

        def end() -> None:
            if not done:
                done.append(True)
                self.on_eval(t0, self.now_ns())

        weakref.finalize(it, end).atexit = False  # an iterator alive at exit: the run's end closes nothing
        return end

    def _count(self, rec: dict[str, Any]) -> None:
        """Adds the batches the current iterator gave since the last count to its epoch's role (a train
        loader may also serve an evaluation pass: its batches are no training batches)."""
        it = rec["_it"]
        if it is not None:
            role = self._epoch_role(rec["_epoch"], rec) or rec["role"] or "train"
            rec["_batches"][role] += max(0, getattr(it, "_num_yielded", 0) - rec["_yielded"])
            rec["_yielded"] = getattr(it, "_num_yielded", 0)
        rec["batches"] = rec["_batches"]["train"] + rec["_batches"]["eval"]

    def training_batches(self) -> int:
        for rec in self.records:
            self._count(rec)
        return sum(r["_batches"]["train"] for r in self.records)

    def main_process_batches(self) -> int:
        """Batches made in this process (num_workers=0): each went through the fetch wrapper on the
        training thread."""
        for rec in self.records:
            self._count(rec)
        return sum(r["batches"] for r in self.records if not r["num_workers"])

    def summary(self, workers_dir) -> list[dict[str, Any]]:
        """The loaders as written to run.json: role, site, settings and each one's own figures (time
        to make a batch from the workers' files, or the main process's with num_workers=0)."""
        per_loader = _worker_batch_ms(workers_dir)
        out = []
        for i, rec in enumerate(self.records):
            self._count(rec)
            self._set_role(rec)
            doc = {k: v for k, v in rec.items() if not k.startswith("_")}
            # `batches`: those of its role; a train loader that an evaluation also drew from says how many apart.
            doc["batches"] = rec["_batches"]["eval" if rec["role"] == "eval" else "train"]
            if rec["role"] != "eval" and rec["_batches"]["eval"]:
                doc["eval_batches"] = rec["_batches"]["eval"]
            doc["worker_batch_ms"] = per_loader.get(i)
            starts = doc["worker_startup_ms"]
            if rec["num_workers"] and not rec["persistent_workers"] and len(starts) > 1:
                # Every epoch after the first starts its workers again; kept alive, an epoch would
                # still wait about one batch's making for its first batch.
                per_batch = doc["worker_batch_ms"] or 0.0
                doc["persistent_workers_would_save_ms"] = float(sum(max(0.0, s - per_batch) for s in starts[1:]))
            out.append(doc)
        return out


def _dataset_shape(dataset) -> tuple[str, int | None]:
    """A dataset's class and length (None: an iterable dataset, or a __len__ that fails)."""
    try:
        n = len(dataset)
    except Exception:  # the user's __len__: whatever it raises stays out of their DataLoader(...)
        n = None
    ds = type(dataset)
    return f"{ds.__module__}.{ds.__qualname__}", n if isinstance(n, int) else None


def fetch_cost_ns() -> float:
    """What the main process's fetch wrapper (run.child.batches.timed_fetch, with its timed collate) adds
    to one batch on this machine now, as a loop pays it: each fetch right after a small training step
    (recording.phase_cost: once a step, its code is out of the caches), wrapped against bare, around a
    fetch that does nothing. ~2 us on the 2-core VM, where back to back it costs ~0.6 us."""
    import time
    from types import SimpleNamespace

    from perfcore.recording.phase_cost import added_cost_ns
    from perfcore.run.child.batches import BatchLines, timed_fetch

    lines = BatchLines(None)
    inst = SimpleNamespace(
        now_ns=time.perf_counter_ns, batch_lines=lines, loaders=Loaders(time.perf_counter_ns), timer=True
    )

    def fetch(fetcher, index):
        return fetcher.collate_fn(index)

    # Two fetchers: the wrapper times its fetcher's collate_fn in place (a TimedCollate), the bare one's stays plain.
    fetcher, bare = (SimpleNamespace(collate_fn=list, dataset=(), auto_collation=True) for _ in range(2))
    wrapped, index = timed_fetch(inst, fetch), [0]
    try:
        return added_cost_ns(lambda: wrapped(fetcher, index), lambda: fetch(bare, index))
    finally:
        lines.main_fetches.clear()


def _worker_batch_ms(workers_dir) -> dict[int, float]:
    """Mean time a worker (or the main process) took per batch, per loader index (files
    workers/<pid>.L<index>.csv and <pid>-main.L<index>.csv)."""
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
