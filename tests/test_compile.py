"""perfcore never changes what torch.compile sees: the same graph breaks and recompiles, at the same
places, under `perfcore run` as bare (TORCH_LOGS=graph_breaks,recompiles), on a model whose layers are
checkpointed through super().__call__ (Hugging Face's gradient-checkpointed layers); and the run
says the script compiles (run.json `torch_compile`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent / "scripts" / "compiled_breaks.py"
# The same model and loop from a file that calls a Block's forward directly: perfcore times that
# forward too (run/child/direct_forward.py), and dynamo must still see the same.
DIRECT = SCRIPT.with_name("compiled_direct.py")
# Dynamo's log lines: where it broke a graph, which function it recompiled.
EVENT = re.compile(r"(Graph break|Recompiling function)\b.*? (?:in user code at|in) (\S+)")


def dynamo_events(stderr: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2).rsplit("/", 1)[-1]) for m in EVENT.finditer(stderr)]


def counted(stdout: str, name: str) -> int:
    return int(stdout.split(name)[1].split()[0])


@pytest.mark.parametrize("script", [SCRIPT, DIRECT], ids=["module_calls", "direct_forward"])
def test_graph_breaks_and_recompiles_are_the_same_as_bare(tmp_path, script):
    env = {**os.environ, "TORCH_LOGS": "graph_breaks,recompiles"}
    bare = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=400)
    assert bare.returncode == 0, bare.stderr[-3000:]
    out = tmp_path / "r"
    cmd = [sys.executable, "-m", "perfcore.cli", "run", "--out", str(out), "--", sys.executable, str(script)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=400)
    assert p.returncode == 0, p.stderr[-3000:]
    events = dynamo_events(bare.stderr)
    line = next(i for i, text in enumerate(SCRIPT.read_text().splitlines(), 1) if 'print("", end="")' in text)
    assert ("Graph break", f"compiled_breaks.py:{line}") in events  # the script's own print, logged
    assert dynamo_events(p.stderr) == events, p.stderr[-3000:]
    for name in ("GRAPH_BREAKS", "RECOMPILES"):
        assert counted(p.stdout, name) == counted(bare.stdout, name), name
    doc = json.loads((out / "run.json").read_text())
    assert doc["torch_compile"] is True and doc["steps"] + doc["warmup_steps"] == 6
