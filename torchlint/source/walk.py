"""Read-only traversal of libcst trees.

libcst's own `node.visit(visitor)` rebuilds every node it passes (it is a transformer underneath), which costs
more than parsing. The model only reads, so it walks the dataclass fields directly, skipping whitespace and
punctuation, with explicit stacks (no recursion limit on long expressions).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Callable, Iterator

import libcst as cst

_SKIP = re.compile(
    r"whitespace|^(lpar|rpar|comma|semicolon|colon|first_colon|second_colon|dot|equal|star|leading_lines"
    r"|lines_after_decorators|header|footer|newline|indent|lbrace|rbrace|lbracket|rbracket|operator|asynchronous"
    r"|empty_lines|comment|trailing_comma|encoding|default_indent|default_newline|has_trailing_newline|relative"
    r"|conversion|keyword)$"
)
_FIELDS: dict[type, tuple[str, ...]] = {}
_IS_NODE: dict[type, bool] = {}  # CSTNode is an ABC: isinstance() on it is slow, a dict of types is not
_SCOPES = frozenset({cst.Lambda, cst.FunctionDef, cst.ClassDef})  # compared by type: isinstance on ABCs is slow
# Nodes with no expression inside: nothing to walk into (most leaves of an expression tree).
_LEAVES = frozenset({cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.Ellipsis})


def _fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(cls) if not _SKIP.search(f.name))
        _FIELDS[cls] = names
    return names


def _is_node(value: object) -> bool:
    cls = type(value)
    known = _IS_NODE.get(cls)
    if known is None:
        known = _IS_NODE[cls] = issubclass(cls, cst.CSTNode)
    return known


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The child nodes that can hold expressions, in source order."""
    out: list[cst.CSTNode] = []
    for name in _FIELDS.get(type(node)) or _fields(type(node)):
        value = getattr(node, name)
        cls = type(value)
        if cls is list or cls is tuple:
            out.extend(value)  # libcst's sequences hold nodes only
        elif _is_node(value):
            out.append(value)
    return out


def walk(
    node: cst.CSTNode, prune: Callable[[cst.CSTNode], bool] | None = None, descend_scopes: bool = False
) -> Iterator[cst.CSTNode]:
    """Pre-order, source order. Does not enter lambdas or nested definitions (unless `descend_scopes`), nor
    nodes where `prune` is true (those are still yielded)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        cls = type(n)
        if n is not node and not descend_scopes and cls in _SCOPES:
            continue
        if (prune is not None and prune(n)) or cls in _LEAVES:
            continue
        stack.extend(reversed(children(n)))


def calls_in_evaluation_order(node: cst.CSTNode) -> list[cst.Call]:
    """Calls inside `node`, inner before outer (`scaler.scale(loss)` before its `.backward()`)."""
    out: list[cst.Call] = []
    stack: list[tuple[cst.CSTNode, bool]] = [(node, False)]
    pop, push = stack.pop, stack.append
    while stack:
        n, done = pop()
        if done:
            out.append(n)  # type: ignore[arg-type]  # only calls are pushed done
            continue
        cls = type(n)
        if cls is cst.Attribute or cls is cst.Arg:  # the commonest nodes hold one expression (`attr` is a Name)
            value = n.value  # type: ignore[attr-defined]  # an Attribute or an Arg, by cls = type(n)
            if type(value) not in _LEAVES:
                push((value, False))
            continue
        if n is not node and cls in _SCOPES:
            continue
        if cls is cst.Call:
            push((n, True))
        for child in reversed(children(n)):
            if type(child) not in _LEAVES:  # nothing inside: not worth a turn of the loop
                push((child, False))
    return out
