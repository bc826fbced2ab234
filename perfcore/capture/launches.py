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
3. The phase's CUDA events. Without API records (the tracer's default: they cost every launch two
   records and CUPTI's callbacks around both calls) a kernel has only its GPU start and end. The
   phase's event pair, recorded on the stream the phase's work goes to, brackets that work on the
   GPU: the kernel belongs to the innermost event window that holds its middle, or the nearest
   one within EVENT_SLACK_NS (the event clock is placed on the host's through an anchor known to
   ~10 us). Work of one phase on another stream, running beside another phase's window, can be
   placed in that window: a limit of this way.

Records of one launch arrive in different buffers and in any order (a kernel's record is written
when the GPU has run it, into whichever buffer CUPTI fills then, possibly completed in a later
flush than its launch's API record), and one cudaGraphLaunch id covers every kernel of the graph. So nothing is removed when it is first
used: entries live for `keep_drains` drains and then age out, which bounds memory.
"""

from __future__ import annotations

import numpy as np

from perfcore._lazy import lazy_module

pd = lazy_module("pandas")  # imported on first use: settling needs it, recording does not

__all__ = ["LaunchPhases", "GraphReplays", "EXTERNAL_KIND_CUSTOM0", "GRAPH_LAUNCH_CBIDS"]

EXTERNAL_KIND_CUSTOM0 = 3  # CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, the kind perfcore pushes
# (driver, cbid) of the graph launch calls: cudaGraphLaunch(_ptsz) and cuGraphLaunch(_ptsz).
GRAPH_LAUNCH_CBIDS = ((0, 311), (0, 312), (1, 514), (1, 515))

_I64 = np.int64
# How far outside a phase's event window a kernel may start and still be the phase's: the anchor that
# places the events on the host clock is known to about +-11 us, and drifts ~7 us between anchors
# (bench/RESULTS.md, the H200 runs).
EVENT_SLACK_NS = 20_000


def _empty(*names: str) -> dict[str, np.ndarray]:
    return {n: np.empty(0, dtype=_I64) for n in names}


def _merge(old: dict[str, np.ndarray], key: str, g: int, **new) -> dict[str, np.ndarray]:
    """old's columns and one drain's (generation g), sorted by `key`."""
    new = {c: np.asarray(v, dtype=_I64) for c, v in new.items()}
    new["gen"] = np.full(len(new[key]), g, dtype=_I64)
    out = {c: np.concatenate([old[c], new[c]]) for c in old}
    order = np.argsort(out[key], kind="stable")
    return {c: v[order] for c, v in out.items()}


class GraphReplays:
    """Graph kernels matched to the graph launches that ran them, by order.

    For CUPTIs whose graph correlation ids cannot be trusted. A graph's launches run in the order
    they were made (CUDA orders work on a stream, and one executable graph never overlaps
    itself), so the n-th replay seen on the GPU belongs to the n-th graph launch call, however far
    the CPU ran ahead. A replay is told by its kernels' graph node ids where the backend decodes
    them (each node runs once a replay), else as a run of one graph's kernels, in start order,
    sharing one correlation id (the ids are wrong, but one per launch). The time of the launch
    call is then looked up in the phases. Limits: API records carry no stream, so launches are matched in
    one host order (graphs launched on several streams at once can swap); a launch whose graph
    has no kernel node leaves the queue one ahead, which the launch-before-replay check catches
    only when the CPU did not run ahead.
    """

    MAX_PENDING = 1 << 16  # launches whose kernels never came (graphs without kernels) age out

    def __init__(self) -> None:
        self._pending = np.empty(0, dtype=_I64)  # host start of launches not yet matched, in order
        self._last: dict[int, tuple[int, int]] = {}  # graph id -> (correlation id, launch start)
        self._node_runs: dict[tuple[int, int], int] = {}  # (graph, node) -> its runs so far
        self._replay_launch: dict[tuple[int, int], int] = {}  # (graph, replay) -> launch start, recent
        # Replays seen before their launch call's record (the kernels' buffer completed first): each
        # owes the queue the launch that comes for it, (first kernel start, how to name its replay).
        self._owed: list[tuple[int, tuple[str, int, int]]] = []

    def add_launches(self, api: pd.DataFrame) -> None:
        """Queue the graph launch calls among one drain's API records. cudaGraphLaunch runs a
        cuGraphLaunch inside it on the same thread: one launch, so the inner driver call is dropped."""
        key = api["driver"].to_numpy(_I64) * 100000 + api["cbid"].to_numpy(_I64)
        is_graph = np.isin(key, [d * 100000 + c for d, c in GRAPH_LAUNCH_CBIDS])
        if not is_graph.any():
            return
        rows = api[is_graph][["start_ns", "end_ns", "driver", "thread_id"]].astype(_I64)
        rows = rows.sort_values("start_ns", kind="stable")
        runtime, driver = rows[rows["driver"] == 0], rows[rows["driver"] != 0]
        if len(runtime) and len(driver):
            outer = pd.merge_asof(driver, runtime, on="start_ns", by="thread_id", suffixes=("", "_rt"))
            nested = (outer["end_ns_rt"] >= outer["end_ns"]).to_numpy()
            driver = driver[~nested]
        start = np.concatenate([runtime["start_ns"].to_numpy(_I64), driver["start_ns"].to_numpy(_I64)])
        self._pending = np.sort(np.concatenate([self._pending, start]), kind="stable")[-self.MAX_PENDING :]
        self._pay_owed()

    def _take(self, first_start: np.ndarray, keys: list[tuple[str, int, int]]) -> np.ndarray:
        """Launch host start for each new replay (given its first kernel's start and its key), matched
        to the queued launches in the replays' start order; -1 where none, or where the launch would
        come after the replay (never true of a right match). A replay that finds the queue empty
        owes it the launch still to come: taken as it arrives, so later replays keep their own."""
        order = np.argsort(first_start, kind="stable")
        n = min(len(order), len(self._pending))
        out = np.full(len(first_start), -1, dtype=_I64)
        took = self._pending[:n]
        out[order[:n]] = np.where(took <= first_start[order[:n]], took, -1)
        self._pending = self._pending[n:]
        self._owed += [(int(first_start[i]), keys[i]) for i in order[n:]]
        self._owed = self._owed[-self.MAX_PENDING :]
        return out

    def _pay_owed(self) -> None:
        """Queued launches to the replays that came before them, oldest first: a launch made before
        the replay ran is its own; the replay's kernels already drained keep -1, the rest of a replay
        split across drains gets it."""
        while self._owed and len(self._pending) and self._pending[0] <= self._owed[0][0]:
            (_, (how, graph, which)), at = self._owed.pop(0), int(self._pending[0])
            self._pending = self._pending[1:]
            if how == "node" and (graph, which) in self._replay_launch:
                self._replay_launch[(graph, which)] = at
            elif how == "corr" and self._last.get(graph, (None,))[0] == which:
                self._last[graph] = (which, at)

    def launch_of(
        self, corr: np.ndarray, graph: np.ndarray, start: np.ndarray, node: np.ndarray | None = None
    ) -> np.ndarray:
        """Host start of the launch that ran each graph kernel, or -1 where none is known. node:
        each kernel's graph node id, where the backend decodes it."""
        if node is not None and len(node) and (np.asarray(node) != 0).all():
            return self._by_node(np.asarray(graph, dtype=_I64), np.asarray(start, dtype=_I64), np.asarray(node, _I64))
        out = np.full(len(corr), -1, dtype=_I64)
        order = np.lexsort((start, graph))
        g, c, t = graph[order], corr[order], start[order]
        new = np.ones(len(g), dtype=bool)
        new[1:] = (g[1:] != g[:-1]) | (c[1:] != c[:-1])
        firsts = np.flatnonzero(new)
        # A graph's first run here may continue the replay the previous drain ended with.
        graph_first = firsts[np.r_[True, g[firsts[1:]] != g[firsts[:-1]]]] if len(firsts) else firsts
        cont = np.zeros(len(g), dtype=bool)
        for i in graph_first:
            cont[i] = self._last.get(int(g[i]), (None,))[0] == int(c[i])
        fresh = firsts[~cont[firsts]]
        launch = np.full(len(g), -1, dtype=_I64)
        launch[fresh] = self._take(t[fresh], [("corr", int(g[i]), int(c[i])) for i in fresh])
        for i in graph_first[cont[graph_first]]:
            launch[i] = self._last[int(g[i])][1]
        per_kernel = launch[firsts][np.cumsum(new) - 1]  # every kernel takes its run's launch
        out[order] = per_kernel
        graph_last = np.flatnonzero(np.r_[g[1:] != g[:-1], True]) if len(g) else firsts
        for e in graph_last:
            self._last[int(g[e])] = (int(c[e]), int(per_kernel[e]))
        return out

    def _by_node(self, graph: np.ndarray, start: np.ndarray, node: np.ndarray) -> np.ndarray:
        """Each node runs once per replay, so a kernel's replay is the count of its node's runs
        before it (kept across drains): a replay split across drains keeps one key, and replays
        of one graph are told apart whatever their correlation ids."""
        order = np.lexsort((start, node, graph))
        g, n, t = graph[order], node[order], start[order]
        head = np.r_[True, (g[1:] != g[:-1]) | (n[1:] != n[:-1])]
        first = np.flatnonzero(head)
        group = np.cumsum(head) - 1
        base = np.array([self._node_runs.get((int(g[i]), int(n[i])), 0) for i in first], dtype=_I64)
        replay = base[group] + np.arange(len(g)) - first[group]
        ends = np.r_[first[1:], len(g)]
        for i, e, b in zip(first, ends, base):
            self._node_runs[(int(g[i]), int(n[i]))] = int(b + e - i)
        keys, inverse = np.unique(np.stack([g, replay]), axis=1, return_inverse=True)
        inverse = inverse.reshape(-1)
        first_start = np.full(keys.shape[1], np.iinfo(np.int64).max, dtype=_I64)
        np.minimum.at(first_start, inverse, t)
        launch = np.array([self._replay_launch.get((int(a), int(b)), -2) for a, b in keys.T], dtype=_I64)
        fresh = launch == -2
        launch[fresh] = self._take(first_start[fresh], [("node", int(a), int(b)) for a, b in keys.T[fresh]])
        for (a, b), at in zip(keys.T, launch):
            self._replay_launch[(int(a), int(b))] = int(at)
        for a in np.unique(keys[0]):  # a replay stays open only until the next ones come
            newest = int(keys[1][keys[0] == a].max())
            for k in [k for k in self._replay_launch if k[0] == a and k[1] < newest - 4]:
                del self._replay_launch[k]
        out = np.empty(len(g), dtype=_I64)
        out[order] = launch[inverse]
        return out


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
        self._win = _empty("start", "end", "phase", "gen")  # host spans, sorted by start
        self._gpu = _empty("start", "end", "phase", "gen")  # the phases' event windows on the GPU, by start
        # False when the loaded CUPTI gives graph kernels wrong correlation ids (sessions after the
        # first, before the fix): graph kernels are then placed by order (see GraphReplays).
        self.trust_graph_ids = True
        self._replays = GraphReplays()
        self.by_external = 0  # records attributed each way (for the run's capture report)
        self.by_window = 0
        self.by_event_window = 0
        self.by_graph_order = 0
        self.unattributed = 0

    # -- feeding ----------------------------------------------------------------------------
    def add(self, frames: dict[str, pd.DataFrame], spans: pd.DataFrame | None = None, events=None) -> None:
        """Take in one drain's external-correlation and API records, host spans and the phases' event
        windows (columns phase_id, start_ns, end_ns on the GPU, as the event timer resolved them)."""
        self.generation += 1
        g = self.generation
        ext = frames.get("external_correlation")
        if ext is not None and len(ext):
            mine = ext[ext["external_kind"].to_numpy() == EXTERNAL_KIND_CUSTOM0]
            self._ext = _merge(self._ext, "corr", g, corr=mine["correlation_id"], phase=mine["external_id"])
        api = frames.get("api")
        if api is not None and len(api):
            self._api = _merge(self._api, "corr", g, corr=api["correlation_id"], start=api["start_ns"])
            if "cbid" in api:
                self._replays.add_launches(api)
        if spans is not None and len(spans):
            self._win = _merge(
                self._win, "start", g, start=spans["start_ns"], end=spans["end_ns"], phase=spans["phase_id"]
            )
        if events is not None and len(events["phase_id"]):
            self._gpu = _merge(
                self._gpu, "start", g, start=events["start_ns"], end=events["end_ns"], phase=events["phase_id"]
            )
        self._age()

    def _age(self) -> None:
        oldest = self.generation - self.keep_drains + 1
        for name in ("_ext", "_api", "_win", "_gpu"):
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
        self,
        correlation_ids: np.ndarray,
        graph_ids: np.ndarray | None = None,
        start_ns: np.ndarray | None = None,
        graph_node_ids: np.ndarray | None = None,
        end_ns: np.ndarray | None = None,
    ) -> np.ndarray:
        """Phase of each record; graph_ids and start_ns (kernels) let graph kernels be placed by
        the order of the graph launches when their correlation ids cannot be trusted; start_ns and
        end_ns place a record with no API record by the phases' event windows."""
        corr = np.asarray(correlation_ids, dtype=_I64)
        start = None if start_ns is None else np.asarray(start_ns, dtype=_I64)
        end = None if end_ns is None else np.asarray(end_ns, dtype=_I64)
        by_order = np.zeros(len(corr), dtype=bool)
        if not self.trust_graph_ids and graph_ids is not None and start is not None:
            by_order = np.asarray(graph_ids) != 0
        if not by_order.any():
            return self._by_correlation(corr, start, end)
        out = np.full(len(corr), -1, dtype=np.int32)
        node = None if graph_node_ids is None else np.asarray(graph_node_ids)[by_order]
        launch = self._replays.launch_of(corr[by_order], np.asarray(graph_ids)[by_order], start[by_order], node)
        phase = self._window_phase(launch)
        phase[launch < 0] = -1
        out[by_order] = phase
        self.by_graph_order += int((phase >= 0).sum())
        self.unattributed += int((phase < 0).sum())
        rest = ~by_order
        if rest.any():
            out[rest] = self._by_correlation(corr[rest], start[rest], None if end is None else end[rest])
        return out

    def _by_correlation(self, corr: np.ndarray, start: np.ndarray | None, end: np.ndarray | None) -> np.ndarray:
        """Phase of each record by its external id, else its API record's launch time, else (start and
        end: its GPU time) the phases' event windows."""
        out = np.full(len(corr), -1, dtype=np.int32)
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
            rest_idx = np.flatnonzero(rest)
            out[rest_idx] = phase
            self.by_window += int((phase >= 0).sum())
            unknown = rest_idx[~ahit]  # no API record: the launch is known only by its GPU time
            if start is not None and len(unknown):
                s = start[unknown]
                mid = s if end is None else s + (end[unknown] - s) // 2
                placed = self._event_phase(mid)
                out[unknown] = placed
                self.by_event_window += int((placed >= 0).sum())
        self.unattributed += int((out < 0).sum())
        return out

    def _event_phase(self, t: np.ndarray) -> np.ndarray:
        """Innermost event window holding each time, else the nearest within EVENT_SLACK_NS, else -1."""
        res = self._window_phase(t, self._gpu)
        w = self._gpu
        miss = np.flatnonzero(res < 0)
        if not len(miss) or not len(w["start"]):
            return res
        tm = t[miss]
        nxt = np.searchsorted(w["start"], tm, side="right")  # the first window starting after t
        after = np.where(nxt < len(w["start"]), w["start"][np.minimum(nxt, len(w["start"]) - 1)] - tm, np.inf)
        # Of the windows starting at or before t (none holds it), the one that ended last: a running
        # maximum of the ends, and the latest index that reached it.
        ends = np.maximum.accumulate(w["end"])
        latest = np.maximum.accumulate(np.where(w["end"] == ends, np.arange(len(ends)), -1))
        prev = np.maximum(nxt - 1, 0)
        before = np.where(nxt > 0, tm - ends[prev], np.inf)
        pick = np.where(before <= after, latest[prev], np.minimum(nxt, len(w["start"]) - 1))
        near = np.minimum(before, after) <= EVENT_SLACK_NS
        res[miss[near]] = w["phase"][pick[near]]
        return res

    def _window_phase(self, t: np.ndarray, w: dict[str, np.ndarray] | None = None) -> np.ndarray:
        """Innermost window containing each time (the one that started last), or -1. w: the windows
        (default the host spans), sorted by start."""
        w = self._win if w is None else w
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
