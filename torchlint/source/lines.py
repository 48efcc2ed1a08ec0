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


def newline_of(text: str) -> str:
    """The file's line break: the first one it uses, `\\n` when it has none."""
    m = _BREAK.search(text)
    return m.group() if m else "\n"


END_BREAK = re.compile(r"(\r\n|\r|\n)\Z")  # the line break a text or a line ends with


def carry_over(original: str, regenerated: str, changed: str) -> str:
    """`changed`, an edit of `regenerated` (code generated again from `original`, line for line the same lines but
    not always the same characters: libcst drops a form feed before a statement, a notebook cell is joined with
    `\\n`), with every line the edit did not touch taken from `original` as it was, and the line breaks of the lines
    it added written as `original` writes them. `changed` itself when `regenerated` does not line up with `original`."""
    if original == regenerated:
        return changed
    old, regen, new = (split_lines(t, keepends=True) for t in (original, regenerated, changed))
    if len(old) != len(regen):
        return changed
    import difflib

    newline = newline_of(original)
    out: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, regen, new, autojunk=False).get_opcodes():
        if tag == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2)):
                kept = old[i]
                out.append(kept if END_BREAK.search(kept) or not END_BREAK.search(new[j]) else kept + newline)
        else:
            out.extend(END_BREAK.sub(newline, line) for line in new[j1:j2])
    return "".join(out)
