"""A job across two simulated machines launched as srun launches it (tests/nodes.py): one `perfcore run --
python train.py` per task, each with the variables srun sets (SLURM_JOB_ID, SLURM_STEP_ID, SLURM_PROCID,
SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, SLURM_NNODES) and no torchrun: the script maps SLURM_PROCID to
RANK itself, as Slurm scripts do, and perfcore's child takes its rank from Slurm's variables. Four perfcore
runs, one shared folder, one report."""

from __future__ import annotations

import json

import pytest

from nodes import NODE_OFFSET_S, WORK, job_or_skip, plan_nodes


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("srun")
    return job_or_skip(tmp, nodes=plan_nodes(2, slow=1), launcher="srun", shared=True, steps=30, script_args=WORK)


def test_four_tasks_one_folder_one_report(job):
    assert len(job.launches) == 4
    for la in job.launches:
        assert la.returncode == 0, la.stderr[-3000:]
    out = job.launches[0].out
    wrote = [la for la in job.launches if f"wrote {out}/:" in la.stderr]
    assert len(wrote) == 1
    assert sum("the job's report goes into" in la.stderr for la in job.launches) == 3
    doc = json.loads((out / "run.json").read_text())
    # Each task's process is the rank srun gave it: its part keyed by it, beside its node's name.
    assert [(r["rank"], r["host"]) for r in doc["ranks"]] == [(0, "node0"), (1, "node0"), (2, "node1"), (3, "node1")]
    assert sorted(d.name for d in (out / "parts").iterdir()) == ["rank0", "rank1", "rank2", "rank3"]
    assert doc["world_size"] == 4 and doc["missing_ranks"] == []
    for task in range(4):
        view = json.loads((out / "nodes" / f"node{task // 2}-task{task}" / "run.json").read_text())
        assert view["rank"] == task and [r["rank"] for r in view["ranks"]] == [task]


def test_the_slurm_jobs_clocks_are_aligned_and_its_slow_node_named(job):
    doc = json.loads((job.launches[0].out / "run.json").read_text())
    n1 = doc["clocks"]["hosts"][1]
    assert n1["host"] == "node1" and n1["source"] == "collectives"
    assert abs(n1["offset_ns"] + NODE_OFFSET_S * 10**9) <= max(1_000_000, n1["spread_ns"]), doc["clocks"]
    assert doc["nodes"]["slow_node"]["host"] == "node1"
    assert [n["state"] for n in doc["nodes"]["nodes"]] == ["waiting", "slow"]
