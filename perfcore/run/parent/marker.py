"""A run folder's marker (MARKER): the file that says perfcore made the folder, read as untrusted and parsed
once into a Marker; run.parent.folder writes it and decides by it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Mapping

from perfcore.analysis.codec import fields_of
from perfcore.untrusted import SMALL, Refused, read_file

__all__ = ["MARKER", "MARKER_SCHEMA", "Marker", "marker_of"]

MARKER = ".perfcore-folder.json"
MARKER_SCHEMA = "perfcore.folder/1"


@dataclasses.dataclass(frozen=True)
class Marker:
    """A folder's marker as read: who made the folder (host, pid and the pid's start tick, the command's
    token), for what (kind; a job across machines and when it began), and how its run ended with the
    identity of its manifest. A value of the wrong kind reads as None: a marker is untrusted."""

    # The whole marker: a run that failed before its first step writes it back.
    doc: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    kind: str | None = None
    host: str | None = None
    pid: int | None = None
    started: int | None = None
    token: str | None = None
    ended: str | None = None
    manifest: Any = None  # compared with the manifest's identity as it is, never used otherwise
    job: str | None = None
    created_unix: float | None = None

    @classmethod
    def parse(cls, doc: Any) -> "Marker | None":
        """The marker of a folder perfcore made, or None for any other document."""
        if not isinstance(doc, dict) or doc.get("schema") != MARKER_SCHEMA:
            return None
        return cls(doc=doc, **fields_of(cls, doc, skip=frozenset({"doc"})))


def marker_of(folder: Path) -> Marker | None:
    """The folder's marker, read as untrusted: not through a link, at most SMALL bytes (a larger one is
    no marker perfcore wrote, and is never read whole)."""
    try:
        doc = json.loads(read_file(Path(folder) / MARKER, SMALL, "folder marker"))
    except (Refused, ValueError):
        return None
    return Marker.parse(doc)
