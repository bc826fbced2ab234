"""Jobs across machines (pure functions, typed results, no words): the hosts' clocks put on one clock by the
collectives every rank takes part in, and the job seen per node: its ranks, step time, shares, and whether
it is the slow node or waits for one.

Monotonic clocks of two machines differ by hours (each counts from its own boot), so a rank's timestamps
mean nothing on another host until an offset is found. Every rank leaves a collective (DDP's gradient
all-reduce, a barrier) at nearly the same instant, so per step the gap between two hosts' collective ends
is their clock offset plus noise (a late wake-up, a ring hop); its median over steps (each host's
earliest rank: lateness only adds) is the offset, its spread over steps the alignment's uncertainty. Without kept collectives, step ends stand in (a step ends
after the optimizer step that follows the last all-reduce: looser)."""

from __future__ import annotations

import dataclasses
import enum
import functools
from typing import Mapping, Sequence

import numpy as np

from perfcore.analysis.labels import LABELS

__all__ = [
    "ClockSource",
    "RankEvents",
    "HostClock",
    "Alignment",
    "NodeState",
    "NodeFigures",
    "SlowNode",
    "JobNodes",
    "rank_events",
    "align_clocks",
    "job_nodes",
    "slow_rows",
    "MIN_STEPS",
]

# Fewer common steps than this leave a host's offset to the next source (a median of 1-2 gaps is a guess).
MIN_STEPS = 3
# As analysis.ranks: an excess under 5% of the step, or 0.5 ms, is noise, not a slow node.
EXCESS_SHARE, EXCESS_MS = 0.05, 0.5
# A node waits for the slow one when its collectives take this much longer a step than the slow node's own.
WAIT_MS = 0.5
_ROBUST_SIGMA = 1.4826  # MAD -> standard deviation, for normal noise
_MEDIAN_SE = 1.2533  # the median's standard error is this times sigma / sqrt(n)


class ClockSource(str, enum.Enum):
    """Where a host's offset came from."""

    REFERENCE = "reference"  # the job's clock: the host of its lowest rank
    COLLECTIVES = "collectives"  # the ends of the collectives every rank took part in
    STEP_ENDS = "step_ends"  # no common collective kept: when steps ended
    NONE = "none"  # nothing in common: left on its own clock (offset 0)


@dataclasses.dataclass(frozen=True)
class RankEvents:
    """One rank's events the alignment reads, ns on its own host's clock: per step (by index), when its
    last collective of the step ended, and when the step ended."""

    host: str
    rank: int | None
    comm_steps: np.ndarray
    comm_end_ns: np.ndarray
    step_end_ns: np.ndarray


@dataclasses.dataclass(frozen=True)
class HostClock:
    """One host's offset onto the job's clock: ns to add to its timestamps; the spread of the per-step
    offsets it is the median of (robust sigma), the median's standard error, and how many steps gave it."""

    host: str
    offset_ns: int
    source: ClockSource
    steps: int = 0
    spread_ns: int = 0
    error_ns: int = 0


@dataclasses.dataclass(frozen=True)
class Alignment:
    """Every host's clock against the reference host's, and how well the collectives line up after it:
    per step the range (latest less earliest) of the hosts' aligned collective ends (each host's earliest
    rank), its median and 90th percentile over the steps every host holds (None with fewer than two hosts
    holding collectives, or no common step)."""

    reference: str
    hosts: tuple[HostClock, ...]
    residual_ns: int | None = None
    residual_p90_ns: int | None = None
    residual_steps: int = 0

    @property
    def offsets(self) -> dict[str, int]:
        return {h.host: h.offset_ns for h in self.hosts}


def rank_events(raw: Mapping[str, np.ndarray], host: str, rank: int | None) -> RankEvents:
    """A part's trace arrays -> its RankEvents: the comm spans (the collectives perfcore timed on the
    host) and NCCL kernels (placed in the step whose interval holds their end), the latest end per step;
    and the steps' ends. Steps whose intervals were not kept have no collective end."""
    starts = np.asarray(raw.get("step_start_ns", ()), np.int64)
    step_end = starts + np.asarray(raw.get("step_wall_ns", np.zeros(len(starts))), np.int64)
    steps, ends = [], []
    names = dict(zip(np.asarray(raw.get("phase_ids", ())).tolist(), np.asarray(raw.get("phase_names", ())).tolist()))
    # The built-in phases' ids are their labels' places (a part without its names keeps them).
    comm_ids = [i for i, n in names.items() if n == "comm"] if names else [LABELS.index("comm")]
    if comm_ids and "span_phase" in raw:
        sel = np.isin(np.asarray(raw["span_phase"]), comm_ids)
        steps.append(np.asarray(raw["span_step"], np.int64)[sel])
        ends.append(np.asarray(raw["span_end_ns"], np.int64)[sel])
    if "kernel_name" in raw and len(starts):
        kname = np.asarray(raw["kernel_name"]).astype(str)
        sel = np.char.find(np.char.lower(kname), "nccl") >= 0
        kend = np.asarray(raw["kernel_end_ns"], np.int64)[sel]
        ix = np.searchsorted(starts, kend, side="right") - 1
        inside = (ix >= 0) & (kend <= step_end[np.clip(ix, 0, None)])
        steps.append(ix[inside])
        ends.append(kend[inside])
    step = np.concatenate(steps) if steps else np.zeros(0, np.int64)
    end = np.concatenate(ends) if ends else np.zeros(0, np.int64)
    ok = step >= 0
    step, end = step[ok], end[ok]
    uniq, inv = np.unique(step, return_inverse=True)
    last = np.full(len(uniq), np.iinfo(np.int64).min, np.int64)
    np.maximum.at(last, inv, end)
    return RankEvents(host=str(host), rank=rank, comm_steps=uniq, comm_end_ns=last, step_end_ns=step_end)


def _rank_order(r: RankEvents | RankSteps) -> tuple[bool, int]:
    """Ranks by number, those without one last."""
    return r.rank is None, r.rank if r.rank is not None else 0


def _per_host(ranks: Sequence[RankEvents], kind: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per host, per step every one of its ranks holds: the earliest of their events (collective or step
    end). A rank records an end late (woken late, descheduled), never early, so the earliest rank is the
    closest to when the collective ended."""
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for host in dict.fromkeys(r.host for r in ranks):
        series = []
        for r in ranks:
            if r.host != host:
                continue
            if kind == "comm":
                series.append((r.comm_steps, r.comm_end_ns))
            else:
                series.append((np.arange(len(r.step_end_ns), dtype=np.int64), r.step_end_ns))
        common, ends = _on_common_steps(series)
        if len(common):
            out[host] = (common, ends.min(axis=0))
    return out


def _on_common_steps(series: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The steps every (steps, values) series holds, and each series' values at them (series x steps)."""
    common = functools.reduce(np.intersect1d, [s for s, _ in series])
    return common, np.stack([e[np.searchsorted(s, common)] for s, e in series])


def _offset(ref: tuple[np.ndarray, np.ndarray], mine: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    common, ia, ib = np.intersect1d(ref[0], mine[0], return_indices=True)
    return ref[1][ia] - mine[1][ib]


def _clock(host: str, gaps: np.ndarray, source: ClockSource) -> HostClock:
    med = float(np.median(gaps))
    sigma = _ROBUST_SIGMA * float(np.median(np.abs(gaps - med)))
    return HostClock(
        host=host,
        offset_ns=int(round(med)),
        source=source,
        steps=int(len(gaps)),
        spread_ns=int(round(sigma)),
        error_ns=int(round(_MEDIAN_SE * sigma / np.sqrt(len(gaps)))),
    )


def align_clocks(ranks: Sequence[RankEvents]) -> Alignment:
    """Every host's offset onto the clock of the host of the lowest rank (ranks without a number last):
    from the collectives every rank takes part in where MIN_STEPS steps hold them on both hosts, else from
    step ends, else none (offset 0). One host: its own clock, offset 0."""
    order = sorted(ranks, key=_rank_order)
    if not order:
        return Alignment(reference="", hosts=())
    ref = order[0].host
    comm, ends = _per_host(order, "comm"), _per_host(order, "step")
    clocks = [HostClock(ref, 0, ClockSource.REFERENCE)]
    for host in dict.fromkeys(r.host for r in order):
        if host == ref:
            continue
        clock = HostClock(host, 0, ClockSource.NONE)
        for source, table in ((ClockSource.COLLECTIVES, comm), (ClockSource.STEP_ENDS, ends)):
            if ref in table and host in table:
                gaps = _offset(table[ref], table[host])
                if len(gaps) >= MIN_STEPS:
                    clock = _clock(host, gaps, source)
                    break
        clocks.append(clock)
    alignment = Alignment(reference=ref, hosts=tuple(clocks))
    return dataclasses.replace(alignment, **_residual(comm, alignment))


def _residual(comm: Mapping[str, tuple[np.ndarray, np.ndarray]], alignment: Alignment) -> dict[str, object]:
    """How far apart the hosts' collective ends of one step still are on the job's clock: per step every
    host holds, the range of the hosts' earliest aligned ends. None with fewer than two hosts."""
    held = [h for h in alignment.hosts if h.host in comm]
    if len(held) < 2:
        return {}
    common, ends = _on_common_steps([comm[h.host] for h in held])
    if not len(common):
        return {}
    aligned = ends + np.array([[h.offset_ns] for h in held], dtype=np.int64)
    spread = aligned.max(axis=0) - aligned.min(axis=0)
    return {
        "residual_ns": int(np.median(spread)),
        "residual_p90_ns": int(np.percentile(spread, 90)),
        "residual_steps": int(len(common)),
    }


class NodeState(str, enum.Enum):
    """A node's part in the job's pace: the slow node, one that waits for it, or neither."""

    SLOW = "slow"
    WAITING = "waiting"
    EVEN = "even"


@dataclasses.dataclass(frozen=True)
class NodeFigures:
    """One node over the measured steps every rank holds: its ranks, mean step, the five labels' mean ms
    per step and shares over its ranks, its own work (wall less comm), and its state in the job."""

    host: str
    ranks: tuple[int | None, ...]
    step_ms: float
    breakdown_ms: dict[str, float]
    breakdown_fraction: dict[str, float]
    work_ms: float
    state: NodeState = NodeState.EVEN
    waits_for: tuple[str, ...] = ()

    @property
    def comm(self) -> tuple[float, float]:
        """Its ranks' mean ms a step in collectives and that share of the step (0 where none was measured)."""
        return self.breakdown_ms.get("comm", 0.0), self.breakdown_fraction.get("comm", 0.0)


@dataclasses.dataclass(frozen=True)
class SlowNode:
    """The node the others wait for: its rank with the most own work, the label of the node's excess over
    the other nodes (never comm) and its ms per step, its own work against theirs, in how many steps it was
    the slowest, and the longest wait for it (a waiting node's mean comm per step, of its step)."""

    host: str
    rank: int | None
    excess_label: str
    excess_ms: float
    work_ms: float
    others_work_ms: float
    slowest_share: float
    waiting_host: str | None
    wait_ms: float
    step_ms: float

    @property
    def wait_share(self) -> float:
        return self.wait_ms / self.step_ms if self.step_ms > 0 else 0.0


@dataclasses.dataclass(frozen=True)
class JobNodes:
    """The job per node (hosts in order of their lowest rank), the slow node if one holds the others up,
    and how many measured steps (the fewest any rank holds) the figures cover."""

    nodes: tuple[NodeFigures, ...]
    slow_node: SlowNode | None
    steps: int


@dataclasses.dataclass(frozen=True)
class RankSteps:
    """One rank's measured steps as job_nodes reads them: ms per step per label and the wall."""

    host: str
    rank: int | None
    wall_ms: np.ndarray
    label_ms: Mapping[str, np.ndarray]


def job_nodes(ranks: Sequence[RankSteps]) -> JobNodes:
    """The job per node, over the first k measured steps every rank holds (steps aligned by index, as
    in synchronous data parallelism every rank takes the same step together). A node is slow when its
    ranks' own work (wall less comm, their mean) is the longest in at least half the steps and exceeds the
    nodes' median by EXCESS_SHARE of it (at least EXCESS_MS); the nodes whose ranks spend WAIT_MS more in
    collectives than the slow node's wait for it. One node: its figures, no slow node."""
    order = sorted(ranks, key=_rank_order)
    hosts = list(dict.fromkeys(r.host for r in order))
    k = min((len(r.wall_ms) for r in order), default=0)
    if not hosts or k == 0:
        return JobNodes(nodes=(), slow_node=None, steps=0)
    groups = [[r for r in order if r.host == h] for h in hosts]
    # nodes x steps: each node's mean over its ranks, per step
    label = {lb: np.stack([np.mean([r.label_ms[lb][:k] for r in g], axis=0) for g in groups]) for lb in LABELS}
    wall = np.stack([np.mean([r.wall_ms[:k] for r in g], axis=0) for g in groups])
    work = wall - label["comm"]
    nodes = []
    for i, (h, g) in enumerate(zip(hosts, groups)):
        step = float(wall[i].mean())
        bms = {lb: float(label[lb][i].mean()) for lb in LABELS}
        nodes.append(
            NodeFigures(
                host=h,
                ranks=tuple(r.rank for r in g),
                step_ms=step,
                breakdown_ms=bms,
                breakdown_fraction={lb: (v / step if step > 0 else 0.0) for lb, v in bms.items()},
                work_ms=float(work[i].mean()),
            )
        )
    slow = _slow_node(hosts, groups, label, wall, work, k) if len(hosts) > 1 else None
    if slow is not None:
        waiting = {n.host for n in nodes if n.host != slow.host and _waits(n, nodes, slow.host)}
        nodes = [
            dataclasses.replace(n, state=NodeState.SLOW)
            if n.host == slow.host
            else dataclasses.replace(n, state=NodeState.WAITING, waits_for=(slow.host,))
            if n.host in waiting
            else n
            for n in nodes
        ]
        waits = [n for n in nodes if n.state is NodeState.WAITING]
        if waits:
            w = max(waits, key=lambda n: n.breakdown_fraction["comm"])
            slow = dataclasses.replace(slow, waiting_host=w.host, wait_ms=w.breakdown_ms["comm"], step_ms=w.step_ms)
    return JobNodes(nodes=tuple(nodes), slow_node=slow, steps=k)


def _waits(node: NodeFigures, nodes: Sequence[NodeFigures], slow_host: str) -> bool:
    slow = next(n for n in nodes if n.host == slow_host)
    return node.breakdown_ms["comm"] - slow.breakdown_ms["comm"] > WAIT_MS


def slow_rows(work: np.ndarray, label_means: Mapping[str, np.ndarray]) -> dict[int, dict[str, float | str]]:
    """The rows of `work` (rows x steps: each rank's or node's own work, wall less comm) the others wait for,
    by index: each the longest on at least half the steps and over the rows' median by EXCESS_SHARE of it (at
    least EXCESS_MS). Each one's figures: the label of its excess over the other rows' median (label_means: each
    label's mean per row; never comm) and that excess, its share of steps as the slowest, its own work and
    the others'. The rows' median and each step's slowest row are found once, for every row."""
    med = np.median(work, axis=0)
    base = float(med.mean())
    slowest = np.argmax(work, axis=0)
    out: dict[int, dict[str, float | str]] = {}
    for i in range(len(work)):
        share = float((slowest == i).mean())
        excess = float((work[i] - med).mean())
        if base <= 0 or share < 0.5 or excess < max(EXCESS_SHARE * base, EXCESS_MS):
            continue
        others = [j for j in range(len(work)) if j != i]
        diffs = {lb: float(label_means[lb][i] - np.median(label_means[lb][others])) for lb in LABELS if lb != "comm"}
        cause = max(diffs, key=diffs.get)
        out[i] = {
            "excess_label": cause,
            "excess_ms": diffs[cause],
            "slowest_share": share,
            "work_ms": float(work[i].mean()),
            "others_work_ms": float(np.median(work[others].mean(axis=1))),
        }
    return out


def _slow_node(
    hosts: list[str],
    groups: list[list[RankSteps]],
    label: Mapping[str, np.ndarray],
    wall: np.ndarray,
    work: np.ndarray,
    k: int,
) -> SlowNode | None:
    i = int(np.argmax(work.mean(axis=1)))
    slow = slow_rows(work, {lb: m.mean(axis=1) for lb, m in label.items()}).get(i)
    if slow is None:
        return None
    # The node's rank with the most own work: the one to look at first.
    own = [float(np.mean(r.wall_ms[:k] - r.label_ms["comm"][:k])) for r in groups[i]]
    return SlowNode(
        host=hosts[i],
        rank=groups[i][int(np.argmax(own))].rank,
        waiting_host=None,
        wait_ms=0.0,
        step_ms=float(wall[i].mean()),
        **slow,
    )
