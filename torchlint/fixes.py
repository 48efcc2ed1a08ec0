"""Statement-level edits that rules attach to findings (the changes of a `Fix`)."""

from __future__ import annotations

import libcst as cst

from torchlint.diagnostic import Replacement


def movable(stmt: cst.CSTNode) -> bool:
    """A line holding exactly one small statement: it can be moved or have lines inserted around it."""
    return isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1


def insert_after(anchor: cst.CSTNode, code: str) -> tuple[cst.CSTNode, Replacement]:
    """Insert the statement(s) `code` right after `anchor`, at its indentation."""
    new = cst.parse_module(code).body
    return anchor, cst.FlattenSentinel([anchor, *new])


def insert_before(anchor: cst.CSTNode, code: str) -> tuple[cst.CSTNode, Replacement]:
    new = cst.parse_module(code).body
    return anchor, cst.FlattenSentinel([*new, anchor])


def move_after(stmt: cst.CSTNode, anchor: cst.CSTNode) -> tuple[tuple[cst.CSTNode, Replacement], ...]:
    """Move the line `stmt` to just after `anchor` (comments on the moved line travel with it)."""
    moved = stmt.with_changes(leading_lines=[]) if isinstance(stmt, cst.SimpleStatementLine) else stmt
    return ((stmt, cst.RemovalSentinel.REMOVE), (anchor, cst.FlattenSentinel([anchor, moved])))
