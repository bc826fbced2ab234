"""Which phase launched each GPU record: CUPTI's correlation ids joined to perfcore's phases.

CUPTI gives every runtime/driver API call a correlation id, and the kernels, copies and memsets
that call starts repeat it. Two ways lead from a correlation id to a phase:

1. External correlation. A phase pushes its id (cuptiActivityPushExternalCorrelationId) on the
   thread that opens it; for each API record made on that thread while it is pushed, CUPTI writes
   an EXTERNAL_CORRELATION record (external id = the phase, correlation id = the call's).
2. The launch's host time. Work launched from a thread where no phase is pushed (autograd's
   device threads run the backward pass while the training thread waits inside `compute`) has
   an API record but no external record; its launch time falls inside the phase open at that
   moment, on whichever thread: the innermost such phase is the launching one.

Records of one launch arrive in different buffers and in any order (API and external records
come in the global host buffer, kernels in per-stream device buffers, completed later), and one
cudaGraphLaunch id covers every kernel of the graph. So nothing is removed when it is first
used: entries live for `keep_drains` drains and then age out, which bounds memory.
"""

from __future__ import annotations

import numpy as np

from perfcore._lazy import lazy_module

pd = lazy_module("pandas")  # imported on first use: settling needs it, recording does not

__all__ = ["LaunchPhases", "EXTERNAL_KIND_CUSTOM0", "GRAPH_LAUNCH_CBIDS"]

EXTERNAL_KIND_CUSTOM0 = 3  # CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, the kind perfcore pushes
# (driver, cbid) of the graph launch calls: cudaGraphLaunch(_ptsz) and cuGraphLaunch(_ptsz).
GRAPH_LAUNCH_CBIDS = ((0, 311), (0, 312), (1, 514), (1, 515))

_I64 = np.int64


def _empty(*names: str) -> dict[str, np.ndarray]:
    return {n: np.empty(0, dtype=_I64) for n in names}


class LaunchPhases:
    """Correlation id -> phase id, kept across drains.

    add(frames, spans) after each drain (spans: the host spans drained with it), then
    phase_of(correlation_ids) for the kernels of that drain: -1 where no phase is known.
    """

    def __init__(self, keep_drains: int = 4):
        if keep_drains < 1:
            raise ValueError("keep_drains must be >= 1")
        self.keep_drains = keep_drains
        self.generation = 0
        self._ext = _empty("corr", "phase", "gen")  # sorted by corr
        self._api = _empty("corr", "start", "gen")  # sorted by corr
        self._win = _empty("start", "end", "phase", "gen")  # sorted by start
        self._graph = _empty("start", "gen")  # graph launch calls' host start, sorted
        # False when the loaded CUPTI gives graph kernels wrong correlation ids (sessions after the
        # first, before the fix): each graph kernel then belongs to the latest graph launch made
        # before it started, placed by that launch's host time.
        self.trust_graph_ids = True
        self.by_external = 0  # records attributed each way (for the run's capture report)
        self.by_window = 0
        self.by_graph_time = 0
        self.unattributed = 0

    # -- feeding ----------------------------------------------------------------------------
    def add(self, frames: dict[str, pd.DataFrame], spans: pd.DataFrame | None = None) -> None:
        """Take in one drain's external-correlation and API records and host spans."""
        self.generation += 1
        g = self.generation
        ext = frames.get("external_correlation")
        if ext is not None and len(ext):
            mine = ext[ext["external_kind"].to_numpy() == EXTERNAL_KIND_CUSTOM0]
            self._ext = self._merge(
                self._ext,
                "corr",
                {"corr": mine["correlation_id"].to_numpy(_I64), "phase": mine["external_id"].to_numpy(_I64)},
                g,
            )
        api = frames.get("api")
        if api is not None and len(api):
            self._api = self._merge(
                self._api,
                "corr",
                {"corr": api["correlation_id"].to_numpy(_I64), "start": api["start_ns"].to_numpy(_I64)},
                g,
            )
            if "cbid" in api:
                key = api["driver"].to_numpy(_I64) * 100000 + api["cbid"].to_numpy(_I64)
                graph = np.isin(key, [d * 100000 + c for d, c in GRAPH_LAUNCH_CBIDS])
                if graph.any():
                    self._graph = self._merge(self._graph, "start", {"start": api["start_ns"].to_numpy(_I64)[graph]}, g)
        if spans is not None and len(spans):
            self._win = self._merge(
                self._win,
                "start",
                {
                    "start": spans["start_ns"].to_numpy(_I64),
                    "end": spans["end_ns"].to_numpy(_I64),
                    "phase": spans["phase_id"].to_numpy(_I64),
                },
                g,
            )
        self._age()

    def _merge(self, old: dict[str, np.ndarray], key: str, new: dict[str, np.ndarray], g: int) -> dict[str, np.ndarray]:
        new = dict(new, gen=np.full(len(new[key]), g, dtype=_I64))
        out = {c: np.concatenate([old[c], new[c]]) for c in old}
        order = np.argsort(out[key], kind="stable")
        return {c: v[order] for c, v in out.items()}

    def _age(self) -> None:
        oldest = self.generation - self.keep_drains + 1
        for name in ("_ext", "_api", "_win", "_graph"):
            t = getattr(self, name)
            keep = t["gen"] >= oldest
            if not keep.all():
                setattr(self, name, {c: v[keep] for c, v in t.items()})

    # -- lookup -----------------------------------------------------------------------------
    @staticmethod
    def _lookup(sorted_keys: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Index of each key in sorted_keys (the last of equal ones) and whether it was found."""
        if not len(sorted_keys):
            return np.zeros(len(keys), dtype=_I64), np.zeros(len(keys), dtype=bool)
        idx = np.searchsorted(sorted_keys, keys, side="right") - 1
        idx = np.clip(idx, 0, len(sorted_keys) - 1)
        return idx, sorted_keys[idx] == keys

    def phase_of(
        self, correlation_ids: np.ndarray, graph_ids: np.ndarray | None = None, start_ns: np.ndarray | None = None
    ) -> np.ndarray:
        """Phase of each record; graph_ids and start_ns (kernels) let graph kernels be placed by
        time when their correlation ids cannot be trusted."""
        corr = np.asarray(correlation_ids, dtype=_I64)
        out = np.full(len(corr), -1, dtype=np.int32)
        if not len(corr):
            return out
        by_time = np.zeros(len(corr), dtype=bool)
        if not self.trust_graph_ids and graph_ids is not None and start_ns is not None:
            by_time = np.asarray(graph_ids) != 0
        if by_time.any():
            t = np.asarray(start_ns, dtype=_I64)[by_time]
            gi = np.searchsorted(self._graph["start"], t, side="right") - 1
            launch = np.where(
                gi >= 0, self._graph["start"][np.clip(gi, 0, None)] if len(self._graph["start"]) else -1, -1
            )
            phase = self._window_phase(launch)
            phase[launch < 0] = -1
            out[by_time] = phase
            self.by_graph_time += int((phase >= 0).sum())
            self.unattributed += int((phase < 0).sum())
            rest_idx = np.flatnonzero(~by_time)
            if len(rest_idx):
                out[rest_idx] = self.phase_of(corr[rest_idx])
            return out
        idx, hit = self._lookup(self._ext["corr"], corr)
        out[hit] = self._ext["phase"][idx[hit]]
        self.by_external += int(hit.sum())
        rest = ~hit
        if rest.any():
            aidx, ahit = self._lookup(self._api["corr"], corr[rest])
            t = np.full(len(aidx), -1, dtype=_I64)
            t[ahit] = self._api["start"][aidx[ahit]]
            phase = self._window_phase(t)
            phase[~ahit] = -1
            out[np.flatnonzero(rest)] = phase
            self.by_window += int((phase >= 0).sum())
        self.unattributed += int((out < 0).sum())
        return out

    def _window_phase(self, t: np.ndarray) -> np.ndarray:
        """Innermost known span containing each time (the one that started last), or -1."""
        w = self._win
        res = np.full(len(t), -1, dtype=np.int32)
        n = len(w["start"])
        if not n or not len(t):
            return res
        # Spans sorted by start; the innermost container of t is the latest-starting span with
        # start <= t <= end. Walk back from the last span starting at or before t until one
        # contains t; a few steps suffice because phases nest shallowly, and the walk is bounded.
        idx = np.searchsorted(w["start"], t, side="right") - 1
        todo = idx >= 0
        for _ in range(64):
            if not todo.any():
                break
            i = idx[todo]
            inside = w["end"][i] >= t[todo]
            pos = np.flatnonzero(todo)
            res[pos[inside]] = w["phase"][i[inside]]
            todo[pos[inside]] = False
            idx[pos[~inside]] -= 1
            todo &= idx >= 0
        return res
