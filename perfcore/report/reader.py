"""Reading a run folder back: run.json and steps.csv."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from perfcore.errors import UsageError

__all__ = ["load_run"]


def load_run(out: Path) -> tuple[dict[str, Any], pd.DataFrame]:
    out = Path(out)
    if not (out / "run.json").is_file():
        raise UsageError(f"{out} is not a perfcore run folder (no run.json)")
    return json.loads((out / "run.json").read_text()), pd.read_csv(out / "steps.csv")
