"""Which method of the file a call runs, by the file's classes: the class's own, one inherited from a base of the
file, or, for `self.name(...)` where the class leaves `name` abstract (its body only raises NotImplementedError, or
is `pass` / `...`) or does not define it, the one override a subclass of the file gives it (a base trainer's loop
calling the `train_step` that its one subclass writes). Python runs the subclass's method there: an abstract one
cannot have been meant."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.exprs import dotted
from torchlint.analysis.scopes import Scope
from torchlint.source.walk import walk


class Methods:
    def __init__(self, scopes: list[Scope], classes: dict[str, cst.ClassDef]) -> None:
        self.own: dict[tuple[str | None, str], Scope] = {(s.class_name, s.name): s for s in scopes if s.class_name}
        self._classes = classes
        self._subclasses: dict[str, list[str]] = {}
        for name, node in classes.items():
            for base in {dotted(b.value) for b in node.bases} & classes.keys():
                self._subclasses.setdefault(base, []).append(name)  # type: ignore[arg-type]  # a class's name

    def inherited(self, cls: str | None, name: str) -> Scope | None:
        """`name` as the class defines it, or as the nearest base of the file that does (first bases first)."""
        seen: set[str] = set()
        while cls is not None and cls in self._classes and cls not in seen:
            seen.add(cls)
            found = self.own.get((cls, name))
            if found is not None:
                return found
            bases = [dotted(b.value) for b in self._classes[cls].bases]
            cls = next((b for b in bases if b in self._classes), None)
        return None

    def of_self(self, cls: str | None, name: str) -> Scope | None:
        """What `self.name(...)` runs in a method of `cls`: the method it defines or inherits, unless that one is
        abstract or missing and exactly one subclass of the file (at any depth) defines it concretely."""
        found = self.inherited(cls, name)
        if cls is None or found is not None and not abstract(found.node):
            return found
        overrides = {id(s): s for sub in self._below(cls)
                     if (s := self.own.get((sub, name))) is not None and not abstract(s.node)}
        return next(iter(overrides.values())) if len(overrides) == 1 else found

    def _below(self, cls: str) -> list[str]:
        out: list[str] = []
        todo = list(self._subclasses.get(cls, ()))
        while todo:
            sub = todo.pop()
            if sub not in out and sub != cls:
                out.append(sub)
                todo += self._subclasses.get(sub, ())
        return out


def abstract(node: cst.CSTNode) -> bool:
    """A method that does nothing or only raises: a docstring, `pass`, `...`, `raise NotImplementedError(...)`."""
    if type(node) is not cst.FunctionDef:
        return False
    body = node.body
    if type(body) is cst.SimpleStatementSuite:  # `def step(self): ...`
        return all(_inert(s) for s in body.body)
    return all(type(line) is cst.SimpleStatementLine and all(_inert(s) for s in line.body)
               for line in body.body)


def _inert(stmt: cst.CSTNode) -> bool:
    if type(stmt) is cst.Pass:
        return True
    if type(stmt) is cst.Expr:
        return type(stmt.value) in (cst.SimpleString, cst.ConcatenatedString, cst.Ellipsis)
    if type(stmt) is cst.Raise and stmt.exc is not None:
        exc = stmt.exc.func if type(stmt.exc) is cst.Call else stmt.exc
        return dotted(exc) in ("NotImplementedError", "NotImplemented")
    return False


def hand_written(classes: dict[str, cst.ClassDef], method: Scope) -> bool:
    """`method` belongs to a class of the file that derives from nothing outside it (no base, `object`, or other
    classes of the file) and reads no `.grad` in any of them: an optimizer written by hand (`SGDMomentum.step(grads)`
    over NumPy weights, an EMA of another model's weights), whose `step()` and `zero_grad()` neither use nor clear
    torch's gradients."""
    todo, seen = [method.class_name], set()
    while todo:
        name = todo.pop()
        cls = classes.get(name or "")
        if cls is None or name in seen:
            return False
        seen.add(name)
        for base in cls.bases:
            if base.keyword is None and dotted(base.value) != "object":
                todo.append(dotted(base.value))
        if any(type(n) is cst.Attribute and n.attr.value == "grad" for n in walk(cls, descend_scopes=True)):
            return False
    return bool(seen)
