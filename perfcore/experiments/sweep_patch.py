"""The sweep's best DataLoader settings as a patch for the user's own call: read the script's file at the
DataLoader's recorded file:line (read only), write dataloader.patch into the sweep's folder, and say the
call as it would read. The user applies it with `git apply <folder>/dataloader.patch` from `cwd`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from perfcore.analysis.loader_patch import PatchError, loader_patch

__all__ = ["PATCH_NAME", "sweep_patch"]

PATCH_NAME = "dataloader.patch"
MAX_SOURCE_BYTES = 4 << 20  # a script larger than this is no training script to patch


def _settings(best: Mapping[str, Any], own: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    # Only what the sweep changed, and never a prefetch_factor without workers (DataLoader refuses it).
    out = {k: best[k] for k in keys if best.get(k) is not None and best.get(k) != own.get(k)}
    if not best.get("num_workers"):
        out.pop("prefetch_factor", None)
    return out


def sweep_patch(
    site: str | None,
    best: Mapping[str, Any] | None,
    own: Mapping[str, Any],
    keys: tuple[str, ...],
    out: Path,
    cwd: str | None = None,
) -> dict[str, Any]:
    """{"status": written | unchanged | not_possible, "reason" (a code: no_site, own_is_best, not_under_cwd
    with site and cwd, cannot_patch with the error; report.lines_text says it), "patch" (file name), "call", "at"}.
    `site` is the recorded "file:line" (untrusted: read, never written; it must lie under `cwd`)."""
    if not site or not best:
        return {"status": "not_possible", "reason": "no_site"}
    settings = _settings(best, own, keys)
    if not settings:
        return {"status": "unchanged", "reason": "own_is_best"}
    file, _, line = site.rpartition(":")
    cwd = os.path.realpath(os.getcwd() if cwd is None else cwd)
    real = os.path.realpath(file)
    rel = os.path.relpath(real, cwd)
    if not line.isdigit() or rel.startswith("..") or not os.path.isfile(real):
        return {"status": "not_possible", "reason": "not_under_cwd", "site": site, "cwd": cwd}
    try:
        if os.path.getsize(real) > MAX_SOURCE_BYTES:
            raise PatchError(f"{rel} is over {MAX_SOURCE_BYTES >> 20} MiB")
        with open(real, encoding="utf-8") as fh:
            source = fh.read()
        p = loader_patch(source, rel, int(line), settings)
    except (OSError, UnicodeDecodeError, PatchError) as e:
        return {"status": "not_possible", "reason": "cannot_patch", "error": str(e)}
    from perfcore.report import jsonio

    jsonio.write_text(out / PATCH_NAME, p.diff)
    return {
        "status": "written",
        "patch": PATCH_NAME,
        "at": f"{rel}:{p.line}",
        "call": p.call,
        "changed": [list(c) for c in p.changed],
        "through_kwargs": p.through_kwargs,
    }
