"""What a method of a class of another project file keeps of its arguments (`ProjectLookup.kept`): a meter's
`update(val)` that adds `val` into `self.sum`, a collector's `__setitem__` that appends its value to a list of
`self`. Asked only for the loops of a file that back-propagate, of the classes its objects are built from. The
class's file is parsed only when its text holds such a write (a text search first), once per content."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol

from torchlint.analysis.exprs import positional_params
from torchlint.analysis.model import FileModel
from torchlint.source.cstfast import parse_read_only

# `self.sum +=`, `self.sums[i] +=`, `self.values.append(`, `self.stats[key].append(`: a write that keeps its value
KEEPING_TEXT = re.compile(r"self\s*\.\s*\w+(?:\s*\[[^\]\n]*\])?\s*(?:\+=|\.\s*(?:append|extend)\s*\()")

# the method's positional parameters (`self` included), and those it keeps in an attribute of `self`
Kept = tuple[tuple[str, ...], frozenset[str]]

_MEMO: dict[tuple[str, tuple[str, ...], str], Kept | None] = {}  # by content hash, class lineage, method
_MEMO_LIMIT = 4096


class Texts(Protocol):
    def text(self, path: Path) -> tuple[str, str] | None:
        ...


def kept_by(project: Texts, path: Path, name: str, lineage: list[str], method: str) -> Kept | None:
    """`name.method` of the file `path` (defined by the class or by one of its bases of that file, `lineage`),
    or None when the file defines no such method."""
    got = project.text(path)
    if got is None or KEEPING_TEXT.search(got[0]) is None:
        return None
    key = (got[1], tuple(lineage), method)
    if key not in _MEMO:
        if len(_MEMO) >= _MEMO_LIMIT:
            _MEMO.clear()
        _MEMO[key] = _compute(got[0], lineage, method)
    return _MEMO[key]


def _compute(text: str, lineage: list[str], method: str) -> Kept | None:
    try:
        model = FileModel(parse_read_only(text), text)
        for owner in lineage:
            scope = next((s for s in model.scopes if s.class_name == owner and s.name == method), None)
            if scope is not None:
                return tuple(positional_params(scope.node)), model.summary(scope).keeps
    except Exception:  # a file that cannot be analysed keeps nothing known
        return None
    return None
