"""Code that cannot run: a call that misses a required argument raises TypeError, so what only that call leads to
never runs. Calling a module runs its class's `__call__`, nn.Module's runs `forward` with the call's arguments:
`model(x)` where `forward(self, x, lengths)` needs two is dead code from there on. The class is known from the
name's definitions (`model = Net(...)`, `self.net = Net()`, through `.to(device)` and `nn.DataParallel(...)`), in
this file or, through the lookup, another of the project (`model = build_model(...)`, a function there returning
such an instance); and a function imported from another project file (`from utils import update_features`, or
through `import *`), judged only where every iteration of a loop calls it (a stale script left behind by a changed
helper). Decorated functions, `*args` or `**kwargs` on either side, and classes with a base outside the
project other than nn.Module's stay unknown: no call is judged on them."""

from __future__ import annotations

from operator import attrgetter

import libcst as cst

from torchlint.analysis.events import AssignForm, Event, EventKind
from torchlint.analysis.exprs import dotted
from torchlint.analysis.flow import ENTRY
from torchlint.analysis.foreign import Signature
from torchlint.analysis.lookup import FileLookup
from torchlint.analysis.scopes import Scope
from torchlint.analysis.semantics import MODULE_BASES, MODULE_METHODS_RETURNING_MODULE, MODULE_WRAPPERS
from torchlint.source.walk import walk

_ACTS = frozenset({EventKind.BACKWARD, EventKind.STEP, EventKind.RUN})
_KIND = attrgetter("kind")


def signature_of(fn: cst.FunctionDef, method: bool) -> Signature | None:
    """How `fn` may be called (`self` left out for a method); None when a decorator may change that."""
    if fn.decorators:
        return None
    p = fn.params
    positional = list(p.posonly_params) + list(p.params)
    if method:
        if not positional:
            return None
        positional = positional[1:]
    star = type(p.star_arg) is cst.Param
    required = sum(1 for a in positional if a.default is None)
    if any(a.default is None for a in positional[required:]):
        return None  # not valid Python
    return Signature(
        tuple(a.name.value for a in positional), required, star,
        tuple(a.name.value for a in p.kwonly_params),
        tuple(a.name.value for a in p.kwonly_params if a.default is None), p.star_kwarg is not None,
    )


def misses_argument(sig: Signature, call: cst.Call) -> bool:
    """Does this call raise TypeError before the callee runs: a required argument not passed, more positional
    arguments than the callee takes, or a keyword it does not know? `*args` or `**kw` in the call: not known."""
    if any(a.star for a in call.args):
        return False
    given = sum(1 for a in call.args if a.keyword is None)
    keywords = {a.keyword.value for a in call.args if a.keyword is not None}
    if given > len(sig.positional) and not sig.star:
        return True
    if any(name not in keywords for name in sig.positional[given:sig.required]):
        return True
    if any(name not in keywords for name in sig.required_keywords):
        return True
    known = set(sig.positional) | set(sig.keywords)
    return not sig.double_star and any(k not in known for k in keywords)


def instance_of(expr: cst.BaseExpression) -> str | None:
    """The class (as written) whose instance `expr` is, when it is a constructor call, through module wrappers
    (`nn.DataParallel(Net(...))`) and methods that hand the module back (`.to(device)`, `.cuda()`)."""
    while type(expr) is cst.Call:
        func = expr.func
        name = dotted(func)
        if type(func) is cst.Attribute and func.attr.value in MODULE_METHODS_RETURNING_MODULE and name is None:
            expr = func.value  # `Net(...).to(device)`
        elif name is not None and (name in MODULE_WRAPPERS or name.rsplit(".", 1)[-1] in MODULE_WRAPPERS):
            if not expr.args or expr.args[0].keyword is not None or expr.args[0].star:
                return None
            expr = expr.args[0].value
        else:
            return name
    return None


def drop_dead(model: FileLookup) -> None:
    """In each scope that back-propagates or steps, drop the events that only a call missing an argument leads to
    (every path from the scope's entry to them passes through it: it raises there first), and the events of a loop
    every iteration of which makes such a call (it raises in the first)."""
    binds: _Binds | None = None
    for scope in model.scopes:
        if _ACTS.isdisjoint(map(_KIND, scope.events)):
            continue  # (read in C: this runs on every scope of every file that is parsed)
        binds = binds or _Binds(model)
        # (the calls written as such: not a closure's call placed at `optimizer.step(closure)`)
        calls = [e for e in scope.raw if e.kind is EventKind.LOCAL_CALL and type(e.node) is cst.Call
                 and e.scope is scope.node and dotted(e.node.func) == e.callee]
        failing = [e for e in calls if _fails(model, binds, scope, e, False)]
        # a loop whose every iteration reaches such a call never completes one: nothing in it runs twice. A call
        # of another project file's function counts only there (a stale script left behind by a changed helper
        # fails in its loop; a setup call that no longer fits its helper may be a refactor under way)
        stale = [e for e in calls if e.loops and not e.guards_within(e.loops[-1]) and _fails(model, binds, scope, e, True)]
        broken = {loop for e in failing + stale for loop in e.loops if not e.guards_within(loop) and not _in_try(loop, e)}
        if not failing and not broken:
            continue
        flow = scope.flow
        dead = frozenset(n for n in (flow.node(e.stmt) for e in failing) if n is not None)
        live = {}
        kept = []
        for e in scope.events:
            if broken and not broken.isdisjoint(e.loops):
                continue
            node = scope.flow_node(e)
            if node is not None and node not in dead:
                if node not in live:
                    live[node] = flow.reaches_avoiding(ENTRY, node, dead)
                if not live[node]:
                    continue
            kept.append(e)
        if len(kept) != len(scope.events):
            scope.events = kept
            scope.forget()


def _in_try(loop: cst.CSTNode, e: Event) -> bool:
    """The call sits in the body of a `try` inside `loop`: a handler may catch what it raises."""
    return any(type(t) is cst.Try and any(n is e.node for n in walk(t.body)) for t in walk(loop))


class _Binds:
    """The file's plain assignments, by the class whose methods make them (None: functions and the module body)
    and target: what a name or `self.x` may be bound to, and whether a name is ever bound at all."""

    def __init__(self, model: FileLookup) -> None:
        self.model = model
        self.by: dict[tuple[str | None, str], list[Event]] = {}
        self.of: dict[str, list[Event]] = {}  # by target alone
        for s in model.scopes:
            for d in s.raw:
                if d.kind is EventKind.ASSIGN and d.target and d.scope is s.node:
                    self.by.setdefault((s.class_name, d.target), []).append(d)
                    self.of.setdefault(d.target, []).append(d)
        self.targets = frozenset(self.of)
        self._built: dict[str, bool] = {}

    def may_build(self, name: str) -> bool:
        """Is `name` bound somewhere in the file to an instance of a class of the file or an imported one? Asked
        before the definitions reaching a call are (most calls are of names bound to nothing of the kind)."""
        found = self._built.get(name)
        if found is None:
            classes = {instance_of(d.value) for d in self.of.get(name, ()) if d.value is not None}
            found = self._built[name] = any(
                c is not None and (c in self.model.classes or c.split(".", 1)[0] in self.model.imported)
                for c in classes)
        return found


def _fails(model: FileLookup, binds: _Binds, scope: Scope, e: Event, imported: bool) -> bool:
    name = e.callee or ""
    if not name or name.count(".") > (1 if name.startswith("self.") else 0):
        return False
    if imported:  # only a function imported from another project file
        sig = _imported_signature(model, binds, name)
    else:
        sig = _signature(model, binds, scope, name, e)
    return sig is not None and misses_argument(sig, e.node)  # type: ignore[arg-type]  # a Call (above)


def _imported_signature(model: FileLookup, binds: _Binds, name: str) -> Signature | None:
    """How a function of another project file bound by an import (`import *` too) may be called."""
    if "." in name or model.project is None or name in model.classes or name in binds.targets or not (
            name in model.imported or name in model.project.star_names()):
        return None
    return model.project.function_call(name)


def _signature(model: FileLookup, binds: _Binds, scope: Scope, name: str, at: Event) -> Signature | None:
    """The signature a call of `name` runs: a function of the file defined once, or the instance's `__call__` /
    `forward` for an object whose class is known."""
    if "." not in name:
        local = model.resolve(scope, name)
        if local is not None:
            # defined once, and never rebound (`f = functools.partial(f, w)` fills arguments) nor shadowed
            same = [s for s in model.scopes if s.name == name and s.class_name is None]
            rebound = name in scope.params or name in model.imported or name in binds.targets
            return signature_of(local.node, False) if len(same) == 1 and not rebound \
                and type(local.node) is cst.FunctionDef else None
        if name in model.classes or name in model.imported or not binds.may_build(name):
            return None  # a constructor (not followed), a builtin, a parameter, a name bound to no instance
    if name.startswith("self."):
        # an attribute: every assignment of it in the methods of the class (`self.net = Net(...)`)
        defs: tuple[Event, ...] = tuple(binds.by.get((scope.class_name, name), ())) if scope.class_name else ()
    else:
        defs, outside = scope.reaching(name, at)
        if outside:
            return None
    if not defs:
        return None
    classes = {instance_of(d.value) if d.kind is EventKind.ASSIGN and d.variant is AssignForm.PLAIN
               and d.value is not None else None for d in defs}
    if len(classes) != 1:
        return None
    found = classes.pop()
    return _instance_signature(model, found) if found is not None else None


def _instance_signature(model: FileLookup, cls: str) -> Signature | None:
    """What calling an instance of `cls` (as this file names it) runs: the first `__call__` along its classes,
    else, for a module, the first `forward`. A class of another project file is asked of the lookup."""
    forward: Signature | None = None
    seen = set()
    while cls not in seen:
        seen.add(cls)
        node = model.classes.get(cls)
        if node is None:
            if model.project is None or cls.split(".", 1)[0] not in model.imported:
                return None
            return model.project.instance_call(cls, forward)
        methods = {s.name: s for s in model.scopes if s.class_name == cls and type(s.node) is cst.FunctionDef}
        if "__call__" in methods:
            return signature_of(methods["__call__"].node, True)  # type: ignore[arg-type]  # a FunctionDef
        if forward is None and "forward" in methods:
            forward = signature_of(methods["forward"].node, True)  # type: ignore[arg-type]
            if forward is None:
                return None  # a decorated forward
        bases = [dotted(b.value) if b.keyword is None and not b.star else None for b in node.bases]
        if len(bases) != 1 or bases[0] is None:
            return None  # no base (not a module), several (an order not followed), or not a plain name
        base = bases[0]
        if base.rsplit(".", 1)[-1] in MODULE_BASES and base not in model.classes:
            return forward
        cls = base
    return None
