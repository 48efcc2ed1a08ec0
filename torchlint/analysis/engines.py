"""The loops a framework runs around a function of the file: ignite's `Engine(process_function)` calls that function
once per iteration and never touches the gradients, so the function is a whole iteration (a `Loop` with no head of
its own), for rules that ask what an iteration clears. Read only for files that import such an engine.
Likewise the loops of the project's other files that run a training-step method of a class of the file once per
iteration (`run_by_callers`), asked by a rule only once the method shows its premise; and what a module's
`forward`, run once per step by the loop that calls the model, keeps in the module (`kept_by_forward`)."""

from __future__ import annotations

import re

import libcst as cst

from torchlint.analysis.events import Event, EventKind
from torchlint.analysis.exprs import argument_for, dotted, keyword, last_part, names_in, positional_params
from torchlint.analysis.foreign import CallerUse
from torchlint.analysis.loops import Loop
from torchlint.analysis.model import FileModel
from torchlint.analysis.prescan import scan_imports
from torchlint.analysis.scopes import Scope
from torchlint.analysis.semantics import GRAD_MODE_SWITCHES, ITERATION_ENGINES
from torchlint.analysis.vkind import VKind
from torchlint.source.walk import walk

_PROCESS_PARAM = "process_function"


def engine_iterations(model: FileModel) -> list[Loop]:
    """The functions of the file an iteration engine runs per batch: the process function handed to `Engine(...)`
    (or to a class of the file deriving from it, or to `super().__init__(...)` in such a class): a function
    (`Engine(update)`), a method (`Engine(self._update)`, `MyEngine(MyEngine.train, ...)`)."""
    if "ignite" not in model.text:
        return []
    imports = scan_imports(model.text)
    engines = {local for local, imp in imports.items() if imp.name and (imp.module, imp.name) in ITERATION_ENGINES}
    if not engines:
        return []
    subclasses = _subclasses(model, engines)
    found: dict[int, Scope] = {}
    for holder in model.scopes:
        for call in walk(holder.node):
            if type(call) is cst.Call and (scope := _handed(model, call, holder.class_name, engines, subclasses)):
                found[id(scope)] = scope
    return [Loop(None, scope, scope.events) for scope in found.values()]  # type: ignore[arg-type]  # no head


def _handed(model: FileModel, call: cst.Call, within: str | None, engines: set[str], subclasses: set[str]) -> Scope | None:
    """The function of the file `call` hands to an iteration engine as its process function, if it does."""
    callee = dotted(call.func)
    if not (callee in engines or callee in subclasses or within in subclasses and _super_init(call)):
        return None
    first = call.args[0] if call.args and not call.args[0].keyword and not call.args[0].star else None
    handed = keyword(call, _PROCESS_PARAM) or first
    return _function(model, dotted(handed.value), within) if handed is not None else None


def _super_init(call: cst.Call) -> bool:
    """`super().__init__(...)`."""
    func = call.func
    return (type(func) is cst.Attribute and func.attr.value == "__init__" and type(func.value) is cst.Call
            and dotted(func.value.func) == "super")


def _subclasses(model: FileModel, engines: set[str]) -> set[str]:
    """The classes of the file that derive from an iteration engine, directly or through the file's."""
    out: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, cls in model.classes.items():
            if name not in out and any((b := dotted(base.value)) in engines or b in out for base in cls.bases):
                out.add(name)
                changed = True
    return out


def _function(model: FileModel, name: str | None, within: str | None) -> Scope | None:
    """The function or method `name` names: `update`, `self._update` (a method of `within`), `Cls.train`."""
    if name is None:
        return None
    if "." not in name:  # a function of the module, or one nested in the function that builds the engine
        found = [s for s in model.scopes if s.class_name is None and (s.name == name or s.name.endswith(f".{name}"))]
        return next((s for s in found if s.name == name), found[0] if len(found) == 1 else None)
    owner, _, method = name.rpartition(".")
    cls = within if owner == "self" else last_part(owner)
    return next((s for s in model.scopes if s.class_name == cls and last_part(s.name) == method), None)


def run_by_callers(model: FileModel, scope: Scope) -> list[CallerUse]:
    """The calls in the project's other files that run a method of a class of the file once per iteration of a loop
    (`ProjectLookup.runs`): on an instance of the class, or through another method of the class that no function of
    the file calls either (`__call__` dispatching to `self._softmax(...)`). None when a function of the file calls it
    otherwise (the file's own loops answer for it), nor without a project."""
    if model.project is None or scope.class_name is None or "." in scope.name:
        return []
    entries = [scope]
    callers = {id(c): c for c, _ in model.callers_naming(scope, "self")}
    if callers:
        hop = list(callers.values())
        if any(c.class_name != scope.class_name or "." in c.name or c is scope or model.callers_naming(c, "self")
               for c in hop):
            return []
        entries = hop
    return [u for e in entries for u in model.project.runs(f"{scope.class_name}.{e.name}") if u.looped]


def outputs_kept(model: FileModel) -> list[tuple[Scope, Scope, cst.CSTNode]]:
    """ignite's handlers of `Events.ITERATION_COMPLETED` that keep the engine's output in what outlives them: the
    handler (decorated with `@trainer.on(Events.ITERATION_COMPLETED)` or given to `add_event_handler`), the process
    function whose return value `engine.state.output` is, and the statement that appends it to (or adds it into) a
    name the handler does not bind (a list of the enclosing function, a global, an attribute). Every iteration's
    output stays referenced."""
    loops = engine_iterations(model)
    if not loops or "ITERATION_COMPLETED" not in model.text:
        return []
    process = loops[0].scope  # (the first engine's: which engine a handler is registered on is not followed)
    out = []
    for handler in _iteration_handlers(model):
        for e in handler.events:
            if e.scope is not handler.node or e.value is None or e.target is None:
                continue
            if not (e.kind is EventKind.APPEND or e.accumulates) or e.target in handler.params:
                continue
            if any(a.rebinds and not a.accumulates for a in handler.assignments(e.target)):
                continue  # a buffer of one call
            if any(d.endswith(".state.output") for d in names_in(e.value)):
                out.append((handler, process, e.stmt))
    return out


def _iteration_handlers(model: FileModel) -> list[Scope]:
    """The functions of the file registered for `Events.ITERATION_COMPLETED` (every k iterations included)."""
    names: set[str] = set()
    for node in walk(model.module, descend_scopes=True):
        if type(node) is cst.FunctionDef:
            for dec in node.decorators:
                d = dec.decorator
                if (type(d) is cst.Call and type(d.func) is cst.Attribute and d.func.attr.value == "on" and d.args
                        and "ITERATION_COMPLETED" in (dotted(_event(d.args[0].value)) or "")):
                    names.add(node.name.value)
        elif (type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == "add_event_handler"
              and len(node.args) >= 2 and "ITERATION_COMPLETED" in (dotted(_event(node.args[0].value)) or "")):
            handed = dotted(node.args[1].value)
            if handed is not None:
                names.add(last_part(handed))
    return [s for s in model.scopes if type(s.node) is cst.FunctionDef and s.node.name.value in names]


def _event(value: cst.BaseExpression) -> cst.BaseExpression:
    """`Events.ITERATION_COMPLETED(every=10)` -> `Events.ITERATION_COMPLETED`."""
    return value.func if type(value) is cst.Call else value


def kept_by_forward(model: FileModel) -> list[tuple[Scope, Event]]:
    """The appends (and additions) of a module class's `forward` into an attribute of `self` that keep a value
    carrying a graph across calls: `self.activations.append(h)`, `self.penalty = self.penalty + h.abs().mean()`.
    The loop that calls the model runs `forward` once per training step, so the module keeps every step's graph.
    Only in a file that builds the class and back-propagates in a loop; not under a guard (`if self.keep:`) or
    `no_grad`; not an attribute bound again by anything but `__init__`, emptied anywhere in the file
    (`model.activations = []`, `.clear()`, `del x.acts[:]`), or back-propagated by any function of the file (an
    auxiliary loss the loop adds into the loss it back-propagates). TL007."""
    if not any(loop.backwards_into_grad() for loop in model.loops):
        return []
    found = []
    for scope in model.scopes:
        cls = scope.class_name
        if scope.name != "forward" or not cls or not model.is_module_class(cls) or \
                re.search(rf"(?<![\w.]){re.escape(cls)}\s*\(", model.text) is None:
            continue
        for e in scope.events:
            target = e.target or ""
            if (e.scope is not scope.node or e.guards or "no_grad" in e.contexts or e.value is None
                    or not (e.kind is EventKind.APPEND or e.accumulates)
                    or not target.startswith("self.") or target.count(".") != 1):
                continue
            if model.kinds.of(e.value, scope, e) is VKind.GRAPH and not _emptied(model, scope, target):
                found.append((scope, e))
    return found


def _emptied(model: FileModel, forward: Scope, target: str) -> bool:
    """Is `self.<attr>` bound again (by a method of the class other than `__init__`, or by `forward` itself),
    emptied or bound through another name anywhere in the file, or back-propagated by a function of the file?"""
    attr = re.escape(target[5:])
    for other in model.scopes:
        if other.class_name == forward.class_name and other.name != "__init__" and any(
                e.target == target and e.rebinds for e in other.events if e.scope is other.node):
            return True
        if any(n == target[5:] or n.endswith(f".{target[5:]}") for n in other.backpropagated()):
            return True
    emptying = (rf"(?<!self)\.{attr}\s*=(?!=)|\.{attr}\s*\[\s*:\s*\]\s*=|\.{attr}\s*\.\s*(?:clear|pop|popleft)\s*\("
                rf"|\bdel\s+[\w.]*\.{attr}\b")
    return re.search(emptying, model.text) is not None


def training_callers(model: FileModel, callee: Scope) -> list[Scope]:
    """The functions that call `callee` inside a loop that back-propagates; empty unless every call of it runs
    outside `no_grad` and only keeps the value it returns (never back-propagates it)."""
    out = []
    for caller in model.scopes:
        for e in caller.raw:
            if e.kind is not EventKind.LOCAL_CALL or model.resolve(caller, e.callee or "") is not callee:
                continue
            if "no_grad" in e.contexts or switches_grad(caller):
                return []
            body: list = list(getattr(e.stmt, "body", ()))
            targets = [t.target for small in body if type(small) is cst.Assign for t in small.targets]
            # (or read by a call of the statement, `print(validate(...))`, that back-propagates nothing)
            shown = not targets and len(body) == 1 and type(body[0]) is cst.Expr and not any(
                type(n) is cst.Attribute and n.attr.value in ("backward", "manual_backward") for n in walk(body[0]))
            if not targets and not shown or any(names_in(t) & caller.backpropagated() for t in targets):
                return []  # handed on as it is, or back-propagated: a loss builder, not an evaluation
            if any(lp.scope is caller and lp.node in e.loops and lp.of(EventKind.BACKWARD) for lp in model.loops):
                out.append(caller)
    return out


def switches_grad(scope: Scope) -> bool:
    """The function turns gradients off itself (`torch.set_grad_enabled(False)`, a `no_grad` it calls)."""
    return any(type(n) is cst.Call and (dotted(n.func) or "").rsplit(".", 1)[-1] in GRAD_MODE_SWITCHES
               for n in walk(scope.node))


def called_per_run(model: FileModel, callee, optimizers: list[str]) -> str | None:
    """The function holding a call of `callee` inside a loop of the file that steps the same optimizer on every call:
    for one of the `optimizers` the callee steps, it hands a name bound before that loop, or the callee steps one it
    is neither handed nor binds (`_outlives_calls`). An epoch function run by the epoch loop, not a fold's new run."""
    params = positional_params(callee.node)
    for scope, e in model.calls_of(callee):
        if not e.loops or type(e.node) is not cst.Call:
            continue
        for opt in optimizers:
            if opt not in params:
                if _outlives_calls(scope, e, callee, opt):
                    return scope.name
                continue
            arg = argument_for(e.node, params[1:] if params[:1] == ["self"] else params, opt)
            if type(arg) is not cst.Name:
                continue
            defs, _ = scope.reaching(arg.value, e)
            if all(e.loops[-1] not in d.loops for d in defs):
                return scope.name
    return None


def _outlives_calls(caller, call: Event, callee, opt: str) -> bool:
    """An optimizer the callee steps without being handed it or binding it (a module's, or `self.optimizer` bound by
    another method) that the calling loop does not bind either: every call of the loop steps the same one."""
    root = opt.split(".", 1)[0]
    if root in positional_params(callee.node) and root != "self" or callee.assignments(opt) or callee.assignments(root):
        return False
    return not any(call.loops[-1] in d.loops for d in caller.assignments(opt))
