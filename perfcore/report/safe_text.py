"""Text read from a document, made safe to print: no control characters (a run folder is untrusted)."""

from __future__ import annotations

import re

__all__ = ["clean"]

# C0 controls but newline and tab, DEL, C1 controls (0x9b starts a terminal sequence as ESC [ does),
# and the bidirectional overrides that make a line read other than it is stored.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


# Whole terminal sequences go first, so that none leaves its printable tail ("[1m" of a bold ESC [ 1 m that a
# torch error message carries) once its ESC is gone: CSI (ESC [ or 0x9b, parameters, one final byte), and
# OSC/DCS/APC/PM strings up to their terminator (BEL or ESC \\), or a two-byte ESC sequence.
_SEQUENCE = re.compile("(?:\x1b\\[|\x9b)[0-?]*[ -/]*[@-~]|\x1b[\\]P_^][^\x07\x1b]*(?:\x07|\x1b\\\\)?|\x1b[ -/]*[0-~]")


def clean(text: str) -> str:
    """`text` with every terminal sequence and control character removed but newline and tab: an escape
    sequence in a document's string cannot set the terminal's title, clear the screen, move the cursor
    over earlier lines or colour what follows, and leaves no fragment of itself."""
    return _CONTROL.sub("", _SEQUENCE.sub("", str(text)))
