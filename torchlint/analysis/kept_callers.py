"""Methods and functions of a file with no backward that keep what callers in other project files give them, asked
for the callers' loops (`ProjectLookup.callers`): a method adding a parameter into `self` (`kept_for_callers`), a
function storing a value into an item of a parameter whose object keeps it (`stored_for_callers`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import libcst as cst

from torchlint.analysis.events import AssignForm, EventKind
from torchlint.analysis.exprs import names_in, positional_params
from torchlint.analysis.foreign import CallerUse
from torchlint.analysis.model import FileModel
from torchlint.analysis.scopes import Scope
from torchlint.analysis.semantics import SET_ITEM


@dataclass(frozen=True)
class KeptForCallers:
    node: cst.CSTNode  # the statement (or `append` call) of the method that keeps the value
    param: str  # the parameter kept
    use: CallerUse  # a call of the method whose loop back-propagates what it passes


def kept_for_callers(model: FileModel, scope: Scope) -> Iterator[KeptForCallers]:
    """A method of the file with no backward of its own that adds a parameter into an attribute of `self`
    (`Summary.keeps`: `self.totals[k] += losses[k]`), called in another project file by a loop that
    back-propagates what it passes (`losses["total"].backward()`), on an object bound outside that loop
    (`ProjectLookup.callers`): the object keeps every iteration's graph. Not a call under `no_grad`, with a value
    read with `.item()`, nor on an object the loop binds afresh; nor a value back-propagated whole (`err.backward()`)
    given to an object the caller builds from the class by name (`meter = Meter()`): that call is the caller's own
    finding (`kept_by_objects`); only an item of it back-propagated (`losses["total"]`) is left to the method."""
    if model.project is None or scope.class_name is None or "." in scope.name:
        return
    uses = model.project.callers(f"{scope.class_name}.{scope.name}")  # none unless the project asked them (cheap)
    keeps = model.summary(scope).keeps if uses and not scope.own_backwards() else frozenset()
    if not keeps:
        return
    params = positional_params(scope.node)[1:]
    for use in uses:
        given = {params[int(k)] if k.isdigit() and int(k) < len(params) else k for k in use.attached} & keeps
        if not use.looped or not use.outlives or not given:
            continue
        over = set(given) | {e.target for e in scope.events if e.kind is EventKind.ASSIGN and e.target
                             and e.variant is AssignForm.FOR and e.value is not None and names_in(e.value) & given}
        for e in scope.events:
            if e.scope is not scope.node or e.value is None or not (e.target or "").startswith("self."):
                continue
            if (e.kind is EventKind.APPEND or e.kind is EventKind.ASSIGN and e.accumulates) \
                    and names_in(e.value) & over:
                yield KeptForCallers(e.node, next(iter(sorted(given))), use)
        return


@dataclass(frozen=True)
class StoredForCallers:
    node: cst.CSTNode  # the statement storing the value into the parameter's item
    param: str  # the parameter holding the caller's object
    cls: str  # the object's class (of another project file)
    use: CallerUse  # a call of the function whose loop back-propagates the value


def stored_for_callers(model: FileModel, scope: Scope) -> Iterator[StoredForCallers]:
    """A function or method of the file with no backward of its own that stores a value into an item of a
    parameter (`stat_col["loss"] = loss`), called in another project file by a loop that back-propagates that value
    (returned by the function, alone or as an item of a tuple, or passed to it), which hands, for that parameter, an
    object outliving the loop that is, by every binding the caller has, an instance of a class of a project file
    whose `__setitem__` keeps its value (appends it to a list of `self`: `ProjectLookup.kept_in`): the object keeps
    every iteration's graph (`CallerUse.objects`). Not a parameter the callers hand different or unknown objects,
    a collector whose `__setitem__` overwrites, nor one the loop binds afresh."""
    if model.project is None or "." in scope.name:
        return
    uses = model.project.callers(f"{scope.class_name}.{scope.name}" if scope.class_name else scope.name)
    if not uses or not any(u.objects for u in uses) or scope.own_backwards():
        return
    params = positional_params(scope.node)[1 if scope.class_name else 0:]
    stores = [e for e in scope.events if e.kind is EventKind.ASSIGN and e.variant is AssignForm.ITEM
              and e.scope is scope.node and e.target in params and type(e.value) is cst.Name]
    returned: dict[str, set[int]] = {}  # what the function returns: each name, by its item (-1: the whole result)
    for r in scope.own_returns():
        value = r.value
        items = list(enumerate(el.value for el in value.elements)) if isinstance(value, cst.Tuple) else [(-1, value)]
        for k, item in items:
            if type(item) is cst.Name:
                returned.setdefault(item.value, set()).add(k)

    def named(k: str) -> str:
        return params[int(k)] if k.isdigit() and int(k) < len(params) else k

    for use in uses:
        given = {named(k) for k in use.attached}
        for e in stores:
            value = e.value.value  # type: ignore[union-attr]  # a Name (above)
            if not use.looped or not (returned.get(value, set()) & use.backpropagated or value in given):
                continue
            # the class every such call site hands in for the parameter (one each, the same for all)
            classes = {next(((p, c) for k, p, c in u.objects if named(k) == e.target), None) for u in uses
                       if u.looped and (returned.get(value, set()) & u.backpropagated or value in u.attached)}
            held = classes.pop() if len(classes) == 1 else None
            if held is None:
                continue
            kept = model.project.kept_in(held[0], held[1], SET_ITEM)
            if kept is not None and len(kept[0]) == 3 and kept[0][2] in kept[1]:
                yield StoredForCallers(e.node, e.target or "", held[1], use)
                break
