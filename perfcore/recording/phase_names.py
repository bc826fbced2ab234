"""The custom phase names of a Recording, bounded: each distinct name is a column kept for every step
(steps.csv, the summary table), so names made per step (f"step{i}") would grow the recording with
the run. Names past MAX_PHASE_NAMES share one phase per label: "other_phases" for host,
"other_<label>_phases" for the others."""
from __future__ import annotations

import warnings

from perfcore.errors import UsageError

__all__ = ["MAX_PHASE_NAMES", "RESERVED", "declare", "shared_scope", "check_name"]

MAX_PHASE_NAMES = 512
# Names whose <name>_ms column is one perfcore writes in every steps table (a phase "wall" replaced
# the step's wall time; "perfcore" was taken out of the step as perfcore's own work), or that it
# gives to names past the limit.
RESERVED = frozenset({"step", "wall", "warmup", "perfcore", "start", "mem", "evaluation", "host", "load", "transfer",
                      "compute", "comm", "other_phases", "other_compute_phases", "other_transfer_phases",
                      "other_comm_phases", "other_load_phases"})


def check_name(name: str) -> None:
    """A custom phase name must name a column of its own: not one perfcore writes, nor another
    phase's GPU column (<name>_gpu_ms), nor an internal one; UsageError, one line, otherwise."""
    text = str(name)
    if text in RESERVED or text.startswith(("_", "monitor_")) or text.endswith("_gpu") or not text.strip():
        raise UsageError(f"phase name {text[:60]!r} is reserved: perfcore's steps table has a column of that name "
                         "(or it is empty); choose another name, such as 'augment' or 'decode'")


def declare(engine, name: str, label: str):
    """The scope of a custom phase not declared yet: its own id, or past the limit the shared one."""
    check_name(name)
    with engine._lock:
        scope = engine._scopes.get(name)  # declared by another thread meanwhile
        if scope is not None:
            return scope
        if engine._custom >= MAX_PHASE_NAMES:
            return shared_scope(engine, name, label)
        pid = engine._store.first_custom + engine._custom
        engine._custom += 1
        engine._names[pid] = name
        engine._labels[pid] = label
        return engine.make_scope(name, pid, label)


def shared_scope(engine, name: str, label: str):
    """The scope every name past MAX_PHASE_NAMES with this label shares (under the engine's lock): its
    time still counts in `label`, and its column sums those names, a name nested in another once.
    Said once per recording, in a warning and a note, never raised into the loop."""
    scope = engine._others.get(label)
    if scope is not None:
        return scope
    other = "other_phases" if label == "host" else f"other_{label}_phases"
    if not engine._others:
        text = (f"more than {MAX_PHASE_NAMES} distinct phase names (the next was {name!r}): each name is a column "
                f"kept for every step, so names past {MAX_PHASE_NAMES} are counted together as {other!r} (their "
                "time stays in its label); use a fixed set of names, e.g. timer.phase('augment') rather than "
                "timer.phase(f'augment{i}') (each step is already a row)")
        engine.notes.append(text)
        try:  # stacklevel 5: the user's `with timer.phase(...)`, through StepTimer.phase, the engine, declare
            warnings.warn(f"perfcore: {text}", RuntimeWarning, stacklevel=5)
        except Warning:  # warnings made errors: the note says it, the loop runs on
            pass
    pid = engine._store.first_custom + MAX_PHASE_NAMES + len(engine._others)
    engine._names[pid] = other
    engine._labels[pid] = label
    engine._store.shared_phase_ids.add(pid)
    scope = engine._others[label] = engine.make_scope(other, pid, label)
    return scope
