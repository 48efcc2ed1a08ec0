"""What a dict may hold where it is read: the entries of a literal, or of a name whose every reaching definition is
one, with what the function stores into it by key."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.events import AssignForm, Event, EventKind
from torchlint.analysis.exprs import dotted
from torchlint.analysis.scopes import Scope


def dict_entries(scope: Scope, expr: cst.BaseExpression, at: Event) -> list | None:
    """(key, value, where) of every entry a dict may hold at `at`: a literal, or a name whose every reaching
    definition is one (`parts = {"ce": ce, "kl": kl}`), with what is stored into it (`parts["aux"] = aux`);
    None when some entry is not known (a `**` splat, a parameter, a dict from a call)."""
    if type(expr) is cst.Dict:
        if any(type(el) is not cst.DictElement for el in expr.elements):
            return None
        return [(el.key, el.value, at) for el in expr.elements]  # type: ignore[attr-defined]  # all DictElements (checked above)
    name = dotted(expr)
    if name is None or "." in name:
        return None
    defs, entry = scope.reaching(name, at)
    if entry or not defs:
        return None
    entries = []
    for d in defs:
        if d.kind is not EventKind.ASSIGN or d.variant is not AssignForm.PLAIN or type(d.value) is not cst.Dict:
            return None
        found = dict_entries(scope, d.value, d)
        if found is None:
            return None
        entries.extend(found)
    for store in scope.stores(name):
        if store.kind is EventKind.APPEND or store.value is None:
            return None
        entries.append((None, store.value, store))  # (its key is not read: `.items()` keys stay unknown)
    return entries
