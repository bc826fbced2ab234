"""One job across machines, one folder: the job's identity read from torchrun's command line and srun's
variables, parents of one job joining one folder (at once, from several processes), other jobs never, and
exactly one parent writing the job's report."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import time
from pathlib import Path

import pytest

from perfcore.run import protocol
from perfcore.run.parent import folder as folder_mod
from perfcore.run.parent.folder import MARKER, prepare_job_out
from perfcore.run.parent.job import JOB_DIR, done, job_of, ranks_done

TR = ["torchrun", "--nnodes", "2", "--nproc_per_node", "2", "--node_rank", "1"]


def test_a_torchrun_job_is_known_by_its_rendezvous_and_a_single_node_is_no_job():
    a = job_of([*TR, "--master_addr", "10.0.0.1", "--master_port", "29533", "train.py", "--lr", "1"], {})
    assert (a.kind, a.key, a.nodes, a.task) == ("torchrun", "10.0.0.1:29533", 2, None)
    # The same job from its other node (another node rank), written with '-' and '=': one identity.
    b = job_of(["torchrun", "--nnodes=2", "--node-rank=0", "--master-addr=10.0.0.1", "--master-port=29533", "t.py"], {})
    assert b.digest == a.digest
    # Another port: another job; the defaults are torchrun's.
    assert job_of([*TR, "--master_port", "29534", "t.py"], {}).digest != a.digest
    assert job_of([*TR, "t.py"], {}).key == "127.0.0.1:29500"
    c = job_of(["torchrun", "--nnodes", "1:4", "--rdzv-backend", "c10d", "--rdzv-endpoint", "h:29400",
                "--rdzv-id", "exp7", "t.py", "--nnodes", "9"], {})
    assert (c.key, c.nodes) == ("h:29400/exp7", 4)
    py = job_of(["python3", "-u", "-m", "torch.distributed.run", "--nnodes", "2", "--rdzv_endpoint", "h:1", "t.py"], {})
    assert py.key == "h:1/none"
    for alone in (["torchrun", "--nproc_per_node", "2", "t.py"], ["torchrun", "--standalone", "--nnodes", "2", "t.py"],
                  ["python", "train.py", "--nnodes", "2"], ["python", "-m", "mymod", "--nnodes", "2"], []):
        assert job_of(alone, {}) is None, alone


def test_an_srun_task_is_known_by_its_job_step_and_gets_its_rank_where_no_launcher_sets_one():
    env = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_PROCID": "3", "SLURM_NTASKS": "4",
           "SLURM_LOCALID": "1", "SLURM_NNODES": "2"}
    j = job_of(["python", "train.py"], env)
    assert (j.kind, j.key, j.nodes, dict(j.task)) == ("slurm", "4242.0", 2, {"rank": 3, "world_size": 4, "local_rank": 1})
    # One torchrun a node under srun: torchrun numbers the ranks; the job is still srun's step.
    t = job_of([*TR, "t.py"], {**env, "SLURM_PROCID": "1", "SLURM_NTASKS": "2"})
    assert t.kind == "slurm" and t.task is None
    assert job_of(["python", "t.py"], {**env, "SLURM_STEP_ID": "1"}).digest != j.digest
    # A leftover or a lone task: no job (salloc's shell has no step; srun -n 1 has one task).
    assert job_of(["python", "t.py"], {k: v for k, v in env.items() if k != "SLURM_STEP_ID"}) is None
    assert job_of(["python", "t.py"], {**env, "SLURM_NTASKS": "1", "SLURM_PROCID": "0"}) is None
    assert job_of(["python", "t.py"], {**env, "SLURM_PROCID": "../3"}) is None


def test_part_keys_and_worker_files_carry_the_host_so_two_machines_never_share_a_name():
    me = protocol.part_key(None)
    assert me == f"pid{os.getpid()}-{protocol.host_tag()}" and protocol.is_part_key(me)
    assert protocol.host_tag("node0") != protocol.host_tag("node1") and len(protocol.host_tag("x")) == 8
    assert protocol.part_key(3) == "rank3" and protocol.is_part_key("pid7")  # older folders' keys
    assert not protocol.is_part_key("pid7-../x") and not protocol.is_part_key("pid7-ABCDEF12")
    assert protocol.worker_file(12, 0) == f"12.{protocol.host_tag()}.L0.csv"
    assert protocol.worker_file(12, 1, main=True).startswith("12-main.")


def _join(args):
    out, digest, barrier_at = args
    time.sleep(max(0.0, barrier_at - time.time()))
    return str(prepare_job_out(Path(out), digest))


def test_the_parents_of_one_job_starting_at_once_all_join_one_folder(tmp_path):
    ctx = mp.get_context("spawn")
    for trial in range(4):
        out = tmp_path / f"job{trial}"
        with ctx.Pool(6) as pool:
            at = time.time() + 2.0
            got = pool.map(_join, [(str(out), "ab" * 8, at)] * 6)
        assert set(got) == {str(out)}, got
        assert json.loads((out / MARKER).read_text())["job"] == "ab" * 8


def test_another_job_or_a_later_run_of_the_same_command_never_joins(tmp_path, monkeypatch, capsys):
    out = tmp_path / "shared"
    a, b = "a" * 16, "b" * 16
    assert prepare_job_out(out, a) == out
    assert prepare_job_out(out, a) == out  # its other node
    # Another job sharing --out: a folder of its own, found alike by its other nodes.
    other = prepare_job_out(out, b)
    assert other == out / f"job-{b[:12]}" and prepare_job_out(out, b) == other
    assert "holds another run" in capsys.readouterr().err
    # The job reported: a rerun of the same command is a new job.
    (out / JOB_DIR).mkdir(exist_ok=True)
    (out / JOB_DIR / "report").write_text("x")
    again = prepare_job_out(out, a)
    assert again == out / f"job-{a[:12]}"
    # Begun longer ago than a rendezvous waits: an earlier run, not this one.
    monkeypatch.setattr(folder_mod, "JOIN_S", 0.0)
    assert prepare_job_out(out, a) == out / f"job-{a[:12]}-2"
    # A folder with the user's files is never taken.
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    assert prepare_job_out(mine, a) == mine / f"job-{a[:12]}" and (mine / "notes.txt").read_text() == "keep"


def _finish(args):
    out, ranks, at = args
    time.sleep(max(0.0, at - time.time()))
    return done(Path(out), 0, ranks, 8)


def test_exactly_one_parent_writes_the_jobs_report_and_only_once_every_rank_is_done(tmp_path, monkeypatch):
    from perfcore.run.parent import job as job_mod

    ctx = mp.get_context("spawn")
    for trial in range(4):
        out = tmp_path / f"j{trial}"
        out.mkdir()
        with ctx.Pool(4) as pool:
            at = time.time() + 2.0
            last = pool.map(_finish, [(str(out), [2 * i, 2 * i + 1], at) for i in range(4)])
        assert sum(last) == 1, last
        assert ranks_done(out) == {"ranks": list(range(8)), "world_size": 8, "missing": [], "parents": 4, "rc": 0}
    # Every rank done already (the report claimed): a parent finishing later finds it complete and still
    # does not write it again.
    monkeypatch.setattr(job_mod, "_me", lambda: "late")
    assert done(tmp_path / "j0", 0, [7], 8) is False
    # A node that never finishes (ran without perfcore, died): no parent is last; the ranks it held are said.
    out = tmp_path / "partial"
    out.mkdir()
    monkeypatch.setattr(job_mod, "_me", lambda: "node0")
    assert done(out, 0, [0, 1], 4) is False
    monkeypatch.setattr(job_mod, "_me", lambda: "node2")  # its ranks crashed before writing anything
    assert done(out, 3, [], None) is False
    state = ranks_done(out)
    assert state["missing"] == [2, 3] and state["rc"] == 3 and state["parents"] == 2


@pytest.mark.parametrize("bad", ["[1, 2", json.dumps({"ranks": ["x", -1, True], "world_size": 1 << 40, "rc": "0"})])
def test_a_damaged_done_file_counts_for_nothing(tmp_path, bad):
    (tmp_path / JOB_DIR / "done").mkdir(parents=True)
    (tmp_path / JOB_DIR / "done" / "x.json").write_text(bad)
    assert done(tmp_path, 0, [0], 1) is True  # its own rank completes a job of one; the bad file adds none


def test_a_task_that_failed_before_its_first_step_never_offers_the_jobs_folder_to_the_next_run(tmp_path):
    import subprocess
    import sys

    env = {**os.environ, "SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0", "SLURM_PROCID": "1", "SLURM_NTASKS": "2",
           "SLURM_LOCALID": "1", "SLURM_NNODES": "2"}
    out = tmp_path / "job"
    p = subprocess.run([sys.executable, "-m", "perfcore", "run", "--out", str(out), "--", sys.executable, "-c",
                        "import torch; raise SystemExit(3)"], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 3, p.stderr[-2000:]
    # The folder holds (or will hold) the job's other tasks' results: it is never marked as a failed run's,
    # which the next run could take over.
    mark = json.loads((out / MARKER).read_text())
    assert mark["job"] and "ended" not in mark
    state = ranks_done(out)
    assert state["parents"] == 1 and state["rc"] == 3 and state["ranks"] == [1]  # srun gave it rank 1
