"""What a container holds, for the value kinds (`kinds.KindInference` asks): the item of a tuple at a position (a
literal, what a function returns there, what the one plain definition of a name holds), a loop variable (or a
name a comprehension binds) over `range`, a module's `.parameters()`, or a dict's `.items()` / `.values()`, and the
values of a dict: those summed into what a backward back-propagates, the entries a scope builds, or a dict
a function returns (whole, or as an element of a returned tuple: `loss, parts = criterion(out, y)`), of this file
or, through its exports, of another project file (a loss object's `__call__` too, when the object's class or the
factory that made it is known). A value of a dict is known only when every entry the analysis sees agrees on it."""

from __future__ import annotations

import re
from typing import Protocol

import libcst as cst

from torchlint.analysis.events import AssignForm, Event
from torchlint.analysis.exprs import COMBINING_CALLS, dotted, names_in
from torchlint.analysis.foreign import Resolved
from torchlint.analysis.entries import dict_entries
from torchlint.analysis.scopes import Scope
from torchlint.analysis.semantics import DISTRIBUTIONS, VALUES_INDICES, is_metric_key
from torchlint.analysis.vkind import VKind, join
from torchlint.source.walk import walk

_MAX_HOPS = 8  # definitions and returns followed for the values of one dict
ANY_KEY = "*"  # the entries of a dict whose key is not a literal


class Asker(Protocol):
    def of(self, expr: cst.BaseExpression, scope: Scope, at: Event | None, depth: int = 0) -> VKind: ...

    def callee(self, scope: Scope, name: str) -> Scope | None: ...

    def foreign(self, scope: Scope, name: str) -> Resolved | None: ...

    def of_def(self, d: Event, scope: Scope, depth: int = 0) -> VKind: ...


def element(k: Asker, value: cst.BaseExpression, index: int, scope: Scope, at: Event, depth: int) -> VKind | None:
    """The kind of item `index` of a tuple value: a literal, what a function returns there, or what the one plain
    definition of a name holds (`res = step(batch)`, then `loss, acc = res`)."""
    if index < 0:
        return None
    if type(value) is cst.Tuple or type(value) is cst.List:
        if index < len(value.elements) and type(value.elements[index]) is not cst.StarredElement:
            return k.of(value.elements[index].value, scope, at, depth)
        return None
    if type(value) is cst.Call:
        name = dotted(value.func)
        callee = k.callee(scope, name) if name is not None else None
        if callee is None and name is not None and k.of(value.func, scope, at, depth) is VKind.MODULE:
            callee = k.callee(scope, f"{name}.forward")  # `recon, mu, logvar = model(x)`: the forward of its class
        if callee is None and _handed_back(value, at):
            # `model, opt = amp.initialize(model, opt)` (`accelerator.prepare`, `fabric.setup`): handed back as taken
            return k.of(value.args[index].value, scope, at, depth)
        if callee is None:  # a function of another project file: the kinds its exports give each element
            found = k.foreign(scope, name) if name is not None else None
            items = found.export.items if found is not None else []
            return VKind.__members__.get(items[index], VKind.UNKNOWN) if index < len(items) else None
        kinds = []
        for r in callee.own_returns():
            assert r.value is not None  # own_returns keeps those with a value
            kind = element(k, r.value, index, callee, r, depth + 1)
            if kind in (None, VKind.UNKNOWN) and type(r.value) is cst.Tuple and index < len(r.value.elements) and (
                    callee.backpropagated_before(r.value.elements[index].value, r)):
                kind = VKind.GRAPH  # back-propagated by the helper before it returns it: it carries a graph
            kinds.append(kind if kind is not None else VKind.UNKNOWN)
        return join(kinds) if kinds else None
    defs, outside = scope.reaching(value.value, at) if type(value) is cst.Name and depth < 4 else ((), True)
    if len(defs) == 1 and not outside and defs[0].variant is AssignForm.PLAIN and defs[0].value is not None:
        return element(k, defs[0].value, index, scope, defs[0], depth + 1)
    return None


def _handed_back(call: cst.Call, at: Event) -> bool:
    """Every name the statement unpacks is the positional argument in its place, and no other is passed (`model, opt
    = amp.initialize(model, opt, opt_level="O1")`); not `out, hidden = rnn(x, hidden)`, which hands back a new state."""
    stmt = at.stmt
    assign = stmt.body[0] if type(stmt) is cst.SimpleStatementLine and len(stmt.body) == 1 else None
    if type(assign) is not cst.Assign or len(assign.targets) != 1 or type(assign.targets[0].target) is not cst.Tuple:
        return False
    names = [dotted(el.value) for el in assign.targets[0].target.elements]
    if any(a.star == "*" for a in call.args):
        return False
    args = [dotted(a.value) for a in call.args if a.keyword is None and not a.star]  # (options by keyword aside)
    return None not in names and names == args


def element_of_iterable(k: Asker, it: cst.BaseExpression, scope: Scope, at: Event | None, depth: int,
                        index: int | None = None) -> VKind:
    """A loop variable (`index`: its place in the unpacked target, -1 for the whole element; by default the
    definition's): a number over `range(...)`; a parameter over a module's `.parameters()`, or the second of
    `.named_parameters()`: a leaf that requires grad, so what is computed from it carries a graph; a value of a dict
    over `.values()`, or the key or value of `.items()` (`for name, part in losses.items()`): the entries the scope
    builds, or the values of a dict a call returned (`dict_values`); anything else (batches, `enumerate`'s tuples)
    unknown."""
    if type(it) is cst.Call and dotted(it.func) == "range":
        return VKind.NUMBER
    index = at.index if index is None and at is not None else -1 if index is None else index
    if type(it) is cst.Call and type(it.func) is cst.Attribute and not any(a.keyword is None for a in it.args):
        method = it.func.attr.value
        if method == "parameters" and index < 0 or method == "named_parameters" and index == 1:
            return VKind.GRAPH
    if at is None:
        return VKind.UNKNOWN
    if (type(it) is cst.Call and not it.args and type(it.func) is cst.Attribute
            and it.func.attr.value in ("items", "values")):
        method = it.func.attr.value
        if method == "values" and index >= 0 or method == "items" and index not in (0, 1):
            return VKind.UNKNOWN  # a value unpacked itself, or `.items()` not taken as (key, value)
        entries = dict_entries(scope, it.func.value, at)
        keys = method == "items" and index == 0
        if entries is None and not keys:
            found = dict_values(k, it.func.value, scope, at, depth)
            if found is None and type(it.func.value) is cst.Name and _values_backpropagated(scope, it.func.value, at):
                return VKind.GRAPH  # `loss = sum(losses.values()); loss.backward()`: each value carries a graph
            if found is None and type(it.func.value) is cst.Name and _entry_backpropagated(scope, it.func.value, at):
                return VKind.GRAPH  # `out["loss"].backward()`, then every entry of `out`, unfiltered: one has a graph
            return found if found is not None else VKind.UNKNOWN
        if entries is None or keys and any(key is None for key, _, _ in entries):
            return VKind.UNKNOWN
        return join(k.of(key if keys else value, scope, where, depth + 1) for key, value, where in entries)
    return VKind.UNKNOWN


def _values_backpropagated(scope: Scope, d: cst.Name, at: Event) -> bool:
    """The values of the dict `d` are combined (`sum(d.values())`, `torch.stack(list(d.values()))`) into what a
    backward of the scope back-propagates, the same definitions of `d` reaching that backward and `at`: each value
    carries a graph, whoever built the dict (`losses = model(x, y)` of a detector)."""
    return _read_by_a_backward(scope, d, at, lambda node: type(node) is cst.Call and dotted(node.func) in COMBINING_CALLS
                               and any(_values_of(n, d.value) for arg in node.args for n in walk(arg.value)))


def _entry_backpropagated(scope: Scope, d: cst.Name, at: Event) -> bool:
    """An entry of the dict `d` is what a backward of the scope back-propagates (`loss = out["loss"];
    loss.backward()`), the same definitions of `d` reaching it and `at` (a loop over all of `d`'s entries), and the
    loop at `at` compares nothing with a string (`if k != "loss":`, `if "acc" in k:`): one of the values it
    visits carries a graph."""
    if type(at.stmt) is not cst.For or any(type(n) is cst.Comparison and any(
            type(s) in (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString) for s in walk(n))
            for n in walk(at.stmt.body)):
        return False
    return _read_by_a_backward(scope, d, at, lambda n: type(n) is cst.Subscript and type(n.value) is cst.Name
                               and n.value.value == d.value and type(n.slice[0].slice) is cst.Index
                               and type(n.slice[0].slice.value) is cst.SimpleString)


def _read_by_a_backward(scope: Scope, d: cst.Name, at: Event, reads) -> bool:
    """A backward of the scope, reached by the same definitions of `d` as `at`, back-propagates a value (itself, or
    a definition of a name it reads) with a node that `reads(node)` accepts."""
    reaching = scope.reaching(d.value, at)
    for b in scope.own_backwards():
        assert b.value is not None  # own_backwards: each with a value
        if scope.reaching(d.value, b) != reaching:
            continue
        exprs = [b.value] + [x.value for name in names_in(b.value) for x in scope.reaching(name, b)[0]
                             if x.value is not None]
        if any(reads(n) for e in exprs for n in walk(e)):
            return True
    return False


def over_entries(k: Asker, scope: Scope, value: cst.BaseExpression, at: Event) -> bool:
    """`value` reads a loop variable over `.items()` / `.values()` of a dict whose entries the scope does not build
    nor knows to be all tensors with a graph (a model's output): they may mix tensors with plain numbers (`ntokens`),
    on which `.detach()` or `.item()` raises."""
    return any(type(d.stmt) is cst.For and type(it := d.stmt.iter) is cst.Call and type(it.func) is cst.Attribute
               and it.func.attr.value in ("items", "values") and dict_entries(scope, it.func.value, d) is None
               and dict_values(k, it.func.value, scope, d, 0) is not VKind.GRAPH
               for n in names_in(value) for d in scope.reaching(n, at)[0])


def _values_of(node: cst.CSTNode, name: str) -> bool:
    return (type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == "values"
            and type(node.func.value) is cst.Name and node.func.value.value == name)


def dict_values(k: Asker, expr: cst.BaseExpression, scope: Scope, at: Event, depth: int,
                key: str | None = None) -> VKind | None:
    """The kind of the values of the dict `expr` holds at `at` (`key`: of the entry with that literal key, and of
    those whose key is not a literal), or None when not known (`dict_kinds`)."""
    return pick(dict_kinds(k, expr, scope, at, depth), key)


def pick(kinds: dict[str, VKind] | None, key: str | None) -> VKind | None:
    """The join of the kinds of a dict's entries (`key`: of that entry and of those whose key is not known)."""
    found = [v for name, v in kinds.items() if key is None or name in (key, ANY_KEY)] if kinds else []
    return join(found) if found else None


def entry(k: Asker, e: cst.Subscript, scope: Scope, at: Event | None, depth: int) -> VKind:
    """The kind of `e`, an item read by subscript: a shape's size is a number; an entry of a dict whose every
    value is known is that value's kind; a score entry of what a module returned is not known (`output["metric"]`:
    the forward returned a dict, whose scores are for reporting); else the container's kind carries over for a
    tensor (with or without its graph) and a string."""
    if indices_of(e):
        return VKind.TENSOR  # `torch.max(out, 1)[1]`: the indices
    base = k.of(e.value, scope, at, depth + 1)
    if type(e.value) is cst.Attribute and e.value.attr.value == "shape":
        return VKind.NUMBER
    if base is VKind.CONTAINER and at is not None:
        found = dict_values(k, e.value, scope, at, depth, subscript_key(e))
        return found if found is not None else VKind.UNKNOWN
    if base is VKind.GRAPH and (key := subscript_key(e)) is not None and is_metric_key(key):
        return VKind.UNKNOWN
    return base if base in (VKind.GRAPH, VKind.TENSOR, VKind.STRING) else VKind.UNKNOWN


def subscript_key(node: cst.Subscript) -> str | None:
    """`d["loss"]`: the literal key read; None for any other subscript (its entry may be any)."""
    if len(node.slice) != 1 or type(node.slice[0].slice) is not cst.Index:
        return None
    key = literal_key(node.slice[0].slice.value)
    return None if key == ANY_KEY else key


def literal_key(key: cst.BaseExpression | None) -> str:
    """The key of a dict entry as its exports write it: a string literal's value, else `ANY_KEY`."""
    value = key.evaluated_value if type(key) is cst.SimpleString else None
    return value if isinstance(value, str) and value != ANY_KEY else ANY_KEY


def dict_kinds(k: Asker, expr: cst.BaseExpression, scope: Scope, at: Event, depth: int,
               hops: int = 0) -> dict[str, VKind] | None:
    """The kind of each entry of the dict `expr` holds at `at`, by literal key, or None when not known: entries the
    scope builds (`entries.dict_entries`), a name every reaching definition of which binds such a dict (a call's
    result, an item of one it unpacked), or what a function returns (its `return`s, or another file's exports)."""
    if hops > _MAX_HOPS:
        return None
    entries = dict_entries(scope, expr, at)
    if entries is not None:
        return merged([{literal_key(key): k.of(v, scope, where, depth + 1)} for key, v, where in entries])
    if type(expr) is cst.Name:
        defs, entry = scope.reaching(expr.value, at)
        if entry or not defs:
            return None
        found: list[dict[str, VKind] | None] = []
        for d in defs:
            if d.value is None:
                return None
            if d.variant is AssignForm.PLAIN:
                found.append(dict_kinds(k, d.value, scope, d, depth, hops + 1))
            elif d.variant in (AssignForm.UNPACK_FIRST, AssignForm.UNPACK):
                found.append(_element_kinds(k, d.value, d.index, scope, d, depth, hops + 1))
            else:
                return None
        return merged(found)
    return _returned_kinds(k, expr, None, scope, depth, hops)


def merged(maps: list[dict[str, VKind] | None]) -> dict[str, VKind] | None:
    """The entries of dicts one of which a value is (definitions on two paths, several `return`s), by key."""
    if not maps or any(m is None for m in maps):
        return None
    out: dict[str, VKind] = {}
    for m in maps:
        for key, kind in m.items():  # type: ignore[union-attr]  # None excluded above
            out[key] = join([out[key], kind]) if key in out else kind
    return out


def _element_kinds(k: Asker, value: cst.BaseExpression, index: int, scope: Scope, at: Event,
                   depth: int, hops: int) -> dict[str, VKind] | None:
    """`dict_kinds` of item `index` of a tuple value (`loss, parts = criterion(out, y)`: `parts`)."""
    if index < 0:
        return None
    if type(value) is cst.Tuple:
        if index < len(value.elements) and type(value.elements[index]) is not cst.StarredElement:
            return dict_kinds(k, value.elements[index].value, scope, at, depth, hops + 1)
        return None
    return _returned_kinds(k, value, index, scope, depth, hops)


def _returned_kinds(k: Asker, call: cst.BaseExpression, index: int | None, scope: Scope,
                    depth: int, hops: int) -> dict[str, VKind] | None:
    """The entries of the dict a call returns (`index` None), or returns as item `index` of a tuple."""
    name = dotted(call.func) if type(call) is cst.Call else None
    if name is None:
        return None
    callee = k.callee(scope, name)
    if callee is None:
        found = k.foreign(scope, name)
        if found is None:
            return None
        exp = found.export
        written = exp.dict_values if index is None else exp.values[index] if index < len(exp.values) else {}
        kinds = {key: VKind.__members__.get(v, VKind.UNKNOWN) for key, v in written.items()}
        return kinds or None
    each: list[dict[str, VKind] | None] = []
    for r in callee.own_returns():
        assert r.value is not None  # own_returns keeps those with a value
        each.append(dict_kinds(k, r.value, callee, r, depth, hops + 1) if index is None
                    else _element_kinds(k, r.value, index, callee, r, depth, hops + 1))
    return merged(each)


_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)


class ComprehensionNames:
    """The names a comprehension binds, for the value kinds: `p` in `sum(p.norm() for p in model.parameters())` is
    an element of its iterable, at its place in the target. A scope's comprehensions are read once, and only for a
    name that the file's text binds in a `for` clause and that the scope's definitions do not give a kind."""

    def __init__(self) -> None:
        self._scopes: dict[int, dict[int, tuple[cst.BaseExpression, int]]] = {}
        self._named: dict[str, bool] = {}

    def bound(self, scope: cst.CSTNode, name: cst.Name, text: str) -> tuple[cst.BaseExpression, int] | None:
        """The iterable that binds this `name` node in a comprehension of `scope`, and the name's place in the
        target (-1: the whole element); None when no comprehension binds it."""
        named = self._named.get(name.value)
        if named is None:
            named = self._named[name.value] = re.search(
                rf"f(?<!\wf)or[ \t]+[\w \t,()]*?\b{re.escape(name.value)}\b[\w \t,()]*?\bin\b", text) is not None
        if not named:
            return None
        found = self._scopes.get(id(scope))
        if found is None:
            found = self._scopes[id(scope)] = _comprehension_names(scope)
        return found.get(id(name))


def _comprehension_names(scope: cst.CSTNode) -> dict[int, tuple[cst.BaseExpression, int]]:
    """Each name node that a comprehension of `scope` binds -> (its iterable, its place in the target). A nested
    comprehension is visited after the one around it, so its own targets shadow the outer ones."""
    out: dict[int, tuple[cst.BaseExpression, int]] = {}
    for node in walk(scope):
        if type(node) not in _COMPREHENSIONS:
            continue
        bound: dict[str, tuple[cst.BaseExpression, int]] = {}
        uses: list[cst.CSTNode] = (
            [node.key, node.value] if type(node) is cst.DictComp else [node.elt])  # type: ignore[attr-defined]  # by type
        clause: cst.CompFor | None = node.for_in  # type: ignore[attr-defined]  # every comprehension has one
        while clause is not None:
            target = clause.target
            if type(target) is cst.Name:
                bound[target.value] = (clause.iter, -1)
            elif type(target) in (cst.Tuple, cst.List):
                for i, el in enumerate(target.elements):  # type: ignore[attr-defined]  # by type
                    if type(el.value) is cst.Name:
                        bound[el.value.value] = (clause.iter, i)
            uses.extend(c.test for c in clause.ifs)
            clause = clause.inner_for_in
            if clause is not None:
                uses.append(clause.iter)
        for use in uses:
            for n in walk(use):
                if type(n) is cst.Name and n.value in bound:
                    out[id(n)] = bound[n.value]
    return out


def from_args(k: Asker, call: cst.Call, scope: Scope, at: Event | None, depth: int, numbers_stay: bool = False) -> VKind:
    """A function of its arguments: a graph if any argument has one, no graph if none can have one."""
    kinds = []
    for arg in call.args:
        value = arg.value
        if type(value) is cst.GeneratorExp or type(value) is cst.ListComp:
            kinds.append(k.of(value.elt, scope, at, depth + 1))
        elif type(value) is cst.List or type(value) is cst.Tuple:
            kinds.extend(k.of(el.value, scope, at, depth + 1) for el in value.elements)
        else:
            kinds.append(k.of(value, scope, at, depth + 1))
    if VKind.GRAPH in kinds:
        return VKind.GRAPH
    if numbers_stay and kinds and all(kind is VKind.NUMBER for kind in kinds):
        return VKind.NUMBER
    if kinds and all(kind in (VKind.TENSOR, VKind.NUMBER, VKind.STRING, VKind.NONE) for kind in kinds):
        return VKind.TENSOR if not numbers_stay or VKind.TENSOR in kinds else VKind.NUMBER
    return VKind.UNKNOWN


def indices_of(e: cst.BaseExpression) -> bool:
    """`torch.max(out, 1)[1]`, `out.max(dim=1)[1]`, `out.topk(k).indices`: the indices of a reduction that returns
    values and indices (given a dimension, or `topk` / `sort`), with no graph; the values keep theirs."""
    if type(e) is cst.Attribute and e.attr.value == "indices":
        call = e.value
    elif type(e) is cst.Subscript and len(e.slice) == 1 and type(e.slice[0].slice) is cst.Index \
            and type(index := e.slice[0].slice.value) is cst.Integer and index.value == "1":
        call = e.value
    else:
        return False
    if type(call) is not cst.Call or type(call.func) is not cst.Attribute or call.func.attr.value not in VALUES_INDICES:
        return False
    method_form = not (type(call.func.value) is cst.Name and call.func.value.value == "torch")
    return call.func.attr.value in ("topk", "sort") or len(call.args) > (0 if method_form else 1) or any(
        a.keyword is not None and a.keyword.value == "dim" for a in call.args)


def distribution_with_graph(k: Asker, expr: cst.BaseExpression, scope: Scope, at: Event | None, depth: int) -> bool:
    """`expr` is a `torch.distributions` distribution built from a value with a graph (`Categorical(probs)` with
    `probs = policy(state)`, itself or the one definition of a name): its `log_prob(a)`, `entropy()` and `rsample()`
    carry the graph of its parameters."""
    if type(expr) is cst.Name and at is not None:
        defs, entry = scope.reaching(expr.value, at)
        if entry or len(defs) != 1 or defs[0].variant is not AssignForm.PLAIN or defs[0].value is None:
            return False
        expr, at = defs[0].value, defs[0]
    if type(expr) is not cst.Call or (dotted(expr.func) or "").rpartition(".")[2] not in DISTRIBUTIONS:
        return False
    return any(k.of(a.value, scope, at, depth + 1) is VKind.GRAPH for a in expr.args)


def written(k: Asker, name: str, scope: Scope, at: Event, depth: int) -> VKind:
    """A tensor made without a graph (`outputs = torch.zeros(T, B)`) that values are written into by index
    (`outputs[t] = decoder(x)`, `losses[i] = loss`) where that can reach `at`: the write copies the value in with
    its gradient (a `CopySlices` node), so the tensor carries the graph of what was written. (A value of unknown
    kind written in leaves it a tensor, as it was read before: a crop's or a mask's slices.)"""
    found = any(e.variant is AssignForm.ITEM and scope.store_reaches(e, at)
                and k.of_def(e, scope, depth + 1) is VKind.GRAPH for e in scope.stores(name))
    return VKind.GRAPH if found else VKind.TENSOR
