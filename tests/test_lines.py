"""Physical lines (torchlint.source.lines): `\r\n`, `\r` and `\n` end a line, and nothing else does; the fast path
through `str.splitlines` gives the very same lines."""

from __future__ import annotations

import re

from hypothesis import given, settings, strategies as st

from torchlint.source.lines import split_lines


def _reference(text: str, keepends: bool) -> list[str]:
    parts = re.split(r"(\r\n|\r|\n)", text)
    lines = [parts[i] + (parts[i + 1] if keepends else "") for i in range(0, len(parts) - 1, 2)]
    return lines + ([parts[-1]] if parts[-1] else [])


@settings(max_examples=400, derandomize=True)
@given(st.lists(st.sampled_from(["a", " ", "\t", "é", "\n", "\r", "\r\n", "\f", "\v", "\x1c", "\x85", "\u2028"])),
       st.booleans())
def test_split_lines_breaks_only_where_python_does(pieces, keepends):
    text = "".join(pieces)
    assert split_lines(text, keepends) == _reference(text, keepends)


def test_form_feed_and_line_separator_do_not_end_a_line():
    assert split_lines("a\fb\u2028c\nd") == ["a\fb\u2028c", "d"]
    assert split_lines("a\r\nb\rc\n", keepends=True) == ["a\r\n", "b\r", "c\n"]


def test_carry_over_keeps_the_untouched_lines_and_their_breaks():
    from torchlint.source.lines import carry_over

    original = "a = 1\r\n\x0cb = 2\r\nc = 3"
    regenerated = "a = 1\nb = 2\nc = 3\n"
    changed = "a = 1\nb = 2\nnew()\nc = 3\n"
    assert carry_over(original, regenerated, changed) == "a = 1\r\n\x0cb = 2\r\nnew()\r\nc = 3\r\n"
    assert carry_over("x\n", "x\ny\n", "z\n") == "z\n"  # does not line up: the edit as it is
