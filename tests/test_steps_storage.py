"""A large run keeps its steps table once, compressed: steps.csv.gz in the run folder, the main part's
table handed over to it (another part's compressed); report, compare and merge read every form."""

from __future__ import annotations

import json

from click.testing import CliRunner
from run_docs import write_run_folder

from perfcore.cli import cli
from perfcore import jsonio
from perfcore.run.parent.part_dirs import LARGE_STEPS

WARMUP = 1  # write_run_folder's default warm-up rows


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], prog_name="perfcore")


def large_unfinished(out, rank=None):
    part = write_run_folder(out / "parts" / (f"rank{rank}" if rank is not None else "pid4242"), decided=False,
                            steps=LARGE_STEPS)
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
    assert json.loads((part / "run.json").read_text())["steps_table"] == "run"
    assert rows_in(out) == {"steps.csv.gz": LARGE_STEPS + WARMUP}, "the steps rows are held once"
    assert (out / "steps.csv.gz").stat().st_size < plain / 2
    again = invoke("report", out)  # read back from the compressed table
    assert again.exit_code == 0 and doc["steps"] == LARGE_STEPS, again.output
    assert rows_in(out) == {"steps.csv.gz": LARGE_STEPS + WARMUP}
    assert invoke("compare", out, out).exit_code == 0


def rows_in(out):
    """Rows of every steps table under a folder (csv, csv.gz, parquet), by path."""
    import pandas as pd

    found = {}
    for f in sorted(out.rglob("*")):
        if f.name.startswith("steps") and f.suffix in (".csv", ".gz", ".parquet"):
            read = pd.read_parquet if f.suffix == ".parquet" else pd.read_csv
            found[str(f.relative_to(out))] = len(read(f))
    return found


def test_an_unfinished_part_keeps_its_own_table(tmp_path):
    out = large_unfinished(tmp_path / "r")
    assert rows_in(out) == {"parts/pid4242/steps.csv": LARGE_STEPS + WARMUP}


def test_a_handed_over_part_is_read_from_the_run_table(tmp_path):
    """The part refers to the run's table by its state, never by a path from the document: without
    the run's table the part is one line naming the missing file, and nothing is written."""
    out = large_unfinished(tmp_path / "r")
    assert invoke("report", out).exit_code == 0
    (out / "run.json").unlink()
    (out / "steps.csv.gz").rename(tmp_path / "aside.csv.gz")
    res = invoke("report", out)
    assert res.exit_code != 0 and "steps.csv" in res.output, res.output
    assert not (out / "run.json").exists()
    (tmp_path / "aside.csv.gz").rename(out / "steps.csv.gz")
    res = invoke("report", out)  # finished again from the part and the run's table
    assert res.exit_code == 0, res.output
    assert rows_in(out) == {"steps.csv.gz": LARGE_STEPS + WARMUP}


def test_merge_reads_a_compressed_part(tmp_path):
    node = large_unfinished(tmp_path / "node", rank=0)
    assert invoke("report", node).exit_code == 0
    assert rows_in(node) == {"steps.csv.gz": LARGE_STEPS + WARMUP}
    res = invoke("merge", node, "--out", tmp_path / "m")
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "m" / "run.json").read_text())["steps"] == LARGE_STEPS
    assert rows_in(node) == {"steps.csv.gz": LARGE_STEPS + WARMUP}, "merge changes nothing in its inputs"
