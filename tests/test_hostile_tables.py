"""A killed run's checkpoint table is untrusted input: never read through a link (so a crafted run.json
cannot turn another file's bytes into step rows), and never read past what its run.json claims (a
sparse file a tarball ships in a few bytes is refused at once, in bounded memory). Report and merge
read it through the same reader."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from perfcore.errors import PerfcoreError
from perfcore import jsonio
from perfcore.analysis.reader import load_part

COLS = ["step", "wall_ms", "load_ms", "transfer_ms", "compute_ms", "comm_ms", "host_ms", "warmup"]


def checkpoint_part(out: Path, rows: int, table_bytes, *, kinds=None, declared: int | None = None) -> Path:
    """parts/pid4242/checkpoint/ of a killed run: run.json describing steps.i64 (written by the caller)."""
    ck = out / "parts" / "pid4242" / "checkpoint"
    ck.mkdir(parents=True, exist_ok=True)
    declared = rows if declared is None else declared
    jsonio.write(ck / "run.json", {
        "schema": "perfcore.run/1", "backend": "host", "device": "cpu", "steps": declared - 1, "warmup_steps": 1,
        "pid": 4242, "rank": None, "argv": [],
        "checkpoint": {"steps": declared, "table": "steps.i64", "columns": COLS,
                       "kinds": kinds or ["i", "ms", "ms", "ms", "ms", "ms", "ms", "b"], "table_bytes": table_bytes},
        "exit": {"reason": "killed before writing its results", "exception": None},
    })
    return ck


def good_rows(n: int) -> bytes:
    return np.array([[k, 1_000_000, 500_000, 0, 400_000, 0, 100_000, k < 1] for k in range(n)], dtype="<i8").tobytes()


def perfcore(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "perfcore.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def test_a_checkpoint_table_that_is_a_link_is_refused_and_nothing_of_its_target_is_written(tmp_path):
    secret = tmp_path / "secret.bin"
    data = os.urandom(640)
    secret.write_bytes(data)
    out = tmp_path / "killed"
    # Every column an integer: through a link, the target's bytes would come back exactly as step values.
    ck = checkpoint_part(out, 10, 640, kinds=["i"] * 8)
    (ck / "steps.i64").symlink_to(secret)
    for args in (["report", out], ["merge", out, "--out", tmp_path / "merged"]):
        p = perfcore(*args)
        assert p.returncode == 1, (args, p.stderr)
        (line,) = p.stderr.strip().splitlines()
        assert "steps.i64: is a link" in line, line
    secret_ints = set(np.frombuffer(data, dtype="<i8").tolist())
    written = [f for f in (*out.rglob("*"), *tmp_path.joinpath("merged").rglob("*")) if f.is_file()
               and not f.is_symlink()]
    for f in written:
        text = f.read_bytes()
        assert not any(str(v).encode() in text for v in secret_ints if abs(v) > 10**6), f
    assert secret.read_bytes() == data and (ck / "steps.i64").is_symlink()


def test_a_checkpoint_table_that_is_a_hard_link_is_refused_and_nothing_of_its_target_is_written(tmp_path):
    """O_NOFOLLOW stops a symbolic link, not a second name for the same file: a hard link to a secret (made
    where the kernel allows it, or by the user's own tools) would bring its bytes back as exact step values."""
    secret = tmp_path / "secret.bin"
    data = os.urandom(640)
    secret.write_bytes(data)
    out = tmp_path / "killed"
    ck = checkpoint_part(out, 10, 640, kinds=["i"] * 8)
    os.link(secret, ck / "steps.i64")
    for args in (["report", out], ["merge", out, "--out", tmp_path / "merged"]):
        p = perfcore(*args)
        assert p.returncode == 1, (args, p.stderr)
        (line,) = p.stderr.strip().splitlines()
        assert "steps.i64: has 2 names (a hard link" in line, line
    secret_ints = {v for v in np.frombuffer(data, dtype="<i8").tolist() if abs(v) > 10**6}
    written = [f for f in (*out.rglob("*"), *tmp_path.joinpath("merged").rglob("*")) if f.is_file()
               and f.name != "steps.i64"]
    for f in written:
        text = f.read_bytes()
        assert not any(str(v).encode() in text for v in secret_ints), f
    assert secret.read_bytes() == data


@pytest.mark.parametrize("table_bytes", [None, 2**30, 2**62, 8 * 64 + 1])
def test_a_sparse_table_with_no_or_a_false_size_is_refused_by_its_claims(tmp_path, table_bytes):
    ck = checkpoint_part(tmp_path, 8, table_bytes)
    with open(ck / "steps.i64", "wb") as fh:
        fh.write(good_rows(8))
        fh.truncate(2**30)  # 1 GiB, a few bytes on disk: what a tarball carries
    with pytest.raises(PerfcoreError) as e:
        load_part(ck)
    assert "run.json: is corrupt" in str(e.value) and "\n" not in str(e.value)


def test_a_sparse_table_that_claims_its_size_is_refused_fast_and_in_bounded_memory(tmp_path):
    """Even a description that claims 16.7M rows consistently: a table perfcore wrote has no holes."""
    rows = 2**30 // 64
    ck = checkpoint_part(tmp_path, rows, 2**30)
    with open(ck / "steps.i64", "wb") as fh:
        fh.write(good_rows(8))
        fh.truncate(2**30)
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(PerfcoreError) as e:
            load_part(ck)
        elapsed = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "steps.i64: has holes" in str(e.value) and "\n" not in str(e.value)
    # Read whole, this table took 4.1 GB and minutes; refused, it costs what reading run.json does.
    assert peak < 16 << 20, peak
    assert elapsed < 10, elapsed


def test_a_real_checkpoint_still_reads_after_a_row_cut_short(tmp_path):
    ck = checkpoint_part(tmp_path, 4, 4 * 64)
    (ck / "steps.i64").write_bytes(good_rows(4) + good_rows(1)[:12])
    doc, steps, _ = load_part(ck)
    assert len(steps) == 4 and doc["steps"] == 3


def test_report_on_a_sparse_table_fails_in_one_line_through_the_cli(tmp_path):
    out = tmp_path / "killed"
    ck = checkpoint_part(out, 2**30 // 64, 2**30)
    with open(ck / "steps.i64", "wb") as fh:
        fh.truncate(2**30)
    t0 = time.perf_counter()
    p = perfcore("report", out)
    assert p.returncode == 1 and "has holes" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert time.perf_counter() - t0 < 60
    assert not (out / "run.json").exists()


def test_a_raw_part_is_never_read_through_a_link(tmp_path):
    from perfcore.run.part_files import RAW_SCHEMA, finish_raw
    from perfcore.untrusted import Refused

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "raw.json").write_text(json.dumps({"schema": RAW_SCHEMA, "recording": {}, "facts": {}}))
    np.savez(elsewhere / "raw.npz", x=np.arange(3))
    part = tmp_path / "parts" / "pid7"
    part.mkdir(parents=True)
    for name in ("raw.json", "raw.npz"):
        (part / name).symlink_to(elsewhere / name)
    with pytest.raises(Refused, match="raw.json: is a link"):
        finish_raw(part)
    (part / "raw.json").unlink()
    (part / "raw.json").write_text((elsewhere / "raw.json").read_text())
    with pytest.raises(Refused, match="raw.npz: is a link"):
        finish_raw(part)
