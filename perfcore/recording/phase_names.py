"""The phase names of a Recording, bounded: each distinct custom name is a column kept for every step
(steps.csv, the summary table), so names made per step (f"step{i}") would grow the recording with
the run. Names past MAX_PHASE_NAMES share one phase per label: "other_phases" for host,
"other_<label>_phases" for the others."""

from __future__ import annotations

import threading
import warnings
from typing import Any, Callable

from perfcore.errors import UsageError

__all__ = ["MAX_PHASE_NAMES", "RESERVED", "PhaseNames", "check_name"]

MAX_PHASE_NAMES = 512
# Names whose <name>_ms column is one perfcore writes in every steps table (a phase "wall" replaced
# the step's wall time; "perfcore" was taken out of the step as perfcore's own work), or that it
# gives to names past the limit.
RESERVED = frozenset(
    {
        "step",
        "wall",
        "warmup",
        "perfcore",
        "start",
        "mem",
        "evaluation",
        "host",
        "load",
        "transfer",
        "compute",
        "comm",
        "other_phases",
        "other_compute_phases",
        "other_transfer_phases",
        "other_comm_phases",
        "other_load_phases",
    }
)


def check_name(name: str) -> None:
    """A custom phase name must name a column of its own: not one perfcore writes, nor another
    phase's GPU column (<name>_gpu_ms), nor an internal one; UsageError, one line, otherwise."""
    text = str(name)
    if text in RESERVED or text.startswith(("_", "monitor_")) or text.endswith("_gpu") or not text.strip():
        raise UsageError(
            f"phase name {text[:60]!r} is reserved: perfcore's steps table has a column of that name "
            "(or it is empty); choose another name, such as 'augment' or 'decode'"
        )


class PhaseNames:
    """Phase id -> name and -> label (`names`, `labels`: read by the store, the tables and the raw part),
    and the native scope of each declared name. make_scope(name, phase_id, label) builds a scope (the
    engine's: it knows the recorder, the events and the tracer)."""

    def __init__(self, names: dict[int, str], labels: dict[int, str], first_custom: int) -> None:
        self.names = names
        self.labels = labels
        self.first_custom = first_custom
        self._scopes: dict[str, Any] = {}
        self._custom = 0  # custom phase names declared (at most MAX_PHASE_NAMES)
        self._others: dict[str, Any] = {}  # label -> the scope the names past that limit share
        self._lock = threading.Lock()

    def scope(self, name: str):
        """The scope of a declared name, or None."""
        return self._scopes.get(name)

    def add(self, name: str, scope):
        self._scopes[name] = scope
        return scope

    def declare(self, name: str, label: str, make_scope: Callable, notes: list[str], shared_ids: set[int]):
        """The scope of a custom phase not declared yet: its own id, or past the limit the shared one
        (whose id goes into shared_ids, the store's)."""
        check_name(name)
        with self._lock:
            scope = self._scopes.get(name)  # declared by another thread meanwhile
            if scope is not None:
                return scope
            if self._custom >= MAX_PHASE_NAMES:
                return self._shared(name, label, make_scope, notes, shared_ids)
            pid = self.first_custom + self._custom
            self._custom += 1
            self.names[pid] = name
            self.labels[pid] = label
            return self.add(name, make_scope(name, pid, label))

    def _shared(self, name: str, label: str, make_scope: Callable, notes: list[str], shared_ids: set[int]):
        """The scope every name past MAX_PHASE_NAMES with this label shares (under the lock): its time
        still counts in `label`, and its column sums those names, a name nested in another once. Said
        once per recording, in a warning and a note, never raised into the loop."""
        scope = self._others.get(label)
        if scope is not None:
            return scope
        other = "other_phases" if label == "host" else f"other_{label}_phases"
        if not self._others:
            text = (
                f"more than {MAX_PHASE_NAMES} distinct phase names (the next was {name!r}): each name is a "
                f"column kept for every step, so names past {MAX_PHASE_NAMES} are counted together as "
                f"{other!r} (their time stays in its label); use a fixed set of names, e.g. "
                "timer.phase('augment') rather than timer.phase(f'augment{i}') (each step is already a row)"
            )
            notes.append(text)
            try:  # stacklevel 5: the user's `with timer.phase(...)`, through StepTimer.phase, the engine, declare
                warnings.warn(f"perfcore: {text}", RuntimeWarning, stacklevel=5)
            except Warning:  # warnings made errors: the note says it, the loop runs on
                pass
        pid = self.first_custom + MAX_PHASE_NAMES + len(self._others)
        self.names[pid] = other
        self.labels[pid] = label
        shared_ids.add(pid)
        scope = self._others[label] = self.add(other, make_scope(other, pid, label))
        return scope
