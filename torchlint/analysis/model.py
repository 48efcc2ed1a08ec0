"""The file model: one pass over a module builds, per function and for the module body, the ordered events of its
loops (the walker's raw events, classified, with helpers' events placed at their calls, from this file or, through
the project's lookup, from another); rules ask questions of it instead of walking the tree themselves."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.arity import drop_dead
from torchlint.analysis.classify import classify
from torchlint.analysis.cmdline import Options
from torchlint.analysis.dispatch import Methods, hand_written
from torchlint.analysis.events import (
    CLEARING_DEPTH, INLINE_DEPTH, AssignForm, CallVia, Event, EventKind, Guard, ResetOf, ZeroGradOf, variant_named,
)
from torchlint.analysis.exprs import dotted, positional_params
from torchlint.analysis.foreign import ProjectLookup, Resolved
from torchlint.analysis.kinds import KindInference
from torchlint.analysis.loops import Loop
from torchlint.analysis.names import Role, Symbols
from torchlint.analysis.receivers import Receivers
from torchlint.analysis.scopes import Scope
from torchlint.analysis.semantics import MODULE_BASES
from torchlint.analysis.summaries import Summary, summarize
from torchlint.analysis.walker import EventWalker


class FileModel:
    """Everything rules may ask about one file."""

    def __init__(self, module: cst.Module, text: str = "", project: ProjectLookup | None = None,
                 whole_text: str | None = None) -> None:
        self.module = module
        self.project = project  # the other files, as this file imports them (torchlint.project); None: alone
        self.project_modules = project.modules() if project is not None else set()
        self.resolved_calls: set[int] = set()  # calls answered by another file's exports (not unknown calls)
        self._foreign: dict[tuple[str, str], Scope] = {}
        self._assigned: dict[str, frozenset[str]] = {}  # _assigned_in
        self.text = text  # the source, for cheap textual questions (is `total.item()` used anywhere?)
        self.whole_text = whole_text or text  # the same before `prune` blanked functions that cannot hold an event
        self.symbols = Symbols()
        self._kinds: KindInference | None = None
        self._options: Options | None = None
        self._classified: dict[int, Event | None] = {}
        self._expanded: dict[tuple, list[Event]] = {}  # a helper's events, expanded once per depth and call chain
        walker = EventWalker(self.project_modules, Scope, project.module_files() if project is not None else set())
        walker.walk_module(module)
        self.scopes: list[Scope] = walker.scopes  # type: ignore[assignment]  # made with scope_type=Scope
        self._by_node: dict[cst.CSTNode | None, Scope] = {s.node: s for s in self.scopes}  # asked with None too
        # id(node) -> index of the module-level statement holding it (see torchlint.source.positions)
        self.top_of = walker.top_of
        self.statement_of = walker.statement_of
        self.classes = walker.classes
        self.imported, self.imported_as = walker.imported, walker.imported_as  # import-bound names; their full names
        for scope in self.scopes:
            for e in scope.raw:
                if e.kind is EventKind.ASSIGN and e.rebinds and e.target and e.value:  # `=`, unpacking
                    self.symbols.record(e.target, e.value, first=e.variant is not AssignForm.UNPACK)
        stmt_scope: dict[int, Scope] = {}
        for scope in self.scopes:
            scope.stmt_scope = stmt_scope
            scope.resolved_calls = self.resolved_calls
            for e in scope.raw:
                stmt_scope[id(e.stmt)] = scope
        self._summaries: dict[int, Summary] = {}
        self._functions = {s.name: s for s in self.scopes if s.class_name is None and "." not in s.name}
        self._methods = Methods(self.scopes, self.classes)
        self._forwards = any(name == "forward" for _, name in self._methods.own)  # a class of the file defines one
        self.receivers = Receivers(self.scopes, self.classes, self.imported, project,
                                   project.star_names() if project is not None else frozenset())
        # A method call of an object becomes a call event where its class is known and defines or inherits it.
        for scope, index, event, method in reversed(walker.object_calls):  # type: ignore[assignment]  # Scopes, as above
            local = self._object_method(scope, event.callee or "")
            found = None if local is not None or self.project is None else self._object_external(
                scope, event.callee or "")
            if local is None and found is None:
                continue
            if method is not None and self.classify(method) is not None:
                # `optimizer.step()`, `scaler.update()`: understood by what the receiver's name holds, unless the
                # object's own class says what it does: a wrapper whose step() steps the optimizer it holds is
                # an optimizer step, whatever it is called (`scheduler = LRScheduler(optimizer)`)
                if not self._steps_or_clears(local, found) or scope.raw[index - 1] is not method:
                    continue
                scope.raw[index - 1] = event
            else:
                scope.raw.insert(index, event)
            stmt_scope[id(event.stmt)] = scope
        for scope in self.scopes:
            scope.events = self._expand(scope, 0, frozenset())
            for i, e in enumerate(scope.events):
                # Each event object sits in one scope's list (inlined ones are copies): number it in place.
                object.__setattr__(e, "seq", i)
        drop_dead(self)  # what only a call missing an argument leads to never runs
        self.loops: list[Loop] = []
        for scope in self.scopes:
            # Only the scope's own loops: a helper's loops belong to the helper's scope.
            seen: dict[cst.CSTNode, list[Event]] = {loop: [] for e in scope.raw for loop in e.loops}
            for e in scope.events:
                for loop in e.loops:
                    if loop in seen:
                        seen[loop].append(e)
            self.loops.extend(Loop(node, scope, evs) for node, evs in seen.items() if evs)

    def release(self) -> None:
        """Once the rules are done: the cycles the model holds (its scopes share a map back to themselves, its kinds
        point back at it) are broken, so that the file's tree and model go at once, freed by their reference counts,
        and the cycle collector need not walk them."""
        for scope in self.scopes:
            scope.stmt_scope.clear()
        self._kinds = None

    @property
    def options(self) -> Options:
        """The script's command-line options and their defaults (`args.steps` of `parser.parse_args()`)."""
        if self._options is None:
            self._options = Options(self.module, self.text)
        return self._options

    @property
    def kinds(self) -> KindInference:
        """The kinds of the file's values (`kinds.of(expr, scope, at)`), inferred on demand."""
        if self._kinds is None:
            self._kinds = KindInference(self)
        return self._kinds

    def is_module_class(self, name: str, _seen: frozenset[str] = frozenset()) -> bool:
        """A class of this file that derives from nn.Module (directly or through another class of the file)."""
        cls = self.classes.get(name)
        if cls is None or name in _seen:
            return False
        for base in cls.bases:
            base_name = dotted(base.value) or ""
            last = base_name.rsplit(".", 1)[-1]
            if last in MODULE_BASES:
                return True
            if self.is_module_class(base_name, _seen | {name}):
                return True
            if self.project is not None and base_name not in self.classes and self.project.module_base(base_name):
                return True
        return False

    def step_bodies(self) -> list[Loop]:
        """A function that back-propagates outside any loop of its own and steps an optimizer (an optimizer
        wrapper's `step(loss)`, an agent's `_train(batch)`) runs once per training step of whatever loop calls it,
        in this file or another: each, as one iteration of that loop (a Loop with no head, `node` None), for rules
        whose question is about one iteration's order. Its events in loops of its own are in those loops. Computed
        once per model (several rules ask)."""
        bodies = self.__dict__.get("_step_bodies")
        if bodies is None:
            bodies = self.__dict__["_step_bodies"] = [
                Loop(None, scope, scope.events) for scope in self.scopes  # type: ignore[arg-type]  # no head
                if type(scope.node) is cst.FunctionDef and any(e.kind is EventKind.BACKWARD and not e.loops
                                                               for e in scope.events)
                and any(e.kind is EventKind.STEP for e in scope.events)]
        return bodies

    def full_name(self, name: str) -> str:
        """A dotted name read through the file's imports (`dist.reduce` with `import torch.distributed as dist`:
        `torch.distributed.reduce`); a name the file does not import stays as written."""
        head, dot, rest = name.partition(".")
        return self.imported_as.get(head, head) + dot + rest

    def role(self, name: str | None) -> Role:
        """What the name holds among optimizer, scheduler, GradScaler, accelerator, engine (`names.Role`)."""
        return self.symbols.role(name)

    def scope_of(self, event: Event) -> Scope:
        return self._by_node[event.scope]

    def scope_at(self, node: cst.CSTNode | None) -> Scope | None:
        """The scope a node defines, if it is one of this file's (an event placed from another file has none)."""
        return self._by_node.get(node)

    def callers_naming(self, scope: Scope, name: str) -> list[tuple[Scope, str | None]]:
        """For each call of `scope`'s function in this file: the calling scope and its name for `name` (a parameter
        becomes the argument passed for it; None when the caller has no name for it)."""
        params = positional_params(scope.node)
        return [(caller, _mapped(name, _positional(params, e), e)) for caller, e in self.calls_of(scope)]

    def calls_of(self, scope: Scope) -> list[tuple[Scope, Event]]:
        """Each call of `scope`'s function in this file: the calling scope and its LOCAL_CALL event."""
        return [(caller, e) for caller in self.scopes for e in caller.raw
                if e.kind is EventKind.LOCAL_CALL and self.resolve(caller, e.callee or "") is scope]

    def resolve(self, caller: Scope, callee: str) -> Scope | None:
        if callee.startswith("self.") and callee.count(".") == 1:
            return self._methods.of_self(caller.class_name, callee[5:])
        if "." in callee:
            return self._object_method(caller, callee)
        local = caller.local_defs.get(callee)
        if local is not None:
            return self._by_node.get(local)
        return self._functions.get(callee)

    def _made_closure(self, caller: Scope, factory: str) -> Scope | None:
        """The nested function a factory of the file returns (`def make_closure(...): def closure(): ...;
        return closure`), when it returns exactly one; None otherwise."""
        made = self.resolve(caller, factory)
        if made is None:
            return None
        nested = {made.local_defs.get(r.value.value) for r in made.raw
                  if r.kind is EventKind.RETURN and type(r.value) is cst.Name}
        if len(nested) != 1 or None in nested:
            return None
        return self._by_node.get(nested.pop())

    def _named_closure(self, caller: Scope, name: str) -> Scope | None:
        """`closure = self.make_closure(x, y)` then `optimizer.step(closure)`: the closure a factory of the file
        returns, when every assignment of the name in the caller is a call of that one factory."""
        made = {dotted(a.value.func) for a in caller.raw
                if a.kind is EventKind.ASSIGN and a.target == name and type(a.value) is cst.Call}
        if len(made) != 1 or any(a.kind is EventKind.ASSIGN and a.target == name and type(a.value) is not cst.Call
                                 for a in caller.raw):
            return None
        factory = made.pop()
        return self._made_closure(caller, factory) if factory is not None else None

    def _detached_through_loop_variable(self, scope: Scope, reset: Event) -> list[Event]:
        """`for s in state: s.detach_()` detaches the tensors of `state` in place: a RESET of `state` too."""
        out = []
        for a in scope.raw:
            if (a.kind is EventKind.ASSIGN and a.variant is AssignForm.FOR and a.target == reset.target
                    and a.stmt in reset.loops and a.value is not None):
                container = dotted(a.value)
                if container is not None:
                    out.append(reset.but(target=container, variant=ResetOf.ITEMS))
        return out

    def _inherited(self, scope: Scope, callee: str) -> bool:
        """`self.name(...)` may be a method inherited from a class of another file: the class has such a base,
        and `name` is not an attribute the file assigns (`self.net = ...` makes `self.net(x)` a module call)."""
        cls = self.classes.get(scope.class_name or "")
        if cls is None:
            return False
        if callee in self._assigned_in(scope.class_name or ""):
            return False
        for base in cls.bases:
            name = dotted(base.value) or ""
            last = name.rsplit(".", 1)[-1]
            if last not in ("object", "Module", "ABC") and name not in self.classes:
                return True
        return False

    def _assigned_in(self, class_name: str) -> frozenset[str]:
        """Every name the methods of a class assign (`self.net = ...`), computed once per class."""
        found = self._assigned.get(class_name)
        if found is None:
            found = self._assigned[class_name] = frozenset(
                a.target for s in self.scopes if s.class_name == class_name for a in s.raw
                if a.kind is EventKind.ASSIGN and a.target
            )
        return found

    def _expand(self, scope: Scope, depth: int, active: frozenset) -> list[Event]:
        out: list[Event] = []
        for e in scope.raw:
            if e.kind is EventKind.LOCAL_CALL and e.variant is None:
                e = self._forward_call(scope, e)
            if e.kind is EventKind.LOCAL_CALL:
                if e.variant is CallVia.FACTORY:
                    callee = self._made_closure(scope, e.callee or "")
                    if callee is None:
                        continue  # `scaler.step(self.get_optimizer())`: not a closure the file builds
                else:
                    callee = self.resolve(scope, e.callee or "")
                    if callee is None and e.variant is CallVia.CLOSURE:
                        callee = self._named_closure(scope, e.callee or "")
                if callee is None and self.project is not None and e.variant is not CallVia.CLOSURE:
                    found = self.external(scope, e.callee or "")
                    if found is not None:
                        out.extend(self._place_external(scope, e, found))
                        continue
                if callee is None:
                    if e.variant is CallVia.MODULE and self.project is not None and self.project.inert(e.callee or ""):
                        self.resolved_calls.add(id(e.node))  # known to leave gradients as they are
                        continue
                    if e.variant in (CallVia.CLOSURE, CallVia.MODULE, CallVia.OBJECT):
                        # `scaler.step(opt)`: the argument was not a closure after all; `utils.f(...)` that is not
                        # a function of the project: a method call like any other (Loop.handed_to_unknown)
                        continue
                    if e.callee == "self.zero_grad" and self.is_module_class(scope.class_name or ""):
                        continue  # nn.Module's own zero_grad: its METHOD event clears the module's gradients
                    if "zero_grad" in (e.callee or "").rsplit(".", 1)[-1]:
                        # `zero_grad(params)`, `self.zero_grad()` of a base class: clears the gradients it names
                        out.append(e.but(kind=EventKind.ZERO_GRAD, variant=ZeroGradOf.PARAM))
                    elif not (e.callee or "").startswith("self.") or self._inherited(scope, e.callee or ""):
                        out.append(e.but(kind=EventKind.OPAQUE))
                    continue
                if depth >= INLINE_DEPTH + CLEARING_DEPTH or callee.node in active:
                    continue
                clearing_only = depth >= INLINE_DEPTH  # past the inline depth: only what the helper clears
                if e.variant is CallVia.OBJECT and not clearing_only:
                    self.resolved_calls.add(id(e.node))
                summary = self.summary(callee)
                trains = summary.trains
                if trains and clearing_only:
                    continue
                if trains:
                    # A run of its own: the caller sees it as one event at the call, per optimizer it steps.
                    out.extend(_runs(e, sorted(summary.steps), positional_params(callee.node), same_file=True))
                key = (id(callee.node), depth + 1, active | {scope.node})
                inner_events = self._expanded.get(key)
                if inner_events is None:
                    inner_events = self._expanded[key] = self._expand(callee, depth + 1, active | {scope.node})
                for inner in inner_events:
                    if trains and inner.loops:
                        continue  # a training run of its own: its loop is checked in its scope, not spliced here
                    if clearing_only and inner.kind is not EventKind.ZERO_GRAD:
                        continue
                    if inner.kind in (EventKind.ASSIGN, EventKind.APPEND, EventKind.RESET, EventKind.FAKE_RESET,
                                      EventKind.RETURN):
                        continue  # the callee's own names mean nothing in the caller
                    shift = len(e.loops)
                    mapped = {}
                    if inner.kind is EventKind.RUN:
                        # a run the helper starts steps what the caller passed for the helper's parameter
                        callee_params = _positional(positional_params(callee.node), e)
                        mapped["target"] = _mapped(inner.target, callee_params, e, same_file=True)
                    if inner.kind is EventKind.ZERO_GRAD and _runs_forward(e):
                        # `self.zero_grad()` in the forward of `model(x)`: the caller's `model.zero_grad()`
                        mapped["target"] = _mapped(inner.target, [], e, same_file=True)
                    out.append(inner.but(
                        loops=e.loops + inner.loops,
                        guards=e.guards + tuple(Guard(g.test, g.negated, g.depth + shift) for g in inner.guards),
                        contexts=e.contexts + inner.contexts,
                        inlined_from=inner.inlined_from or e.node,
                        path=(e.stmt,) + inner.path,
                        **mapped,
                    ))
            elif e.kind is EventKind.METHOD:
                classified = self.classify(e)
                if classified is not None:
                    out.append(classified)
                    if classified.kind is EventKind.RESET and classified.variant is None:
                        out.extend(self._detached_through_loop_variable(scope, classified))
            else:
                out.append(e)
        return out

    def _forward_call(self, scope: Scope, e: Event) -> Event:
        """`model(x)`, `self.net(x)` where the object's class is known (receivers) and is not a function of the
        file: calling a module runs its `forward`, so the call is the method call `model.forward(x)`."""
        name = e.callee or ""
        if not name or not (self._forwards or self.project) or self.resolve(scope, name) is not None or (
                name.count(".") != (1 if name.startswith("self.") else 0)):
            return e
        cls = self.receivers.class_of(scope, name)
        if cls is None:
            return e
        forward = e.but(callee=f"{name}.forward", variant=CallVia.OBJECT)
        if self._object_method(scope, forward.callee or "") is not None:
            return forward if self.is_module_class(cls) else e
        return forward if self.project is not None and self._object_external(scope, forward.callee or "") else e

    def external(self, scope: Scope, callee: str) -> Resolved | None:
        """A function or inherited method of another project file that the call `callee(...)` reaches."""
        if self.project is None:
            return None
        if callee.startswith("self.") and callee.count(".") == 1:
            if not self._inherited(scope, callee):
                return None
            cls = self.classes.get(scope.class_name or "")
            bases = [b for b in (dotted(base.value) for base in cls.bases) if b] if cls is not None else []
            return self.project.method(bases, callee[5:])
        found = self.project.function(callee) if not callee.startswith("self.") else None
        return found if found is not None else self._object_external(scope, callee)

    def _steps_or_clears(self, local: Scope | None, found: Resolved | None) -> bool:
        """The method steps an optimizer or clears gradients (per batch: a run of its own is not a wrapper), or is
        a method of an optimizer written by hand in the file that reads no gradient (`hand_written`)."""
        if local is not None:
            summary = self.summary(local)
            return (bool(summary.steps) or bool(summary.zeroes)) and not summary.trains or hand_written(self.classes, local)
        assert found is not None
        exp = found.export
        return not exp.trains and (bool(exp.steps) or exp.zeroes or any(
            ev.kind in ("step", "zero_grad") for ev in exp.events))

    def _object_method(self, scope: Scope, callee: str) -> Scope | None:
        """`obj.name(...)` where `obj` is an instance of a class of this file that defines `name` (itself or
        through a base of the file)."""
        receiver, _, name = callee.rpartition(".")
        cls = self.receivers.class_of(scope, receiver)
        return self._methods.inherited(cls, name) if cls in self.classes else None

    def _object_external(self, scope: Scope, callee: str) -> Resolved | None:
        """`obj.name(...)` where `obj` is an instance of a class of another project file (or of a class of this
        file whose base there defines `name`)."""
        receiver, _, name = callee.rpartition(".")
        cls = self.receivers.class_of(scope, receiver)
        if cls is None or self.project is None:
            return None
        if cls in self.classes:
            bases = [b for b in (dotted(base.value) for base in self.classes[cls].bases) if b and b not in self.classes]
            return self.project.method(bases, name) if bases else None
        return self.project.method([cls], name)

    def _place_external(self, scope: Scope, e: Event, found: Resolved) -> list[Event]:
        """The events a call to another file's function adds to the caller's iteration, placed at the call; the
        callee's names are mapped to the call's arguments (a name the caller cannot see becomes None)."""
        exp = found.export
        params = _positional(exp.params, e)
        out: list[Event] = []
        if exp.trains:
            out.extend(_runs(e, exp.steps, exp.params, origin=(found.path, exp.line)))
        else:
            key = (found.path, found.name)
            foreign = self._foreign.get(key)
            if foreign is None:
                # The callee's names live in its own file: its events get a scope of their own, with no events,
                # so that rules asking about a backward's value in the caller's scope skip them, as they skip a
                # local helper's.
                foreign = self._foreign[key] = Scope(cst.Name("_"), f"{found.path}:{found.name}", None)
                self._by_node[foreign.node] = foreign
            for ev in exp.events:
                out.append(e.but(
                    kind=EventKind(ev.kind), target=_mapped(ev.target, params, e),
                    variant=variant_named(EventKind(ev.kind), ev.variant),
                    via=_mapped(ev.via, params, e), value=e.node if ev.kind == "backward" else None,
                    scope=foreign.node, contexts=e.contexts + ev.contexts, inlined_from=e.node,
                    origin=(found.path, ev.line), callee=None,
                ))
        # What the callee hands to calls its file cannot follow is as unknown here as there: an OPAQUE event per
        # such argument, named by the caller (`self` when the callee hands itself or its attributes on).
        for param in exp.handed:
            name = "self" if param == "self" else _mapped(param, params, e)
            if name is not None:
                out.append(e.but(kind=EventKind.OPAQUE, target=name, variant=CallVia.EXTERNAL,
                                 callee="self." if name == "self" else None))
        self.resolved_calls.add(id(e.node))
        return out

    def summary(self, scope: Scope) -> Summary:
        """What a function does, as its callers see it (analysis.summaries), computed once."""
        found = self._summaries.get(id(scope.node))
        if found is None:
            found = self._summaries[id(scope.node)] = summarize(self, scope)
        return found

    def classify(self, e: Event) -> Event | None:
        """What a method call of interest is (backward, step, zero_grad ...), or None (memoised per event)."""
        key = id(e)
        if key in self._classified:
            return self._classified[key]
        result = self._classified[key] = classify(e, self.symbols)
        return result


def _positional(params: list[str], call_event: Event) -> list[str]:
    """The callee's positional parameters as the call fills them: `self` is not passed by `self.method(...)` nor
    by `obj.method(...)`."""
    return params[1:] if (call_event.callee or "").startswith("self.") or call_event.variant is CallVia.OBJECT else params


def _runs_forward(call_event: Event) -> bool:
    """The call runs a module's forward (`model(x)`, placed as `model.forward(x)`)."""
    return call_event.variant is CallVia.OBJECT and (call_event.callee or "").endswith(".forward")


def _on_receiver(name: str, call_event: Event) -> str:
    """A method's `self.x`, as the caller of `obj.method(...)` names it: `obj.x`."""
    receiver = (call_event.callee or "").rpartition(".")[0]
    return receiver + name[4:] if receiver else name


def _runs(call_event: Event, steps, params: list[str], same_file: bool = False, origin=None) -> list[Event]:
    """A call to a function that trains, as the caller sees it: one RUN event per optimizer it steps, named as the
    caller names it."""
    params = _positional(params, call_event)
    return [call_event.but(kind=EventKind.RUN, target=_mapped(opt, params, call_event, same_file),
                           variant=CallVia.RUN, origin=origin) for opt in steps]


def _mapped(name: str | None, params: list[str], call_event: Event, same_file: bool = False) -> str | None:
    """A callee's name for a value (`optimizer`, `self.opt`, `model.module`), as the caller names it: a parameter
    becomes the argument passed for it; `self.` stays (a method of the same object); anything else (the callee's
    own globals and locals) is not a name of the caller: None (in the same file, a global keeps its name)."""
    if name is None:
        return None
    if name == "self" and _runs_forward(call_event):
        return (call_event.callee or "").rpartition(".")[0]  # the module whose forward it is
    if name.startswith("self."):
        return _on_receiver(name, call_event) if call_event.variant is CallVia.OBJECT else name
    head, dot, rest = name.partition(".")
    call = call_event.node
    if head not in params:
        return name if same_file else None
    if type(call) is not cst.Call:
        return None
    index = params.index(head)
    arg = None
    for i, a in enumerate(call.args):
        if a.star:
            return None
        if a.keyword is None and i == index:
            arg = a
        elif a.keyword is not None and a.keyword.value == head:
            arg = a
    passed = dotted(arg.value) if arg is not None else None
    return None if passed is None else passed + dot + rest
