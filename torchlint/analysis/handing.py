"""Whether a use of kept values other than showing them may back-propagate them later: handed, or a value
computed from them, to a helper of the file that back-propagates, or to a call whose use of them is not known
(TL007 stays silent then: detaching them would break that backward)."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from torchlint.analysis.events import BackwardVia, Event, EventKind
from torchlint.analysis.exprs import dotted, names_in, positional_params
from torchlint.analysis.loops import Loop
from torchlint.analysis.model import FileModel
from torchlint.analysis.names import Role
from torchlint.analysis.scopes import Scope
from torchlint.analysis.semantics import DISPLAY_METHOD, NUMERIC_MODULES, READING_CALLS, SERIALIZERS


_HELPER_DEPTH = 3


def handed_on(model: FileModel, scope: Scope, total: str) -> bool:
    """A use of the kept values other than showing them may back-propagate them later: the container, an item
    popped from it or a value computed from it is handed to a helper of the file that back-propagates (a pipeline
    schedule's queue of micro-batch outputs, each popped into `backward_step(...)`), or to a call whose use of it
    is not known. Detaching them then breaks that backward, and the report is false."""
    if total.startswith("self."):
        scopes = [s for s in model.scopes if s.class_name == scope.class_name] if scope.class_name else [scope]
    else:
        scopes = [scope]
    return any(_may_backpropagate(model, s, {total}, 0) for s in scopes)


def _may_backpropagate(model: FileModel, scope: Scope, names: set[str], depth: int) -> bool:
    """Some use of `names` in `scope`, or of a value computed from them, may back-propagate them."""
    derived = _computed_from(scope, names)
    if derived & scope.backpropagated() and scope.feeds_backward(names, derived):
        return True
    if depth and any(_stored_for_backward(model, scope, d, depth) for d in derived - names if d.startswith("self.")):
        return True  # a helper storing them in its object, which another of its methods may back-propagate
    for stmt, call in _calls_by_statement(scope):
        if type(call) is not cst.Call:
            continue
        handed = [a for a in call.args if names_in(a.value) & derived and _derived_there(scope, stmt, names_in(
                  a.value) & derived, names, derived)
                  and not (depth == 0 and _detached_before(model, scope, stmt, names_in(a.value) & derived))]
        if not handed or _reads(model, call, derived):
            continue
        func = dotted(call.func)
        callee = model.resolve(scope, func) if func is not None else None
        if callee is None and func is not None and depth < _HELPER_DEPTH:
            callee = _defaulted_method(model, scope, func)
            if callee is None and _passive_elsewhere(model, scope, func, call, handed):
                continue  # a scheduler reading a number; another file's method that keeps it for no backward
            if callee is None and _passive_by_name(model, func, call, handed, depth):
                continue  # `monitor.check(..., history)`: every method of the file's classes of that name plots it
        if callee is None or depth >= _HELPER_DEPTH:
            return True  # a call the analysis cannot follow: what it does with the values is not known
        if any(e.kind is EventKind.BACKWARD for e in callee.events):
            return True  # a helper that back-propagates: the values are kept for it
        params = _parameters_given(callee, call, handed)
        if params is None or _may_backpropagate(model, callee, params, depth + 1):
            return True
    return False


def _calls_by_statement(scope: Scope) -> Iterator[tuple[cst.CSTNode | None, cst.CSTNode]]:
    """Every node of the function, with the simple statement line holding it (None outside one)."""
    todo: list[tuple[cst.CSTNode | None, cst.CSTNode]] = [(None, scope.node)]
    while todo:
        stmt, node = todo.pop()
        yield stmt, node
        line = node if type(node) is cst.SimpleStatementLine else stmt
        todo.extend((line, child) for child in reversed(node.children))


def _detached_before(model: FileModel, scope: Scope, stmt: cst.CSTNode | None, names: set[str]) -> bool:
    """Each of `names` is a running total rebound to a value without a graph before `stmt` (`total =
    total.detach().cpu()` after the batch loop, then `animator.add(total)`): the call gets no kept graph. Only
    rebindings that the accumulations never see count: the total's initialisation reaches them too."""
    # A name the scope assigns is unbound on a path from its entry (a local, or a global of the module body),
    # unless it is a parameter or an attribute.
    if stmt is None:
        return False
    for name in names:
        sums = [a for a in scope.assignments(name) if a.accumulates and a.kind is EventKind.ASSIGN]
        found = scope.reaching_statement(name, stmt)
        if not sums or found is None or not found[0] or found[1] and (name in scope.params or "." in name):
            return False
        before = {id(d) for a in sums for d in scope.reaching(name, a)[0]}
        if any(id(d) in before or not model.kinds.of_def(d, scope).graph_free for d in found[0]):
            return False
    return True


def _derived_there(scope: Scope, stmt: cst.CSTNode | None, used: set[str], names: set[str], derived: set[str]) -> bool:
    """One of `used` holds a value computed from the kept values where `stmt` reads it: a kept name itself, or a
    name one of whose definitions reaching `stmt` reads them (`for v in totals.values()` after the loop does not
    make the loop's own `v` a kept value)."""
    if used & names or stmt is None:
        return True
    for name in used:
        found = scope.reaching_statement(name, stmt)
        if found is None or found[1] and (name in scope.params or "." in name):
            return True  # not known where it comes from
        if any(d.value is None or names_in(d.value) & derived for d in found[0]):
            return True
    return False


def _computed_from(scope: Scope, names: set[str]) -> set[str]:
    """`names` and every name of the scope assigned a value that reads one of them (`out = outputs.pop(0)`, a
    loop variable over them, another list they are appended to)."""
    out = set(names)
    assigns = [(e.target, e.value) for e in scope.events
               if e.scope is scope.node and e.kind in (EventKind.ASSIGN, EventKind.APPEND) and e.target
               and e.value is not None]
    grown = True
    while grown:
        grown = False
        for target, value in assigns:
            if target not in out and names_in(value) & out:
                out.add(target)
                grown = True
    return out


def _reads(model: FileModel, call: cst.Call, derived: set[str]) -> bool:
    """The call reads what it is given and back-propagates nothing: a reader above, or a method of the kept values
    themselves (`outputs.append(...)`, `total.add_(...)`; their `.backward()` is a backward the scope already
    counts). A library's function is named in full through the file's imports (`import torch.distributed as
    dist`: `dist.reduce(total)`, a collective, works on the tensor in place)."""
    func = model.full_name(dotted(call.func) or "")
    if func.startswith("torch.autograd"):
        return False
    if func in SERIALIZERS:
        return True  # `torch.save(state, path)`: written to a file, pickled, not differentiated
    if type(call.func) is cst.Attribute and dotted(call.func.value) in derived:
        return True
    strings = (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)
    if type(call.func) is cst.Attribute and isinstance(call.func.value, strings):
        return True  # `"{:.3f}".format(total)`, `" ".join(...)`: a string's method makes a string
    parts = func.split(".")
    return (parts[-1] in READING_CALLS or (len(parts) > 1 and parts[0] in NUMERIC_MODULES)
            or DISPLAY_METHOD.fullmatch(parts[-1]) is not None)


def _parameters_given(callee: Scope, call: cst.Call, handed: list[cst.Arg], bound: bool = False) -> set[str] | None:
    """The parameters of the helper that receive the arguments `handed` (`bound`: a method called on its object);
    None when one is passed in a way not followed (`*args`, `**kwargs`, more positional arguments than parameters)."""
    names = positional_params(callee.node)
    if bound or type(call.func) is cst.Attribute and (dotted(call.func) or "").startswith("self."):
        names = names[1:]
    positional = [a for a in call.args if a.keyword is None]
    out: set[str] = set()
    for a in handed:
        if a.star:
            return None
        if a.keyword is not None:
            out.add(a.keyword.value)
            continue
        index = positional.index(a)
        if index >= len(names):
            return None
        out.add(names[index])
    return out


def passive_params(model: FileModel, scope: Scope) -> frozenset[str]:
    """The parameters of a function (`self` left out) that it never back-propagates: not itself, not through a
    helper, not by handing them to a call the analysis cannot follow, nor by storing them into its object for
    another of its methods that may (asked of a method of another file's class, `ProjectLookup.passed_on`)."""
    return frozenset(p for p in scope.params if p != "self" and not _may_backpropagate(model, scope, {p}, 1))


def _stored_for_backward(model: FileModel, scope: Scope, name: str, depth: int) -> bool:
    """`name`, an attribute of `self` a method stores the values into, may be back-propagated by a method of its
    class (`def update(self, v): self.last = v` with `def flush(self): self.last.backward()`)."""
    if scope.class_name is None or depth >= _HELPER_DEPTH:
        return True
    attr = ".".join(name.split(".")[:2])
    return any(_may_backpropagate(model, s, {attr}, depth + 1) for s in model.scopes if s.class_name == scope.class_name)


def _maker(model: FileModel, scope: Scope, receiver: str) -> str | None:
    """The class (or factory) an object is made by: known to the receivers (`self.meter = Meter()`), or, for an
    attribute of `self` bound only to a parameter of a method, the class that parameter's default makes or its
    annotation names (`def __init__(self, callback=Callback()): self.callback = callback`)."""
    found = model.receivers.class_of(scope, receiver) or model.receivers.maker_of(scope, receiver)
    if found is not None or not receiver.startswith("self.") or receiver.count(".") != 1 or scope.class_name is None:
        return found
    makers: set[str | None] = set()
    for s in model.scopes:
        if s.class_name != scope.class_name:
            continue
        for a in s.assignments(receiver):
            param = s.params.get(a.value.value) if type(a.value) is cst.Name and a.rebinds else None
            if param is None:
                return None
            default = param.default
            made = dotted(default.func) if type(default) is cst.Call else None
            makers.add(dotted(param.annotation.annotation) if param.annotation is not None else made)
    found = makers.pop() if len(makers) == 1 else None
    head = (found or "").split(".", 1)[0]
    return found if found in model.classes or head in model.imported else None


def _defaulted_method(model: FileModel, scope: Scope, func: str) -> Scope | None:
    """The method of a class of this file that `obj.method(...)` calls, `obj` made by it through a parameter's
    default or annotation (`_maker`; the receivers answer the other cases)."""
    receiver, _, method = func.rpartition(".")
    if not receiver.startswith("self.") or model.receivers.class_of(scope, receiver) is not None:
        return None
    cls = _maker(model, scope, receiver)
    if cls is None or cls not in model.classes:
        return None
    return next((s for s in model.scopes if s.class_name == cls and s.name == method), None)


def _passive_by_name(model: FileModel, func: str, call: cst.Call, handed: list[cst.Arg], depth: int) -> bool:
    """`obj.method(...)` on an object of no known class, where the file's classes define methods of that name and
    none of them may back-propagate what it is handed (a monitor's `check(..., history)` that plots it): the
    method is known by its name in the file, as duck typing would find it."""
    receiver, _, method = func.rpartition(".")
    if not receiver or receiver == "self" or type(call.func) is not cst.Attribute:
        return False
    methods = [s for s in model.scopes if s.class_name is not None and s.name == method]
    if not methods:
        return False
    for m in methods:
        params = _parameters_given(m, call, handed, bound=True)
        if params is None or _may_backpropagate(model, m, params, depth + 1):
            return False
    return True


def _passive_elsewhere(model: FileModel, scope: Scope, func: str, call: cst.Call, handed: list[cst.Arg]) -> bool:
    """The call, which the file cannot follow, does not back-propagate what it is handed: a scheduler's `step(metric)`
    (a name whose role is a scheduler, of no class of the project that acts: `ReduceLROnPlateau` reads a number),
    or a method of another project file's class, or a function of another project file, that neither back-propagates
    its parameters nor hands them on (`meter.update(total)` storing it, `to_numpy(total)`: `ProjectLookup.passed_on`,
    `function_passed_on`)."""
    receiver, _, method = func.rpartition(".")
    if method == "step" and model.role(receiver) is Role.SCHEDULER:
        cls = model.receivers.class_of(scope, receiver)
        return cls not in model.classes and model.external(scope, func) is None
    if model.project is None:
        return False
    if receiver:  # a method of an object another file's class or factory makes
        maker = _maker(model, scope, receiver)
        if maker is None or maker in model.classes:
            return False
        found = model.project.passed_on(maker, method)
    else:  # a function of another project file (`to_numpy(total)`)
        maker = None
        found = None if func in model.classes else model.project.function_passed_on(func)
    if found is None:
        return False
    params, passive = found
    names = list(params[1:] if maker is not None else params)
    positional = [a for a in call.args if a.keyword is None]
    for a in handed:
        if a.star or a.keyword is None and positional.index(a) >= len(names):
            return False
        if (a.keyword.value if a.keyword is not None else names[positional.index(a)]) not in passive:
            return False
    return True


def escapes(model: FileModel, loop: Loop, total: str) -> bool:
    """The total leaves a function that back-propagates nothing itself, nor trains through a helper in the loop that
    sums it (back-propagates and steps: a per-batch training step, or a whole run: an epoch's), so a loss builder whose caller may well
    back-propagate the total; or another method of the class back-propagates it. Gradients taken with
    `torch.autograd.grad(..., create_graph=True)` are differentiable values, not a backward: an unrolled inner
    optimizer returning its iterates is a forward whose caller differentiates them."""
    scope = loop.scope
    trains = loop.of(EventKind.BACKWARD) and loop.of(EventKind.STEP) or loop.of(EventKind.RUN)  # (a run: it trains)
    if all(differentiable_grad(b) for b in scope.own_backwards()) and not trains and any(
            total in scope.depends(r.value) for r in scope.own_returns()):  # type: ignore[arg-type]  # own_returns: each with a value
        return True
    if total.startswith("self."):
        return any(total in s.backpropagated() for s in model.scopes if s.class_name == scope.class_name)
    return False


def differentiable_grad(b: Event) -> bool:
    """`torch.autograd.grad(out, x, create_graph=True)` (not known False): gradients with a graph of their own."""
    return b.variant is BackwardVia.AUTOGRAD_GRAD and type(b.node) is cst.Call and any(
        a.keyword is not None and a.keyword.value == "create_graph" and dotted(a.value) != "False" for a in b.node.args)
