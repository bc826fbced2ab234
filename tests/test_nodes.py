"""A job across two machines, simulated on this one (tests/nodes.py): two nodes, each its own hostname and a
monotonic clock two hours from the other's, two gloo ranks each under torchrun --nnodes 2, node1 slowed from
outside. The job runs once, both nodes' perfcore writing one folder (a shared filesystem); each node's copy of
that folder (its own parts and DataLoader files) is what its folder holds on machines that share no disk, and
`perfcore merge` joins those copies. A node alone in a folder is what the first parent to finish in the shared
folder is (it writes its node's view and says where the job's report goes), and what node0 of the job whose
other node runs without perfcore is (the last test)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nodes import NODE_OFFSET_S, WORK, job_or_skip, plan_nodes
from perfcore.analysis.labels import LABELS
from perfcore.analysis.nodes import ClockSource, NodeState, RankSteps, align_clocks, job_nodes, rank_events
from perfcore.analysis.reader import load_part


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """The job, both nodes' perfcore writing one folder (a shared filesystem): run once for the module."""
    tmp = tmp_path_factory.mktemp("shared")
    return job_or_skip(tmp, nodes=plan_nodes(2, slow=1), launcher="torchrun", shared=True, steps=30, script_args=WORK)


@pytest.fixture(scope="module")
def copies(shared, tmp_path_factory) -> list[Path]:
    """Each node's copy of the shared folder (node0's, node1's): its parts and its DataLoader files (named with
    their host's tag), what the folder of a node that shares no disk with the other holds."""
    from perfcore.run.protocol import host_tag

    out, base = shared.launches[0].out, tmp_path_factory.mktemp("copies")
    folders = {}
    for d in sorted((out / "parts").iterdir()):
        host = load_part(d)[0]["host"]
        folders.setdefault(host, base / host)
        shutil.copytree(d, folders[host] / "parts" / d.name)
    for f in (out / "workers").iterdir():
        host = next(h for h in folders if f.name.split(".")[1] == host_tag(h))
        (folders[host] / "workers").mkdir(exist_ok=True)
        shutil.copy(f, folders[host] / "workers" / f.name)
    return [folders[h] for h in sorted(folders)]


def _parts(folder: Path):
    return [load_part(d) for d in sorted(folder.glob("parts/rank*"))]


def test_each_node_ran_as_a_machine_of_its_own(shared, copies):
    for la in shared.launches:
        assert la.returncode == 0, la.stderr[-3000:]
    node0, node1 = (_parts(folder) for folder in copies)
    assert {(d["host"], d["rank"], d["world_size"]) for d, _, _ in node0} == {("node0", 0, 4), ("node0", 1, 4)}
    assert {(d["host"], d["rank"], d["world_size"]) for d, _, _ in node1} == {("node1", 2, 4), ("node1", 3, 4)}
    # The steps started together, on clocks NODE_OFFSET_S apart.
    gap_s = (node1[0][2]["step_start_ns"][0] - node0[0][2]["step_start_ns"][0]) / 1e9
    assert gap_s == pytest.approx(NODE_OFFSET_S, abs=60)


def test_clocks_are_aligned_by_the_collectives_to_the_true_offset(shared):
    parts = _parts(shared.launches[0].out)
    al = align_clocks([rank_events(raw, doc["host"], doc["rank"]) for doc, _, raw in parts])
    assert al.reference == "node0"
    n1 = al.hosts[1]
    assert n1.source is ClockSource.COLLECTIVES and n1.steps >= 25
    # The namespaces' clocks are exactly NODE_OFFSET_S apart: the estimate is within 1 ms of that, or, where
    # this machine's load makes the collectives' ends noisier than that, within the spread it measured
    # and states (the per-step gaps' robust sigma: 0.3-0.7 ms on a quiet run here, 6 ms beside a test run).
    tolerance = max(1_000_000, n1.spread_ns)
    assert abs(n1.offset_ns + NODE_OFFSET_S * 10**9) <= tolerance, (n1, al)
    # On one clock, the nodes' collective ends of one step line up as closely (the median step).
    assert al.residual_steps >= 25 and al.residual_ns <= tolerance, al


def test_the_slow_node_is_named_and_the_other_waits_for_it(shared):
    ranks = []
    for doc, steps, _ in _parts(shared.launches[0].out):
        m = steps[~steps["warmup"].to_numpy(dtype=bool)]
        ranks.append(
            RankSteps(
                doc["host"], doc["rank"], m["wall_ms"].to_numpy(), {lb: m[f"{lb}_ms"].to_numpy() for lb in LABELS}
            )
        )
    nodes = job_nodes(ranks)
    states = {n.host: n.state for n in nodes.nodes}
    assert states == {"node0": NodeState.WAITING, "node1": NodeState.SLOW}, nodes
    slow = nodes.slow_node
    assert slow.host == "node1" and slow.rank in (2, 3)
    # Held stopped, it is slower in what it does itself (its compute dominates), never in comm.
    assert slow.excess_label == "compute" and slow.work_ms > 1.3 * slow.others_work_ms, slow
    assert slow.waiting_host == "node0" and slow.wait_share > 0.2
    assert np.isclose(sum(nodes.nodes[1].breakdown_fraction.values()), 1.0)


@pytest.fixture(scope="module")
def merged(copies, tmp_path_factory):
    """`perfcore merge` of the nodes' folders."""
    out = tmp_path_factory.mktemp("merged") / "job"
    p = subprocess.run([sys.executable, "-m", "perfcore", "merge", *map(str, copies), "--out", str(out)],
                       capture_output=True, text=True, timeout=600)
    return p, out


def test_perfcore_merge_of_the_nodes_folders_is_one_job_of_four_ranks(merged):
    p, out = merged
    # torchrun's agent on each node left a part with no rank and no step: not a run to refuse.
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads((out / "run.json").read_text())
    assert [(r["rank"], r["host"]) for r in doc["ranks"]] == [(0, "node0"), (1, "node0"), (2, "node1"), (3, "node1")]
    assert doc["missing_ranks"] == [] and doc["world_size"] == 4
    assert doc["clocks"]["reference"] == "node0" and doc["clocks"]["hosts"][1]["source"] == "collectives"
    assert doc["clock_offsets_ns"]["node1"] == doc["clocks"]["hosts"][1]["offset_ns"]
    assert doc["nodes"]["slow_node"]["host"] == "node1"
    assert [n["state"] for n in doc["nodes"]["nodes"]] == ["waiting", "slow"]


def test_the_merged_trace_puts_the_nodes_collectives_on_one_clock(merged):
    _, out = merged
    doc = json.loads((out / "run.json").read_text())
    trace = json.loads((out / "trace.json").read_text())["traceEvents"]
    host_of = {}
    for e in trace:
        if e.get("name") == "process_name" and e["args"]["name"].endswith(" host"):
            rank = int(e["args"]["name"].split()[1])
            host_of[e["pid"]] = next(r["host"] for r in doc["ranks"] if r["rank"] == rank)
    ends: dict[str, dict[int, dict[int, float]]] = {}  # host -> step -> pid -> last comm end (us)
    for e in trace:
        if e.get("name") == "comm" and e.get("cat") == "host" and e["pid"] in host_of:
            per = ends.setdefault(host_of[e["pid"]], {}).setdefault(e["args"]["step"], {})
            per[e["pid"]] = max(per.get(e["pid"], -np.inf), e["ts"] + e["dur"])
    names = {e["args"]["name"] for e in trace if e.get("name") == "process_name"}
    assert {"rank 0 (node0) host", "rank 3 (node1) host", "rank 3 (node1) GPU"} <= names
    steps = sorted(set(ends["node0"]) & set(ends["node1"]))
    assert len(steps) >= 25
    # Per step, each node's earliest rank (lateness only adds): the two nodes' ends on the trace's one clock.
    gaps_ms = [abs(min(ends["node0"][s].values()) - min(ends["node1"][s].values())) / 1e3 for s in steps]
    tolerance_ms = max(1.0, doc["clocks"]["hosts"][1]["spread_ns"] / 1e6)
    assert np.median(gaps_ms) <= tolerance_ms, (gaps_ms, tolerance_ms)
    # A rank records a collective's end late (the slowed node is held stopped a share of the time), never
    # early: on the steps where neither node was held, the ends line up within 1 ms (here 15 of 41 steps of a
    # run beside the tests: 0.6 ms at the quartile, 0.27 ms at the tenth percentile).
    assert np.percentile(gaps_ms, 25) <= 1.0, sorted(gaps_ms)
    # The alignment's uncertainty is run.json's: each host's spread and the median's error, and the line-up.
    clocks = doc["clocks"]
    assert clocks["hosts"][1]["error_ns"] > 0 and clocks["residual_steps"] >= 25 and clocks["residual_ns"] >= 0


def test_one_folder_one_report_written_by_the_node_that_finished_last(shared):
    for la in shared.launches:
        assert la.returncode == 0, la.stderr[-3000:]
    out = shared.launches[0].out
    assert {la.out for la in shared.launches} == {out}
    # One parent wrote the job's report (at the top); the other said its node's view and where the report goes.
    wrote = [la for la in shared.launches if f"wrote {out}/:" in la.stderr]
    waited = [la for la in shared.launches if "the job's report goes into" in la.stderr]
    assert len(wrote) == 1 and len(waited) == 1 and wrote[0] is not waited[0]
    doc = json.loads((out / "run.json").read_text())
    assert [(r["rank"], r["host"]) for r in doc["ranks"]] == [(0, "node0"), (1, "node0"), (2, "node1"), (3, "node1")]
    assert doc["missing_ranks"] == [] and doc["nodes"]["slow_node"]["host"] == "node1"
    # The job's verdict is the wait for the slow node (its rank with the most own work), not node0's comm.
    straggler = doc["verdict"]["straggler"]
    assert straggler["slow_rank"] in (2, 3) and straggler["waiting_rank"] in (0, 1), doc["verdict"]
    assert doc["stragglers"][0]["host"] == "node1"
    # Each node's view: its own ranks only, none said missing (the job's report says what is).
    for node, ranks in (("node0", [0, 1]), ("node1", [2, 3])):
        view = json.loads((out / "nodes" / node / "run.json").read_text())
        assert [r["rank"] for r in view["ranks"]] == ranks and view["missing_ranks"] == []
        assert {r["host"] for r in view["ranks"]} == {node}
    # Both torchrun agents' parts, keyed apart though their pids may repeat across machines.
    agents = sorted(d.name for d in (out / "parts").iterdir() if d.name.startswith("pid"))
    assert len(agents) == 2 and len({a.rsplit("-", 1)[1] for a in agents}) == 2


def test_perfcore_merge_of_each_nodes_copy_gives_the_same_report(shared, merged):
    p, merged_out = merged
    assert p.returncode == 0, p.stderr[-3000:]
    job, merged = (json.loads((f / "run.json").read_text()) for f in (shared.launches[0].out, merged_out))
    for key in ("ranks", "stragglers", "waiting", "missing_ranks", "world_size", "clocks", "nodes", "clock_offsets_ns"):
        assert merged.get(key) == job.get(key), (key, merged.get(key), job.get(key))
    assert merged["verdict"]["bound"] == job["verdict"]["bound"]


def test_a_node_without_perfcore_leaves_the_job_unreported_until_perfcore_report_names_its_ranks(tmp_path):
    part = job_or_skip(tmp_path, nodes=plan_nodes(2, slow=None, bare=(1,)), shared=True, steps=12)
    node0, node1 = part.launches
    assert node0.returncode == 0 and node1.returncode == 0, node0.stderr[-3000:]
    out = node0.out
    # Its ranks 2 and 3 never report: node0's perfcore says so and where the job's report goes.
    assert "rank(s) 2, 3 of 4 not done yet" in node0.stderr and f"perfcore report {out}" in node0.stderr
    assert not (out / "run.json").exists() and (out / "nodes" / "node0" / "run.json").is_file()
    p = subprocess.run([sys.executable, "-m", "perfcore", "report", str(out), "--json", "-"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads((out / "run.json").read_text())
    assert doc["missing_ranks"] == [2, 3] and [r["rank"] for r in doc["ranks"]] == [0, 1]
    assert "MISSING: rank(s) 2, 3 of 4" in p.stderr
