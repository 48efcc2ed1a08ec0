"""What a class's method does to the state it keeps, read from its text alone (Python's `ast`, no file model):
whether a `detach()` cuts that state from the graph, or does nothing. Asked for a class that overrides `detach`
with a body that does nothing (TL008), of the base it overrides: in the same file, or through the project's
lookup (`ProjectLookup.detaches`) in another."""

from __future__ import annotations

import ast
import re
import textwrap

# `def detach(self):` whose body is only `pass` (a docstring before it allowed): an override that does nothing.
NOOP_DETACH = re.compile(r"detach[ \t]*\([ \t]*self[ \t]*\)[^:\n]*:[ \t]*(?:#[^\n]*)?\n"
                         r"(?:[ \t]*(?:#[^\n]*)?\n)*(?:[ \t]*(?:\"\"\"[^\n]*\"\"\"|'''[^\n]*''')[ \t]*\n)?[ \t]*pass\b")
# A `detach` method of a class, which the check reads (the override, and the base's it overrides).
DEF_DETACH = re.compile(r"def(?<!\wdef)\s+detach\s*\(")
_DETACHING = {"detach", "detach_"}


def method_of(tree: ast.Module, lineage: list[str], name: str) -> ast.FunctionDef | None:
    """The method `name` the first class of `lineage` (nearest first, top-level classes of the tree) defines."""
    classes = {c.name: c for c in tree.body if type(c) is ast.ClassDef}
    for owner in lineage:
        cls = classes.get(owner)
        if cls is None:
            continue
        for node in cls.body:
            if type(node) is ast.FunctionDef and node.name == name:
                return node
    return None


def detaches_state(fn: ast.FunctionDef) -> bool:
    """The method cuts what its object keeps from the graph: it stores a detached value in an attribute of `self`
    (`self.hidden = tuple(h.detach() for h in self.hidden)`) or detaches one in place (`self.h.detach_()`, `for
    h in self._all: h.detach_()`)."""
    params = fn.args.posonlyargs + fn.args.args
    if not params:
        return False
    me = params[0].arg
    for node in ast.walk(fn):
        if type(node) is ast.Assign and any(_on_self(t, me) for t in node.targets) and _calls_detach(node.value):
            return True
        if (type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "detach_"):
            return True
    return False


def does_nothing(code: str) -> bool:
    """The text of a `def` is a method whose body is only `pass` (and a docstring)."""
    try:
        tree = ast.parse(textwrap.dedent(code))
    except SyntaxError:
        return False
    fn = tree.body[0] if tree.body else None
    if type(fn) is not ast.FunctionDef:
        return False
    body = fn.body[1:] if fn.body and _docstring(fn.body[0]) else fn.body
    return len(body) == 1 and type(body[0]) is ast.Pass


def parse_method(code: str) -> ast.FunctionDef | None:
    try:
        tree = ast.parse(textwrap.dedent(code))
    except SyntaxError:
        return None
    fn = tree.body[0] if tree.body else None
    return fn if type(fn) is ast.FunctionDef else None


def _docstring(node: ast.stmt) -> bool:
    return type(node) is ast.Expr and type(node.value) is ast.Constant and isinstance(node.value.value, str)


def _on_self(target: ast.expr, me: str) -> bool:
    return type(target) is ast.Attribute and type(target.value) is ast.Name and target.value.id == me


def _calls_detach(value: ast.expr) -> bool:
    return any(type(n) is ast.Call and type(n.func) is ast.Attribute and n.func.attr in _DETACHING
               for n in ast.walk(value))
