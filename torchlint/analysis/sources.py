"""Where the graph a backward goes through comes from: the values (definitions) and the names from a function's
entry it is computed with, followed back through the scope's reaching definitions. Two backwards of one iteration
share a graph only through such a source (TL002: is a kept graph needed by a later backward, is it one every
iteration shares); and whether something computed from a function's graph leaves the call (`leaves_call`: then
the graph outlives it)."""

from __future__ import annotations

import re
from typing import Iterator

import libcst as cst

from torchlint.analysis.events import AssignForm, Event, EventKind
from torchlint.analysis.exprs import code_of, dotted
from torchlint.analysis.loops import Loop
from torchlint.analysis.model import FileModel
from torchlint.analysis.scopes import Scope
from torchlint.analysis.semantics import GRAPH_PRESERVING_METHODS
from torchlint.source.walk import children, walk


def operands(expr: cst.CSTNode) -> set[str]:
    """The names whose values `expr` computes with: not the functions it calls (`F.mse_loss`, `self.head`), except
    the tensor a graph-preserving method is called on (`out.sum()`); an attribute chain counts by what is assigned
    (`mb.x` by `mb`, `self.feats.x` by `self.feats`)."""
    out: set[str] = set()
    stack = [expr]
    while stack:
        node = stack.pop()
        if type(node) in (cst.Name, cst.Attribute) and (name := dotted(node)) is not None:
            parts = name.split(".")
            out.add(".".join(parts[:2]) if parts[0] == "self" and len(parts) > 1 else parts[0])
            continue
        if type(node) is cst.Call:
            stack.extend(a.value for a in node.args)
            func = node.func
            if type(func) is cst.Attribute and func.attr.value in GRAPH_PRESERVING_METHODS:
                stack.append(func.value)
            elif type(func) not in (cst.Name, cst.Attribute):
                stack.append(func)
            continue
        if type(node) in (cst.Lambda, cst.FunctionDef, cst.ClassDef):
            continue
        stack.extend(children(node))
    return out


def _unseen(todo: list[tuple[str, Event]]) -> Iterator[tuple[str, Event]]:
    """Each (name, event) of the worklist `todo` once, while the caller keeps adding to it."""
    seen: set[tuple[str, int]] = set()
    while todo:
        name, where = todo.pop()
        if (name, id(where)) not in seen:
            seen.add((name, id(where)))
            yield name, where


def shared_sources(model: FileModel, scope: Scope, at: Event, names: set[str],
                   inner: cst.CSTNode | None) -> tuple[bool, set[str]]:
    """Follows `names` back from `at` through the definitions of `scope`: whether one computed outside the loop
    `inner` (when given) may hold a graph, and which names that may hold one come from the scope's entry (its
    parameters, globals). Loop variables end the walk: the items iterated over are inputs, not one shared graph."""
    entries: set[str] = set()
    todo = [(name, at) for name in names]
    for name, where in _unseen(todo):
        defs, entry = scope.reaching(name, where)
        if entry and not model.kinds.of_name(name, scope, where).graph_free:
            entries.add(name)
        for d in defs:
            if d.value is None or d.variant is AssignForm.FOR:
                continue
            node = scope.flow_node(d)
            if inner is not None and (node is None or not scope.flow.in_loop(node, inner)):
                if not model.kinds.of_def(d, scope).graph_free:
                    return True, entries
                continue
            todo.extend((n, d) for n in operands(d.value))
    return False, entries


def graph_sources(model: FileModel, loop: Loop, b: Event) -> set[int] | None:
    """The statements whose values may carry a graph that `b` back-propagates through, followed back to the items
    the loop iterates over (inputs); None where one may come from elsewhere (a value from before the loop, a
    parameter or global of unknown kind: two such names may hold one graph)."""
    scope, out = loop.scope, set()
    todo = [(name, b) for name in operands(b.value)]  # type: ignore[arg-type]  # own backwards have a value
    for name, where in _unseen(todo):
        defs, entry = scope.reaching(name, where)
        if entry and not model.kinds.of_name(name, scope, where).graph_free and not settings_name(model, scope, name):
            return None
        for d in defs:
            if d.value is None or d.variant is AssignForm.FOR and d.node is loop.node \
                    or model.kinds.of_def(d, scope).graph_free:
                continue
            if loop.node not in d.loops and d.node is not loop.node:
                return None
            out.add(id(d.stmt))  # both names of `a, b = f(x)` come from one call: one source
            todo.extend((n, d) for n in operands(d.value))
    return out


def settings_name(model: FileModel, scope: Scope, name: str) -> bool:
    """A module (`torch` of `torch.max(a, b)`), or an attribute of `self` the function reads only through further
    attributes (`self.hparams.w_value`): settings, not a tensor two losses may share."""
    if name in model.imported:
        return True
    return name.startswith("self.") and re.search(rf"{re.escape(name)}\b(?!\s*\.)", code_of(scope.node)) is None


# A function named for a derivative it takes (`hessian_vector_product`, `jvp`, `compute_grads`): its arguments are
# differentiated. Not the gradient utilities of torch, which read `.grad` (`clip_grad_norm_`, `zero_grad`).
DIFFERENTIATING = re.compile(r"(?:^|_)(?:grads?|gradients?|hvp|vhp|jvp|vjp)(?:_|$)|hessian|jacobian", re.IGNORECASE)
_READS_GRAD = re.compile(r"clip_grad|zero_grad|requires_grad|grad_norm|no_grad|enable_grad")


def differentiated_after(scope: Scope, b: Event, region: cst.CSTNode | None) -> cst.Call | None:
    """A call that may run after `b` (in the same pass of the loop `region`, or anywhere after it in `scope`) and
    differentiates what `b` back-propagated again, a backward of another form: one given `retain_graph=` or
    `create_graph=` (a learned optimizer's `update(loss, params, create_graph=True)`), or one named for a derivative
    (`hessian_vector_product(kl, params)`), handed the value or another bound by the same statement (`loss, kl =
    surrogate(...)`). `b` is an event of `scope` itself."""
    start = scope.flow_node(b)
    if b.value is None or start is None:
        return None
    backwards = {id(e.node) for e in scope.events if e.kind is EventKind.BACKWARD}  # (the rules' own business)
    mine = operands(b.value)
    bound = {id(d.stmt) for name in mine for d in scope.reaching(name, b)[0]}
    for stmt in walk(region if region is not None else scope.node):
        node = scope.flow.node(stmt) if type(stmt) is cst.SimpleStatementLine else None
        if node is None or node == start or not scope.flow.may_follow(start, node, region):
            continue
        for call in (c for c in walk(stmt) if type(c) is cst.Call and id(c) not in backwards):
            last = (dotted(call.func) or "").rsplit(".", 1)[-1]
            if not (any(a.keyword is not None and a.keyword.value in ("retain_graph", "create_graph") for a in call.args)
                    or DIFFERENTIATING.search(last) and not _READS_GRAD.search(last)):
                continue
            handed = set().union(*(operands(a.value) for a in call.args)) if call.args else set()
            if handed & mine or any(id(d.stmt) in bound for name in handed for d in scope.reaching(name, b)[0]):
                return call
    return None


def leaves_call(model: FileModel, scope: Scope, value: cst.BaseExpression) -> bool:
    """Something computed from `value`'s graph leaves the function: returned (not as a graph-free value:
    `loss.item()`, `loss.detach().cpu().numpy()`), stored on an object, or added into a container or total that
    comes from outside the function."""
    # the function's own values the graph is computed from (not `self`, a module or a network it calls)
    graph = {name for name in scope.depends(value) if scope.assignments(name)}
    for e in scope.events:
        if e.scope is not scope.node or e.value is None or not scope.depends(e.value) & graph:
            continue
        if e.kind is EventKind.RETURN:
            # a tuple returned: its items computed from the graph (`return cam.detach().cpu().numpy(), label`)
            items = [el.value for el in e.value.elements if scope.depends(el.value) & graph] \
                if type(e.value) is cst.Tuple else [e.value]
            if not all(model.kinds.of(v, scope, e).graph_free or _bound_graph_free(model, scope, v) for v in items):
                return True
            continue
        if e.kind not in (EventKind.ASSIGN, EventKind.APPEND) or not e.target or e.variant is AssignForm.FOR:
            continue
        if "." in e.target:
            return True  # stored on an object
        if e.kind is EventKind.APPEND or e.variant is AssignForm.ITEM or e.accumulates:
            if scope.reaching(e.target, e)[1]:
                return True  # into a container or a total that comes from outside the function
    return False


def _bound_graph_free(model: FileModel, scope: Scope, value: cst.BaseExpression) -> bool:
    """A name every assignment of the function binds to a value with no graph (`label = out.argmax().item()`
    under `if label is None:`): a parameter it may also hold comes from the caller, not from this call's graph."""
    defs = scope.assignments(value.value) if type(value) is cst.Name else []
    return bool(defs) and all(d.kind is EventKind.ASSIGN and d.rebinds and d.value is not None
                              and model.kinds.of(d.value, scope, d).graph_free for d in defs)
