"""Where the project runs a method of a file's class once per iteration of a loop: a training-step method (`def
step(self, batch)` that back-propagates and steps, outside any loop of its own) is one iteration of its callers'
loops, wherever they are (a tutorial script three folders below the package that defines the class).

A method's name alone says little (`step`, `update`, `__call__` are everywhere), so a call counts only when the
caller imports the class from the method's file (directly, or through a package's `__init__` that imports it from
there), binds a name to an instance of it (`gan = GAN(...)`, `self.sched = Scheduler(model)`) and to nothing else,
and calls the method on that name (`gan.step(batch)`; the instance itself for `__call__`: `self.sched(preds)`).
Each such call, inside a loop of its function and not under `no_grad`, is a `foreign.CallerUse` with `looped`, and
`clears` when that loop calls some `zero_grad()`, writes a `.grad`, or hands the instance to another call (which
may clear it).

Gated by the rules: asked only for a method whose own file shows the premise (TL004: a step no clearing of the
method precedes; TL002: a last backward keeping a graph that leaves the call) and that no function of its file
calls. Then the project's files (breadth first from its root, skipping what the file walk skips, at most
`_MAX_FILES`) whose text names the class as a word and calls the method are parsed with `ast`, once per content
(`project_trees`)."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path
from typing import Any, Callable, Iterator

from torchlint.analysis.foreign import CallerUse
from torchlint.analysis.prescan import Imported
from torchlint.excluded import excluded_by_default
from torchlint.project_trees import dotted_name, tree_of

_MAX_FILES = 2000  # the project's files searched for a method's runs, at most
_QUIET = re.compile(r"no_grad|inference_mode")


class RunsIndex:
    """Held by the `Project`: for a method of one of its files' classes, the calls that run it per iteration."""

    def __init__(self, project: Any) -> None:
        self.project = project  # its `root`, `text(path)`, `module_file(importer, imported)`, `_listing(dir)`
        self._files: list[Path] | None = None
        self._uses: dict[tuple[Path, str], tuple[CallerUse, ...]] = {}
        self._read: dict[tuple[Path, str], list[Path]] = {}

    def runs(self, file: Path, name: str, record: Callable[[Path], None]) -> tuple[CallerUse, ...]:
        """The calls of `Class.method` of `file` on an instance of the class, in the project's other files."""
        key = (file, name)
        if key not in self._uses:
            read: list[Path] = []
            self._uses[key] = tuple(self._find(file, name, read))
            self._read[key] = read
        for p in self._read[key]:
            record(p)
        return self._uses[key]

    def _all(self) -> list[Path]:
        """The project's `.py` files, breadth first from its root (a caller nearer the root is found first)."""
        if self._files is None:
            out: list[Path] = []
            todo = [str(self.project.root)]
            while todo and len(out) < _MAX_FILES:
                here = todo.pop(0)
                for n in sorted(self.project._listing(here)):
                    if n.endswith(".py"):
                        out.append(Path(here, n))
                    elif not n.startswith(".") and "." not in n and not excluded_by_default(n):
                        todo.append(os.path.join(here, n))
            self._files = out[:_MAX_FILES]
        return self._files

    def _find(self, file: Path, name: str, read: list[Path]) -> Iterator[CallerUse]:
        cls, _, method = name.rpartition(".")
        word = re.compile(r"(?<![\w.])" + re.escape(cls) + r"\b")
        called = re.compile(r"\.\s*" + re.escape(method) + r"\s*\(") if method != "__call__" else None
        own = self.project.text(file)
        own_tree = tree_of(own[1], own[0]) if own is not None else None
        kept = _methods(own_tree, cls) if own_tree is not None else None
        if kept is None:
            return
        for path in self._all():
            got = self.project.text(path) if path != file else None
            if got is None:
                continue
            text, digest = got
            if cls not in text or word.search(text) is None or called is not None and called.search(text) is None:
                continue
            read.append(path)
            tree = tree_of(digest, text)
            local = self._imported(path, tree, file, cls) if tree is not None else set()
            if local:
                yield from _runs(tree, local, method, kept, self.project.display(path))  # type: ignore[arg-type]

    def _imported(self, path: Path, tree: ast.Module, target: Path, cls: str) -> set[str]:
        """The names the caller binds the class to by importing it from `target`, or from a module of the project
        that imports it from there (a package's `__init__`)."""
        out: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name == cls and self._from(path, node, target, cls, 1):
                        out.add(alias.asname or cls)
        return out

    def _from(self, importer: Path, node: ast.ImportFrom, target: Path, cls: str, hops: int) -> bool:
        found = self.project.module_file(importer, Imported(node.module or "", node.level))
        if found == target:
            return True
        if found is None or hops == 0:
            return False
        got = self.project.text(found)
        tree = tree_of(got[1], got[0]) if got is not None and cls in got[0] else None
        return tree is not None and any(
            isinstance(n, ast.ImportFrom) and any(a.name == cls and (a.asname or cls) == cls for a in n.names)
            and self._from(found, n, target, cls, hops - 1) for n in tree.body)


def _methods(tree: ast.Module, cls: str) -> dict[str, bool] | None:
    """The methods the class defines, each with whether it may clear gradients (`zero_grad()`, a `.grad` written);
    None when the file defines no such class."""
    found = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls), None)
    if found is None:
        return None
    return {f.name: any(_clearing(n) for n in ast.walk(f)) for f in found.body
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _clearing(n: ast.AST) -> bool:
    if isinstance(n, ast.Call):
        return isinstance(n.func, ast.Attribute) and n.func.attr == "zero_grad"
    targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AugAssign) else []
    return any(isinstance(t, ast.Attribute) and t.attr == "grad" for t in targets)


def _runs(tree: ast.Module, local: set[str], method: str, kept: dict[str, bool], shown: str) -> Iterator[CallerUse]:
    # the names (`gan`, `self.gan`) every binding of which makes an instance of the class
    bound: dict[str, bool] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign):
            for target in n.targets:
                pairs = zip(target.elts, n.value.elts) if isinstance(target, (ast.Tuple, ast.List)) \
                    and isinstance(n.value, (ast.Tuple, ast.List)) and len(target.elts) == len(n.value.elts) \
                    else [(target, n.value)]
                for t, v in pairs:  # `gan = GAN()`; `gan, env = GAN(), Env()`
                    name = dotted_name(t)
                    if name is not None:
                        bound[name] = bound.get(name, True) and isinstance(v, ast.Call) \
                            and dotted_name(v.func) in local
    instances = {name for name, makes in bound.items() if makes}
    if not instances:
        return
    finder = _Finder(instances, method)
    finder.visit(tree)
    for call, receiver, loops in finder.found:
        inner = loops[-1]
        # a backward of that loop (`backward_line`): it may go through a graph the method keeps for it
        later = next((n.lineno for n in ast.walk(inner) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                      and n.func.attr in ("backward", "manual_backward")), 0)
        yield CallerUse(shown, call.lineno, True, True, frozenset(), frozenset(), frozenset(), later, direct=True,
                        clears=_clears(inner, call, receiver, kept))


def _clears(loop: ast.AST, call: ast.Call, receiver: str, kept: dict[str, bool]) -> bool:
    """Does the loop clear gradients itself (`zero_grad()`, a `.grad` written), call another method of the
    instance that may (`gan.reset()`: one of the class that clears, or one it does not define), or hand the
    instance to another call (`reset(gan)`)?"""
    for n in ast.walk(loop):
        if _clearing(n):
            return True
        if isinstance(n, ast.Call) and n is not call:
            if isinstance(n.func, ast.Attribute) and dotted_name(n.func.value) == receiver \
                    and kept.get(n.func.attr, True):
                return True
            if any(dotted_name(a) == receiver for a in [*n.args, *(k.value for k in n.keywords)]):
                return True
    return False


class _Finder(ast.NodeVisitor):
    """The calls of `method` on one of `instances` (of the instance itself for `__call__`), each in a loop of its
    function and not under `no_grad` / `inference_mode`, with that loop stack."""

    def __init__(self, instances: set[str], method: str) -> None:
        self.instances, self.method = instances, method
        self.loops: list[ast.AST] = []
        self.quiet = 0
        self.found: list[tuple[ast.Call, str, list[ast.AST]]] = []

    def visit_FunctionDef(self, node: ast.AST) -> None:
        saved = self.loops, self.quiet
        self.loops, self.quiet = [], 0
        self.generic_visit(node)
        self.loops, self.quiet = saved

    visit_AsyncFunctionDef = visit_FunctionDef

    def _loop(self, node: ast.AST) -> None:
        self.loops.append(node)
        self.generic_visit(node)
        self.loops.pop()

    visit_For = visit_While = visit_AsyncFor = _loop

    def visit_With(self, node: ast.With) -> None:
        quiet = any(_QUIET.search(ast.unparse(i.context_expr)) for i in node.items)
        self.quiet += quiet
        self.generic_visit(node)
        self.quiet -= quiet

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if self.method == "__call__":
            receiver = dotted_name(func)
        else:
            receiver = dotted_name(func.value) if isinstance(func, ast.Attribute) and func.attr == self.method \
                else None
        if receiver in self.instances and self.loops and not self.quiet:
            self.found.append((node, receiver, list(self.loops)))
        self.generic_visit(node)
