"""A trainer-callback session leaves torch as it found it: every patched attribute is torch's own
object again and torch.compile works afterwards (run in a fresh interpreter)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "scripts" / "session_restore.py"


def test_sessions_restore_every_patch_and_torch_compile_works():
    p = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert [ln for ln in lines if ln.startswith("STEPS")] == ["STEPS 5", "STEPS 5"]  # both sessions timed
    assert "NOT_RESTORED []" in lines and "HOOKS_LEFT 0" in lines
    assert "COMPILED (3, 8) (5,)" in lines
