"""Multi-rank runs on CPU with gloo: real torchrun, real DDP, one rank slower by construction."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perfcore.analysis.codec import from_doc
from perfcore.analysis.process_part import Part
from perfcore.analysis.ranks import clock_offsets, merge_ranks
from perfcore.analysis.run_context import Straggler, Waiting
from perfcore.analysis.units import fmt_ms
from perfcore.report.words.runs import job_problem_words, missing_sentence, straggler_sentence, waiting_sentence
from perfcore.analysis.reader import load_run
from perfcore.report.words.verdict import verdict_long

SCRIPT = str(Path(__file__).resolve().parent / "scripts" / "ddp_train.py")
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))


def perfcore(*args, timeout=240):
    return subprocess.run([sys.executable, "-m", "perfcore.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    if not Path(TORCHRUN).exists():
        pytest.skip("torchrun not installed next to this Python")
    out = tmp_path_factory.mktemp("ddp") / "run"
    p = perfcore("run", "--warmup", "3", "--out", str(out), "--", TORCHRUN, "--nproc_per_node=2", SCRIPT,
                 "--slow-rank", "1", "--delay", "0.0025")
    return p, out


def test_both_ranks_measured_and_the_slow_one_named(two_ranks):
    p, out = two_ranks
    assert p.returncode == 0, p.stderr[-3000:]
    doc = load_run(out)[0]
    assert doc.world_size == 2 and [r.rank for r in doc.ranks] == [0, 1]
    for r in doc.ranks:
        assert r.breakdown_fraction is not None and r.steps == 27
    st = doc.stragglers
    assert len(st) == 1 and st[0].rank == 1 and st[0].excess_label == "load"
    assert st[0].excess_ms > 15  # 8 items x 2.5 ms of loading per step
    assert "rank 1" in straggler_sentence(st[0]) and "load" in straggler_sentence(st[0])
    r0, r1 = doc.ranks
    # The fast rank's extra time is waiting in comm; the slow rank's is loading.
    assert r0.breakdown_ms.comm > 0.7 * r1.breakdown_ms.load
    assert r1.breakdown_ms.comm < 0.2 * r0.breakdown_ms.comm
    assert doc.verdict.bound == "load" and "rank 1" in verdict_long(doc.verdict)
    # The headline names the wait for the straggler, with the slow rank and why it is slow.
    job = doc.verdict.straggler
    assert (job.slow_rank, job.waiting_rank, job.excess_label) == (1, 0, "load")
    assert job.wait_ms == pytest.approx(r0.breakdown_ms.comm, rel=0.3) and job.wait_share >= 0.1
    assert verdict_long(doc.verdict).startswith("rank 1 holds up the job: rank 0 waits")
    assert doc.findings[0].kind != "balance_ranks"  # rank 1's own cause (load) is the change
    assert doc.missing_ranks == ()


def test_a_rank_that_computes_longer_is_named_in_the_headline(tmp_path):
    if not Path(TORCHRUN).exists():
        pytest.skip("torchrun not installed next to this Python")
    out = tmp_path / "run"
    p = perfcore("run", "--warmup", "3", "--out", str(out), "--", TORCHRUN, "--nproc_per_node=2", SCRIPT,
                 "--slow-rank", "1", "--compute-delay", "0.02")
    assert p.returncode == 0, p.stderr[-3000:]
    doc = load_run(out)[0]
    assert doc.stragglers[0].rank == 1 and doc.stragglers[0].excess_label == "compute"
    v = doc.verdict
    # Rank 1's own steps are compute; rank 0 waits about the 20 ms it sleeps in forward.
    assert v.bound == "straggler" and v.healthy is False
    assert (v.straggler.slow_rank, v.straggler.waiting_rank) == (1, 0)
    assert v.straggler.wait_ms > 10 and v.straggler.wait_share >= 0.2 and v.level == "critical"
    assert "compute-bound (healthy)" not in p.stderr and "verdict: straggler rank 1 (major): rank 0 waits" in p.stderr
    assert doc.findings[0].kind == "balance_ranks"


def test_trace_and_plots_cover_all_ranks(two_ranks):
    _, out = two_ranks
    trace = json.loads((out / "trace.json").read_text())
    procs = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
    assert {"rank 0 host", "rank 1 host"} <= procs
    assert (out / "ranks.png").stat().st_size > 5000
    assert (out / "steps_rank0.csv").is_file() and (out / "steps_rank1.csv").is_file()


def test_merge_parts_written_on_different_nodes(two_ranks, tmp_path):
    _, out = two_ranks
    node_a, node_b = tmp_path / "nodeA", tmp_path / "nodeB"
    for node, rank in ((node_a, 0), (node_b, 1)):
        (node / "parts").mkdir(parents=True)
        shutil.copytree(out / "parts" / f"rank{rank}", node / "parts" / f"rank{rank}")
    p = perfcore("merge", str(node_a), str(node_b), "--out", str(tmp_path / "merged"), "--json", "-")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    assert doc["stragglers"][0]["rank"] == 1
    assert set(doc["clock_offsets_ns"].values()) == {0}  # one host: one clock
    bad = perfcore("merge", str(tmp_path / "nodeA" / "parts"), "--out", str(tmp_path / "m2"))
    assert bad.returncode == 2 and "holds no perfcore parts" in bad.stderr


def test_a_killed_rank_leaves_the_others_and_is_named_missing(tmp_path):
    if not Path(TORCHRUN).exists():
        pytest.skip("torchrun not installed next to this Python")
    out = tmp_path / "run"
    p = perfcore("run", "--warmup", "2", "--out", str(out), "--", TORCHRUN, "--nproc_per_node=2", SCRIPT,
                 "--crash-rank", "1", "--crash-at", "10", "--hard")
    assert p.returncode != 0
    doc = load_run(out)[0]
    assert doc.missing_ranks == (1,)
    assert [r.rank for r in doc.ranks] == [0]
    assert "MISSING: rank(s) 1 of 2" in p.stderr
    assert doc.exit.reason in ("crashed", "terminated")


def _part(rank, load, comm, compute=1.0, host_name="h", n=10):
    steps = pd.DataFrame({"step": range(n), "warmup": [False] * n, "load_ms": load, "transfer_ms": 0.0,
                          "compute_ms": compute, "comm_ms": comm, "host_ms": 0.5})
    steps["wall_ms"] = steps[["load_ms", "transfer_ms", "compute_ms", "comm_ms", "host_ms"]].sum(axis=1)
    bms = {"load": load, "transfer": 0.0, "compute": compute, "comm": comm, "host": 0.5}
    wall = sum(bms.values())
    doc = {"rank": rank, "world_size": 3, "host": host_name, "steps": n,
           "step_time_ms": {"mean": wall, "p50": wall, "p90": wall}, "breakdown_ms": bms,
           "breakdown_fraction": {k: v / wall for k, v in bms.items()}}
    return Part.parse(doc, steps)


def test_merge_ranks_on_hand_built_parts():
    parts = [_part(0, 1.0, 9.0), _part(1, 1.0, 9.0), _part(2, 10.0, 0.0)]
    m = merge_ranks(parts)
    assert m["world_size"] == 3 and m["missing_ranks"] == []
    assert [s["rank"] for s in m["stragglers"]] == [2]
    assert m["stragglers"][0]["excess_label"] == "load"
    assert m["stragglers"][0]["excess_ms"] == pytest.approx(9.0)
    assert {w["rank"] for w in m["waiting"]} == {0, 1} and all(w["waits_for"] == [2] for w in m["waiting"])
    raw = m["stragglers"][0]
    assert raw["work_ms"] > raw["others_work_ms"] and "sentence" not in raw  # facts: the words are report's
    # The words are made from those figures.
    s = from_doc(Straggler, raw)
    assert f"{fmt_ms(s.excess_ms)}/step more" in straggler_sentence(s) and "rank 2" in straggler_sentence(s)
    for w in m["waiting"]:
        assert f"rank {w['rank']} waits {fmt_ms(w['comm_ms'])}/step" in waiting_sentence(from_doc(Waiting, w))
    balanced = merge_ranks([_part(0, 1.0, 1.0), _part(1, 1.0, 1.0), _part(2, 1.0, 1.0)])
    assert balanced["stragglers"] == []
    missing = merge_ranks([_part(0, 1.0, 1.0), _part(2, 1.0, 1.0)])
    assert missing["missing_ranks"] == [1] and missing["world_size"] == 3
    from run_docs import typed_run

    run = typed_run(10.0, {"compute": 10.0}, missing_ranks=missing["missing_ranks"], world_size=3)
    assert "rank(s) 1 of 3" in missing_sentence(run)


def test_clock_offsets_from_collective_ends():
    def raw(shift):
        ends = np.arange(5) * 1000 + 500 + shift
        return {"span_phase": np.full(5, 3), "span_step": np.arange(5), "span_end_ns": ends}

    parts = [Part.parse({"host": "a"}, raw=raw(0)), Part.parse({"host": "b"}, raw=raw(-250))]
    assert clock_offsets(parts) == {"a": 0, "b": 250}


def _rank_part(rank, world, host="h", pid=1, wall=10.0, comm=0.0, n=6):
    steps = pd.DataFrame({"step": range(n), "warmup": [False] * n, "wall_ms": [wall] * n, "comm_ms": [comm] * n,
                          "load_ms": [0.0] * n, "transfer_ms": [0.0] * n, "compute_ms": [wall - comm] * n,
                          "host_ms": [0.0] * n})
    doc = {"rank": rank, "world_size": world, "host": host, "pid": pid, "steps": n,
           "step_time_ms": {"mean": wall}, "breakdown_ms": {}, "breakdown_fraction": {}}
    return Part.parse(doc, steps)


def test_processes_without_a_rank_are_not_missing_ranks():
    from perfcore.analysis.ranks import job_problem

    out = merge_ranks([_rank_part(None, None, pid=1), _rank_part(None, None, pid=2)])
    assert out["missing_ranks"] == [] and "missing_note" not in out
    # Two processes without a rank are two single-process runs, not one job.
    two = job_problem([_rank_part(None, None, pid=1), _rank_part(None, None, pid=2)])
    assert two == {"reason": "no_rank", "count": 2, "parts": [["h", 1], ["h", 2]]}
    assert "not a rank of one distributed job" in job_problem_words(two)
    # A script's own subprocess beside its process is still one run.
    helper = Part.parse({**_rank_part(None, None, pid=2).doc, "nested_in": 1})
    assert job_problem([_rank_part(None, None, pid=1), helper]) is None


def test_two_jobs_rank_0_is_not_one_job():
    from perfcore.analysis.ranks import job_problem

    assert job_problem([_rank_part(0, 2, pid=1), _rank_part(1, 2, pid=2)]) is None
    twice = job_problem([_rank_part(0, 2, pid=1), _rank_part(0, 2, pid=7)])
    assert twice == {"reason": "rank_claimed_twice", "rank": 0, "parts": [["h", 1], ["h", 7]]}
    assert job_problem([_rank_part(0, 2, pid=1), _rank_part(1, 4, pid=2)]) == {"reason": "world_sizes", "sizes": [2, 4]}
    assert "two parts claim rank 0 (host h pid 1, host h pid 7)" in job_problem_words(twice)


def test_zero_wall_steps_do_not_divide_by_zero():
    out = merge_ranks([_rank_part(0, 2, pid=1, wall=0.0), _rank_part(1, 2, pid=2, wall=0.0)])
    assert out["stragglers"] == []


def test_merging_two_jobs_folders_is_one_line(tmp_path):
    from click.testing import CliRunner
    from run_docs import write_run_folder

    from perfcore.cli import cli
    from perfcore import jsonio

    for name, pid in (("jobA", 11), ("jobB", 22)):
        part = write_run_folder(tmp_path / name / "parts" / "rank0", decided=False)
        doc = json.loads((part / "run.json").read_text())
        doc.update(rank=0, world_size=1, pid=pid)
        jsonio.write(part / "run.json", doc)
    res = CliRunner().invoke(cli, ["merge", str(tmp_path / "jobA"), str(tmp_path / "jobB"), "--out",
                                   str(tmp_path / "m")], prog_name="perfcore")
    lines = res.stderr.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and "two parts claim rank 0" in lines[0], lines
    assert not (tmp_path / "m").exists()


def _merged(parts):
    """A merged job document as finish makes it (rank 0's numbers plus the merge), and the slow rank's."""
    merged = {**parts[0].doc, "device": "cpu", "warmup_steps": 0, **merge_ranks(parts)}
    slow = merged["stragglers"][0]["rank"]
    return merged, next(p.doc for p in parts if p.rank == slow)


def test_a_straggler_that_computes_longer_is_the_jobs_headline():
    from perfcore.analysis.advice import advise_run
    from perfcore.analysis.ranks import straggle
    from perfcore.report.words.advice import try_short
    from perfcore.report.words.verdict import verdict_short

    # Rank 2 computes 10 ms a step; ranks 0 and 1 compute 1 ms and wait 9 ms for it in the collective.
    parts = [_part(0, 1.0, 9.0), _part(1, 1.0, 9.0), _part(2, 1.0, 0.0, compute=10.0)]
    doc, focus = _merged(parts)
    s = straggle(*_job(doc))
    assert (s.slow_rank, s.excess_label) == (2, "compute")
    assert s.wait_ms == pytest.approx(9.0) and s.wait_share == pytest.approx(9.0 / 11.5)
    d = advise_run(doc, zero_code=True, focus=focus, evidence={"cpu_count": 8})
    v = d.verdict
    # Alone, rank 2's own steps are healthy compute; the job's verdict is the wait for it.
    assert (v.bound, v.level, v.healthy) == ("straggler", "critical", False)
    assert v.straggler.waiting_rank in (0, 1) and v.straggler.excess_ms == pytest.approx(9.0)
    assert verdict_long(v).startswith("rank 2 holds up the job")
    rec = d.findings[0]
    assert rec.kind == "balance_ranks" and rec.cause == "straggler"
    assert all(r.kind != "faster_compute" for r in d.findings)
    line = verdict_short(v)
    assert line.startswith("straggler rank 2 (major): rank ") and "(78%) for it, compute +9.00 ms" in line
    assert len(line) <= 120
    assert "slow rank" in try_short(rec, v, None)
    # The slow rank's own collective time (its all-reduce) is not why it is slow: still the wait.
    parts = [_part(0, 1.0, 9.0), _part(1, 1.0, 9.0), _part(2, 1.0, 1.5, compute=10.0)]
    doc, focus = _merged(parts)
    v = advise_run(doc, zero_code=True, focus=focus, evidence={"cpu_count": 8}).verdict
    assert v.bound == "straggler" and v.named[0].label == "comm"


def test_a_wait_below_the_tier_leaves_the_slow_ranks_verdict():
    from perfcore.analysis.advice import advise_run

    # Rank 2 is slower by 0.6 ms of a 10.6 ms step: the others wait under 10% for it.
    parts = [_part(0, 1.0, 0.6, compute=8.5), _part(1, 1.0, 0.6, compute=8.5), _part(2, 1.0, 0.0, compute=9.1)]
    doc, focus = _merged(parts)
    assert doc["stragglers"][0]["rank"] == 2 and doc["waiting"]
    d = advise_run(doc, zero_code=True, focus=focus, evidence={"cpu_count": 8})
    assert d.verdict.bound == "compute" and d.verdict.straggler is None
    assert all(r.kind != "balance_ranks" for r in d.findings)


def _job(merged):
    """The job's rows as the advice reads them from a merged document: stragglers, waiting, ranks."""
    from perfcore.analysis.advice_evidence import RunFacts, read

    run = read(RunFacts, merged)
    return run.stragglers, run.waiting, run.ranks

