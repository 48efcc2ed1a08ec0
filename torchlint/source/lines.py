"""Physical lines as Python's tokenizer counts them: `\\r\\n`, `\\r` and `\\n` end a line, and nothing else does
(`str.splitlines` also splits on form feeds, `\\x1c`-`\\x1e`, `\\u2028`..., which Python reads as ordinary
characters). Every stage that turns offsets into line numbers, or line numbers into lines, uses this one index.
"""

from __future__ import annotations

import re

_BREAK = re.compile(r"\r\n|\r|\n")
_OTHER_BREAKS = re.compile("[\v\f\x1c\x1d\x1e\x85\u2028\u2029]")  # where str.splitlines splits, and Python does not


def split_lines(text: str, keepends: bool = False) -> list[str]:
    """The physical lines of `text` (a final line break does not start an empty line)."""
    if not _OTHER_BREAKS.search(text):
        return text.splitlines(keepends)  # the same lines, in C
    out: list[str] = []
    start = 0
    for m in _BREAK.finditer(text):
        out.append(text[start : m.end() if keepends else m.start()])
        start = m.end()
    if start < len(text):
        out.append(text[start:])
    return out


def breaks_before(text: str, offset: int) -> int:
    """How many line breaks `text[:offset]` holds: the 0-based line of `offset`."""
    return sum(1 for _ in _BREAK.finditer(text, 0, offset))
