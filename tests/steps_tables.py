"""Synthetic per-step tables (the columns of steps.csv) for report and finishing tests."""
from __future__ import annotations

import numpy as np
import pandas as pd

LABELS = ("load", "transfer", "compute", "comm", "host")


def steps_table(n: int, means=(1.0, 0.2, 3.0, 0.0, 0.5), seed: int = 0) -> pd.DataFrame:
    """n steps (5 warm-up), each label's ms drawn around its mean; wall_ms is their sum."""
    rng = np.random.default_rng(seed)
    d = {"step": np.arange(n), "warmup": np.arange(n) < 5}
    for lb, v in zip(LABELS, means):
        d[f"{lb}_ms"] = v * rng.gamma(20, 1 / 20, n)
    df = pd.DataFrame(d)
    df["wall_ms"] = df[[f"{lb}_ms" for lb in LABELS]].sum(axis=1)
    return df
