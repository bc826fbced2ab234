"""Run folders: where a run writes, chosen and checked before the command starts."""
from __future__ import annotations

import shutil
import time
from pathlib import Path

from perfcore.errors import UsageError

__all__ = ["default_out", "prepare_out"]


def default_out() -> Path:
    return Path("perfcore-runs") / time.strftime("%Y%m%d-%H%M%S")


def prepare_out(out: Path | None) -> Path:
    out = Path(out) if out else default_out()
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".perfcore-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise UsageError(f"cannot write to --out {out}: {e.strerror or e}; choose a writable folder")
    for stale in ("parts", "workers"):
        if (out / stale).exists():
            shutil.rmtree(out / stale)
    return out
