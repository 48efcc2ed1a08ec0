"""Code a notebook never runs: a function or class defined at the top of a notebook that nothing the notebook runs
refers to, directly or through another such definition.

A notebook is run cell by cell and imported by nobody, so a definition no cell reaches (`train_epoch` called only
by `train_model`, which no cell calls; a course's agent class never instantiated) never runs, and a mistake in it
misbehaves nowhere; a `.py` file may be imported by code the analysis does not see, so this holds for notebooks
only. A definition counts as reached when its name is read by a top-level statement that is not a definition, by
what a definition evaluates when it runs (its decorators, defaults, bases), or by the body of a reached one. Text
that may reach a name without reading it (`globals()`, `eval`, `exec`, `getattr`, `locals()`, `vars()`, `%run`)
makes every definition count as reached.
"""

from __future__ import annotations

import ast
import re

import libcst as cst

from torchlint.source.walk import walk

_BY_NAME = re.compile(r"(?<![\w.])(?:globals|locals|vars|eval|exec|getattr)\s*\(|%run\b|__all__")  # not `model.eval()`
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def never_run(module: cst.Module, text: str) -> set[int]:
    """ids of every node inside a top-level definition of the notebook `text` (its joined cells, which `module` is
    parsed from, possibly pruned) that nothing the notebook runs reaches."""
    if _BY_NAME.search(text):
        return set()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    defs: dict[str, list[ast.stmt]] = {}
    live: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, _DEFS):
            defs.setdefault(stmt.name, []).append(stmt)
            live |= _read(_evaluated_at_definition(stmt))
        else:
            live |= _read([stmt])
    todo = [name for name in live if name in defs]
    while todo:
        for stmt in defs[todo.pop()]:
            for name in _read([stmt]):
                if name in defs and name not in live:
                    live.add(name)
                    todo.append(name)
    dead = {name for name in defs if name not in live}
    out: set[int] = set()
    for node in module.body:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)) and node.name.value in dead:
            out.update(id(n) for n in walk(node, descend_scopes=True))
    return out


def _evaluated_at_definition(stmt: ast.stmt) -> list[ast.AST]:
    """What runs when the definition itself runs: decorators, defaults and annotations, or bases and keywords."""
    parts: list[ast.AST] = list(stmt.decorator_list)  # type: ignore[attr-defined]  # every kind in _DEFS has them
    if isinstance(stmt, ast.ClassDef):
        parts += [*stmt.bases, *stmt.keywords]
    else:
        args = stmt.args  # type: ignore[attr-defined]
        parts += [d for d in (*args.defaults, *args.kw_defaults) if d is not None]
    return parts


def _read(nodes: list[ast.AST]) -> set[str]:
    return {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name)}
