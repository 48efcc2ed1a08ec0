"""torchlint.source.words: the fast spelling of `\\bword` finds exactly what `\\bword` finds."""

from __future__ import annotations

import re

from torchlint.source.words import any_word, word_start

TEXT = """
for x in xs: self.fit()  # for
_for = 1; before = 2; a.for_each(); for_(); xself.y; self .z; myself.w
global g
nonlocal_x = 1;nonlocal y
ITERATION_COMPLETED, Events.ITERATION_COMPLETED_X, xITERATION_COMPLETED
"""


def spans(pattern: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(pattern, TEXT)]


def test_word_start_matches_where_a_word_boundary_does():
    for word in ("for", "self", "global", "nonlocal", "ITERATION_COMPLETED", "_for"):
        assert spans(word_start(word)) == spans(r"\b" + re.escape(word)), word
    assert spans(word_start("self") + r"\s*\.") == spans(r"\bself\s*\.") != []


def test_any_word_is_an_alternation_of_word_starts_with_a_tail():
    pattern = any_word({"nonlocal", "global"}, r"\s")
    assert spans(pattern) == spans(r"\b(?:global|nonlocal)\s")
    assert [TEXT[a:b] for a, b in spans(pattern)] == ["global ", "nonlocal "]
