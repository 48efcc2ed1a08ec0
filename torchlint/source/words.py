"""Regular expressions for words that `re` searches fast.

A pattern that starts with `\\b` (or an alternation of which one branch does) makes `re` try the whole pattern at
every position of the text. Written as its first letter, then a look-behind for the boundary (`f(?<!\\wf)or`, the
same matches as `\\bfor`), `re` first looks for that letter, and every branch that starts with a literal lets it
skip to the next position where one could start (4 to 30 times faster over the benchmark corpora)."""

from __future__ import annotations

import re
from functools import lru_cache


def word_start(word: str) -> str:
    """The pattern of `\\bword` for a `word` that starts with a word character (a literal, not a pattern)."""
    head = re.escape(word[0])
    return f"{head}(?<!\\w{head}){re.escape(word[1:])}"


def any_word(words, tail: str = "") -> str:
    """`\\b(?:w1|w2|...)tail`, each word a branch of its own that starts with its first letter and ends with the
    pattern `tail` (sorted, for one order on every run)."""
    return "|".join(word_start(w) + tail for w in sorted(words))


_FEW = re.compile(r"\[([^]\\^-]{1,3})\](?![*+?{])")  # `[sSſ]`, not repeated
# backreferences and conditionals (group numbers shift when split), flags for the whole pattern: not split
_REFERENCES = re.compile(r"\\[1-9]|\(\?P=|\(\?\(|^\(\?[aiLmsux]+\)")


@lru_cache(maxsize=None)
def branches(p: re.Pattern[str]) -> tuple[re.Pattern[str], ...]:
    """The top-level alternatives of `p`, each compiled alone; `(p,)` where it has one, or where splitting could
    change what a branch means (a backreference, whose group numbers shift; flags set for the whole pattern).

    `re` searches a pattern that starts with a literal by skipping to that literal, but an alternation by trying it
    at every position where the first character of one branch stands (`\\.backward\\s*\\(|manual_backward\\s*\\(`:
    at every `.` and `m`). `p` matches at a position exactly where one of its branches does, so searching the
    branches one by one finds the same positions, in a fifth of the time over training code."""
    text = p.pattern
    if not isinstance(text, str) or p.flags & re.VERBOSE or _REFERENCES.search(text):
        return (p,)  # (a verbose pattern's `|` may sit in a comment)
    parts = _split(text)
    if len(parts) == 1 and text.startswith("(?:"):
        # `(?:for|while)\b`: a leading group's alternatives, each followed by the rest
        inner = _split(text[3:], closing=True)
        if len(inner) > 1 and inner[-1][:1] not in ("*", "+", "?", "{"):  # (not a repeated group)
            rest = inner.pop()
            parts = [part + rest for part in inner]
    # `[sSſ](?i:ched)`: a first character from a few, a branch for each (each then starts with a literal)
    expanded: list[str] = []
    for part in parts:
        head = _FEW.match(part)
        expanded += [re.escape(c) + part[head.end():] for c in head.group(1)] if head else [part]
    parts = expanded
    if len(parts) == 1:
        return (p,)
    try:
        return tuple(re.compile(part, p.flags) for part in parts)
    except re.error:  # pragma: no cover - a split the scan got wrong: the pattern as it is
        return (p,)


def _split(text: str, closing: bool = False) -> list[str]:
    """`text` cut at its top-level `|`. With `closing`, `text` is the inside of a group and what follows its `)`:
    the group's alternatives, then that rest as the last item ([text] when the group has one alternative)."""
    parts: list[str] = []
    depth, start, i, in_class = 0, 0, 0, False
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]" or text[i - 1] == "["  # `[]...]` and `[^]...]`: a first `]` is a member
            in_class = in_class or text[i - 2:i] == "[^"
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if closing and depth < 0:
                return [*parts, text[start:i], text[i + 1:]] if parts else [text]
        elif c == "|" and depth == 0:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    if closing:
        return [text]  # no closing parenthesis: not a group (the pattern would not have compiled)
    return [*parts, text[start:]]


def starts(p: re.Pattern[str], text: str) -> list[int]:
    """Sorted positions in `text` where a match of `p` starts: every start of `p.finditer`, and the starts of
    matches that overlap an earlier one (each branch is searched apart)."""
    parts = branches(p)
    if len(parts) == 1:
        return [m.start() for m in p.finditer(text)]
    return sorted({m.start() for b in parts for m in b.finditer(text)})


def occurs(p: re.Pattern[str], text: str) -> bool:
    """`p.search(text) is not None`, searching its branches one by one."""
    return any(b.search(text) is not None for b in branches(p))
