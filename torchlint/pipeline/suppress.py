"""Stage 4: `# noqa` and `# noqa: TL001,TL004` on the line of a finding."""

from __future__ import annotations

import re
from typing import Sequence

from torchlint.diagnostic import Diagnostic

_NOQA = re.compile(r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)


def noqa_codes(line: str) -> set[str] | None:
    """None: no noqa; empty set: bare `# noqa` (everything); else the listed codes. Every `# noqa` of the line
    counts, as flake8 reads the line's text: a string holding `# noqa: E501` before the comment `--add-noqa`
    wrote does not hide that comment."""
    found: set[str] | None = None
    for m in _NOQA.finditer(line):
        codes = m.group("codes")
        if not codes:
            return set()
        found = (found or set()) | {c.upper() for c in re.split(r"[,\s]+", codes) if c}
    return found


def suppressed(lines: Sequence[str], diag: Diagnostic) -> bool:
    if not 1 <= diag.line <= len(lines):
        return False
    codes = noqa_codes(lines[diag.line - 1])
    return codes is not None and (not codes or diag.code in codes)
