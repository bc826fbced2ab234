"""Forward found however it is called: a loop that calls `model.forward(x)`, or a layer's own method
that calls `self.forward(x)` (pytorch/examples' mnist_forward_forward), is forward time, not host;
and a class whose forward nobody calls directly is left as written."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_torch_reach import perfcore_run

from perfcore.run.child.direct_forward import reads_forward

SCRIPT = str(Path(__file__).resolve().parent / "scripts" / "direct_forward.py")


@pytest.mark.parametrize("mode", ["self", "model"])
def test_a_direct_forward_call_is_forward_time(tmp_path, mode):
    p, doc = perfcore_run(tmp_path, SCRIPT, mode, "14")
    assert p.returncode == 0, p.stderr[-3000:]
    assert doc["steps"] + doc["warmup_steps"] == 14
    split = doc["compute_split_ms"]
    # The forward's eight 256x512x512 matmuls: forward time, of the same order as backward's (which
    # does about twice the work); without the hook forward is only the ReLU module, ~0.1 ms.
    assert split["forward"] > 0.2 * split["backward"], split
    assert doc["breakdown_fraction"]["host"] < 0.2, doc["breakdown_fraction"]
    # The advice promises no host gain the data does not have.
    assert "host_gaps" not in [r["kind"] for r in doc["findings"]], doc["findings"]


def test_only_code_that_reads_forward_gets_its_classes_wrapped():
    calls = compile(
        "class L:\n    def forward(self, x): return x\n    def go(self): return self.forward(1)\n", "u", "exec"
    )
    plain = compile("class L:\n    def forward(self, x): return x\nm = L()\nm(1)\n", "u", "exec")
    nested = compile("def loop(m):\n    for _ in range(3):\n        m.forward(2)\n", "u", "exec")
    assert reads_forward(calls) and reads_forward(nested)
    assert not reads_forward(plain)  # defining forward (a STORE_NAME in the class body) is no read
