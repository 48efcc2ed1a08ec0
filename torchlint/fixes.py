"""Statement-level edits that rules attach to findings (the changes of a `Fix`)."""

from __future__ import annotations

from functools import lru_cache
from typing import Union

import libcst as cst

# What a node may be replaced with in a Fix: a node, several statements, or nothing.
Replacement = Union[cst.CSTNode, cst.FlattenSentinel, cst.RemovalSentinel]


def parenthesized(value: cst.BaseExpression) -> cst.BaseExpression:
    """`value` in parentheses when it is an operator expression, so that a method can be called on all of it
    (`(a + b).detach()`, `(await f()).item()`)."""
    if isinstance(value, (cst.BinaryOperation, cst.BooleanOperation, cst.UnaryOperation, cst.IfExp, cst.Await)) \
            and not value.lpar:
        return value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return value


def movable(stmt: cst.CSTNode) -> bool:
    """A line holding exactly one small statement: it can be moved or have lines inserted around it."""
    return isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1


@lru_cache(maxsize=512)
def statements(code: str) -> tuple[cst.BaseStatement, ...]:
    """Parsed once per distinct snippet: rules build the same few lines (`optimizer.zero_grad()`) again and
    again, and a libcst parse has a fixed cost. Nodes are immutable, so sharing them is safe."""
    return tuple(cst.parse_module(code).body)


@lru_cache(maxsize=512)
def expression(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def insert_after(anchor: cst.CSTNode, code: str) -> tuple[cst.CSTNode, Replacement]:
    """Insert the statement(s) `code` right after `anchor`, at its indentation."""
    return anchor, cst.FlattenSentinel([anchor, *statements(code)])


def insert_before(anchor: cst.CSTNode, code: str) -> tuple[cst.CSTNode, Replacement]:
    return anchor, cst.FlattenSentinel([*statements(code), anchor])


def move_after(stmt: cst.CSTNode, anchor: cst.CSTNode) -> tuple[tuple[cst.CSTNode, Replacement], ...]:
    """Move the line `stmt` to just after `anchor` (comments on the moved line travel with it)."""
    moved = stmt.with_changes(leading_lines=[]) if isinstance(stmt, cst.SimpleStatementLine) else stmt
    return ((stmt, cst.RemovalSentinel.REMOVE), (anchor, cst.FlattenSentinel([anchor, moved])))
