"""The loops a framework runs around a function of the file: ignite's `Engine(process_function)` calls that function
once per iteration and never touches the gradients, so the function is a whole iteration (a `Loop` with no head of
its own), for rules that ask what an iteration clears. Read only for files that import such an engine.
Likewise the loops of the project's other files that run a training-step method of a class of the file once per
iteration (`run_by_callers`), asked by a rule only once the method shows its premise."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.exprs import dotted, keyword, last_part
from torchlint.analysis.foreign import CallerUse
from torchlint.analysis.loops import Loop
from torchlint.analysis.model import FileModel
from torchlint.analysis.prescan import scan_imports
from torchlint.analysis.scopes import Scope
from torchlint.analysis.semantics import ITERATION_ENGINES
from torchlint.source.walk import walk

_PROCESS_PARAM = "process_function"


def engine_iterations(model: FileModel) -> list[Loop]:
    """The functions of the file an iteration engine runs per batch: the process function handed to `Engine(...)`
    (or to a class of the file deriving from it, or to `super().__init__(...)` in such a class): a function
    (`Engine(update)`), a method (`Engine(self._update)`, `MyEngine(MyEngine.train, ...)`)."""
    if "ignite" not in model.text:
        return []
    imports = scan_imports(model.text)
    engines = {local for local, imp in imports.items() if imp.name and (imp.module, imp.name) in ITERATION_ENGINES}
    if not engines:
        return []
    subclasses = _subclasses(model, engines)
    found: dict[int, Scope] = {}
    for holder in model.scopes:
        for call in walk(holder.node):
            if type(call) is cst.Call and (scope := _handed(model, call, holder.class_name, engines, subclasses)):
                found[id(scope)] = scope
    return [Loop(None, scope, scope.events) for scope in found.values()]  # type: ignore[arg-type]  # no head


def _handed(model: FileModel, call: cst.Call, within: str | None, engines: set[str], subclasses: set[str]) -> Scope | None:
    """The function of the file `call` hands to an iteration engine as its process function, if it does."""
    callee = dotted(call.func)
    if not (callee in engines or callee in subclasses or within in subclasses and _super_init(call)):
        return None
    first = call.args[0] if call.args and not call.args[0].keyword and not call.args[0].star else None
    handed = keyword(call, _PROCESS_PARAM) or first
    return _function(model, dotted(handed.value), within) if handed is not None else None


def _super_init(call: cst.Call) -> bool:
    """`super().__init__(...)`."""
    func = call.func
    return (type(func) is cst.Attribute and func.attr.value == "__init__" and type(func.value) is cst.Call
            and dotted(func.value.func) == "super")


def _subclasses(model: FileModel, engines: set[str]) -> set[str]:
    """The classes of the file that derive from an iteration engine, directly or through the file's."""
    out: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, cls in model.classes.items():
            if name not in out and any((b := dotted(base.value)) in engines or b in out for base in cls.bases):
                out.add(name)
                changed = True
    return out


def _function(model: FileModel, name: str | None, within: str | None) -> Scope | None:
    """The function or method `name` names: `update`, `self._update` (a method of `within`), `Cls.train`."""
    if name is None:
        return None
    if "." not in name:
        return next((s for s in model.scopes if s.class_name is None and s.name == name), None)
    owner, _, method = name.rpartition(".")
    cls = within if owner == "self" else last_part(owner)
    return next((s for s in model.scopes if s.class_name == cls and last_part(s.name) == method), None)


def run_by_callers(model: FileModel, scope: Scope) -> list[CallerUse]:
    """The calls in the project's other files that run a method of a class of the file once per iteration of a loop
    (`ProjectLookup.runs`): on an instance of the class, or through another method of the class that no function of
    the file calls either (`__call__` dispatching to `self._softmax(...)`). None when a function of the file calls it
    otherwise (the file's own loops answer for it), nor without a project."""
    if model.project is None or scope.class_name is None or "." in scope.name:
        return []
    entries = [scope]
    callers = {id(c): c for c, _ in model.callers_naming(scope, "self")}
    if callers:
        hop = list(callers.values())
        if any(c.class_name != scope.class_name or "." in c.name or c is scope or model.callers_naming(c, "self")
               for c in hop):
            return []
        entries = hop
    return [u for e in entries for u in model.project.runs(f"{scope.class_name}.{e.name}") if u.looped]
