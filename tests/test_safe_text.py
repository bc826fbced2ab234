"""Text from a document or a script's exception, made safe to print: whole terminal sequences go, not just
their ESC (a bold sequence in torch.load's error printed as "[1m" once its ESC was stripped)."""

import pytest

from perfcore.cli.group import one_line
from perfcore.safe_text import clean


@pytest.mark.parametrize(
    "raw, shown",
    [
        # torch.load's weights_only message, as the script raised it
        (
            "options, \x1b[1mdo those steps only if you trust the source\x1b[0m. ",
            "options, do those steps only if you trust the source. ",
        ),
        ("x\x1b]0;a new title\x07y", "xy"),  # OSC: sets the terminal's title
        ("x\x1b]8;;https://e.example\x1b\\link\x1b]8;;\x1b\\y", "xlinky"),  # OSC 8 hyperlink, ESC \ ends it
        ("p\x9b2Jq", "pq"),  # 8-bit CSI: clears the screen
        ("up\x1b[2A\x1b[Kdone", "updone"),  # cursor up, erase line
        ("reset\x1bc!", "reset!"),  # a two-byte ESC sequence
        ("a\x1b", "a"),  # a lone ESC at the end
        ("tab\tand\nnewline kept, [1m typed by hand kept", "tab\tand\nnewline kept, [1m typed by hand kept"),
        ("bidi \u202eeurt\u202c ok", "bidi eurt ok"),
    ],
)
def test_clean_removes_whole_sequences_and_controls(raw, shown):
    assert clean(raw) == shown


def test_one_line_of_an_escaped_exception_has_no_fragment():
    line = one_line("UnpicklingError: Weights only load failed. \x1b[1mdo those steps\x1b[0m.\n\tmore")
    assert line == "UnpicklingError: Weights only load failed. do those steps. more"
