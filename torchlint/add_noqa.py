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
from torchlint.source.lines import split_lines
from torchlint.pipeline.suppress import noqa_codes

_END = re.compile(r"(\r\n|\r|\n)$")
_NOQA_LIST = re.compile(r"#\s*noqa:[\s]?[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*", re.IGNORECASE)


def codes_by_line(diags: Iterable[Diagnostic]) -> dict[int, set[str]]:
    """The rule codes to accept on each line (TL9xx are about the run, not the code: never accepted)."""
    out: dict[int, set[str]] = {}
    for d in diags:
        if not d.code.startswith("TL9"):
            out.setdefault(d.line, set()).add(d.code)
    return out


def add_noqa(text: str, wanted: Mapping[int, set[str]]) -> tuple[str, int]:
    """`text` with the noqa comments added, and how many lines changed."""
    if not wanted:
        return text, 0
    lines = split_lines(text, keepends=True)
    closed = _lines_that_cannot_end_in_a_comment(text)
    changed = 0
    for number, codes in sorted(wanted.items()):
        if not 1 <= number <= len(lines) or number in closed:
            continue
        new = _with_codes(lines[number - 1], codes)
        if new != lines[number - 1]:
            lines[number - 1] = new
            changed += 1
    return "".join(lines), changed


def _with_codes(line: str, codes: set[str]) -> str:
    m = _END.search(line)
    end = m.group(1) if m else ""
    body = line[: len(line) - len(end)]
    present = noqa_codes(body)
    if present is not None and (not present or codes <= present):
        return line  # a bare `# noqa`, or every code already listed
    if present is not None:
        listed = _NOQA_LIST.search(body)
        if listed is not None:
            merged = sorted(present | codes)
            return body[: listed.start()] + "# noqa: " + ", ".join(merged) + body[listed.end():] + end
    return body.rstrip(" \t") + "  # noqa: " + ", ".join(sorted(codes)) + end if body.strip() else line


def _lines_that_cannot_end_in_a_comment(text: str) -> set[int]:
    closed: set[int] = set()
    for number, line in enumerate(split_lines(text), start=1):
        if line.rstrip(" \t").endswith("\\"):
            closed.add(number)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text, newline="").readline):
            if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                closed.update(range(tok.start[0], tok.end[0]))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass  # the file does not tokenize: it has no findings to accept either
    return closed
