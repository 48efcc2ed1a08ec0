"""`--format full`: each finding in its code, for people at a terminal.

    train.py:12:5: TL004 [unsafe fix] `optimizer.step()` runs in a loop that never clears ...
       |
    12 |     optimizer.step()
       |     ^^^^^^^^^^^^^^^^ TL004
       |
       = help: insert `optimizer.zero_grad()` after the step (unsafe fix: --fix --unsafe-fixes)
       = rule: file:///.../site-packages/torchlint/docs/rules/TL004.md

Colour only on a terminal; `NO_COLOR` turns it off, `FORCE_COLOR` on (https://no-color.org). Notebook findings
show the lines of their cell.
"""

from __future__ import annotations

import os
import sys
from typing import Mapping, Sequence

from torchlint.diagnostic import Diagnostic
from torchlint.source.lines import split_lines
from torchlint.source.safe_read import read_regular

MAX_LINES = 6  # a longer range shows its first and last lines around an ellipsis

_BOLD, _RED, _CYAN, _BLUE, _RESET = "\x1b[1m", "\x1b[31m", "\x1b[36m", "\x1b[34m", "\x1b[0m"


def use_color(stream=None) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    stream = stream if stream is not None else sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)())


def render_full(diags: Sequence[Diagnostic], unsafe: bool = False, docs_url: str | None = None,
                color: bool | None = None, given: Mapping[str, bytes] | None = None) -> str:
    """`given`: the bytes of the files the command read itself (standard input, a FIFO), which are not read again."""
    from torchlint.rule_docs import doc_url

    color = use_color() if color is None else color
    sources: dict[tuple[str, int | None], list[str] | None] = {}
    out: list[str] = []
    for d in diags:
        key = (d.path, d.cell)
        if key not in sources:
            sources[key] = _source_lines(d.path, d.cell, (given or {}).get(d.path))
        out.append(_one(d, sources[key], unsafe, color, doc_url(d.code, docs_url) if not d.code.startswith("TL9") else None))
    return "".join(out)


def _paint(text: str, code: str, color: bool) -> str:
    return f"{code}{text}{_RESET}" if color else text


def _one(d: Diagnostic, lines: list[str] | None, unsafe: bool, color: bool, url: str | None) -> str:
    mark = ""
    if d.fix is not None:
        mark = "[*] " if d.fix.applicability == "safe" or unsafe else "[unsafe fix] "
    cell = f"cell {d.cell}:" if d.cell is not None else ""
    head = f"{_paint(f'{d.path}:{cell}{d.line}:{d.column}:', _BOLD, color)} {_paint(d.code, _RED + _BOLD, color)} "
    parts = [head + mark + d.message + "\n"]
    end_line = max(d.end_line, d.line)
    width = len(str(end_line))
    bar = _paint(" " * width + " |", _BLUE, color)
    if lines is not None and 1 <= d.line <= len(lines):
        parts.append(bar + "\n")
        shown = list(range(d.line, min(end_line, len(lines)) + 1))
        if len(shown) > MAX_LINES:
            shown = shown[: MAX_LINES // 2] + [0] + shown[-(MAX_LINES // 2):]
        for number in shown:
            if number == 0:
                parts.append(_paint(" " * width + " ...", _BLUE, color) + "\n")
                continue
            text = lines[number - 1].expandtabs(1)
            gutter = _paint(f"{number:>{width}} |", _BLUE, color)
            parts.append(f"{gutter} {text}".rstrip() + "\n")
            start = d.column - 1 if number == d.line else len(text) - len(text.lstrip())
            stop = d.end_column - 1 if number == end_line else len(text.rstrip())
            stop = max(stop, start + 1)
            label = f" {d.code}" if number == shown[-1] else ""
            parts.append(f"{bar} {' ' * start}{_paint('^' * (stop - start) + label, _RED, color)}\n")
        parts.append(bar + "\n")
    if d.fix is not None:
        how = "safe fix: --fix" if d.fix.applicability == "safe" else "unsafe fix: --fix --unsafe-fixes"
        parts.append(f"{' ' * width} {_paint('= help:', _CYAN, color)} {d.fix.message} ({how})\n")
    if url is not None:
        parts.append(f"{' ' * width} {_paint('= rule:', _CYAN, color)} {url}\n")
    parts.append("\n")
    return "".join(parts)


def _source_lines(path: str, cell: int | None, data: bytes | None = None) -> list[str] | None:
    """The file's lines (the cell's, for a notebook finding), decoded as the engine decodes them; of `data` when the
    command read the file itself, else of the file if it is a regular one (a FIFO is never opened a second time)."""
    from torchlint.engine import SourceError, decode

    try:
        text = decode(read_regular(path) if data is None else data).text
    except (OSError, SourceError):
        return None
    if cell is None:
        return split_lines(text)
    from torchlint.notebook import NotebookError, load

    try:
        source = load(text)["cells"][cell - 1].get("source", "")
    except (NotebookError, IndexError, KeyError, TypeError):
        return None
    return split_lines("".join(source) if isinstance(source, list) else str(source))
