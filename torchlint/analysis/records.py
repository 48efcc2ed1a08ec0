"""Named tuples of a file and what a function returns in one: `P = namedtuple("P", ["a", "b"])` (or `"a b"`,
`"a, b"`), `class P(NamedTuple): a: T` give each field its position, so `out.b` is the item that `x, y = out`
binds to `y` (Python's `collections.namedtuple` and `typing.NamedTuple` are tuples of their fields in order)."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.events import AssignForm, Event
from torchlint.analysis.exprs import dotted, summand_names
from torchlint.analysis.model import FileModel
from torchlint.analysis.scopes import Scope

_FACTORIES = {"namedtuple", "collections.namedtuple"}
_BASES = {"NamedTuple", "typing.NamedTuple"}
_cache: dict[int, tuple[cst.Module, dict[str, tuple[str, ...]]]] = {}


def record_fields(model: FileModel) -> dict[str, tuple[str, ...]]:
    """The named tuples the module defines at its top level, by name: their fields in order."""
    if "amedtuple" not in model.text and "NamedTuple" not in model.text:
        return {}
    cached = _cache.get(id(model.module))
    if cached is not None and cached[0] is model.module:
        return cached[1]
    out: dict[str, tuple[str, ...]] = {}
    for stmt in model.module.body:
        if type(stmt) is cst.ClassDef and any(dotted(b.value) in _BASES for b in stmt.bases):
            out[stmt.name.value] = tuple(
                s.body[0].target.value for s in stmt.body.body
                if type(s) is cst.SimpleStatementLine and type(s.body[0]) is cst.AnnAssign
                and type(s.body[0].target) is cst.Name)
        elif type(stmt) is cst.SimpleStatementLine and type(stmt.body[0]) is cst.Assign:
            assign = stmt.body[0]
            value = assign.value
            if (len(assign.targets) == 1 and type(assign.targets[0].target) is cst.Name and type(value) is cst.Call
                    and dotted(value.func) in _FACTORIES and len(value.args) >= 2):
                fields = _field_names(value.args[1].value)
                if fields is not None:
                    out[assign.targets[0].target.value] = fields
    if len(_cache) > 64:
        _cache.clear()
    _cache[id(model.module)] = (model.module, out)
    return out


def _field_names(spec: cst.BaseExpression) -> tuple[str, ...] | None:
    if type(spec) is cst.SimpleString:
        text = spec.evaluated_value
        return tuple(text.replace(",", " ").split()) if type(text) is str else None
    if type(spec) in (cst.List, cst.Tuple):
        names = [el.value.evaluated_value if type(el.value) is cst.SimpleString else None
                 for el in spec.elements]  # type: ignore[attr-defined]
        return tuple(names) if all(type(n) is str for n in names) else None  # type: ignore[arg-type]
    return None


def _built(model: FileModel, scope: Scope, call: cst.Call, fields: dict[str, tuple[str, ...]]) -> tuple[str, ...] | None:
    """The fields of the named tuple `call` builds: the class called, or the one every `return` of the function
    of the file it calls builds (`out = self.forward(x)` with `return Parts(*terms)`)."""
    name = dotted(call.func)
    if name is None:
        return None
    if name in fields:
        return fields[name]
    callee = model.resolve(scope, name)
    rets = callee.own_returns() if callee is not None else []
    built = {fields.get(dotted(r.value.func) or "") if type(r.value) is cst.Call else None for r in rets}
    return built.pop() if len(built) == 1 and None not in built else None


def backpropagated_fields(model: FileModel, scope: Scope, rets: list[Event]) -> list[str]:
    """Per item of the named tuple every `return` gives by name, after a backward of one of its fields
    (`out = self.forward(x)`, `out.total.backward()`, `return out`): GRAPH for that field, UNKNOWN for the others;
    empty when not known."""
    fields = record_fields(model)
    if not fields or not rets:
        return []
    found: set[tuple[str, ...]] = set()
    backed: set[str] = set()
    for r in rets:
        name = r.value.value if type(r.value) is cst.Name else None
        defs, outside = scope.reaching(name, r) if name is not None else ((), True)
        if len(defs) != 1 or outside or defs[0].variant is not AssignForm.PLAIN or type(defs[0].value) is not cst.Call:
            return []
        built = _built(model, scope, defs[0].value, fields)
        if built is None:
            return []
        found.add(built)
        for b in scope.own_backwards():
            assert b.value is not None  # own_backwards: each with a value
            if b.seq < r.seq and scope.reaching(name, b) == (defs, outside):  # type: ignore[arg-type]
                backed |= {f for f in built if f"{name}.{f}" in summand_names(b.value)}
    if len(found) != 1 or not backed:
        return []
    return ["GRAPH" if f in backed else "UNKNOWN" for f in found.pop()]
