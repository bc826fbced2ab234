"""Text read from a document, made safe to print: no control characters (a run folder is untrusted)."""

from __future__ import annotations

import re

__all__ = ["clean"]

# C0 controls but newline and tab, DEL, C1 controls (0x9b starts a terminal sequence as ESC [ does),
# and the bidirectional overrides that make a line read other than it is stored.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def clean(text: str) -> str:
    """`text` with every control character removed but newline and tab: an escape sequence in a
    document's string cannot set the terminal's title, clear the screen, move the cursor over
    earlier lines or colour what follows."""
    return _CONTROL.sub("", str(text))
