"""Helpers shared by the rule tests."""

from __future__ import annotations

import textwrap

from torchlint.engine import fix_source, lint_source, select_rules


def findings(src: str, code: str) -> list[tuple[int, int]]:
    """(line, column) of every `code` finding in the dedented source."""
    text = textwrap.dedent(src)
    return [(d.line, d.column) for d in lint_source(text, "t.py", select_rules([code])) if d.code == code]


def fixed(src: str, code: str, unsafe: bool = True) -> str:
    return fix_source(textwrap.dedent(src), "t.py", select_rules([code]), unsafe=unsafe).text
