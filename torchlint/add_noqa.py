"""`--add-noqa`: accept today's findings. Each line that holds a finding gets `# noqa: TLxxx`, merged into a
`# noqa: ...` list already on the line; every other character of the file stays as it was.

A line whose end lies inside a string (a triple-quoted string opened on it) or that continues with a backslash
cannot take a comment there; it is left alone, and its finding keeps being reported.
"""

from __future__ import annotations

import io
import re
import tokenize
from typing import Iterable, Mapping

from torchlint.diagnostic import Diagnostic
from torchlint.source.lines import END_BREAK, split_lines
from torchlint.pipeline.suppress import noqa_codes

_NOQA_LIST = re.compile(r"#\s*noqa:[\s]?[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*", re.IGNORECASE)


def codes_by_line(diags: Iterable[Diagnostic]) -> dict[int, set[str]]:
    """The rule codes to accept on each line (TL9xx are about the run, not the code: never accepted)."""
    out: dict[int, set[str]] = {}
    for d in diags:
        if not d.code.startswith("TL9"):
            out.setdefault(d.line, set()).add(d.code)
    return out


def add_noqa(text: str, wanted: Mapping[int, set[str]], python: str | None = None) -> tuple[str, int]:
    """`text` with the noqa comments added, and how many lines changed. The comments already there are the
    tokenizer's comment tokens (a `# noqa: ...` inside a string is data); `python` is the text to tokenize when
    `text` is not all Python (a notebook cell with its magic lines as placeholders), line for line the same."""
    if not wanted:
        return text, 0
    lines = split_lines(text, keepends=True)
    comments, closed = _scan(text if python is None else python)
    changed = 0
    for number, codes in sorted(wanted.items()):
        if not 1 <= number <= len(lines) or number in closed:
            continue
        new = _with_codes(lines[number - 1], codes, comments.get(number))
        if new != lines[number - 1]:
            lines[number - 1] = new
            changed += 1
    return "".join(lines), changed


def _with_codes(line: str, codes: set[str], comment: tuple[int, str] | None) -> str:
    m = END_BREAK.search(line)
    end = m.group(1) if m else ""
    body = line[: len(line) - len(end)]
    if comment is not None and body[comment[0] : comment[0] + len(comment[1])] == comment[1]:
        column, text = comment
        present = noqa_codes(text)
        if present is not None and (not present or codes <= present):
            return line  # a bare `# noqa`, or every code already listed
        listed = _NOQA_LIST.search(text) if present is not None else None
        if listed is not None:
            merged = "# noqa: " + ", ".join(sorted(present | codes))  # type: ignore[operator]
            text = text[: listed.start()] + merged + text[listed.end():]
            return body[:column] + text + body[column + len(comment[1]):] + end
    return body.rstrip(" \t") + "  # noqa: " + ", ".join(sorted(codes)) + end if body.strip() else line


def _scan(text: str) -> tuple[dict[int, tuple[int, str]], set[int]]:
    """Each line's comment token (column, text), and the lines that cannot end in a comment: their end lies
    inside a string, or they continue with a backslash."""
    comments: dict[int, tuple[int, str]] = {}
    closed: set[int] = set()
    for number, line in enumerate(split_lines(text), start=1):
        if line.rstrip(" \t").endswith("\\"):
            closed.add(number)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text, newline="").readline):
            if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                closed.update(range(tok.start[0], tok.end[0]))
            elif tok.type == tokenize.COMMENT:
                comments[tok.start[0]] = (tok.start[1], tok.string)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass  # the file does not tokenize: it has no findings to accept either
    return comments, closed
