"""Objects that keep what they are given across a loop's iterations: `meter.update(loss, n)` where the method adds
its parameter into an attribute of `self` (`Summary.keeps` for a class of the file; `ProjectLookup.kept` for one
of another project file), and `stats["loss"] = loss` where the class's `__setitem__` appends its value; the object
bound before the loop and not rebound in it, so it outlives every iteration and keeps what each one gave it."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Iterator

import libcst as cst

from torchlint.analysis.containers import dict_values
from torchlint.analysis.events import AssignForm, Event, EventKind
from torchlint.analysis.exprs import argument_for, dotted, names_in, positional_params, summand_names
from torchlint.analysis.hooks import step_hooks
from torchlint.analysis.loops import Loop
from torchlint.analysis.model import FileModel
from torchlint.analysis.scopes import Scope
from torchlint.analysis.summaries import kept_writes
from torchlint.analysis.semantics import SET_ITEM, context_of
from torchlint.analysis.vkind import VKind
from torchlint.source.walk import calls_in_evaluation_order, walk


@dataclass(frozen=True)
class KeptValue:
    node: cst.CSTNode  # the call, or the statement that stores the item
    value: cst.BaseExpression  # what the object keeps
    method: str  # as called: `meter.update`, `stats.__setitem__`
    obj: str  # the object: `meter`, `self.stats`
    entries: bool = False  # `value` is a dict whose entries carry the graphs


def kept_by_objects(model: FileModel, loop: Loop) -> Iterator[KeptValue]:
    """Values with a graph that an object outliving the loop keeps: one per call (its first such argument). The
    loop may be a step body (`FileModel.step_bodies`: no head, once per step of a loop elsewhere). A class of
    another file is asked of the project only here, for loops that back-propagate."""
    scope = loop.scope
    local = _keeping_methods(model)
    shares = "global" in model.text or "nonlocal" in model.text  # a function of the file may declare one
    appenders = _param_appenders(model)
    foreign = model.project is not None and model.project.imports_project_files()  # (another file's class)
    if not local and not foreign and not shares and not appenders:
        return
    body = loop.node if loop.node is not None else scope.node  # a step body: the function, once per step
    quiet: set[int] | None = None  # read at the first call of an object's method (most loops call none)
    for call in calls_in_evaluation_order(body):
        if type(call.func) is cst.Name:
            found_global = _kept_by_function(model, scope, call) if shares else None
            if found_global is None and call.func.value in appenders:
                found_global = _appended_by_helper(model, scope, loop, call, appenders[call.func.value])
            if found_global is not None:
                if quiet is None:
                    quiet = _under_no_grad(body)
                if id(call) not in quiet:
                    yield found_global
            continue
        if type(call.func) is cst.Attribute and type(call.func.value) is cst.Subscript:
            element = _kept_by_element(model, scope, loop, call, local)
            if element is not None:
                if quiet is None:
                    quiet = _under_no_grad(body)
                if id(call) not in quiet:
                    yield element
            continue
        func = dotted(call.func) if type(call.func) is cst.Attribute else None
        if func is None:
            continue
        obj, method = func.rsplit(".", 1)
        if obj != "self" and func.count(".") != (2 if func.startswith("self.") else 1):
            continue  # `self.record(loss)`: the object's own method keeps it in the object
        found = _keeps(model, scope, obj, method, local)
        if found is None or not _outlives(scope, loop, obj):
            continue
        if quiet is None:
            quiet = _under_no_grad(body)  # (asked only once a call keeps: most loops call no such method)
        if id(call) in quiet:
            continue
        attached = _kept_argument(model, scope, call, *found)
        if attached is not None:
            yield KeptValue(call, attached, func, obj)
    for e in loop.events:
        if (e.kind is EventKind.ASSIGN and e.variant is AssignForm.ITEM and not e.accumulates and e.target
                and e.value is not None and e.scope is scope.node and e.target.count(".") <= 1):
            found = _keeps(model, scope, e.target, SET_ITEM, local)
            if (found is not None and len(found[0]) == 2 and found[0][1] in found[1]
                    and _outlives(scope, loop, e.target) and _attached(model, scope, e.value, e) is not None):
                yield KeptValue(e.node, e.value, f"{e.target}.{SET_ITEM}", e.target)


def _kept_argument(model: FileModel, scope: Scope, call: cst.Call, params: tuple[str, ...],
                   keeps: frozenset[str]) -> cst.BaseExpression | None:
    """The first argument of `call` given for a kept parameter that carries a graph (`_attached`)."""
    positional = [a for a in call.args if a.keyword is None]
    star_kept = bool(keeps - set(params))  # `def log(self, **values)` keeps what it is given by other keywords
    for a in call.args:
        if a.star:
            break
        param = a.keyword.value if a.keyword is not None else (
            params[positional.index(a)] if positional.index(a) < len(params) else None)
        kept = param in keeps or star_kept and a.keyword is not None and param not in params
        attached = _attached(model, scope, a.value, None) if kept else None
        if attached is not None:
            return attached
    return None


def _kept_by_element(model: FileModel, scope: Scope, loop: Loop, call: cst.Call,
                     local: frozenset[str]) -> KeptValue | None:
    """`meters[k].update(loss_dict[k], n)`: a method that keeps its argument, of an element of a dict or list that
    outlives the loop and that the scope fills with instances of one class of the file (`meters = {k:
    AverageMeter() for k in names}`, `OrderedDict([(k, AverageMeter(k)) for k in names])`)."""
    func = call.func
    assert type(func) is cst.Attribute and type(func.value) is cst.Subscript  # the caller's
    holder, method = func.value.value, func.attr.value
    if type(holder) is not cst.Name or method not in local or not _outlives(scope, loop, holder.value):
        return None
    cls = _element_class(model, scope, holder.value)
    callee = next((s for s in model.scopes if s.class_name == cls and s.name == method), None) if cls else None
    if callee is None:
        return None
    attached = _kept_argument(model, scope, call, tuple(positional_params(callee.node)[1:]), model.summary(callee).keeps)
    return KeptValue(call, attached, f"{holder.value}[...].{method}", holder.value) if attached is not None else None


_CONTAINERS = (cst.Dict, cst.DictComp, cst.List, cst.ListComp)
_CONTAINER_CALLS = frozenset({"dict", "OrderedDict", "collections.OrderedDict"})


def _element_class(model: FileModel, scope: Scope, name: str) -> str | None:
    """The one class of the file whose instances every binding of `name` in the scope fills a container with."""
    found: set[str] = set()
    for d in (a for a in scope.assignments(name) if a.rebinds):
        value = d.value
        if value is None or not (type(value) in _CONTAINERS or type(value) is cst.Call
                                 and dotted(value.func) in _CONTAINER_CALLS):
            return None
        built = {n.func.value for n in walk(value) if type(n) is cst.Call and type(n.func) is cst.Name
                 and n.func.value in model.classes}
        if len(built) != 1:
            return None
        found |= built
    return found.pop() if len(found) == 1 else None


def _param_appenders(model: FileModel) -> dict[str, tuple[tuple[int, int], ...]]:
    """The plain functions of the file that append one parameter to another or add it into an item of another
    (`def log(history, loss): history.append(loss)`; `def accumulate(stats, losses): for k, v in losses.items():
    stats[k] += v`), by name: each (holder, value) pair of positions. Read once per file."""
    found = _APPENDERS.get(model)
    if found is None:
        found = {}
        for s in model.scopes if ".append" in model.text or "+=" in model.text else ():
            if s.class_name is not None or type(s.node) is not cst.FunctionDef or not s.params:
                continue
            names = positional_params(s.node)
            pairs = tuple(dict.fromkeys((names.index(holder), names.index(value))
                                        for holder, value in _params_kept_in_params(s, names)))
            if pairs:
                found[s.name] = pairs
        _APPENDERS[model] = found
    return found


def _params_kept_in_params(scope: Scope, names: list[str]) -> Iterator[tuple[str, str]]:
    """(holder, value) parameters: `holder.append(value)`, or `holder[key] += value` / `holder[key].append(value)`
    with `value` a term of what is added, itself or through a loop over its items (`for k, v in values.items()`);
    neither rebound in the function (a rebound holder is a local copy). Read from the function's own events, as
    parsed (`summaries.kept_writes`: no helper is placed for this)."""
    params = set(names) - {e.target for e in scope.raw if e.kind is EventKind.ASSIGN and e.rebinds
                           and e.scope is scope.node and e.variant is not AssignForm.FOR}
    for e, target, kept in kept_writes(scope, params):
        if target in params and (e.kind is not EventKind.ASSIGN or _into_item(e.node)):
            yield from ((target, v) for v in kept if v != target)


def _into_item(stmt: cst.CSTNode) -> bool:
    """`holder[key] += value` or `holder[key] = holder[key] + value`: a write into an item the caller's object
    holds (not `holder += value`, which only rebinds the function's own name for a number)."""
    targets = [stmt.target] if type(stmt) is cst.AugAssign else [
        t.target for t in stmt.targets] if type(stmt) is cst.Assign else []
    return bool(targets) and all(type(t) is cst.Subscript for t in targets)


def _appended_by_helper(model: FileModel, scope: Scope, loop: Loop, call: cst.Call,
                        pairs: tuple[tuple[int, int], ...]) -> KeptValue | None:
    """`log_loss(history, loss)` with `def log_loss(history, loss): history.append(loss)`, `history` bound before
    the loop: the list keeps every iteration's attached value."""
    if any(a.star or a.keyword is not None for a in call.args):
        return None
    args = [a.value for a in call.args]
    for holder, value in pairs:
        if max(holder, value) >= len(args) or type(args[holder]) is not cst.Name:
            continue
        name = args[holder].value  # type: ignore[attr-defined]  # a Name, tested just above
        if not _outlives(scope, loop, name) or any(e.target == name and e.kind is EventKind.RESET for e in loop.events):
            continue  # (emptied in the loop: `del log_probs[:]` after each episode's backward)
        if any(e.kind is EventKind.BACKWARD and e.value is not None and name in names_in(e.value) or
               e.kind is EventKind.ASSIGN and e.value is not None and name in names_in(e.value) for e in scope.events):
            continue  # read into a loss or another value (`torch.stack(log_probs)`): not only a record
        if (attached := _attached(model, scope, args[value], None)) is not None:
            return KeptValue(call, attached, dotted(call.func) or "", name)
        if (entries := _graph_dict(model, loop, call, args[value])) is not None:
            return KeptValue(call, entries, dotted(call.func) or "", name, entries=True)
    return None


def _graph_dict(model: FileModel, loop: Loop, call: cst.Call, value: cst.BaseExpression) -> cst.BaseExpression | None:
    """`value`, a dict every entry of which carries a graph at the call (`{"ce": crit(out, y), "kl": kl}`)."""
    if type(value) is not cst.Name or not loop.events or loop.node is None:
        return None
    stmt = next((st for st in walk(loop.node) if type(st) is cst.SimpleStatementLine
                 and any(n is call for n in walk(st))), None)  # (a call of such a helper is rare: no parent map)
    at = loop.events[0].but(kind=EventKind.OPAQUE, node=call, stmt=stmt, path=(), inlined_from=None)
    return value if stmt is not None and dict_values(model.kinds, value, loop.scope, at, 0) is VKind.GRAPH else None


def _keeping_methods(model: FileModel) -> frozenset[str]:
    """The names of the methods of the file's classes that keep what they are given, read once per file."""
    found = _KEEPING.get(model)
    if found is None:
        found = _KEEPING[model] = frozenset(
            s.name for s in model.scopes if s.class_name is not None and model.summary(s).keeps)
    return found


_KEEPING: weakref.WeakKeyDictionary[FileModel, frozenset[str]] = weakref.WeakKeyDictionary()  # dies with its model
_APPENDERS: weakref.WeakKeyDictionary[FileModel, dict[str, tuple[tuple[int, int], ...]]] = weakref.WeakKeyDictionary()


def _kept_by_function(model: FileModel, scope: Scope, call: cst.Call) -> KeptValue | None:
    """`record(loss)` where the function of the file adds its parameter, as a term, into a name it declares `global`
    or `nonlocal` (`total += loss`): the name outlives every call. Not a function that back-propagates itself (a
    step body: its own additions are judged there)."""
    callee = model.resolve(scope, call.func.value)  # type: ignore[attr-defined]  # a Name (the caller checks)
    if callee is None or callee.class_name is not None or callee.own_backwards():
        return None
    shared = callee.declared_shared()
    params = positional_params(callee.node)
    kept: dict[str, str] = {}
    for e in callee.events if shared else ():
        if (e.scope is callee.node and e.target in shared and e.value is not None
                and (e.accumulates or e.kind is EventKind.APPEND)):
            for name in summand_names(e.value) & set(params):
                defs, entry = callee.reaching(name, e)
                if entry and not defs:
                    kept.setdefault(name, e.target)
    positional = [a for a in call.args if a.keyword is None]
    for a in call.args if kept else ():
        if a.star:
            return None
        param = a.keyword.value if a.keyword is not None else (
            params[positional.index(a)] if positional.index(a) < len(params) else None)
        attached = _attached(model, scope, a.value, None) if param in kept else None
        if attached is not None:
            return KeptValue(call, attached, callee.name, kept[param or ""])
    return None


def _keeps(model: FileModel, scope: Scope, obj: str, method: str,
           local: frozenset[str]) -> tuple[tuple[str, ...], frozenset[str]] | None:
    """The parameters of `obj.method` past `self`, and those it keeps; None when it keeps none or is not known."""
    if method in local:
        callee = model.resolve(scope, f"{obj}.{method}")
        if callee is not None and callee.class_name is not None:
            keeps = _unconsumed(model, callee, model.summary(callee).keeps)
            return (tuple(positional_params(callee.node)[1:]), keeps) if keeps else None
    if model.project is None or obj.startswith("self.") and obj.count(".") != 1:
        return None
    cls = model.receivers.class_of(scope, obj)
    if cls is None or cls in model.classes:
        return None
    found = model.project.kept(cls, method)
    return (found[0][1:], found[1]) if found is not None and found[1] else None


def _unconsumed(model: FileModel, callee: Scope, kept: frozenset[str]) -> frozenset[str]:
    """The parameters in `kept` that the method `callee` stores into attributes no method of its class that back-
    propagates reads or empties: one stored only where such a backward reads it (`update()` back-propagates
    `torch.stack(self.log_probs)`: REINFORCE's episode buffer, an n-step rollout) is kept for that backward, on
    purpose, and one such a method empties (`self.values.clear()`) lives one update long."""
    stored: dict[str, set[str]] = {}
    for e in callee.events if kept else ():
        if e.target and e.value is not None:
            for p in names_in(e.value) & kept:
                stored.setdefault(p, set()).add(e.target)
    updates = [s for s in model.scopes if s.class_name == callee.class_name and s.own_backwards()] if stored else []
    read = frozenset().union(*(s.backpropagated() for s in updates))
    # (or emptied by such a method, itself or through a helper it calls: `self.clear_storage()` after the update)
    called = {c.func.attr.value for s in updates for c in calls_in_evaluation_order(s.node)
              if type(c.func) is cst.Attribute and type(c.func.value) is cst.Name and c.func.value.value == "self"}
    emptied = {e.target for s in model.scopes if s in updates or s.class_name == callee.class_name and s.name in called
               for e in s.events if e.kind is EventKind.RESET or e.kind is EventKind.ASSIGN and e.rebinds}
    return frozenset(p for p in kept if not (stored.get(p) and stored[p] <= read | emptied))


def _attached(model: FileModel, scope: Scope, value: cst.BaseExpression,
              at: Event | None) -> cst.BaseExpression | None:
    """The value, when it carries a graph where `at` happens; or, of a list or tuple literal (`[loss_a, n]`), its
    first item that does."""
    items = [value]
    if isinstance(value, (cst.List, cst.Tuple)):
        items = [el.value for el in value.elements if type(el) is not cst.StarredElement]
    return next((item for item in items if model.kinds.of(item, scope, at) is VKind.GRAPH
                 or term_of_backpropagated(model, scope, item)), None)


def term_of_backpropagated(model: FileModel, scope: Scope, value: cst.BaseExpression) -> bool:
    """A term of `value` is an element of a tuple a function of the file returned (`total, part = f(x)`) that is,
    in every `return` of `f`, a term of another element (`total = part + other; return total, part`), and that
    other element is back-propagated here (`total.backward()`): the part carries a graph, whoever built it."""
    for name in summand_names(value):
        defs = [d for d in scope.assignments(name) if d.rebinds]
        if defs and all(_part_of_backpropagated(model, scope, d) for d in defs):
            return True
    return False


def _part_of_backpropagated(model: FileModel, scope: Scope, d: Event) -> bool:
    if d.variant not in (AssignForm.UNPACK_FIRST, AssignForm.UNPACK) or type(d.value) is not cst.Call:
        return False
    func = dotted(d.value.func)
    callee = model.resolve(scope, func) if func is not None else None
    rets = callee.own_returns() if callee is not None else []
    # a function of another project file: the element its exports say this one is a term of
    found = model.kinds.foreign(scope, func) if callee is None and func is not None else None
    parts = found.export.parts if found is not None else []
    if callee is None and not 0 <= d.index < len(parts) or callee is not None and (
            not rets or any(type(r.value) is not cst.Tuple for r in rets)):
        return False
    backwards = scope.own_backwards()
    for sibling in scope.events:
        if sibling.value is not d.value or sibling is d or sibling.kind is not EventKind.ASSIGN or not sibling.target:
            continue
        if not any(sibling.target in summand_names(b.value) and sibling in scope.reaching(sibling.target, b)[0]
                   for b in backwards if b.value is not None):
            continue
        if callee is None and parts[d.index] == sibling.index or callee is not None and all(
                callee.returns_term(r, d.index, sibling.index) for r in rets):
            return True
    return False


def _under_no_grad(loop: cst.CSTNode) -> set[int]:
    """The calls of the loop under `with torch.no_grad():` (or `inference_mode()`): what they compute has no
    graph, and what they are handed is not kept by them for a backward."""
    out: set[int] = set()
    for node in walk(loop, _holds_no_with):
        if type(node) is cst.With and any(
                context_of(dotted(item.item.func if type(item.item) is cst.Call else item.item) or "") == "no_grad"
                for item in node.items):
            out.update(id(c) for c in calls_in_evaluation_order(node.body))
    return out


def _holds_no_with(node: cst.CSTNode) -> bool:
    """A `with` is a compound statement: no expression and no line of simple statements holds one."""
    cls = type(node)
    found = _NO_WITH.get(cls)
    if found is None:
        found = _NO_WITH[cls] = issubclass(cls, (cst.BaseExpression, cst.SimpleStatementLine, cst.SimpleStatementSuite))
    return found


_NO_WITH: dict[type, bool] = {}  # by type: isinstance() on libcst's abstract bases is slow


def _outlives(scope: Scope, loop: Loop, obj: str) -> bool:
    """The object is bound before the loop and not rebound in it (or is `self` or an attribute of it, a parameter);
    of a step body (a function called once per step), `self` or an attribute of it."""
    if obj == "self" or obj.startswith("self.") or loop.node is None:
        return obj == "self" or obj.startswith("self.")
    defs = [a for a in scope.assignments(obj) if a.rebinds]
    if not defs:
        return obj in scope.params
    return not any(loop.node in a.loops for a in defs)


def kept_by_steps(model: FileModel) -> Iterator[tuple[Loop, Event]]:
    """Additions into what outlives one call of a function run once per training step (`FileModel.step_bodies`, a
    framework's step hook, `hooks.step_hooks`): an attribute of `self` (`self.total += loss`,
    `self.history["loss"].append(loss)`), or a name the function declares `global` or `nonlocal`; not one the
    function binds afresh itself (a buffer of one call)."""
    for body in [*model.step_bodies(), *step_hooks(model)]:
        scope = body.scope
        shared = None
        for e in scope.events:
            target = e.target
            if e.scope is not scope.node or target is None or e.value is None or "no_grad" in e.contexts:
                continue
            if not (e.accumulates or e.kind is EventKind.APPEND) or e.variant is AssignForm.ITEM and not e.accumulates:
                continue
            if not (target.startswith("self.") and target.count(".") == 1 and scope.class_name):
                shared = scope.declared_shared() if shared is None else shared
                if target not in shared:
                    continue
            if any(a.rebinds and not a.accumulates and a.kind is EventKind.ASSIGN for a in scope.assignments(target)):
                continue
            yield body, e


def summed_by_helper(model: FileModel, scope: Scope, e: Event) -> cst.BaseExpression | None:
    """`running = add_to(running, loss)` with `def add_to(total, loss): return total + loss`: a function of the
    file every return of which adds its parameters as they came in, one given the target itself, so the call adds
    the other one's argument (`loss`) into what the target held, as `running += loss` would. That argument; None
    when the call is not such a sum (a helper that back-propagates, or that returns anything else)."""
    call = e.value
    if e.kind is not EventKind.ASSIGN or e.variant is not AssignForm.PLAIN or type(call) is not cst.Call or not any(
            type(a.value) in (cst.Name, cst.Attribute) and dotted(a.value) == e.target for a in call.args):
        return None  # (the cheap test first: the target is handed to the call)
    callee = model.kinds.callee(scope, dotted(call.func) or "")
    if callee is None or type(callee.node) is not cst.FunctionDef or callee.own_backwards():
        return None
    params = positional_params(callee.node)[1 if callee.class_name else 0:]
    mine = next((p for p in params if dotted(argument_for(call, params, p)) == e.target), None)
    rets = callee.own_returns()
    if mine is None or not rets:
        return None
    others: set[str] = set()
    for r in rets:
        terms = _entry_terms(callee, r.value, r, 0)  # type: ignore[arg-type]  # own_returns: each with a value
        if terms is None or mine not in terms or not terms & (set(params) - {mine}):
            return None
        others |= terms - {mine}
    return next((argument_for(call, params, p) for p in params if p in others), None)


def _entry_terms(callee: Scope, expr: cst.BaseExpression, at: Event, depth: int) -> set[str] | None:
    """The parameters whose values as the call gave them are the terms of `expr` at `at` (through the function's
    own additions, `total = total + loss; return total`); None when a term is anything else."""
    out: set[str] = set()
    for name in summand_names(expr):
        defs, entry = callee.reaching(name, at)
        if entry:
            if name not in callee.params:
                return None
            out.add(name)
        for d in defs:
            if depth > 3 or not (d.accumulates or d.variant is AssignForm.PLAIN) or d.value is None:
                return None
            inner = _entry_terms(callee, d.value, d, depth + 1)
            if inner is None:
                return None
            out |= inner
            if d.accumulates:  # `t += x`, `t = t + x`: what `t` held before is a term too
                held = _entry_terms(callee, cst.Name(name), d, depth + 1) if "." not in name else None
                if held is None:
                    return None
                out |= held
    return out or None


def one_step_per_call(model: FileModel, loop: Loop, e: Event) -> bool:
    """A local total of a function, bound outside any loop and added to in its one loop, which steps nothing,
    while every call of the function in the file runs in a loop, one of which steps an optimizer after it (`loss =
    self.get_loss(batch)` then `optimizer.step()`, with `get_loss` back-propagating each task of the batch and
    summing the losses; an evaluation loop calling it too): the loop is one step's micro-batches, and the total is
    dropped when the next call's result replaces it (a caller that keeps it is judged in its own loop)."""
    scope, target = loop.scope, e.target or ""
    if (type(scope.node) is not cst.FunctionDef or "." in target or e.loops != (loop.node,)
            or loop.of(EventKind.STEP, EventKind.RUN) or any(s.kind is EventKind.STEP for s in scope.events)):
        return False
    if any(a.loops for a in scope.assignments(target) if a.rebinds):
        return False
    calls = model.calls_of(scope)
    return all(call.loops for _, call in calls) and any(
        any(s.kind is EventKind.STEP and s.seq > call.seq and call.loops[-1] in s.loops for s in caller.events)
        for caller, call in calls)
