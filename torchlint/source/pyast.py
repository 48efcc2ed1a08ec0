"""CPython's own parser, used where it is faster or more precise than libcst (pruning, statement lines,
syntax-error messages, checking fixed code), without printing the user's SyntaxWarnings on our stderr."""

from __future__ import annotations

import ast
import warnings


def parse(text: str, path: str = "<unknown>") -> ast.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # `x is 1` in the user's code is not our message to print
        return ast.parse(text, path)


def first_line(node: ast.stmt) -> int:
    """The line a statement starts on, its decorators included (where libcst's statement starts too)."""
    decorators = getattr(node, "decorator_list", None) or []
    return min([node.lineno] + [d.lineno for d in decorators])
