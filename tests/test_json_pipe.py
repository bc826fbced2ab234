"""`perfcore run --json - -- python script.py` can be piped: stdout carries the JSON document alone,
the script's own prints go to stderr."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap


def test_run_json_dash_puts_only_json_on_stdout(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import torch
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for i in range(12):
            loss = model(torch.randn(2, 4)).sum()
            opt.zero_grad(); loss.backward(); opt.step()
            print(f"epoch 0 step {i} loss {loss.item():.3f}")
    """))
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--warmup", "2", "--out", str(tmp_path / "r"),
                        "--json", "-", "--", sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)  # the whole of stdout is one JSON document
    assert doc["steps"] == 10 and doc["schema"] == "perfcore.run/2"
    assert "epoch 0 step 11" in p.stderr and "epoch" not in p.stdout
    assert "perfcore: step" not in p.stderr  # no live status line when stderr is not a terminal
