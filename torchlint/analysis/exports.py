"""A file's exports, computed from that file alone: for each of its functions and methods that may act, the
summary its callers in other files need (see `foreign`)."""

from __future__ import annotations

import ast

import libcst as cst

from torchlint.analysis.containers import dict_kinds, merged
from torchlint.analysis.events import Event, EventKind, variant_word
from torchlint.analysis.exprs import clamping_hook, dotted, positional_params
from torchlint.analysis.foreign import ExportedEvent, Exports, FunctionExport
from torchlint.analysis.model import FileModel
from torchlint.analysis.passing import graph_params
from torchlint.analysis.prescan import EVENT_TEXT
from torchlint.analysis.prune import prune_with_tree
from torchlint.analysis.records import backpropagated_fields
from torchlint.analysis.entries import dict_entries
from torchlint.analysis.scopes import Scope
from torchlint.analysis.vkind import VKind, join
from torchlint.analysis.walker import tracked_call
from torchlint.source.cstfast import parse_read_only
from torchlint.source.positions import positions
from torchlint.source.walk import calls_in_evaluation_order

_EXPORTED_KINDS = {
    EventKind.BACKWARD, EventKind.STEP, EventKind.ZERO_GRAD, EventKind.SCHED_STEP, EventKind.CLIP,
    EventKind.SCALER_UPDATE, EventKind.SCALER_UNSCALE,
}


def compute_exports(text: str, names: frozenset[str]) -> Exports | None:
    """Parse one file and summarise its functions and classes for callers in other files."""
    try:
        # Only what can act is parsed: the other functions are blanked (their lines kept), as for linting.
        source, tree = prune_with_tree(text, [(EVENT_TEXT,)])
        module = parse_read_only(source)
        model = FileModel(module, source)
        try:
            return export(model, names, tree)
        finally:
            model.release()
    except Exception:  # a file we cannot analyse is not followed: its callers stay as silent as before
        return None


def export(model: FileModel, names: frozenset[str], tree: ast.Module | None = None) -> Exports:
    """The exports of an analysed file (`FileModel`): its functions and methods among `names` (`acting`); `tree`:
    the `ast` pruning parsed, if it did (the positions reuse it)."""
    scopes = [s for s in model.scopes if type(s.node) is cst.FunctionDef and "." not in s.name
              and (f"{s.class_name}.{s.name}" if s.class_name else s.name) in names]
    wanted = []
    for scope in scopes:
        wanted.append(scope.node)
        for e in scope.events:
            if e.kind in _EXPORTED_KINDS and e.scope is scope.node:
                wanted.append(e.node)
    where = positions(model.module, model.text, wanted, model.top_of, model.statement_of, tree) if wanted else {}

    def line(node) -> int:
        rng = where.get(node)
        return rng.start.line if rng is not None else 0

    def fn(scope) -> FunctionExport:
        summary = model.summary(scope)
        # A function that reaches a training loop through a helper (`def train(...): return _run_epoch(...)`) is
        # a run too: it steps what that helper's runs step, as it names them (its own parameters).
        runs = [e for e in scope.events if e.kind is EventKind.RUN and e.scope is scope.node and not e.guards]
        trains = summary.trains or bool(runs)
        steps = sorted(set(summary.steps) | {r.target for r in runs if r.target})
        events = []
        # A clip under `if max_norm:` or `if p.grad is not None:` clips whatever gradients it is given, whenever it
        # runs; not in a function that unscales a GradScaler on some path (the clip may be on that path).
        maybe = (EventKind.ZERO_GRAD,) if any(e.kind is EventKind.SCALER_UNSCALE for e in scope.events) \
            else (EventKind.ZERO_GRAD, EventKind.CLIP)
        for e in scope.events:
            if e.kind not in _EXPORTED_KINDS:
                continue
            if trains and e.loops:
                continue  # a run of its own: callers see it as one RUN event
            if e.guards and e.kind not in maybe and not _given_scaler(e):
                continue  # guarded inside the callee: when it runs is not known to the caller
            at = line(e.node if e.scope is scope.node else scope.node)
            events.append(ExportedEvent(e.kind.value, e.target, variant_word(e.variant), e.via, at, tuple(e.contexts)))
        params = positional_params(scope.node)
        handed = _handed(model, scope, set(params) | {"self"})
        try:
            returns, items = _returned(model, scope)
            rets = scope.own_returns()
            parts = [next((j for j in range(len(items)) if all(scope.returns_term(r, i, j) for r in rets)), -1)
                     for i in range(len(items))]
            values, whole = _dict_values(model, scope, len(items))
        except Exception:
            returns, items, parts, values, whole = "UNKNOWN", [], [], [], {}
        return FunctionExport(
            line(scope.node), params, trains, steps, events,
            bool(summary.zeroes) or any(e.kind is EventKind.ZERO_GRAD for e in scope.events), handed, returns, items,
            parts, values, whole, sorted(graph_params(scope)) if returns == "UNKNOWN" else [],
            clamping_hook(scope.node) is not None,
        )

    out = Exports()
    for scope in scopes:
        if scope.class_name is None:
            out.functions[scope.name] = fn(scope)
    for name in model.classes:
        methods = {s.name: fn(s) for s in scopes if s.class_name == name}
        if methods:
            out.classes[name] = methods
    return out


def _handed(model: FileModel, scope: Scope, params: set[str]) -> list[str]:
    """The parameters (and `self`) that the function hands to calls the model cannot follow: an unresolved
    function or inherited method, or a method of another object (`engine.run(optimizer)`)."""
    calls = [e.node for e in scope.events if e.kind is EventKind.OPAQUE and type(e.node) is cst.Call]
    handed: set[str] = set()
    for e in scope.events:
        if e.kind is EventKind.OPAQUE and (e.callee or "").startswith("self."):
            handed.add("self")
    for stmt in scope.body:
        calls.extend(c for c in calls_in_evaluation_order(stmt) if type(c.func) is cst.Attribute and not tracked_call(c))
    for call in calls:
        for a in call.args:
            name = dotted(a.value)
            if name is not None and name.split(".", 1)[0] in params:
                handed.add(name.split(".", 1)[0])
    return sorted(handed)


def _returned(model: FileModel, scope: Scope) -> tuple[str, list[str]]:
    """What the function returns (a VKind name) and, when every `return` gives a tuple literal of one length, the
    kind of each element. A value the function back-propagates before returning it carries a graph, whoever built
    it (`loss = self.compute(batch); loss.backward(); opt.step(); return loss`)."""
    rets = scope.own_returns()

    def kind(value: cst.BaseExpression | None, at: Event) -> VKind:
        assert value is not None  # own_returns: each with a value
        found = model.kinds.of(value, scope, at)
        return VKind.GRAPH if found is VKind.UNKNOWN and scope.backpropagated_before(value, at) else found

    returns = model.kinds.returns(scope)
    if returns is VKind.UNKNOWN and rets and all(kind(r.value, r) is VKind.GRAPH for r in rets):
        returns = VKind.GRAPH
    values = [r.value for r in rets]
    if not rets or any(type(v) is not cst.Tuple for v in values):
        return returns.name, backpropagated_fields(model, scope, rets)
    tuples: list[cst.Tuple] = values  # type: ignore[assignment]  # each a Tuple (above)
    width = len(tuples[0].elements)
    if any(len(v.elements) != width or any(type(el) is cst.StarredElement for el in v.elements) for v in tuples):
        return returns.name, []
    return returns.name, [join(kind(v.elements[i].value, r) for r, v in zip(rets, tuples)).name for i in range(width)]


def _dict_values(model: FileModel, scope: Scope, width: int) -> tuple[list[dict[str, str]], dict[str, str]]:
    """The kind of each entry, by literal key, of the dict each element of the returned tuples is in every `return`
    (`return total, {"ce": ce, "n": n}`), and of the dict every `return` gives whole: a literal, or a name bound to
    one and filled by stores (`containers.dict_kinds`); {} where some `return` gives no such dict."""
    rets = scope.own_returns()

    def of(value: cst.BaseExpression | None, at: Event) -> dict[str, VKind] | None:
        entries = dict_entries(scope, value, at) if value is not None else None
        return dict_kinds(model.kinds, value, scope, at, 0) if entries and value is not None else None

    def joined(found: list[dict[str, VKind] | None]) -> dict[str, str]:
        kinds = merged(found) if found else None
        return {key: kind.name for key, kind in kinds.items()} if kinds else {}

    tuples = [r.value for r in rets if type(r.value) is cst.Tuple and len(r.value.elements) == width]
    values = [joined([of(t.elements[i].value, r) for r, t in zip(rets, tuples)]) for i in range(width)] if (
        len(tuples) == len(rets)) else []
    return values, joined([of(r.value, r) for r in rets])


def _given_scaler(e: Event) -> bool:
    """An update under `if scaler:` (`is not None`) only: it runs whenever the caller hands a scaler, as the caller's
    own update would."""
    name = e.target or ""
    return e.kind is EventKind.SCALER_UPDATE and bool(name) and all(
        g.condition() in ((name, True), (f"{name} is not None", True), (f"{name} is None", False)) for g in e.guards)
