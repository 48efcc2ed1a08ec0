"""Jupyter notebooks: the code cells, joined into one module (cells share state: the optimizer of cell 3 is
stepped in cell 7), are checked like a file; findings map back to (cell, line); fixes are written back into
the fixed cells only.

IPython syntax is kept out of the parser: a cell magic (`%%time`) makes the whole cell opaque, and line magics,
shell escapes (`!pip ...`, `x = !ls`) and help lines (`obj?`) become `pass` placeholders that are put back
verbatim on write. The notebook JSON is written with the formatting it was read with (checked by re-serialising
the unmodified notebook byte for byte); a notebook whose formatting cannot be reproduced is never rewritten.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any, Sequence

from torchlint.source import pyast
from torchlint.codes import SYNTAX_ERROR
from torchlint.diagnostic import Diagnostic, FixInfo
from torchlint.engine import fix_source, lint_source
from torchlint.source.ipython import LineState, is_magic
from torchlint.source.lines import END_BREAK, carry_over, split_lines
from torchlint.rules import Rule

NOTEBOOK_ERROR = "TL900"
_MARKER = "# torchlint-cell {index}\n"
_MARKER_RE = re.compile(r"^# torchlint-cell (\d+)\n", re.MULTILINE)
_PLACEHOLDER = "pass  # torchlint-magic {n}"
_PLACEHOLDER_RE = re.compile(r"^([ \t]*)pass  # torchlint-magic (\d+)$", re.MULTILINE)


class NotebookError(Exception):
    """Not a notebook we can read: reported as one TL900 diagnostic."""


@dataclass(frozen=True)
class _Cell:
    index: int  # position in the notebook's cell list (0-based)
    start: int  # first line of the cell's code in the joined module (1-based)
    lines: int  # number of lines it occupies there
    magics: tuple[str, ...]  # original magic lines, by placeholder number
    indent: str = ""  # the indent IPython strips from a cell whose first line is indented (its `leading_indent`)
    dedented: frozenset[int] = frozenset()  # the cell's lines (1-based) it was stripped from


@dataclass(frozen=True)
class Joined:
    text: str
    cells: tuple[_Cell, ...]

    def locate(self, line: int) -> tuple[int, int] | None:
        """Joined-module line -> (1-based cell number, line within the cell)."""
        for cell in self.cells:
            if cell.start <= line < cell.start + cell.lines:
                return cell.index + 1, line - cell.start + 1
        return None


def load(text: str) -> dict:
    try:
        nb = json.loads(text)
    except ValueError as exc:
        raise NotebookError(f"not a valid notebook (JSON error: {exc})") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise NotebookError("not a valid notebook (no cell list)")
    for number, cell in enumerate(nb["cells"], start=1):
        if not isinstance(cell, dict):
            raise NotebookError(f"not a valid notebook (cell {number} is not a JSON object)")
        src = cell.get("source", "")
        if not isinstance(src, str) and not (isinstance(src, list) and all(isinstance(s, str) for s in src)):
            raise NotebookError(f"not a valid notebook (cell {number}'s source is not text)")
    return nb


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _leading_indent(lines: list[str]) -> tuple[str, frozenset[int], list[str]]:
    """IPython's `leading_indent`: a cell whose first non-blank line is indented runs with that indent stripped
    from every line that starts with it (` def f(x):` / `     return x`). The indent, the lines stripped, the
    lines."""
    first = next((text for text in lines if text.strip()), "")
    indent = first[: len(first) - len(first.lstrip(" \t"))]
    if not indent:
        return "", frozenset(), lines
    stripped = frozenset(i for i, text in enumerate(lines, start=1) if text.startswith(indent))
    return indent, stripped, [text[len(indent):] if i in stripped else text for i, text in enumerate(lines, start=1)]


def join(nb: dict) -> Joined:
    parts: list[str] = []
    cells: list[_Cell] = []
    line = 1
    magic_number = 0
    for index, cell in enumerate(nb["cells"]):
        if cell.get("cell_type") != "code":
            continue
        src = _source(cell)
        if src.lstrip().startswith("%%"):
            continue  # a cell magic: the whole cell is another language or a timing wrapper
        out_lines: list[str] = []
        magics: list[str] = []
        continued = None  # the indent of a magic line ending in a backslash: the next line continues it
        code_state = LineState()  # open brackets, strings and continuations of the Python lines so far
        cell_indent, dedented, raw_lines = _leading_indent(split_lines(src))
        for raw in raw_lines:
            if continued is not None or (code_state.at_statement_start() and is_magic(raw)):
                indent = continued if continued is not None else raw[: len(raw) - len(raw.lstrip())]
                out_lines.append(indent + _PLACEHOLDER.format(n=magic_number + len(magics)))
                magics.append(raw)
                continued = indent if raw.endswith("\\") else None
            else:
                out_lines.append(raw)
                code_state.feed(raw)
        magic_number += len(magics)
        body = "".join(text + "\n" for text in out_lines)
        parts.append(_MARKER.format(index=index))
        line += 1
        parts.append(body)
        cells.append(_Cell(index, line, len(out_lines), tuple(magics), cell_indent, dedented))
        line += len(out_lines)
    return Joined("".join(parts), tuple(cells))


def _shift(joined: Joined, cell: int, line: int) -> int:
    """How far right a joined line's columns lie in the cell: the indent stripped from it."""
    for c in joined.cells:
        if c.index + 1 == cell:
            return len(c.indent) if line in c.dedented else 0
    return 0


def _to_cells(joined: Joined, diags: Sequence[Diagnostic]) -> list[Diagnostic]:
    out = []
    for d in diags:
        where = joined.locate(d.line)
        if where is None:
            continue
        cell, line = where
        shift = _shift(joined, cell, line)
        if shift:
            d = replace(d, column=d.column + shift,
                        end_column=d.end_column + (shift if d.end_line == d.line else _shift(joined, cell, d.end_line)))
        end = joined.locate(d.end_line)
        end_line = end[1] if end is not None and end[0] == cell else line
        fix = None
        if d.fix is not None:
            fix = FixInfo(d.fix.applicability, d.fix.message, ())  # edits are per file; notebooks use --fix
        out.append(replace(d, line=line, end_line=end_line, cell=cell, fix=fix))
    return out


def lint_notebook(text: str, path: str, rules: Sequence[type[Rule]], project=None) -> list[Diagnostic]:
    """Each cell's diagnostics (with `project`: calls into the project's .py files are followed)."""
    try:
        nb = load(text)
    except NotebookError as exc:
        return [Diagnostic(path, 1, 1, 1, 1, NOTEBOOK_ERROR, str(exc))]
    joined = join(nb)
    found = lint_source(joined.text, path, rules, project=project)
    if not any(d.code == SYNTAX_ERROR for d in found):
        return _to_cells(joined, found)
    # An exercise notebook's unfinished cell (`model = `): report it, and check the other cells without it.
    lines = split_lines(joined.text, keepends=True)
    errors = []
    for cell in joined.cells:
        code = "".join(lines[cell.start - 1 : cell.start - 1 + cell.lines])
        try:
            pyast.parse(code, "<cell>")  # not the notebook's path: Python would read its offsets from that file
        except SyntaxError as exc:
            line = min(max(exc.lineno or 1, 1), max(cell.lines, 1))
            column = (exc.offset or 1) + (len(cell.indent) if line in cell.dedented else 0)
            errors.append(Diagnostic(path, line, column, line, column, SYNTAX_ERROR,
                                     f"syntax error: {exc.msg}; cell not checked", cell=cell.index + 1))
            lines[cell.start - 1 : cell.start - 1 + cell.lines] = ["\n"] * cell.lines
    if not errors:
        return _to_cells(joined, found)
    return errors + _to_cells(joined, lint_source("".join(lines), path, rules, project=project))


@dataclass(frozen=True)
class NotebookFix:
    text: str  # the notebook file's new text (unchanged when nothing applied or it could not be written)
    applied: int
    diags: list[Diagnostic]


def fix_notebook(text: str, path: str, rules: Sequence[type[Rule]], unsafe: bool, project=None) -> NotebookFix:
    try:
        nb = load(text)
    except NotebookError as exc:
        return NotebookFix(text, 0, [Diagnostic(path, 1, 1, 1, 1, NOTEBOOK_ERROR, str(exc))])
    joined = join(nb)
    result = fix_source(joined.text, path, rules, unsafe=unsafe, project=project)
    if result.text == joined.text:
        return NotebookFix(text, 0, _to_cells(joined, list(result.remaining) + list(result.failed)))
    style = _json_style(nb, text)
    new_cells = _split(result.text, joined, nb)
    if style is None or new_cells is None:
        reason = ("its JSON formatting could not be reproduced" if style is None
                  else "the fixed code no longer maps onto its cells")
        kept = lint_notebook(text, path, rules, project)
        note = Diagnostic(path, 1, 1, 1, 1, NOTEBOOK_ERROR, f"notebook not rewritten: {reason}")
        return NotebookFix(text, 0, [note] + kept)
    for index, code in new_cells.items():
        cell = nb["cells"][index]
        if code == _source(cell):
            continue
        _set_source(cell, code)
    new_text = _dump(nb, style)
    fixed_joined = join(nb)
    # The rejoined cells are the fixed module again (same markers and placeholders): reuse its diagnostics.
    found = (result.remaining if fixed_joined.text == result.text
             else lint_source(fixed_joined.text, path, rules, project=project))
    remaining = _to_cells(fixed_joined, found)
    return NotebookFix(new_text, result.applied, remaining + _to_cells(joined, list(result.failed)))


def _set_source(cell: dict, code: str) -> None:
    """A cell's new code, stored the way the cell stored it: a list of lines (Jupyter's layout) or one string.
    The list is cut where nbformat cuts it (`str.splitlines`), so the file is laid out as Jupyter writes it; the
    pieces are joined again before anything counts lines."""
    cell["source"] = code.splitlines(keepends=True) if isinstance(cell.get("source"), list) else code


def _split(fixed: str, joined: Joined, nb: dict) -> dict[int, str] | None:
    """The fixed module cut back into cells at the markers, magic lines put back; the lines a fix did not touch
    are the cell's own (its line breaks, CRLF included), the lines it added end as the cell's lines do, and each
    cell's last line break is as it was (Jupyter stores sources without one)."""
    fixed_cells, joined_cells = _cut(fixed, joined), _cut(joined.text, joined)
    if fixed_cells is None or joined_cells is None:
        return None
    out: dict[int, str] = {}
    for cell in joined.cells:
        source = _source(nb["cells"][cell.index])
        code = carry_over(source, _indent(joined_cells[cell.index], cell.indent),
                          _indent(fixed_cells[cell.index], cell.indent))
        if not source.endswith(("\n", "\r")):
            code = END_BREAK.sub("", code)
        out[cell.index] = code
    return out


def _indent(code: str, indent: str) -> str:
    """A dedented cell's code indented again (IPython strips it back): lines a fix added keep their place in
    the cell's blocks; the lines it did not touch are the cell's own (`carry_over`)."""
    if not indent:
        return code
    return "".join(indent + text if text.strip() else text for text in split_lines(code, keepends=True))


def _cut(module: str, joined: Joined, magics: bool = True) -> dict[int, str] | None:
    """Each cell's code in a joined module (this one, or one fixed from it), magic lines put back (`magics`)."""
    marks = list(_MARKER_RE.finditer(module))
    if [int(m.group(1)) for m in marks] != [c.index for c in joined.cells]:
        return None
    all_magics = [m for c in joined.cells for m in c.magics]
    out: dict[int, str] = {}
    for i, (mark, cell) in enumerate(zip(marks, joined.cells)):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(module)
        code = module[mark.end() : end]
        out[cell.index] = _PLACEHOLDER_RE.sub(lambda m: all_magics[int(m.group(2))], code) if magics else code
    return out


_STYLES: list[dict[str, Any]] = [
    {"indent": 1, "sort_keys": True, "ensure_ascii": False},  # what Jupyter (nbformat) writes
    {"indent": 1, "sort_keys": False, "ensure_ascii": False},
    {"indent": 2, "sort_keys": False, "ensure_ascii": False},
    {"indent": 2, "sort_keys": True, "ensure_ascii": False},
    {"indent": 4, "sort_keys": False, "ensure_ascii": False},
    {"indent": 1, "sort_keys": True, "ensure_ascii": True},
    {"indent": 2, "sort_keys": False, "ensure_ascii": True},
]


def _json_style(nb: dict, text: str) -> tuple[dict, str, str] | None:
    """The json.dumps settings, trailing text and line break that reproduce `text` exactly, if any (CRLF: a
    notebook checked out with git's autocrlf; json.dumps writes no line break inside a string)."""
    newline = "\r\n" if "\r\n" in text else "\n"
    plain = text.replace("\r\n", "\n") if newline != "\n" else text
    for style in _STYLES:
        dumped = json.dumps(nb, **style)
        if plain == dumped:
            return style, "", newline
        if plain == dumped + "\n":
            return style, "\n", newline
    return None


def _dump(nb: dict, style: tuple[dict, str, str]) -> str:
    settings, tail, newline = style
    text = json.dumps(nb, **settings) + tail
    return text.replace("\n", newline) if newline != "\n" else text


def add_noqa_notebook(text: str, path: str, rules: Sequence[type[Rule]], project=None) -> tuple[str, int]:
    """`--add-noqa` in a notebook: the comments go into the cells' lines, the JSON layout kept as `--fix`
    keeps it. Returns the new text and how many lines changed; NotebookError when the notebook cannot be read, or
    has findings to accept and cannot be rewritten exactly."""
    from torchlint.add_noqa import add_noqa, codes_by_line

    nb = load(text)
    joined = join(nb)
    python = _cut(joined.text, joined, magics=False) or {}  # what the tokenizer reads of each cell
    by_cell: dict[int, list[Diagnostic]] = {}
    for d in lint_notebook(text, path, rules, project):
        if d.cell is not None:
            by_cell.setdefault(d.cell, []).append(d)
    changed = 0
    for number, diags in by_cell.items():
        cell = nb["cells"][number - 1]
        code, count = add_noqa(_source(cell), codes_by_line(diags), python.get(number - 1))
        if count:
            changed += count
            _set_source(cell, code)
    if not changed:
        return text, 0
    style = _json_style(load(text), text)
    if style is None:
        raise NotebookError("notebook not rewritten: its JSON formatting could not be reproduced")
    return _dump(nb, style), changed
