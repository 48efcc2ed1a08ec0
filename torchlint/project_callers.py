"""The project's callers of a file's functions and methods: what the other files of the project do with a call,
the reverse of `project_values` (where a file's loop asks what another file's function returns or keeps).

A helper file with no backward of its own (a loss function, a metrics class) holds a bug only through its callers:
a prediction cut with `.data` inside a loss function is a bug when a caller back-propagates what the function
returns and passes a model's output for that parameter; a method that adds its argument into `self` keeps every
graph when a caller's loop back-propagates the value it passes and the object outlives that loop. The index
answers, per call of the helper found in the project, with `foreign.CallerUse`.

Gated hard: only a file that holds no backward and one of the shapes that can matter (`candidates`, read with
`ast` on the file's own tree) asks at all; then only the files near it (its folder, the folders above it up to the
project's root, and their direct subfolders) whose text back-propagates and names the helper are parsed (with
`ast`, once per content: `project_trees`)."""

from __future__ import annotations

import ast
import os
from bisect import bisect_left
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from torchlint.analysis.foreign import CallerUse
from torchlint.analysis.prescan import Imported
from torchlint.analysis.semantics import is_module_name
from torchlint.excluded import excluded_by_default
from torchlint.project_runs import RunsIndex
from torchlint.project_trees import dotted_name, tree_of
from torchlint.source import pyast
from torchlint.source.words import word_start

BACKWARD_TEXT = re.compile(r"backward\s*\(")
# `self.losses[k] += loss[k]`, `self.loss_sum += value`, `self.history.append(loss)`: a write of a loss into `self`
# that may keep what a method is given (TL007's premise: a loss kept with its graph)
KEEPING = re.compile(r"self\s*\.\s*\w+(?:\s*\[[^\]\n]*\])?\s*(?:\+=|\.\s*append\s*\()[^\n]*[Ll]oss"
                     r"|self\s*\.\s*\w*[Ll]oss\w*(?:\s*\[[^\]\n]*\])?\s*(?:\+=|\.\s*append\s*\()")
# `stats["loss"] = loss`: a loss stored into an item of something (a parameter: a collector the caller hands in)
ITEM_KEEP = re.compile(r"^[ \t]+\w+\s*\[[^\]\n]*\]\s*=\s*\w*[Ll]oss\w*[ \t]*(?:#[^\n]*)?$", re.MULTILINE)
# a loss function (`def rpn_loss(`, `def criterion(`) whose text cuts a value (`.data`, `.detach()`)
LOSS_DEF = re.compile(r"def\s+\w*(?:[Ll]oss|LOSS|[Cc]riterion)\w*\s*\(")
CUT = re.compile(r"\.\s*(?:data\b|detach\s*\(|item\s*\()")
_MOVES = frozenset({"to", "cuda", "cpu", "float", "double", "half", "train", "eval"})
_CUTTING = frozenset({"item", "detach", "tolist", "numpy", "cpu", "data"})
_MAX_FILES = 400  # files near a helper read for its callers, at most


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    return [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]


def _rebound(fn: ast.AST) -> set[str]:
    return {x.id for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) for x in ast.walk(t)
            if isinstance(x, ast.Name)}


def _definitions(tree: ast.Module) -> Iterator[tuple[str | None, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield None, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield node.name, item


def candidates(text: str, tree: ast.Module | None) -> list[str]:
    """The functions (`name`) and methods (`Class.name`) of a file with no backward whose callers can make a bug
    of them: a loss function that cuts one of its parameters (`pred.data`, `pred.detach()`) and returns a value;
    a method that adds a parameter into `self` or appends it there (a meter's `update(loss)`); one that stores a
    loss it returns, or is given, into an item of a parameter (`stat_col["loss"] = loss`: the caller's collector)."""
    if tree is None or BACKWARD_TEXT.search(text) is not None:
        return []
    # the lines a cut, and a write keeping a loss, start on: only the functions holding one are read
    cuts = _lines(CUT, text) if LOSS_DEF.search(text) is not None else []
    kept = _lines(KEEPING, text)
    stored = _lines(ITEM_KEEP, text)
    out = []
    for cls, fn in _definitions(tree):
        last = fn.end_lineno or fn.lineno
        if cuts and re.search("loss|criterion", fn.name, re.IGNORECASE) and _within(cuts, fn.lineno, last) \
                and _cuts_parameter(fn, set(_params(fn)[1 if cls else 0:])):
            out.append(f"{cls}.{fn.name}" if cls else fn.name)
        elif cls and fn.name != "__init__" and _within(kept, fn.lineno, last) \
                and _keeps_parameter(fn, set(_params(fn)[1:]) - _rebound(fn)):
            out.append(f"{cls}.{fn.name}")
        elif _within(stored, fn.lineno, last) and _stores_into_parameter(fn, set(_params(fn)[1 if cls else 0:])):
            out.append(f"{cls}.{fn.name}" if cls else fn.name)
    return out


def _stores_into_parameter(fn: ast.AST, params: set[str]) -> bool:
    """`stats[key] = loss`: a parameter's item given a loss the function returns (alone or in a tuple) or is given,
    the parameter not rebound."""
    returned = {n.id for r in ast.walk(fn) if isinstance(r, ast.Return) and r.value is not None
                for n in ([r.value] if not isinstance(r.value, ast.Tuple) else r.value.elts) if isinstance(n, ast.Name)}
    held = params - {x.id for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
                     for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                     for x in ([t] if not isinstance(t, (ast.Tuple, ast.List)) else t.elts) if isinstance(x, ast.Name)}
    return any(isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(t := n.targets[0], ast.Subscript)
               and isinstance(t.value, ast.Name) and t.value.id in held and isinstance(n.value, ast.Name)
               and "loss" in n.value.id.lower() and (n.value.id in returned or n.value.id in held)
               for n in ast.walk(fn))


def _lines(pattern: re.Pattern[str], text: str) -> list[int]:
    return [text.count("\n", 0, m.start()) + 1 for m in pattern.finditer(text)]


def _within(lines: list[int], first: int, last: int) -> bool:
    k = bisect_left(lines, first)
    return k < len(lines) and lines[k] <= last


def _cuts_parameter(fn: ast.AST, params: set[str]) -> bool:
    """A function that returns a value and cuts a parameter (`pred.data`, `pred.detach()`), or a value it computes
    with a criterion (`l2.item()` of `l2 = F.mse_loss(pred, y)`, for `cuts._cut_terms`)."""
    returns = any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(fn))
    criteria = {t.id for n in ast.walk(fn) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                and "loss" in (dotted_name(n.value.func) or "").lower() for t in n.targets if isinstance(t, ast.Name)}
    return returns and any(
        isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and (
            n.value.id in params and n.attr in ("data", "detach")
            or n.value.id in criteria and n.attr in ("data", "detach", "item")) for n in ast.walk(fn))


def _keeps_parameter(fn: ast.AST, params: set[str]) -> bool:
    for n in ast.walk(fn):
        if isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add) and _root(n.target) == "self":
            value: ast.AST | None = n.value
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "append" \
                and _root(n.func.value) == "self" and n.args:
            value = n.args[0]
        else:
            continue
        target = n.target if isinstance(n, ast.AugAssign) else n.func.value  # type: ignore[attr-defined]
        while isinstance(target, ast.Subscript):
            target = target.value
        given = _loads(value) & params if value is not None else set()
        if given and any("loss" in x.lower() for x in given | {_last(target)}):  # a loss kept, by its name
            return True
    return False


def _root(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _loads(node: ast.AST) -> set[str]:
    """The names an expression reads, except inside a cut (`x.item()`, `x.detach()`, `x.data`, `float(x)`)."""
    out: set[str] = set()
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Attribute) and n.attr in _CUTTING:
            continue
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("float", "int", "len", "str"):
            continue
        if isinstance(n, ast.Name):
            out.add(n.id)
        todo.extend(ast.iter_child_nodes(n))
    return out


class CallersIndex:
    """Held by the `Project`: for a helper of one of its files, the calls of it in the project's files near it."""

    def __init__(self, project: Any) -> None:
        self.project = project  # its `root`, `text(path)`, `module_file(importer, imported)`, `_listing(dir)`
        self._near: dict[str, list[Path]] = {}  # by folder
        self._uses: dict[tuple[Path, str], tuple[CallerUse, ...]] = {}
        self._read: dict[tuple[Path, str], list[Path]] = {}  # the caller files each answer read
        self.approved: set[Path] = set()  # the files `wanted` said yes for: the only ones `answer` answers
        self.runs = RunsIndex(project)  # the reverse for a file's training-step methods: where a loop runs them

    def wanted(self, path: str | Path, text: str, tree: ast.Module | None) -> bool:
        """Does a caller of one of the file's candidate helpers back-propagate through it (or keep with it)?"""
        file = Path(path).resolve()
        reads = self.project.reads.setdefault(file, {})  # the batch cache's: a change to a caller invalidates

        def record(p: Path) -> None:
            reads[self.project.display(p)] = p

        if any(u.backpropagated or u.attached for name in candidates(text, tree)
               for u in self.uses(file, name, record)):
            self.approved.add(file)
            return True
        return False

    def answer(self, file: Path, name: str, record: Callable[[Path], None]) -> tuple[CallerUse, ...]:
        """`uses`, for a file `wanted` approved (a file with a backward, or no candidate, asks nothing)."""
        return self.uses(file, name, record) if file in self.approved else ()

    def uses(self, file: Path, name: str, record: Callable[[Path], None] | None = None) -> tuple[CallerUse, ...]:
        key = (file, name)
        if key not in self._uses:
            read: list[Path] = []
            self._uses[key] = tuple(self._find(file, name, read))
            self._read[key] = read
        if record is not None:
            for p in self._read[key]:
                record(p)
        return self._uses[key]

    def _nearby(self, file: Path) -> list[Path]:
        folder = os.path.dirname(str(file))
        found = self._near.get(folder)
        if found is not None:
            return found
        root = str(self.project.root)
        dirs: list[str] = []
        here = folder
        while here.startswith(root):
            dirs.append(here)
            for sub in sorted(self.project._listing(here)):
                full = os.path.join(here, sub)
                if not sub.startswith(".") and not excluded_by_default(sub) and "." not in sub and full not in dirs:
                    dirs.append(full)
            if here == root:
                break
            here = os.path.dirname(here)
        out: list[Path] = []
        for d in dict.fromkeys(dirs):
            out.extend(Path(d, n) for n in sorted(self.project._listing(d)) if n.endswith(".py"))
        found = self._near[folder] = [p for p in out if p != file][:_MAX_FILES]
        return found

    def _find(self, file: Path, name: str, read: list[Path]) -> Iterator[CallerUse]:
        cls, _, method = name.rpartition(".")
        called = re.compile((r"\.\s*" if cls else r"(?<![\w.])") + re.escape(method) + r"\s*\(")
        stem = file.stem if file.name != "__init__.py" else file.parent.name
        inherited = re.compile(word_start("self") + r"\s*\.\s*" + re.escape(method) + r"\s*\(") if cls else None
        for path in self._nearby(file):
            got = self.project.text(path)
            if got is None:
                continue
            text, digest = got
            if BACKWARD_TEXT.search(text) is None or called.search(text) is None \
                    or stem not in text and (inherited is None or inherited.search(text) is None):
                continue  # (a method a caller's class inherits is called on `self`, its module never named)
            read.append(path)
            tree = tree_of(digest, text)
            if tree is None:
                continue
            local = self._bound(path, tree, file, method if not cls else None)
            if local is None and (not cls or not self._derives(path, tree, file, cls, 2)):
                continue

            def held(call: ast.Call, body: ast.AST, loops: list[ast.AST], p: Path = path,
                     t: ast.Module = tree) -> tuple[tuple[str, str, str], ...]:
                return self._held(p, t, call, body, loops)

            yield from _calls(tree, local or set(), method, cls, self.project.display(path), held)

    def _held(self, path: Path, tree: ast.Module, call: ast.Call, body: ast.AST,
              loops: list[ast.AST]) -> tuple[tuple[str, str, str], ...]:
        """The arguments that are objects outliving the call's loop (`self.stats`, a name the loop does not bind),
        each bound only to an instance of one class of a project file: (argument, the class's file, the class)."""
        fresh = {dotted_name(t) for n in ast.walk(loops[-1]) if isinstance(n, ast.Assign) for t in n.targets}
        out = []
        given = [(str(k), a) for k, a in enumerate(call.args)] + [(kw.arg, kw.value) for kw in call.keywords if kw.arg]
        for key, arg in given:
            name = dotted_name(arg)
            if name is None or name in fresh or not isinstance(arg, ast.Name) and name.count(".") != 1 \
                    or "." in name and not name.startswith("self."):
                continue
            found = self._class_of(path, tree, name, tree if "." in name else body, _enclosing(tree, body), 1)
            if found is not None:
                out.append((key, str(found[0]), found[1]))
        return tuple(out)

    def _class_of(self, path: Path, tree: ast.Module, name: str, within: ast.AST, cls: ast.ClassDef | None,
                  hops: int) -> tuple[Path, str] | None:
        """The class of a project file every binding of `name` in `within` makes an instance of; for `self.x`
        bound nowhere in its class, as a base of another project file binds it (`hops` bases deep)."""
        makers = {dotted_name(n.value.func) if isinstance(n.value, ast.Call) else None for n in ast.walk(within)
                  if isinstance(n, ast.Assign) and any(dotted_name(t) == name for t in n.targets)}
        if len(makers) == 1 and (made := makers.pop()) is not None and "." not in made:
            return self._class_file(path, tree, made)
        if makers or not hops or cls is None or not name.startswith("self."):
            return None
        for base in cls.bases:
            found = self._class_file(path, tree, base.id) if isinstance(base, ast.Name) else None
            got = self.project.text(found[0]) if found is not None else None
            other = tree_of(got[1], got[0]) if got is not None else None
            node = next((c for c in other.body if isinstance(c, ast.ClassDef) and c.name == found[1]), None) \
                if other is not None and found is not None else None
            if node is not None and found is not None and other is not None:
                return self._class_of(found[0], other, name, node, node, hops - 1)
        return None

    def _derives(self, path: Path, tree: ast.Module, target: Path, cls: str, hops: int) -> bool:
        """A class of the file derives, through bases of project files (`hops` files deep), from `cls` of `target`
        (a trainer's `self.predict(...)` reaching its base worker's method)."""
        for node in tree.body:
            for base in node.bases if isinstance(node, ast.ClassDef) else ():
                found = self._class_file(path, tree, base.id) if isinstance(base, ast.Name) else None
                if found is None or found[0] == path:
                    continue
                if found == (target, cls):
                    return True
                got = self.project.text(found[0]) if hops > 1 else None
                other = tree_of(got[1], got[0]) if got is not None else None
                if other is not None and self._derives(found[0], other, target, cls, hops - 1):
                    return True
        return False

    def _class_file(self, path: Path, tree: ast.Module, name: str) -> tuple[Path, str] | None:
        """The project file defining the class `name` names in `path` (its own, or the one it imports it from)."""
        if any(isinstance(c, ast.ClassDef) and c.name == name for c in tree.body):
            return path, name
        for node in tree.body:
            if not isinstance(node, ast.ImportFrom):
                continue
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    found = self.project.module_file(path, Imported(node.module or "", node.level))
                    got = self.project.text(found) if found is not None else None
                    if got is not None and re.search(rf"^class\s+{re.escape(alias.name)}\b", got[0], re.M):
                        return found, alias.name
        return None

    def _bound(self, path: Path, tree: ast.Module, target: Path, function: str | None) -> set[str] | None:
        """The names the caller calls the helper by (`rpn_loss`, `loss.rpn_loss`), or, for a method, an empty set
        when the caller imports anything of the helper's module; None when it imports nothing of it."""
        names: set[str] = set()
        imports = False
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                for alias in node.names:
                    if self._resolves(path, base, node.level, target):
                        imports = True
                        if alias.name == function or alias.name == "*":
                            names.add(alias.asname or alias.name if alias.name != "*" else function or "")
                    elif self._resolves(path, ".".join(p for p in (base, alias.name) if p), node.level, target):
                        imports = True
                        names.add(f"{alias.asname or alias.name}.{function}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if self._resolves(path, alias.name, 0, target):
                        imports = True
                        names.add(f"{alias.asname or alias.name}.{function}")
        if not imports:
            return None
        return names if function is not None else set()

    def _resolves(self, importer: Path, module: str, level: int, target: Path) -> bool:
        """The import names the target; or, found nowhere else in the project, names it as a script run from a
        folder above the importer would (`run/train.py` importing `loss` of the folder it is run from)."""
        found = self.project.module_file(importer, Imported(module, level))
        if found is not None or level or not module:
            return found == target
        parts = module.split(".")
        tail = Path(*parts[:-1], parts[-1] + ".py") if target.name != "__init__.py" else Path(*parts, "__init__.py")
        folder = target.parents[len(tail.parts) - 1]
        return str(target).endswith(os.sep + str(tail)) and str(importer).startswith(str(folder) + os.sep)


def _calls(tree: ast.Module, local: set[str], method: str, cls: str, shown: str,
           held: Callable[[ast.Call, ast.AST, list[ast.AST]], tuple[tuple[str, str, str], ...]] | None = None,
           ) -> Iterator[CallerUse]:
    objects = _objects(tree)
    # the classes names are bound to instances of (`meter = Meter()`, `self.meter = Meter()`)
    built: dict[str | None, set[str]] = {}
    for n in ast.walk(tree) if cls else ():
        made = (dotted_name(n.value.func) or "").rpartition(".")[2] if isinstance(n, ast.Assign) \
            and isinstance(n.value, ast.Call) else ""
        for t in n.targets if made[:1].isupper() else ():  # type: ignore[attr-defined]  # an Assign (above)
            built.setdefault(dotted_name(t), set()).add(made)

    def match(call: ast.Call) -> bool:
        if cls:
            return isinstance(call.func, ast.Attribute) and call.func.attr == method
        return dotted_name(call.func) in local

    finder = _Finder(match)
    finder.visit(tree)
    for call, fn, loops, quiet in finder.found:
        body = fn if fn is not None else tree
        use = _use(call, body, loops, quiet, objects, shown)
        if held is not None and use.looped and (use.backpropagated or use.attached):
            use = replace(use, objects=held(call, body, loops))
        receiver = dotted_name(call.func.value) if isinstance(call.func, ast.Attribute) else None
        if receiver is None or receiver not in built:
            yield use
            continue
        if cls not in built[receiver]:
            continue  # an object of another class (`conv = Converting()`; `conv.add(x)`)
        # a value back-propagated whole (`err.backward()`) the caller's own model knows attached: its finding
        whole = {b.func.value.id for b in ast.walk(body) if isinstance(b, ast.Call)
                 and isinstance(b.func, ast.Attribute) and b.func.attr == "backward"
                 and isinstance(b.func.value, ast.Name)}
        given = {str(k): a for k, a in enumerate(call.args)} | {kw.arg: kw.value for kw in call.keywords if kw.arg}
        yield replace(use, direct=True, attached=frozenset(
            k for k in use.attached if not (isinstance(a := given.get(k), ast.Name) and a.id in whole)))


class _Finder(ast.NodeVisitor):
    """The calls `match` accepts, each with its enclosing function, the loops around it there, and whether it runs
    under `no_grad` / `inference_mode`."""

    def __init__(self, match: Callable[[ast.Call], bool]) -> None:
        self.match = match
        self.fn: ast.AST | None = None
        self.loops: list[ast.AST] = []
        self.quiet = 0
        self.found: list[tuple[ast.Call, ast.AST | None, list[ast.AST], bool]] = []

    def visit_FunctionDef(self, node: ast.AST) -> None:
        saved = self.fn, self.loops, self.quiet
        self.fn, self.loops, self.quiet = node, [], 0
        self.generic_visit(node)
        self.fn, self.loops, self.quiet = saved

    visit_AsyncFunctionDef = visit_FunctionDef

    def _loop(self, node: ast.AST) -> None:
        self.loops.append(node)
        self.generic_visit(node)
        self.loops.pop()

    visit_For = visit_While = visit_AsyncFor = _loop

    def visit_With(self, node: ast.With) -> None:
        quiet = any(re.search(r"no_grad|inference_mode", ast.unparse(i.context_expr)) for i in node.items)
        self.quiet += quiet
        self.generic_visit(node)
        self.quiet -= quiet

    def visit_Call(self, node: ast.Call) -> None:
        if self.match(node):
            self.found.append((node, self.fn, list(self.loops), self.quiet > 0))
        self.generic_visit(node)


def _objects(tree: ast.Module) -> set[str]:
    """Names (and attribute names) bound to an instance of a class (`self.rpn = RPN()`, `net = Net().cuda()`) or
    to such an attribute of another object (`rpn = model.rpn`), and parameters named as modules are (`def
    train(model, loader)`): calling one runs a model (or a criterion)."""
    found: set[str] = {a.arg for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                       for a in f.args.args if is_module_name(a.arg)}
    assigns = [n for n in ast.walk(tree) if isinstance(n, ast.Assign)]
    for _ in range(2):
        for a in assigns:
            v = a.value
            while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr in _MOVES:
                v = v.func.value
            last = (dotted_name(v.func) or "").rpartition(".")[2] if isinstance(v, ast.Call) else ""
            held = last[:1].isupper() or (isinstance(v, (ast.Name, ast.Attribute))
                                          and (dotted_name(v) or "").rpartition(".")[2] in found)
            if held:
                found.update(_last(t) for t in a.targets if _last(t))
    return found


def _enclosing(tree: ast.Module, fn: ast.AST) -> ast.ClassDef | None:
    """The top-level class whose method `fn` is."""
    return next((c for c in tree.body if isinstance(c, ast.ClassDef) and any(f is fn for f in c.body)), None)


def _last(target: ast.AST) -> str:
    return target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else ""


def _use(call: ast.Call, body: ast.AST, loops: list[ast.AST], quiet: bool, objects: set[str],
         shown: str) -> CallerUse:
    assigns = [n for n in ast.walk(body) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))]
    # which items of the call's result each name holds (-1: all of it)
    held: dict[str, set[int]] = {}
    for a in assigns:
        targets = a.targets if isinstance(a, ast.Assign) else [a.target]
        if a.value is None or not any(n is call for n in ast.walk(a.value)):
            continue
        for t in targets:
            if a.value is call and isinstance(t, (ast.Tuple, ast.List)):
                for i, el in enumerate(t.elts):
                    if isinstance(el, ast.Name):
                        held.setdefault(el.id, set()).add(i)
            elif isinstance(t, ast.Name):
                held.setdefault(t.id, set()).add(-1)
    for _ in range(8):  # through the sums and other values built from them
        changed = False
        for a in assigns:
            targets = a.targets if isinstance(a, ast.Assign) else [a.target]
            got = set().union(*(held.get(n, set()) for n in _loads(a.value))) if a.value is not None else set()
            for t in targets:
                if isinstance(t, ast.Name) and got - held.get(t.id, set()):
                    held.setdefault(t.id, set()).update(got)
                    changed = True
        if not changed:
            break
    backwards = [n for n in ast.walk(body) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and n.func.attr in ("backward", "manual_backward")]
    items: set[int] = set()
    reached: set[str] = set()  # names whose values (or items) are back-propagated
    line = 0
    for b in backwards:
        # `loss.backward()`, `accelerator.backward(loss)` (not the accelerator, nor an optimizer's `backward(loss)`)
        what = [b.args[0]] if b.args else [b.func.value]  # type: ignore[attr-defined]  # an Attribute (above)
        names = set().union(*(_loads(w) for w in what))
        reached |= names
        got = set().union(*(held.get(n, set()) for n in names))
        if any(n is call for w in what for n in ast.walk(w)):
            got.add(-1)
        if got:
            items |= got
            line = line or b.lineno
    looped = bool(loops) and not quiet
    inner = loops[-1] if loops else None
    params = list(call.args)
    attached, outputs = set(), set()
    for k, arg in enumerate([*params, *(kw.value for kw in call.keywords)]):
        key = str(k) if k < len(params) else call.keywords[k - len(params)].arg or ""
        if isinstance(arg, ast.Starred):
            break
        root = _root(arg)
        if root is not None and root in reached and inner is not None and any(
                n is b for n in ast.walk(inner) for b in backwards if root in _loads(b)):
            attached.add(key)
        if isinstance(arg, ast.Name) and _model_output(arg.id, assigns, objects):
            outputs.add(key)
    outlives = True
    if isinstance(call.func, ast.Attribute):
        receiver = _root(call.func.value)
        outlives = receiver == "self" or inner is None or not any(
            isinstance(t, ast.Name) and t.id == receiver for n in ast.walk(inner)
            if isinstance(n, ast.Assign) for t in n.targets)
    return CallerUse(shown, call.lineno, looped, outlives, frozenset(items) if not quiet else frozenset(),
                     frozenset(attached) if looped else frozenset(), frozenset(outputs) if not quiet else frozenset(),
                     line)


def _model_output(name: str, assigns: Sequence[ast.AST], objects: set[str]) -> bool:
    """Every binding of `name` in the function is what calling a model object returned (`out = net(x)`,
    `a, b = rpn(features)`, `feats = extractor.forward(x)`)."""
    values = []
    for a in assigns:
        targets = a.targets if isinstance(a, ast.Assign) else [a.target]  # type: ignore[attr-defined]
        if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
            values.append(a.value)  # type: ignore[attr-defined]
    if not values:
        return False
    for v in values:
        if not isinstance(v, ast.Call):
            return False
        func = v.func
        if isinstance(func, ast.Attribute) and func.attr == "forward":
            func = func.value
        last = _last(func)
        if not last or last not in objects:
            return False
    return True


def callers_text(index: CallersIndex, path: str | Path, text: str) -> str:
    """Text standing, for the prefilter, for what the callers of the file's helpers do: a loop and `.backward(`
    when a caller back-propagates through one of them (or keeps with one of them what it back-propagates, in a
    loop); else ""."""
    if "loss" not in text and "Loss" not in text:
        return ""  # nothing named like a loss (a substring test first: most files fail it)
    if BACKWARD_TEXT.search(text) is not None:
        return ""  # the file answers itself
    if KEEPING.search(text) is None and ITEM_KEEP.search(text) is None \
            and (CUT.search(text) is None or LOSS_DEF.search(text) is None):
        return ""
    try:
        tree = pyast.parse(text.removeprefix("\ufeff"))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ""
    return "for .backward(" if index.wanted(path, text, tree) else ""
