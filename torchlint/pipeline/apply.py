"""Stage 6: fixes applied to the tree (node replacement by identity), and the text edits they make."""

from __future__ import annotations

import difflib
from typing import Sequence

import libcst as cst

from torchlint.diagnostic import Edit, Fix
from torchlint.lines import split_lines


def apply_fixes(module: cst.Module, fixes: Sequence[Fix]) -> cst.Module:
    changes = {id(old): new for fix in fixes for old, new in fix.changes}
    return module.visit(_Replacer(changes))


class _Replacer(cst.CSTTransformer):
    def __init__(self, changes: dict[int, object]) -> None:
        self.changes = changes

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        return self.changes.get(id(original_node), updated_node)


def edits(before: str, after: str) -> tuple[Edit, ...]:
    """Line-granular text edits turning `before` into `after`."""
    a, b = split_lines(before, keepends=True), split_lines(after, keepends=True)
    edits = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            edits.append(Edit(i1 + 1, 1, i2 + 1, 1, "".join(b[j1:j2])))
    return tuple(edits)
