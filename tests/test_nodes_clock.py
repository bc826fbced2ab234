"""analysis.nodes on synthetic parts: hosts' clocks aligned by their collectives, and the job per node."""

from __future__ import annotations

import numpy as np
import pytest

from perfcore.analysis.codec import to_doc
from perfcore.analysis.labels import LABELS
from perfcore.analysis.process_part import Part
from perfcore.analysis.nodes import (
    ClockSource,
    NodeState,
    RankEvents,
    RankSteps,
    align_clocks,
    job_nodes,
    rank_events,
)

HOUR_NS = 3600 * 10**9


def _events(host, rank, true_ends, clock_ns, rng, jitter_ns=50_000, late=()):
    """A rank whose collective of step s ends at true_ends[s] (one clock for all), read on a host clock
    `clock_ns` ahead, with wake-up jitter and some steps woken 5 ms late."""
    ends = true_ends + clock_ns + rng.normal(0, jitter_ns, len(true_ends)).astype(np.int64)
    ends[list(late)] += 5_000_000
    steps = np.arange(len(true_ends), dtype=np.int64)
    return RankEvents(host, rank, steps, ends.astype(np.int64), ends + 300_000)


def test_two_hosts_hours_apart_are_put_on_one_clock():
    rng = np.random.default_rng(0)
    true = np.cumsum(rng.uniform(20e6, 40e6, 200)).astype(np.int64)
    ahead = 2 * HOUR_NS + 123_456_789  # host b booted two hours earlier, and not on a whole second
    ranks = [
        _events("a", 0, true, 0, rng),
        _events("a", 1, true, 0, rng, late=range(0, 200, 17)),
        _events("b", 2, true, ahead, rng),
        # Woken 5 ms late every other step: lateness only adds, so b's earliest rank is its clock.
        _events("b", 3, true, ahead, rng, late=range(0, 200, 2)),
    ]
    al = align_clocks(ranks)
    assert al.reference == "a" and al.offsets["a"] == 0
    b = next(h for h in al.hosts if h.host == "b")
    assert b.source is ClockSource.COLLECTIVES and b.steps == 200
    # The offset undoes b's clock to within the median's error, which the jitter (50 us) sizes.
    assert abs(b.offset_ns + ahead) <= 4 * b.error_ns + 1000
    assert 10_000 < b.spread_ns < 100_000 and 0 < b.error_ns < 10_000
    # After it, one step's collective ends on all four ranks lie within a few jitters, late wake-ups aside.
    assert al.residual_steps == 200 and al.residual_ns < 400_000
    assert al.residual_p90_ns >= al.residual_ns
    assert to_doc(al)["hosts"][1] == {**b.__dict__, "source": "collectives"}


def test_the_reference_is_the_lowest_ranks_host_and_one_host_keeps_its_clock():
    rng = np.random.default_rng(1)
    true = np.arange(50, dtype=np.int64) * 30_000_000
    ranks = [_events("b", 1, true, 5 * HOUR_NS, rng), _events("a", 0, true, 0, rng)]
    al = align_clocks(ranks)
    assert al.reference == "a" and al.offsets["b"] == pytest.approx(-5 * HOUR_NS, abs=200_000)
    one = align_clocks([_events("a", 0, true, 0, rng), _events("a", 1, true, 0, rng)])
    assert [h.source for h in one.hosts] == [ClockSource.REFERENCE] and one.offsets == {"a": 0}
    assert align_clocks([]).hosts == ()


def test_step_ends_stand_in_without_collectives_and_nothing_in_common_is_said():
    rng = np.random.default_rng(2)
    true = np.arange(40, dtype=np.int64) * 30_000_000
    a = _events("a", 0, true, 0, rng)
    b = _events("b", 1, true, HOUR_NS, rng)
    empty = np.zeros(0, np.int64)
    no_comm = [RankEvents(a.host, 0, empty, empty, a.step_end_ns), RankEvents(b.host, 1, empty, empty, b.step_end_ns)]
    al = align_clocks(no_comm)
    hb = al.hosts[1]
    assert hb.source is ClockSource.STEP_ENDS and abs(hb.offset_ns + HOUR_NS) < 300_000
    assert al.residual_ns is None and al.residual_steps == 0
    # Two steps in common are too few to say an offset: left at 0, and said.
    short = RankEvents("b", 1, b.comm_steps[:2], b.comm_end_ns[:2], b.step_end_ns[:2])
    assert align_clocks([a, short]).hosts[1].source is ClockSource.NONE
    assert align_clocks([a, short]).offsets["b"] == 0


def test_rank_events_read_comm_spans_and_nccl_kernels_per_step():
    starts = np.array([0, 100, 200, 300], np.int64)
    raw = {
        "step_start_ns": starts,
        "step_wall_ns": np.full(4, 90, np.int64),
        "phase_ids": np.array([2, 3]),
        "phase_names": np.array(["compute", "comm"]),
        "span_phase": np.array([3, 3, 2, 3], np.int32),
        "span_step": np.array([0, 0, 0, 1], np.int64),
        "span_end_ns": np.array([40, 60, 80, 150], np.int64),
        # A collective kernel in step 2, a compute kernel after it, one NCCL kernel ending between steps.
        "kernel_name": np.array(["ncclDevKernel_AllReduce_Sum", "gemm", "ncclKernel_Broadcast"]),
        "kernel_end_ns": np.array([270, 280, 295], np.int64),
    }
    ev = rank_events(raw, "h", 0)
    assert ev.comm_steps.tolist() == [0, 1, 2]
    assert ev.comm_end_ns.tolist() == [60, 150, 270]  # the compute span (80) is no collective
    assert ev.step_end_ns.tolist() == [90, 190, 290, 390]
    assert rank_events({}, "h", None).comm_steps.tolist() == []


def _steps(host, rank, n=100, compute=10.0, load=1.0, comm=1.0, rng=None):
    rng = rng or np.random.default_rng(rank)
    noise = rng.normal(0, 0.3, n)
    ms = {lb: np.zeros(n) for lb in LABELS}
    ms["compute"] = np.full(n, compute) + noise
    ms["load"] = np.full(n, load)
    ms["comm"] = np.full(n, comm) - noise  # a synchronous job: every rank's step is as long
    ms["host"] = np.full(n, 0.5)
    return RankSteps(host, rank, sum(ms.values()), ms)


def test_a_slow_node_is_named_with_its_rank_and_cause_and_the_other_waits():
    # node1's ranks compute 12 ms more a step; node0's ranks wait that long in the collective.
    ranks = [
        _steps("node0", 0, comm=13.0),
        _steps("node0", 1, comm=13.0),
        _steps("node1", 2, compute=21.0),
        _steps("node1", 3, compute=22.0),
    ]
    job = job_nodes(ranks)
    n0, n1 = job.nodes
    assert (n0.host, n0.ranks, n1.ranks) == ("node0", (0, 1), (2, 3))
    assert n1.state is NodeState.SLOW and n0.state is NodeState.WAITING and n0.waits_for == ("node1",)
    s = job.slow_node
    assert (s.host, s.rank, s.excess_label) == ("node1", 3, "compute")
    assert s.excess_ms == pytest.approx(11.5, abs=0.3) and s.slowest_share > 0.9
    assert s.waiting_host == "node0" and s.wait_ms == pytest.approx(13.0, abs=0.2)
    assert s.wait_share == pytest.approx(s.wait_ms / n0.step_ms) and s.step_ms == n0.step_ms
    assert n0.breakdown_fraction["comm"] == pytest.approx(n0.breakdown_ms["comm"] / n0.step_ms)
    assert sum(n1.breakdown_ms.values()) == pytest.approx(n1.step_ms)
    assert to_doc(job)["slow_node"]["host"] == "node1" and job.steps == 100


def test_a_slow_loader_is_the_cause_and_balanced_nodes_have_none():
    ranks = [_steps("a", 0, comm=9.0), _steps("a", 1, comm=9.0), _steps("b", 2, load=9.0), _steps("b", 3, load=9.0)]
    job = job_nodes(ranks)
    assert job.slow_node.host == "b" and job.slow_node.excess_label == "load"
    even = job_nodes([_steps("a", 0), _steps("a", 1), _steps("b", 2), _steps("b", 3)])
    assert even.slow_node is None and {n.state for n in even.nodes} == {NodeState.EVEN}
    one = job_nodes([_steps("a", 0, compute=30.0), _steps("a", 1)])
    assert one.slow_node is None and len(one.nodes) == 1
    assert job_nodes([]).nodes == ()


def test_a_node_nearly_as_slow_is_not_said_to_wait_and_two_slow_halves_name_none():
    # d computes 10 ms more than a and b, which wait for it; c is nearly as slow as d and waits 0.4 ms.
    ranks = [
        _steps("a", 0, comm=10.0),
        _steps("b", 1, comm=10.0),
        _steps("c", 2, compute=19.6, comm=0.4),
        _steps("d", 3, compute=20.0, comm=0.0),
    ]
    job = job_nodes(ranks)
    states = {n.host: n.state for n in job.nodes}
    assert job.slow_node.host == "d" and states == {
        "a": NodeState.WAITING,
        "b": NodeState.WAITING,
        "c": NodeState.EVEN,
        "d": NodeState.SLOW,
    }
    # Half the nodes slow: the median node is slow, no one node holds the job up.
    halves = job_nodes([_steps("a", 0, comm=10.0), _steps("b", 1, compute=20.0), _steps("c", 2, compute=20.0)])
    assert halves.slow_node is None


def test_merge_ranks_adds_the_clocks_and_the_nodes_where_ranks_run_on_two_hosts():
    import pandas as pd

    from perfcore.analysis.ranks import clock_offsets, merge_ranks

    rng = np.random.default_rng(3)
    true = np.arange(12, dtype=np.int64) * 30_000_000
    parts = []
    for rank, host, ahead, compute, comm in ((0, "a", 0, 10.0, 9.0), (1, "b", HOUR_NS, 19.0, 0.0)):
        ev = _events(host, rank, true, ahead, rng)
        n = len(true)
        steps = pd.DataFrame(
            {
                "step": range(n),
                "warmup": [False] * n,
                "load_ms": 1.0,
                "transfer_ms": 0.0,
                "compute_ms": compute,
                "comm_ms": comm,
                "host_ms": 0.5,
            }
        )
        steps["wall_ms"] = steps[[f"{lb}_ms" for lb in LABELS]].sum(axis=1)
        bms = {lb: float(steps[f"{lb}_ms"].mean()) for lb in LABELS}
        doc = {
            "rank": rank,
            "world_size": 2,
            "host": host,
            "steps": n,
            "step_time_ms": {"mean": 20.5},
            "breakdown_ms": bms,
            "breakdown_fraction": {k: v / 20.5 for k, v in bms.items()},
        }
        raw = {
            "span_phase": np.full(n, 3, np.int32),
            "span_step": ev.comm_steps,
            "span_end_ns": ev.comm_end_ns,
            "step_start_ns": ev.step_end_ns - 20_000_000,
            "step_wall_ns": np.full(n, 20_000_000),
        }
        parts.append(Part.parse(doc, steps, raw))
    m = merge_ranks(parts)
    assert m["clocks"]["reference"] == "a" and m["clocks"]["hosts"][1]["source"] == "collectives"
    assert abs(m["clocks"]["hosts"][1]["offset_ns"] + HOUR_NS) < 500_000
    assert clock_offsets(parts) == {h["host"]: h["offset_ns"] for h in m["clocks"]["hosts"]}
    assert m["nodes"]["slow_node"]["host"] == "b" and m["nodes"]["slow_node"]["excess_label"] == "compute"
    assert [n["state"] for n in m["nodes"]["nodes"]] == ["waiting", "slow"]
    # One host: neither (its ranks are the job's nodes' whole story).
    parts = [Part.parse({**p.doc, "host": "a"}, p.table, p.raw) for p in parts]
    assert "nodes" not in merge_ranks(parts) and "clocks" not in merge_ranks(parts)


def test_the_launchers_of_two_nodes_beside_their_ranks_are_one_job():
    from perfcore.analysis.ranks import job_problem

    def part(rank, host, pid, steps):
        return Part.parse({"rank": rank, "world_size": 4 if rank is not None else None, "host": host, "pid": pid,
                           "steps": steps, "warmup_steps": 0, "nested_in": None})

    # torchrun's agent on each node imports torch and writes a part of its own: no rank, no step.
    job = [part(None, "node0", 10, 0), part(0, "node0", 11, 30), part(1, "node0", 12, 30),
           part(None, "node1", 10, 0), part(2, "node1", 11, 30), part(3, "node1", 12, 30)]
    assert job_problem(job) is None
    # A process without a rank that trained is a run of its own beside the job's ranks.
    alone = part(None, "node1", 13, 30)
    assert job_problem([*job, alone]) == {"reason": "no_rank", "count": 1, "parts": [["node1", 13]]}


def _table_part(rank, host, compute, comm, n=42, world=6):
    import pandas as pd

    steps = pd.DataFrame({"step": range(n), "warmup": [False] * n, "load_ms": 1.0, "transfer_ms": 0.0,
                          "compute_ms": compute, "comm_ms": comm, "host_ms": 0.5})
    steps["wall_ms"] = steps[[f"{lb}_ms" for lb in LABELS]].sum(axis=1)
    bms = {lb: float(steps[f"{lb}_ms"].mean()) for lb in LABELS}
    wall = sum(bms.values())
    doc = {"rank": rank, "world_size": world, "host": host, "steps": n, "warmup_steps": 0, "device": "cpu",
           "step_time_ms": {"mean": wall, "p50": wall, "p90": wall}, "breakdown_ms": bms,
           "breakdown_fraction": {k: v / wall for k, v in bms.items()}}
    return Part.parse(doc, steps, {})


def test_a_whole_slow_node_holds_up_the_job_though_none_of_its_ranks_alone_is_slowest_on_most_steps():
    from perfcore.analysis.ranks import merge_ranks, straggle

    # node1's three ranks compute 12 ms more a step, taking turns at being the slowest (a third of the
    # steps each); node0's ranks wait for them.
    n = 42
    turn = np.arange(n) % 3
    parts = [_table_part(r, "node0", 10.0, 13.3) for r in range(3)]
    parts += [_table_part(3 + j, "node1", 22.0 + np.where(turn == j, 0.3, 0.0), 1.3 - np.where(turn == j, 0.3, 0.0))
              for j in range(3)]
    m = merge_ranks(parts)
    assert m["nodes"]["slow_node"]["host"] == "node1"
    (s,) = m["stragglers"]
    assert s["host"] == "node1" and s["rank"] in (3, 4, 5) and s["excess_label"] == "compute"
    assert s["excess_ms"] == pytest.approx(12.1, abs=0.2)
    assert {w["rank"] for w in m["waiting"]} == {0, 1, 2}
    st = straggle(*_job(m))
    assert st.slow_rank == s["rank"] and st.waiting_rank in (0, 1, 2) and st.wait_share > 0.4
    assert (st.slow_host, st.waiting_host) == ("node1", "node0")  # the verdict's straggle knows the nodes
    # The job's verdict: the wait for the slow node's rank, not the waiting ranks' communication.
    from perfcore.analysis.advice import advise_run

    doc = {**parts[0].doc, **m}
    focus = next(p.doc for p in parts if p.rank == s["rank"])
    v = advise_run(doc, zero_code=True, focus=focus, evidence={"cpu_count": 8}).verdict
    assert v.bound == "straggler" and v.straggler.slow_rank == s["rank"]
    # Seen from node1 alone (its node's view), no rank of it stands out.
    assert merge_ranks(parts[3:], node_view=True)["stragglers"] == []


def _job(merged):
    """The job's rows as the advice reads them from a merged document: stragglers, waiting, ranks."""
    from perfcore.analysis.advice_evidence import RunFacts, read

    run = read(RunFacts, merged)
    return run.stragglers, run.waiting, run.ranks

