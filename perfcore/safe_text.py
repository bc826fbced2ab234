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


# A byte that is not UTF-8 in an argument or a path, as Python carries it (surrogateescape: U+DC80..U+DCFF),
# or any other lone surrogate, which no UTF-8 output can hold.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _shown(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c - 0xDC00:02x}" if 0xDC80 <= c <= 0xDCFF else f"\\u{c:04x}"


def clean(text: str) -> str:
    """`text` with every terminal sequence and control character removed but newline and tab: an escape
    sequence in a document's string cannot set the terminal's title, clear the screen, move the cursor
    over earlier lines or colour what follows, and leaves no fragment of itself. A byte that was not
    UTF-8 (an argument `$'\\xff'`) is shown as its escape, \\xff, as Python's repr shows it: printable, and
    the document keeps the byte itself."""
    return _SURROGATE.sub(_shown, _CONTROL.sub("", _SEQUENCE.sub("", str(text))))
