"""perfcore run's compute facts: the optimizer read in the training process, through JSON, into run.json's
"compute_facts"."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from perfcore.run.split_facts import compute_document, optimizer_facts


def _table(fw, bw, opt, n=8):
    return pd.DataFrame({"step": np.arange(n), "warmup": np.arange(n) < 2, "wall_ms": np.full(n, fw + bw + opt + 1),
                         "forward_ms": np.full(n, fw), "backward_ms": np.full(n, bw), "optimizer_ms": np.full(n, opt)})


def test_an_adamw_is_named_as_imported_and_its_fused_form_advised():
    torch = pytest.importorskip("torch")
    opt = torch.optim.AdamW(torch.nn.Linear(4, 4).parameters())
    facts = json.loads(json.dumps(optimizer_facts(opt)))
    assert facts["class"] == "torch.optim.AdamW" and {"fused", "foreach"} <= set(facts["accepts"])
    assert facts["device"] == "cpu" and facts["settings"] == {"foreach": None, "fused": None}
    doc = compute_document(facts, _table(2.0, 4.0, 6.0))
    json.dumps(doc)
    got = doc["compute_facts"]["optimizer"]
    assert got["snippet"] == "torch.optim.AdamW(..., fused=True)" and got["share"] == pytest.approx(6 / 13)
    assert doc["compute_facts"]["backward"] is None
    assert compute_document(facts, _table(2.0, 4.0, 0.5))["compute_facts"]["optimizer"] is None


def test_no_split_or_no_optimizer_readable():
    assert compute_document(None, _table(1.0, 5.0, 0.5))["compute_facts"]["backward"]["ratio"] == 5.0
    assert compute_document(None, _table(1, 2, 3).drop(columns=["forward_ms"])) == {}
    assert optimizer_facts(object()) is None


def test_perfcore_run_on_an_mlp_with_adamw_says_its_fused_form(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).parent / "scripts" / "mlp_adamw.py"
    out = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--out", str(out), "--", sys.executable,
                        str(script)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "run.json").read_text())
    got = doc["compute_facts"]["optimizer"]
    assert got["snippet"] == "torch.optim.AdamW(..., fused=True)" and got["share"] > 0.15
    # The line to change: where the script made its optimizer (line 8 of mlp_adamw.py).
    assert got["site"].endswith("mlp_adamw.py:8"), got["site"]
    assert f"try: {got['site']}: torch.optim.AdamW(..., fused=True)" in p.stdout + p.stderr
