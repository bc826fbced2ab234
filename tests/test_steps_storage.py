"""A large run keeps its steps table once, compressed: steps.csv.gz in the run folder, the part's copy
compressed after finishing; report, compare and merge read both forms."""
from __future__ import annotations

import json

from click.testing import CliRunner

from perfcore.cli import cli
from perfcore.report import jsonio
from perfcore.run.parent.part_dirs import LARGE_STEPS

from run_docs import write_run_folder


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], prog_name="perfcore")


def large_unfinished(out, rank=None):
    part = write_run_folder(out / "parts" / (f"rank{rank}" if rank is not None else "pid4242"), steps=LARGE_STEPS)
    doc = json.loads((part / "run.json").read_text())
    doc.update(rank=rank, world_size=1 if rank is not None else None)
    jsonio.write(part / "run.json", doc)
    return out


def test_a_large_table_is_kept_once_and_compressed(tmp_path):
    out = large_unfinished(tmp_path / "r")
    plain = (out / "parts" / "pid4242" / "steps.csv").stat().st_size
    res = invoke("report", out)
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "run.json").read_text())
    assert doc["files"]["steps.csv.gz"] == "steps.csv.gz" and "steps.csv" not in doc["files"]
    assert not (out / "steps.csv").exists() and not (out / "steps.parquet").exists()
    part = out / "parts" / "pid4242"
    assert not (part / "steps.csv").exists() and (part / "steps.csv.gz").is_file()
    kept = (out / "steps.csv.gz").stat().st_size + (part / "steps.csv.gz").stat().st_size
    assert kept < plain / 2, (kept, plain)
    again = invoke("report", out)  # read back from the compressed table
    assert again.exit_code == 0 and doc["steps"] == LARGE_STEPS, again.output
    assert invoke("compare", out, out).exit_code == 0


def test_merge_reads_a_compressed_part(tmp_path):
    node = large_unfinished(tmp_path / "node", rank=0)
    assert invoke("report", node).exit_code == 0
    assert (node / "parts" / "rank0" / "steps.csv.gz").is_file()
    res = invoke("merge", node, "--out", tmp_path / "m")
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "m" / "run.json").read_text())["steps"] == LARGE_STEPS
