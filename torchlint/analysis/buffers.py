"""Buffers an object keeps across training steps and back-propagates whole: a list attribute (`self.log_probs`, or
`policy.saved_log_probs` of a module-level object) that `__init__` binds empty, that a method or function of the
file appends values with a graph to (a policy's `dist.log_prob(action)`), and that a training step (a function that
back-propagates outside a loop of its own and steps an optimizer, run once per update) reads into its loss, while
no code of the file ever empties it. From the second update on, the backward reaches the items of earlier updates,
whose graphs the first backward freed."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

import libcst as cst

from torchlint.analysis.events import AssignForm, Event, EventKind
from torchlint.analysis.exprs import dotted
from torchlint.analysis.model import FileModel
from torchlint.analysis.scopes import Scope
from torchlint.analysis.vkind import VKind


# `self.log_probs.append(`, `policy.saved_log_probs.append(`: the text of a function that may fill such a buffer
ATTRIBUTE_APPEND = re.compile(r"\.(?<=\w\.)\w+\s*\.\s*append\s*\(")


@dataclass(frozen=True)
class KeptBuffer:
    backward: Event  # the training step's backward that reads the buffer
    buffer: str  # as the step names it: `self.log_probs`, `policy.saved_log_probs`
    filler: str  # the function or method that appends to it


def unemptied_buffers(model: FileModel) -> Iterator[KeptBuffer]:
    if ".append" not in model.text:
        return
    for body in model.step_bodies():
        scope = body.scope
        for b in scope.own_backwards():
            if b.loops or b.value is None:
                continue
            found = next((k for attr in sorted(scope.depends(b.value)) if (k := _kept(model, scope, b, attr))), None)
            if found is not None:
                yield found


def _kept(model: FileModel, scope: Scope, b: Event, attr: str) -> KeptBuffer | None:
    owner, _, name = attr.partition(".")
    if not name or "." in name:
        return None
    cls = scope.class_name if owner == "self" else _instance_class(model, owner)
    if cls is None or not _bound_empty(model, cls, name) or _emptied(model, cls, owner, name):
        return None
    for s in model.scopes:
        names = {f"self.{name}"} if s.class_name == cls else set()
        if owner != "self":
            names.add(attr)
        for e in s.events if names else ():
            if (e.kind is EventKind.APPEND and e.scope is s.node and e.target in names and e.value is not None
                    and "no_grad" not in e.contexts and model.kinds.of(e.value, s, e) is VKind.GRAPH):
                return KeptBuffer(b, attr, s.name)
    return None


def _instance_class(model: FileModel, name: str) -> str | None:
    """The class of the file a module-level name is bound to an instance of, by every binding (`policy = Policy()`)."""
    module = model.scopes[0]
    made = {dotted(d.value.func) for d in module.assignments(name)
            if d.variant is AssignForm.PLAIN and type(d.value) is cst.Call}
    cls = made.pop() if len(made) == 1 and module.assignments(name) else None
    return cls if cls in model.classes else None


def _bound_empty(model: FileModel, cls: str, name: str) -> bool:
    """`__init__` of the class binds `self.<name>` to an empty list."""
    init = next((s for s in model.scopes if s.class_name == cls and s.name == "__init__"), None)
    return init is not None and any(
        d.variant is AssignForm.PLAIN and (type(d.value) is cst.List and not d.value.elements
                                           or type(d.value) is cst.Call and dotted(d.value.func) == "list"
                                           and not d.value.args)
        for d in init.assignments(f"self.{name}"))


def _emptied(model: FileModel, cls: str, owner: str, name: str) -> bool:
    """Some code of the file may empty or replace the list: binds it outside `__init__` (`self.log_probs = []`,
    `agent.log_probs = ...`), deletes or clears its items (`del x.log_probs[:]`, `.clear()`, `.pop(`), of the class
    or of any object (the name is read by attribute only)."""
    for s in model.scopes:
        if s.name == "__init__" and s.class_name == cls:
            continue
        if any(e.kind is EventKind.ASSIGN and e.rebinds and (e.target or "").endswith(f".{name}") for e in s.events):
            return True
    emptying = re.compile(r"del\s[^\n]*\." + name + r"\b|\." + name + r"\s*(?:\.\s*(?:clear|pop|remove)\s*\(|\[[^\]\n]*\]\s*="
                          r"(?!=))")
    return emptying.search(model.text) is not None
