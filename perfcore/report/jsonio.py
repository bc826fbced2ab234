"""JSON output for every document perfcore writes: numpy values become plain numbers and lists,
keys starting with "_" (in-memory helpers) are left out, files are replaced atomically."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["dumps", "write"]


def _default(o: Any) -> Any:
    if hasattr(o, "tolist"):
        return o.tolist()
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _public(doc: Any) -> Any:
    return {k: v for k, v in doc.items() if not str(k).startswith("_")} if isinstance(doc, dict) else doc


def dumps(doc: Any) -> str:
    return json.dumps(_public(doc), indent=2, default=_default) + "\n"


def write(path: Path, doc: Any) -> Path:
    """Writes through a temporary file, so a reader never sees half a document."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(dumps(doc))
    tmp.replace(path)
    return path
