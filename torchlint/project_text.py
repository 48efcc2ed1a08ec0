"""What the project's files say, read from their text without libcst: a class's text and whether it writes a
learning rate (`ProjectView.rate_setter`), and what calling an object of the project runs
(`ProjectLookup.instance_call`), read with `ast` (a fiftieth of libcst's parse), only when a file that
back-propagates calls such an object.

The object is an instance of a class of the project, built by the class itself or returned by a function there
(`return nn.DataParallel(Net(...)).to(device)`, `model = Net(...); return model`): every return of the function must
give the same class. Calling it runs the first `__call__` along its classes, else, for a module (its bases reach
nn.Module's through classes of the project), the first `forward`. A class is followed through the files that
import it (`from .models import Net`, a package's `__init__.py`), one base at a time; a base outside the project
other than nn.Module's, several bases, a decorator on the method: not known."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Callable, Protocol, Union

from torchlint.analysis.foreign import Signature
from torchlint.analysis.prescan import Imported, scan_imports
from torchlint.project_trees import dotted_name, tree_of
from torchlint.analysis.semantics import LR_KEY, MODULE_BASES, MODULE_METHODS_RETURNING_MODULE, MODULE_WRAPPERS

# `group["lr"] = ...`: a learning rate written into an optimizer's param group.
LR_WRITE = re.compile(rf"\[\s*(['\"]){LR_KEY}\1\s*\]\s*=(?!=)")


_AT_MARGIN = re.compile(r"(?m)^(?=[^\s#)])")  # a line that starts a top-level statement


def class_text(text: str, cls: str) -> str:
    """The text of the top-level class `cls`: from its `class` line to the next line that starts a statement at
    the margin."""
    start = re.search(rf"(?m)^class[ \t]+{re.escape(cls)}\b", text)
    if start is None:
        return ""
    end = _AT_MARGIN.search(text, start.end())
    return text[start.start():end.start() if end is not None else len(text)]


class Files(Protocol):
    """What the reader asks of the project (`project.Project`): a file's text and content hash, an import's file."""

    def text(self, path: Path, data: bytes | None = None) -> tuple[str, str] | None: ...

    def module_file(self, importer: Path, imp: Imported) -> Path | None: ...


class ClassFiles(Files, Protocol):
    """And the bases a top-level class of a file names (None when the file defines no such class)."""

    def class_bases(self, path: Path, cls_name: str) -> list[str] | None: ...


def rate_setter(project: ClassFiles, reader: "SignatureReader", path: Path, name: str) -> bool:
    """Is `name` of `path` a scheduler of the project's own: a class that derives from nothing outside its file (no
    base, `object`, or classes of the same file that do the same) and writes a learning rate into param groups
    itself (`group["lr"] = lr`), or a plain function of that file every return of which builds such a class
    (`def get_scheduler(cfg): if cfg["type"] == "linear": return LinearSchedule(cfg) ...`)?"""
    got = project.text(path)
    if got is None:
        return False
    names = [name] if project.class_bases(path, name) is not None else _factory_classes(reader, path, name)
    return bool(names) and all(_sets_rate(project, path, got[0], cls) for cls in names)


def _sets_rate(project: ClassFiles, path: Path, text: str, name: str) -> bool:
    todo, seen = [name], set()
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        bases = project.class_bases(path, cls)
        if bases is None or any(not b.isidentifier() for b in bases):
            return False  # not a class of that file, or a base elsewhere (`lr_scheduler._LRScheduler`)
        todo.extend(b for b in bases if b != "object")
    return any(LR_WRITE.search(body) or _calls_rate_writer(text, body) for body in (class_text(text, c) for c in seen))


def _calls_rate_writer(text: str, body: str) -> bool:
    """The class calls a top-level function of its file that writes the rate (`def adjust_lr(optimizer, lr): for
    group in optimizer.param_groups: group["lr"] = lr`, called as `adjust_lr(self.optimizer, self.lr)`)."""
    for m in re.finditer(r"(?m)^def[ \t]+(\w+)", text):
        end = _AT_MARGIN.search(text, m.end())
        if LR_WRITE.search(text, m.end(), end.start() if end is not None else len(text)) and re.search(
                rf"(?<![\w.]){re.escape(m.group(1))}\s*\(", body):
            return True
    return False


def _factory_classes(reader: "SignatureReader", path: Path, name: str) -> list[str]:
    """The classes of `path` that its top-level function `name` returns, when every return builds one
    (`return Schedule(cfg)`); [] otherwise (a decorator, a return of anything else, none)."""
    got = reader.file(path)
    node = got[0].get(name) if got is not None else None
    if not isinstance(node, ast.FunctionDef) or node.decorator_list:
        return []
    out: list[str] = []
    for r in _returns(node):
        value = r.value
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                and isinstance(got[0].get(value.func.id), ast.ClassDef)):  # type: ignore[index]  # got: not None
            return []
        out.append(value.func.id)
    return out


_HOPS = 16  # files and classes visited for one question
_Def = Union[ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef]


class SignatureReader:
    """One per project: each file's top-level definitions and imports, parsed once (by content hash)."""

    def __init__(self, project: Files) -> None:
        self.project = project
        self._files: dict[str, tuple[dict[str, _Def], dict[str, Imported]] | None] = {}

    def instance_call(self, path: Path, name: str, forward: Signature | None,
                      record: Callable[[Path], None]) -> Signature | None:
        """What calling the object `name(...)` of `path` gives runs (see the module's docstring)."""
        return _Question(self, record).instance(path, name, forward)

    def function_call(self, path: Path, name: str, record: Callable[[Path], None]) -> Signature | None:
        """How the function `name` of `path` (its own, or one it imports from another project file) may be called;
        None for a class, or a decorated or async function."""
        found = _Question(self, record).locate(path, name)
        if found is None or not isinstance(found[1], ast.FunctionDef) or found[1].decorator_list:
            return None
        return _signature(found[1], method=False)

    def file(self, path: Path) -> tuple[dict[str, _Def], dict[str, Imported]] | None:
        got = self.project.text(path)
        if got is None:
            return None
        text, digest = got
        if digest not in self._files:
            tree = tree_of(digest, text)
            if tree is None:
                self._files[digest] = None
            else:
                defs = {n.name: n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))}
                self._files[digest] = (defs, scan_imports(text))
        return self._files[digest]


class _Question:
    def __init__(self, reader: SignatureReader, record: Callable[[Path], None]) -> None:
        self.reader = reader
        self.record = record
        self.hops = 0

    def locate(self, path: Path, name: str) -> tuple[Path, _Def] | None:
        """The definition `name` means in `path`: its own, or one it imports from another project file."""
        while self.hops < _HOPS:
            self.hops += 1
            self.record(path)
            got = self.reader.file(path)
            if got is None:
                return None
            defs, imports = got
            if name in defs:
                return path, defs[name]
            imp = imports.get(name)
            if imp is None or imp.name is None:
                return None
            found = self.reader.project.module_file(path, Imported(imp.module, imp.level))
            if found is None:
                return None  # outside the project
            path, name = found, imp.name
        return None

    def instance(self, path: Path, name: str, forward: Signature | None) -> Signature | None:
        found = self.locate(path, name)
        if found is None:
            return None
        path, node = found
        if isinstance(node, ast.ClassDef):
            return self.called(path, node, forward)
        if forward is not None or isinstance(node, ast.AsyncFunctionDef) or node.decorator_list:
            return None
        classes = {_built(node, r.value) for r in _returns(node)}
        if len(classes) != 1:
            return None
        cls = classes.pop()
        return self.instance(path, cls, None) if cls is not None and self.hops < _HOPS else None

    def called(self, path: Path, node: ast.ClassDef, forward: Signature | None) -> Signature | None:
        while self.hops < _HOPS:
            self.hops += 1
            methods = {f.name: f for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
            if "__call__" in methods:
                return _signature(methods["__call__"])
            if forward is None and "forward" in methods:
                forward = _signature(methods["forward"])
                if forward is None:
                    return None
            if len(node.bases) != 1 or node.keywords:
                return None
            base = dotted_name(node.bases[0])
            if base is None:
                return None
            found = self.locate(path, base) if "." not in base else None
            if found is None:
                return forward if base.rsplit(".", 1)[-1] in MODULE_BASES else None
            path, got = found
            if not isinstance(got, ast.ClassDef):
                return None
            node = got
        return None


def _signature(fn: ast.FunctionDef | ast.AsyncFunctionDef, method: bool = True) -> Signature | None:
    """How a method (`self` left out) or a function may be called; None when a decorator may change that."""
    if fn.decorator_list or isinstance(fn, ast.AsyncFunctionDef):
        return None
    a = fn.args
    skip = 1 if method else 0
    positional = [p.arg for p in a.posonlyargs + a.args][skip:]
    if len(a.posonlyargs + a.args) < skip:
        return None
    required = len(a.posonlyargs + a.args) - skip - len(a.defaults)
    return Signature(
        tuple(positional), max(required, 0), a.vararg is not None, tuple(p.arg for p in a.kwonlyargs),
        tuple(p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is None), a.kwarg is not None,
    )


def _returns(fn: ast.FunctionDef) -> list[ast.Return]:
    """The function's own returns (not those of functions or classes defined inside it)."""
    out: list[ast.Return] = []
    todo: list[ast.AST] = list(fn.body)
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Return):
            out.append(n)
        elif not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(n))
    return out


def _unwrap(expr: ast.expr) -> ast.expr:
    """The module inside wrappers (`nn.DataParallel(m)`) and methods that hand it back (`m.to(device)`)."""
    while isinstance(expr, ast.Call):
        func = expr.func
        name = dotted_name(func)
        if isinstance(func, ast.Attribute) and func.attr in MODULE_METHODS_RETURNING_MODULE:
            expr = func.value
        elif name is not None and (name in MODULE_WRAPPERS or name.rsplit(".", 1)[-1] in MODULE_WRAPPERS) \
                and expr.args and not isinstance(expr.args[0], ast.Starred):
            expr = expr.args[0]
        else:
            break
    return expr


def _built(fn: ast.FunctionDef, expr: ast.expr | None, depth: int = 0) -> str | None:
    """The class (a plain name) whose instance `expr` is: a constructor call, through module wrappers and methods
    that hand the module back, or a local name every assignment of which is such a call (`m = m.to(d)` aside)."""
    if expr is None:
        return None
    expr = _unwrap(expr)
    if isinstance(expr, ast.Call):
        name = dotted_name(expr.func)
        return name if name is not None and "." not in name else None
    if not isinstance(expr, ast.Name) or depth >= 2:
        return None
    stores = 0
    values: list[ast.expr] = []
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and n.id == expr.id and isinstance(n.ctx, ast.Store):
            stores += 1
        elif isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) \
                and n.targets[0].id == expr.id:
            values.append(n.value)
    if stores != len(values):
        return None  # bound some other way too (a loop, a with, unpacking, `+=`): not followed
    inner = [v for v in map(_unwrap, values) if not (isinstance(v, ast.Name) and v.id == expr.id)]
    classes = {_built(fn, v, depth + 1) for v in inner}
    return classes.pop() if len(classes) == 1 else None
