"""A large steps table is kept as steps.csv.gz (run.parent.part_dirs): the same table compressed twice is
the same bytes (the header names no file: it named the atomic write's random temporary one), and it reads
back as the table."""

from __future__ import annotations

import gzip

import numpy as np
import pandas as pd

import perfcore.run.parent.part_dirs as part_dirs
from perfcore.analysis.process_part import Part


def test_the_same_table_compresses_to_the_same_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(part_dirs, "LARGE_STEPS", 10)
    table = pd.DataFrame({"step": np.arange(50), "wall_ms": np.linspace(1, 2, 50), "warmup": np.arange(50) < 5})
    written = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        files = {"steps.csv": "steps.csv"}
        part_dirs.write_steps(Part.parse({"pid": 1}, table, {}), tmp_path / name / "steps.csv", files, added=None)
        assert files == {"steps.csv.gz": "steps.csv.gz"}
        written.append((tmp_path / name / "steps.csv.gz").read_bytes())
    assert written[0] == written[1]
    assert not written[0][3] & 0x08  # FLG.FNAME unset: no file name in the header
    assert gzip.decompress(written[0]).decode() == table.to_csv(index=False)
