"""One `ast` tree per content of a project file, shared by every reader of other files' text: what calling an
object of the project runs (`project_text.SignatureReader`), whether another file's method cuts its state
(`project_values`), and who calls a file's helpers (`project_callers`). Keyed by content hash, so a file read by
the three is parsed once, whichever asks first."""

from __future__ import annotations

import ast

from torchlint.source import pyast

_LIMIT = 512  # trees kept (a language server runs long)
_TREES: dict[str, ast.Module | None] = {}  # by content hash


def tree_of(digest: str, text: str) -> ast.Module | None:
    """The `ast` of a project file's text (`digest`: its content hash), None where CPython refuses it."""
    if digest not in _TREES:
        if len(_TREES) >= _LIMIT:
            _TREES.clear()
        try:
            _TREES[digest] = pyast.parse(text.removeprefix("\ufeff"))  # CPython refuses a BOM in a str
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            _TREES[digest] = None
    return _TREES[digest]


def dotted_name(node: ast.AST) -> str | None:
    """`a.b.c` of a name or an attribute chain of names, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted_name(node.value)
        return f"{head}.{node.attr}" if head is not None else None
    return None
