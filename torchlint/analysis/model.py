"""The training-loop model: one pass over a module builds, per function and for the module body, the ordered
events of its loops; rules ask questions of it instead of walking the tree themselves."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import libcst as cst

from torchlint.analysis.events import Event, EventKind, Guard, contradict
from torchlint.analysis.flow import FlowGraph
from torchlint.analysis.kinds import Kinds
from torchlint.analysis.summaries import Summary, summarize
from torchlint.analysis.exprs import (
    dotted, is_self_accumulation, is_true, keyword, names_in, positional, positional_params, summand_names,
)
from torchlint.analysis.names import Kind, Symbols
from torchlint.analysis.project import MODULE_BASES, ProjectView, Resolved
from torchlint.analysis.semantics import IN_PLACE_DETACH, LOSS_FUNCTION_WORDS, context_of, gradients_go_to
from torchlint.analysis.walk import calls_in_evaluation_order

_METHODS = frozenset(
    """backward manual_backward grad step zero_grad update unscale_ clip_grad_norm_ clip_grad_value_
    append extend clear detach_ zero_ fill_""".split()
)
INLINE_DEPTH = 2
_Ctx = tuple  # (loops, guards, contexts)


@dataclass(eq=False)
class Scope:
    """A function (or the module body) with its events in program order."""

    node: cst.CSTNode
    name: str
    class_name: str | None
    raw: list[Event] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)  # after classification and inlining of helpers
    local_defs: dict[str, cst.CSTNode] = field(default_factory=dict)
    _assigns: dict[str, list[Event]] | None = None
    _depends: dict[str, frozenset[str]] = field(default_factory=dict)
    _value_names: dict[int, set[str]] = field(default_factory=dict)
    _backpropagated: frozenset[str] | None = None
    body: Sequence[cst.CSTNode] = ()  # the statements the flow graph is built from
    _flow: FlowGraph | None = None
    params: dict[str, cst.Param] = field(default_factory=dict)
    _def_nodes: dict[str, frozenset[int]] | None = None
    _kill_events: dict[tuple[str, int | None], list[Event]] | None = None
    _defined: set[str] | None = None
    _followed: dict[tuple[int, int, str], list[Event]] = field(default_factory=dict)  # flow_defs, summand_defs
    stmt_scope: dict[int, "Scope"] = field(default_factory=dict)  # shared by a file's scopes: id(stmt) -> scope
    _reaching: dict[tuple[str, int], tuple[tuple[Event, ...], bool]] = field(default_factory=dict)
    resolved_calls: set[int] = field(default_factory=set)  # shared by a file's scopes: FileModel.resolved_calls

    def assignments(self, name: str) -> list[Event]:
        """Every ASSIGN/APPEND event of this scope whose target is `name`."""
        if self._assigns is None:
            self._assigns = {}
            for e in self.events:
                if e.scope is self.node and e.kind in (EventKind.ASSIGN, EventKind.APPEND) and e.target:
                    self._assigns.setdefault(e.target, []).append(e)
        return self._assigns.get(name, [])

    # -- flow ----------------------------------------------------------------------------------------------------
    @property
    def flow(self) -> FlowGraph:
        """The scope's flow graph, built on first use (most functions of a file are never asked)."""
        if self._flow is None:
            self._flow = FlowGraph(self.body)
        return self._flow

    def flow_node(self, event: Event) -> int | None:
        """The flow node where `event` happens in this scope (the call statement, for a helper's event)."""
        flow = self._flow or self.flow
        return flow.node_of.get(id(event.path[0] if event.path else event.stmt))

    def may_follow(self, a: Event, b: Event, loop: cst.CSTNode | None = None) -> bool:
        """Can `b` run after `a` (within one iteration of `loop`, when given)? Events of helpers are placed at
        their call; two events of the same call are ordered by the helper's own flow graph; events whose guards
        contradict (`scaler is not None` in a helper, its `else` in the caller) never run in one pass."""
        if contradict(a.guards, b.guards):
            return False
        for i, (sa, sb) in enumerate(zip(a.path, b.path)):
            if sa is sb:
                continue
            owner = self.stmt_scope.get(id(sa)) if i else self
            if owner is None:
                break
            flow = owner.flow
            na, nb = flow.node_of.get(id(sa)), flow.node_of.get(id(sb))
            if na is None or nb is None or na == nb:
                break
            within = loop if i == 0 else _innermost_common(
                tuple(x for x in a.loops if id(x) in flow.loop_head),
                tuple(x for x in b.loops if id(x) in flow.loop_head),
            )
            return flow.may_follow(na, nb, within)
        return b.seq > a.seq

    def exclusive(self, a: Event, b: Event) -> bool:
        """`a` and `b` never run in the same pass: different arms of an if/elif/else, match or try/except."""
        loop = _innermost_common(a.loops, b.loops)
        return not self.may_follow(a, b, loop) and not self.may_follow(b, a, loop)

    def reaching(self, name: str, at: Event) -> tuple[tuple[Event, ...], bool]:
        """The definitions of `name` (assignments, `del`, in-place resets) that reach `at`, and whether a path
        from the scope's entry (a parameter, a global, an attribute set elsewhere) reaches it too."""
        if self._defined is None:
            self._defined = {e.target for e in self.events if e.scope is self.node and e.target and _kills(e)}
        if name not in self._defined:
            return (), True  # never defined in this scope: it comes from outside (parameter, global)
        node = self.flow_node(at)
        if node is None:
            return tuple(e for e in self.assignments(name) if e.seq < at.seq), False
        same = [e for e in self._defs_in(name, node) if e.seq < at.seq]
        if same:
            return (same[-1],), False
        return self._reaching_node(name, node)

    def carried_round(self, d: Event, loop: cst.CSTNode) -> bool:
        """Does the value defined by `d` go round `loop` (through its head) and reach `d`'s statement again, with
        no other definition of its name on the way? (a state fed back from one iteration into the next)"""
        assert d.target is not None
        start, head = self.flow_node(d), self.flow.loop_head.get(id(loop))
        if start is None or head is None:
            return False
        kills = self.def_nodes().get(d.target, frozenset()) - {start}
        if head in kills:
            return False  # the loop variable itself: each iteration binds it anew
        return self.flow.reaches_avoiding(start, head, kills) and (
            head == start or self.flow.reaches_avoiding(head, start, kills)
        )

    def _reaching_node(self, name: str, node: int) -> tuple[tuple[Event, ...], bool]:
        key = (name, node)
        cached = self._reaching.get(key)
        if cached is None:
            stops = self.def_nodes().get(name)
            if not stops:
                cached = ((), True)  # never defined in this scope: it comes from outside (parameter, global)
            else:
                found, entry = self.flow.backward(node, stops)
                cached = (tuple(self._defs_in(name, n)[-1] for n in sorted(found)), entry)
            self._reaching[key] = cached
        return cached

    def def_nodes(self) -> dict[str, frozenset[int]]:
        if self._def_nodes is None:
            nodes: dict[str, set[int]] = {}
            for e in self.events:
                if e.scope is self.node and e.target and _kills(e):
                    n = self.flow_node(e)
                    if n is not None:
                        nodes.setdefault(e.target, set()).add(n)
            self._def_nodes = {k: frozenset(v) for k, v in nodes.items()}
        return self._def_nodes

    def _defs_in(self, name: str, node: int) -> list[Event]:
        """The definitions of `name` made at flow node `node`, in order."""
        if self._kill_events is None:
            self._kill_events = {}
            for e in self.events:
                if e.scope is self.node and e.target and _kills(e):
                    self._kill_events.setdefault((e.target, self.flow_node(e)), []).append(e)
        return self._kill_events.get((name, node), [])

    def own_returns(self) -> list[Event]:
        """RETURN events of this scope with a value: what a caller gets (the function summary reads them)."""
        return [e for e in self.events if e.kind is EventKind.RETURN and e.scope is self.node and e.value is not None]

    def own_backwards(self) -> list[Event]:
        """BACKWARD events whose names are this scope's (not those inlined from helpers)."""
        return [e for e in self.events if e.kind is EventKind.BACKWARD and e.scope is self.node and e.value is not None]

    def backpropagated(self) -> frozenset[str]:
        """Every name whose value may flow into a backward of this scope (flow-insensitive: an over-approximation,
        which is the safe side for rules that stay silent on back-propagated values)."""
        if self._backpropagated is None:
            names: set[str] = set()
            for b in self.own_backwards():
                names |= self.depends(b.value)
            self._backpropagated = frozenset(names)
        return self._backpropagated

    def summand_defs(self, expr: cst.BaseExpression, at: Event, terms=None) -> list[Event]:
        """The definitions whose values are terms of `expr` at `at` (reaching definitions followed through
        arithmetic, sums and stacks, appends into the lists involved; not through the arguments of a forward).
        `terms(expr, at)` may narrow which names of an expression count as its terms (default: summand_names)."""
        if terms is not None:
            return self._follow(expr, at, terms)
        key = (id(expr), id(at), "terms")
        cached = self._followed.get(key)
        if cached is None:
            cached = self._followed[key] = self._follow(expr, at, lambda e, _at: summand_names(e))
        return cached

    def flow_defs(self, expr: cst.BaseExpression, at: Event) -> list[Event]:
        """The definitions whose values flow into `expr` evaluated at `at`, through any expression: reaching
        definitions followed transitively, plus what is appended or stored into the containers involved. A loop
        variable ends the walk (its iterable is where the batches come from, not part of a graph)."""
        key = (id(expr), id(at), "names")
        cached = self._followed.get(key)
        if cached is None:
            cached = self._followed[key] = self._follow(expr, at, lambda e, _at: self._names(e))
        return cached

    def _follow(self, expr: cst.BaseExpression, at: Event, names_of) -> list[Event]:
        """Reaching definitions of the names `names_of(expr, at)` gives, followed through the values of those
        definitions (and through the old value of an accumulation); loop variables and definitions without a
        value (`del`, `detach_()`) end the walk."""
        out: list[Event] = []
        seen: set[tuple[str, int]] = set()
        seen_defs: set[int] = set()
        todo = [(n, at) for n in names_of(expr, at)]
        while todo:
            name, where = todo.pop()
            if (name, id(where)) in seen:
                continue
            seen.add((name, id(where)))
            defs, _ = self.reaching(name, where)
            adds = [e for e in self.assignments(name) if e.kind is EventKind.APPEND or e.flavor == "item="]
            for d in (*defs, *adds):
                if id(d) in seen_defs or d.value is None or d.flavor == "for":
                    continue
                seen_defs.add(id(d))
                out.append(d)
                todo.extend((n, d) for n in names_of(d.value, d))
                if d.accumulates and d.target:
                    todo.append((d.target, d))
        return out

    def depends(self, expr: cst.CSTNode) -> frozenset[str]:
        """Names whose values flow into `expr`, through the assignments of this scope (flow-insensitive)."""
        out: set[str] = set()
        for name in names_in(expr):
            out |= self._closure(name)
        return frozenset(out)

    def _closure(self, name: str) -> frozenset[str]:
        cached = self._depends.get(name)
        if cached is not None:
            return cached
        seen: set[str] = set()
        todo = [name]
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            for e in self.assignments(n):
                if e.value is not None:
                    todo.extend(m for m in self._names(e.value) if m not in seen)
        result = self._depends[name] = frozenset(seen)
        return result

    def _names(self, value: cst.CSTNode) -> set[str]:
        cached = self._value_names.get(id(value))
        if cached is None:
            cached = self._value_names[id(value)] = names_in(value)
        return cached

    def is_numeric(self, expr: cst.BaseExpression, _depth: int = 0) -> bool:
        """True when `expr` is plainly a Python number or a size (`1`, `len(x)`, `x.size(0)`, `bs` = such)."""
        if isinstance(expr, (cst.Integer, cst.Float)):
            return True
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Name) and func.value in ("len", "int", "float", "round"):
                return True
            if isinstance(func, cst.Attribute) and func.attr.value in ("size", "numel", "item", "dim", "tolist"):
                return True
        if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "shape":
            return True
        if isinstance(expr, cst.BinaryOperation):
            return self.is_numeric(expr.left, _depth) and self.is_numeric(expr.right, _depth)
        name = dotted(expr)
        if name is not None and _depth < 3:
            defs = [e for e in self.assignments(name) if e.value is not None]
            return bool(defs) and all(self.is_numeric(e.value, _depth + 1) for e in defs)
        return False

    def is_loss(self, expr: cst.BaseExpression) -> bool:
        """A value that is a training loss: named like one, or computed by a criterion / loss function."""
        name = dotted(expr)
        if name is None:
            return False
        last = name.rsplit(".", 1)[-1].lower()
        if "loss" in last or "cost" in last or last in ("l", "nll", "objective"):
            return True
        for e in self.assignments(name):
            if isinstance(e.value, cst.Call):
                func = (dotted(e.value.func) or "").lower()
                if any(w in func for w in LOSS_FUNCTION_WORDS):
                    return True
        return False


@dataclass(eq=False)
class Loop:
    node: cst.CSTNode
    scope: Scope
    events: list[Event]

    def of(self, *kinds: EventKind) -> list[Event]:
        return [e for e in self.events if e.kind in kinds]

    def between(self, start: Event, end: Event) -> list[Event]:
        """Events an iteration meets going from `start` to the next `end`, wrapping to the next iteration."""
        if end.seq > start.seq:
            return [e for e in self.events if start.seq < e.seq < end.seq]
        return [e for e in self.events if e.seq > start.seq or e.seq < end.seq]

    def after_step(self, step: Event) -> Event:
        """Where code that must follow this optimizer step goes: the step itself, or the `scaler.update()`
        that follows a `scaler.step(optimizer)` in the same block."""
        if step.via:
            for e in self.events:
                if (e.kind is EventKind.SCALER_UPDATE and e.seq > step.seq and e.guards == step.guards
                        and e.scope is step.scope):
                    return e
        return step

    def may_follow(self, a: Event, b: Event) -> bool:
        """Can `b` run after `a` within one iteration of this loop (inner loops included)?"""
        return self.scope.may_follow(a, b, self.node)

    def ends_iteration_after(self, event: Event, unless: list[Event]) -> bool:
        """Can this loop's iteration end after `event` (inner loops may go round) with none of `unless` between?
        (`loss_a.backward(retain_graph=True)` is followed by `loss_b.backward()` on every path: not last.)"""
        scope = self.scope
        flow = scope.flow
        start = scope.flow_node(event)
        if start is None:
            return not any(u.seq > event.seq for u in unless)
        if any(scope.flow_node(u) == start and u.seq > event.seq for u in unless):
            return False
        head = flow.loop_head[id(self.node)]
        avoid = frozenset(n for u in unless if (n := scope.flow_node(u)) is not None and n != start)
        return flow.reaches_avoiding(start, head, avoid, normal_only=True)  # not "if the next backward raises"

    def trip_count(self) -> int | None:
        """How many times the loop runs when that is a constant (`for _ in range(5)`, `range(n)` with `n = 2`)."""
        node = self.node
        if not isinstance(node, cst.For) or not isinstance(node.iter, cst.Call) or dotted(node.iter.func) != "range":
            return None
        args = [a.value for a in node.iter.args if a.keyword is None and not a.star]
        if len(args) not in (1, 2):
            return None
        bounds = [self._constant(a) for a in args]
        if any(b is None for b in bounds):
            return None
        return max(0, bounds[-1] - (bounds[0] if len(bounds) == 2 else 0))  # type: ignore[operator]

    def _constant(self, expr: cst.BaseExpression) -> int | None:
        if isinstance(expr, cst.Integer):
            return int(expr.evaluated_value)
        if isinstance(expr, cst.Name) and self.events:
            defs, entry = self.scope.reaching(expr.value, self.events[0])
            if defs and not entry and all(isinstance(d.value, cst.Integer) and d.flavor == "=" for d in defs):
                values = {int(d.value.evaluated_value) for d in defs}  # type: ignore[union-attr]
                return values.pop() if len(values) == 1 else None
        return None

    def handed_to_unknown(self, name: str) -> bool:
        """A call the model cannot follow is handed `name` in this loop (or, for `self.x`, an unresolved method
        of `self` runs): what that call does with it is not known."""
        last = name.rsplit(".", 1)[-1]
        opaque = self.of(EventKind.OPAQUE)
        if name.startswith("self.") and any((e.callee or "").startswith("self.") for e in opaque):
            return True
        if any(e.flavor == "external" and e.target is not None
               and (e.target == name or e.target.rsplit(".", 1)[-1] == last) for e in opaque):
            return True  # another file's function hands it to a call that file cannot follow
        calls = [e.node for e in opaque if e.flavor != "external"]
        # Method calls of other objects (`engine.train_step(model, optimizer)`) are not events: look for them
        # only now, when a rule needs the answer.
        calls += [c for c in calls_in_evaluation_order(self.node)
                  if isinstance(c.func, cst.Attribute) and id(c) not in self.scope.resolved_calls]
        for call in calls:
            if isinstance(call, cst.Call) and not _tracked(call):
                for a in call.args:
                    arg = dotted(a.value)
                    if arg is not None and (arg == name or arg.rsplit(".", 1)[-1] == last):
                        return True
        return False

    def backwards_into_grad(self) -> list[Event]:
        """The backwards of the iteration that add into `.grad` (not `autograd.grad`, not dist_autograd)."""
        return [b for b in self.of(EventKind.BACKWARD) if gradients_go_to(b.flavor) == "grad"]

    def gated_with(self, step: Event) -> list[Event]:
        """Backwards under the same guard as `step` (within this loop): the guard that gates a step also gates
        the backward that serves it, so such a step is not fed by the backwards that run every iteration (a GAN's
        generator trained every n_critic steps)."""
        tests = {id(g.test) for g in step.guards_within(self.node) if not g.negated}
        return [
            b for b in self.backwards_into_grad()
            if tests & {id(g.test) for g in b.guards_within(self.node) if not g.negated}
        ]

    @property
    def outermost(self) -> bool:
        """Not nested in another loop of the same function."""
        return self.events[0].loops[0] is self.node if self.events else True


class FileModel:
    """Everything rules may ask about one file."""

    def __init__(self, module: cst.Module, text: str = "", project: ProjectView | None = None) -> None:
        self.module = module
        # The other files of the project, as this file imports them (analysis.project); None: the file alone.
        self.project = project
        self.project_modules = project.modules() if project is not None else set()
        self.resolved_calls: set[int] = set()  # calls answered by another file's exports (not unknown calls)
        self._foreign: dict[tuple[str, str], Scope] = {}
        self._assigned: dict[str, frozenset[str]] = {}  # _assigned_in
        self.text = text  # the source, for cheap textual questions (is `total.item()` used anywhere?)
        self.symbols = Symbols()
        self.scopes: list[Scope] = []
        self._kinds: Kinds | None = None
        self._classified: dict[int, Event | None] = {}
        self._expanded: dict[tuple, list[Event]] = {}  # a helper's events, expanded once per depth and call chain
        self._by_node: dict[cst.CSTNode, Scope] = {}
        # id(node) -> index of the module-level statement holding it, for the nodes events point at
        # (positions are computed per module-level statement, see torchlint.pipeline.positions).
        self.top_of: dict[int, int] = {}
        self.classes: dict[str, cst.ClassDef] = {}
        self.imported: set[str] = set()  # names bound by import statements
        _Walker(self).walk_module(module)
        for scope in self.scopes:
            for e in scope.raw:
                if e.kind is EventKind.ASSIGN and e.flavor in ("=", "tuple0", "tuple") and e.target and e.value:
                    self.symbols.record(e.target, e.value, first=e.flavor != "tuple")
        stmt_scope: dict[int, Scope] = {}
        for scope in self.scopes:
            scope.stmt_scope = stmt_scope
            scope.resolved_calls = self.resolved_calls
            for e in scope.raw:
                stmt_scope[id(e.stmt)] = scope
        self._summaries: dict[int, Summary] = {}
        self._functions = {s.name: s for s in self.scopes if s.class_name is None and "." not in s.name}
        self._methods = {(s.class_name, s.name): s for s in self.scopes if s.class_name is not None}
        for scope in self.scopes:
            scope.events = self._expand(scope, 0, frozenset())
            for i, e in enumerate(scope.events):
                # Each event object sits in one scope's list (inlined ones are copies): number it in place.
                object.__setattr__(e, "seq", i)
        self.loops: list[Loop] = []
        for scope in self.scopes:
            # Only the scope's own loops: a helper's loops belong to the helper's scope.
            seen: dict[cst.CSTNode, list[Event]] = {loop: [] for e in scope.raw for loop in e.loops}
            for e in scope.events:
                for loop in e.loops:
                    if loop in seen:
                        seen[loop].append(e)
            self.loops.extend(Loop(node, scope, evs) for node, evs in seen.items() if evs)

    # -- queries -------------------------------------------------------------------------------------------------
    @property
    def kinds(self) -> Kinds:
        if self._kinds is None:
            self._kinds = Kinds(self)
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

    def kind(self, name: str | None) -> Kind:
        return self.symbols.kind(name)

    def scope_of(self, event: Event) -> Scope:
        return self._by_node[event.scope]

    def scope_at(self, node: cst.CSTNode | None) -> Scope | None:
        """The scope a node defines, if it is one of this file's (an event placed from another file has none)."""
        return self._by_node.get(node)

    def innermost_loop(self, event: Event, scope: Scope) -> Loop | None:
        if not event.loops:
            return None
        node = event.loops[-1]
        for loop in self.loops:
            if loop.node is node and loop.scope is scope:
                return loop
        return None

    # -- construction --------------------------------------------------------------------------------------------
    def _add_scope(self, scope: Scope) -> None:
        self.scopes.append(scope)
        self._by_node[scope.node] = scope

    def optimizer_calls(self, scope: Scope | None, name: str | None, depth: int = 2) -> list[cst.Call] | None:
        """The constructor calls that built the optimizer `name` of `scope` may hold: one built in the file under
        that name, or, for a parameter of the function, what every call of the function in this file passes for it
        (`train_epoch(model, data, s2s_optimizer)`). None when one of them is unknown (no call in this file, an
        argument built elsewhere)."""
        if name is None:
            return None
        built = self.symbols.optimizer_class.get(name) or self.symbols.optimizer_class.get(name.rsplit(".", 1)[-1])
        if built is not None:
            return [built]
        params = positional_params(scope.node) if scope is not None else []
        if depth == 0 or name.partition(".")[0] not in params:
            return None
        found: list[cst.Call] = []
        for caller in self.scopes:
            for e in caller.raw:
                if e.kind is not EventKind.LOCAL_CALL or self.resolve(caller, e.callee or "") is not scope:
                    continue
                calls = self.optimizer_calls(caller, _mapped(name, _positional(params, e), e), depth - 1)
                if calls is None:
                    return None
                found.extend(calls)
        return found or None

    def resolve(self, caller: Scope, callee: str) -> Scope | None:
        if callee.startswith("self."):
            return self._methods.get((caller.class_name, callee[5:]))
        local = caller.local_defs.get(callee)
        if local is not None:
            return self._by_node.get(local)
        return self._functions.get(callee)

    def _detached_through_loop_variable(self, scope: Scope, reset: Event) -> list[Event]:
        """`for s in state: s.detach_()` detaches the tensors of `state` in place: a RESET of `state` too."""
        out = []
        for a in scope.raw:
            if (a.kind is EventKind.ASSIGN and a.flavor == "for" and a.target == reset.target
                    and a.stmt in reset.loops and a.value is not None):
                container = dotted(a.value)
                if container is not None:
                    out.append(dataclasses.replace(reset, target=container, flavor="item"))
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
            if e.kind is EventKind.LOCAL_CALL:
                callee = self.resolve(scope, e.callee or "")
                if callee is None and self.project is not None and e.flavor != "closure":
                    found = self.external(scope, e.callee or "")
                    if found is not None:
                        out.extend(self._place_external(scope, e, found))
                        continue
                if callee is None:
                    if e.flavor in ("closure", "module"):
                        # `scaler.step(opt)`: the argument was not a closure after all; `utils.f(...)` that is not
                        # a function of the project: a method call like any other (Loop.handed_to_unknown)
                        continue
                    if "zero_grad" in (e.callee or "").rsplit(".", 1)[-1]:
                        # `zero_grad(params)`, `self.zero_grad()` of a base class: clears the gradients it names
                        out.append(dataclasses.replace(e, kind=EventKind.ZERO_GRAD, flavor="param"))
                    elif not (e.callee or "").startswith("self.") or self._inherited(scope, e.callee or ""):
                        out.append(dataclasses.replace(e, kind=EventKind.OPAQUE))
                    continue
                if depth >= INLINE_DEPTH or callee.node in active:
                    continue
                summary = self.summary(callee)
                trains = summary.trains
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
                    if inner.kind in (EventKind.ASSIGN, EventKind.APPEND, EventKind.RESET, EventKind.FAKE_RESET,
                                      EventKind.RETURN):
                        continue  # the callee's own names mean nothing in the caller
                    shift = len(e.loops)
                    placed = copy.copy(inner)  # faster than dataclasses.replace on this hot path
                    for attr, value in (
                        ("loops", e.loops + inner.loops),
                        ("guards", e.guards + tuple(Guard(g.test, g.negated, g.depth + shift) for g in inner.guards)),
                        ("contexts", e.contexts + inner.contexts),
                        ("inlined_from", inner.inlined_from or e.node),
                        ("path", (e.stmt,) + inner.path),
                    ):
                        object.__setattr__(placed, attr, value)
                    out.append(placed)
            elif e.kind is EventKind.METHOD:
                classified = self.classify(e)
                if classified is not None:
                    out.append(classified)
                    if classified.kind is EventKind.RESET and classified.flavor == "":
                        out.extend(self._detached_through_loop_variable(scope, classified))
            else:
                out.append(e)
        return out

    def external(self, scope: Scope, callee: str) -> Resolved | None:
        """A function or inherited method of another project file that the call `callee(...)` reaches."""
        if self.project is None:
            return None
        if callee.startswith("self."):
            if callee.count(".") != 1 or not self._inherited(scope, callee):
                return None
            cls = self.classes.get(scope.class_name or "")
            bases = [b for b in (dotted(base.value) for base in cls.bases) if b] if cls is not None else []
            return self.project.method(bases, callee[5:])
        return self.project.function(callee)

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
                out.append(dataclasses.replace(
                    e, kind=EventKind(ev.kind), target=_mapped(ev.target, params, e), flavor=ev.flavor,
                    via=_mapped(ev.via, params, e), value=e.node if ev.kind == "backward" else None,
                    scope=foreign.node, contexts=e.contexts + ev.contexts, inlined_from=e.node,
                    origin=(found.path, ev.line), callee=None,
                ))
        # What the callee hands to calls its file cannot follow is as unknown here as there: an OPAQUE event per
        # such argument, named by the caller (`self` when the callee hands itself or its attributes on).
        for param in exp.handed:
            name = "self" if param == "self" else _mapped(param, params, e)
            if name is not None:
                out.append(dataclasses.replace(e, kind=EventKind.OPAQUE, target=name, flavor="external",
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
        result = self._classified[key] = self._classify(e)
        return result

    def _classify(self, e: Event) -> Event | None:
        call = e.node
        assert isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
        method = call.func.attr.value
        recv = call.func.value
        recv_name = dotted(recv)
        kind = self.symbols.kind(recv_name)
        rep = dataclasses.replace
        if method in ("backward", "manual_backward", "grad"):
            return self._classify_backward(e, call, method, recv, recv_name, kind)
        if method == "step":
            if kind is Kind.SCALER:
                arg = positional(call, 0)
                opt = dotted(arg.value) if arg else None
                return rep(e, kind=EventKind.STEP, target=opt, via=recv_name) if opt else None
            if kind is Kind.OPTIMIZER:
                # `DistributedOptimizer.step(context_id)` reads the gradients of a dist_autograd context.
                flavor = "context" if "dist_autograd" in e.contexts and call.args else ""
                return rep(e, kind=EventKind.STEP, target=recv_name, flavor=flavor)
            if kind is Kind.SCHEDULER:
                return rep(e, kind=EventKind.SCHED_STEP, target=recv_name)
            return None
        if method == "zero_grad":
            flavor = "optimizer" if kind is Kind.OPTIMIZER else "model"
            return rep(e, kind=EventKind.ZERO_GRAD, target=recv_name, flavor=flavor)
        if method == "update" and kind is Kind.SCALER:
            return rep(e, kind=EventKind.SCALER_UPDATE, target=recv_name)
        if method == "unscale_" and kind is Kind.SCALER:
            arg = positional(call, 0)
            return rep(e, kind=EventKind.SCALER_UNSCALE, target=dotted(arg.value) if arg else None, via=recv_name)
        if method in ("clip_grad_norm_", "clip_grad_value_"):
            flavor = "accelerator" if kind is Kind.ACCELERATOR else "torch"
            return rep(e, kind=EventKind.CLIP, flavor=flavor)
        if recv_name is None:
            container = _container(recv)
            if method in IN_PLACE_DETACH and container is not None:
                # `hidden[0].detach_()`: the state's tensors are cut from their graph in place
                return rep(e, kind=EventKind.RESET, target=container, flavor="item")
            return None
        if method in ("append", "extend") and call.args:
            return rep(e, kind=EventKind.APPEND, target=recv_name, value=call.args[-1].value)
        if method == "clear":
            return rep(e, kind=EventKind.RESET, target=recv_name)
        if method in IN_PLACE_DETACH:
            return rep(e, kind=EventKind.RESET, target=recv_name)
        if method in ("zero_", "fill_"):
            if recv_name.endswith(".grad") or recv_name.endswith(".grad.data"):
                return rep(e, kind=EventKind.ZERO_GRAD, target=recv_name, flavor="param")
            if recv_name.endswith(".data"):
                return rep(e, kind=EventKind.FAKE_RESET, target=recv_name[: -len(".data")])
        return None

    def _classify_backward(
        self, e: Event, call: cst.Call, method: str, recv: cst.BaseExpression, recv_name: str | None, kind: Kind
    ) -> Event | None:
        retain = keyword(call, "retain_graph")
        create = keyword(call, "create_graph")
        arg0 = positional(call, 0)
        via = None
        if method == "grad":
            if recv_name not in ("torch.autograd", "autograd"):
                return None
            flavor, value = "grad", arg0.value if arg0 else None
        elif method == "manual_backward":
            flavor, value = "lightning", arg0.value if arg0 else None
        elif recv_name in ("torch.autograd", "autograd"):
            flavor, value = "autograd", arg0.value if arg0 else None
        elif recv_name is not None and recv_name.endswith("autograd"):
            # `dist_autograd.backward(context_id, roots, retain_graph=...)`: the roots come last, and the
            # gradients go to the context, not to `.grad`.
            last = positional(call, len([a for a in call.args if a.keyword is None]) - 1)
            flavor, value = "dist", last.value if last else None
        elif kind is Kind.ACCELERATOR:
            flavor, value = "accelerator", arg0.value if arg0 else None
        elif kind is Kind.ENGINE:
            flavor, value = "engine", arg0.value if arg0 else None
        elif kind is Kind.OPTIMIZER and arg0 is not None:
            # `optimizer.backward(loss)`: apex FP16_Optimizer, DeepSpeed and ColossalAI wrappers scale the loss
            # and back-propagate it into `.grad`, like `loss.backward()`
            flavor, value = "optimizer", arg0.value
        elif (
            isinstance(recv, cst.Call)
            and isinstance(recv.func, cst.Attribute)
            and recv.func.attr.value == "scale"
            and self.symbols.is_(dotted(recv.func.value), Kind.SCALER)
            and recv.args
        ):
            flavor, value, via = "scaler", recv.args[0].value, dotted(recv.func.value)
        else:
            flavor, value = "tensor", recv
            if retain is None:
                pos = positional(call, 1)
                retain = pos if pos is not None else None
        if value is None:
            return None
        return dataclasses.replace(
            e,
            kind=EventKind.BACKWARD,
            value=value,
            flavor=flavor,
            via=via,
            retain_arg=retain if retain is not None and is_true(retain.value) else None,
            create_graph=create is not None and is_true(create.value),
        )


class _Walker:
    """Walks statements by hand (cheap) and expressions with small visitors, emitting raw events."""

    def __init__(self, model: FileModel) -> None:
        self.model = model
        self._top = 0  # index of the module-level statement being walked

    def walk_module(self, module: cst.Module) -> None:
        scope = Scope(module, "<module>", None, body=module.body)
        self.model._add_scope(scope)
        for index, stmt in enumerate(module.body):
            self._top = index
            self._stmt(scope, stmt, ((), (), ()))

    def _function(self, node: cst.FunctionDef, class_name: str | None, prefix: str) -> Scope:
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else [node.body]
        scope = Scope(node, prefix + node.name.value, class_name, body=body)
        p = node.params
        for param in (*p.posonly_params, *p.params, *p.kwonly_params):
            scope.params[param.name.value] = param
        self.model._add_scope(scope)
        contexts: tuple[str, ...] = ()
        for dec in node.decorators:
            d = dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator
            name = dotted(d) or ""
            ctx = context_of(name)
            if ctx:
                contexts += (ctx,)
        self._block(scope, body, ((), (), contexts))
        return scope

    def _block(self, scope: Scope, stmts: Sequence[cst.CSTNode], ctx: _Ctx) -> None:
        for stmt in stmts:
            self._stmt(scope, stmt, ctx)

    def _body(self, scope: Scope, node: cst.CSTNode, ctx: _Ctx) -> None:
        body = getattr(node, "body", None)
        if isinstance(body, cst.IndentedBlock):
            self._block(scope, body.body, ctx)
        elif isinstance(body, cst.SimpleStatementSuite):
            self._simple(scope, node, body.body, ctx)

    def _stmt(self, scope: Scope, stmt: cst.CSTNode, ctx: _Ctx) -> None:
        loops, guards, contexts = ctx
        if isinstance(stmt, cst.SimpleStatementLine):
            self._simple(scope, stmt, stmt.body, ctx)
        elif isinstance(stmt, cst.If):
            self._exprs(scope, stmt, [stmt.test], ctx)
            g = Guard(stmt.test, False, len(loops))
            self._body(scope, stmt, (loops, guards + (g,), contexts))
            orelse = stmt.orelse
            neg = guards + (Guard(stmt.test, True, len(loops)),)
            if isinstance(orelse, cst.If):
                self._stmt(scope, orelse, (loops, neg, contexts))
            elif isinstance(orelse, cst.Else):
                self._body(scope, orelse, (loops, neg, contexts))
        elif isinstance(stmt, (cst.For, cst.While)):
            head = [stmt.iter] if isinstance(stmt, cst.For) else [stmt.test]
            if isinstance(stmt, cst.For):
                self._assign_targets(scope, stmt, stmt.target, stmt.iter, ctx, "for")
            self._exprs(scope, stmt, head, ctx)
            self._body(scope, stmt, (loops + (stmt,), guards, contexts))
            if stmt.orelse is not None:
                self._body(scope, stmt.orelse, ctx)
        elif isinstance(stmt, cst.With):
            added: tuple[str, ...] = ()
            for item in stmt.items:
                expr = item.item
                func = expr.func if isinstance(expr, cst.Call) else expr
                name = dotted(func) or ""
                kind = context_of(name)
                if kind:
                    added += (kind,)
            self._exprs(scope, stmt, [i.item for i in stmt.items], ctx)
            for item in stmt.items:
                if item.asname is not None:  # `with amp.scale_loss(loss, opt) as scaled_loss:`
                    self._assign_targets(scope, stmt, item.asname.name, item.item, ctx, "=")
            self._body(scope, stmt, (loops, guards, contexts + added))
        elif isinstance(stmt, (cst.Try, cst.TryStar)):
            self._body(scope, stmt, ctx)
            for handler in stmt.handlers:
                self._body(scope, handler, (loops, guards + (Guard(handler, False, len(loops)),), contexts))
            if stmt.orelse is not None:
                self._body(scope, stmt.orelse, ctx)
            if stmt.finalbody is not None:
                self._body(scope, stmt.finalbody, ctx)
        elif isinstance(stmt, cst.FunctionDef):
            scope.local_defs[stmt.name.value] = stmt
            prefix = "" if isinstance(scope.node, cst.Module) else scope.name + "."
            self._function(stmt, scope.class_name, prefix)
        elif isinstance(stmt, cst.ClassDef):
            self.model.classes.setdefault(stmt.name.value, stmt)
            for item in stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else ():
                if isinstance(item, cst.FunctionDef):
                    self._function(item, stmt.name.value, "")
                else:
                    self._stmt(scope, item, ctx)
        elif isinstance(stmt, cst.Match):
            self._exprs(scope, stmt, [stmt.subject], ctx)
            for case in stmt.cases:
                self._body(scope, case, (loops, guards + (Guard(case, False, len(loops)),), contexts))

    # -- simple statements ---------------------------------------------------------------------------------------
    def _simple(self, scope: Scope, line: cst.CSTNode, smalls: Sequence[cst.CSTNode], ctx: _Ctx) -> None:
        for small in smalls:
            if isinstance(small, cst.Assign):
                self._exprs(scope, line, [small.value], ctx)
                for t in small.targets:
                    self._assign_targets(scope, line, t.target, small.value, ctx, "=")
            elif isinstance(small, cst.AnnAssign):
                if small.value is not None:
                    self._exprs(scope, line, [small.value], ctx)
                    self._assign_targets(scope, line, small.target, small.value, ctx, "=")
            elif isinstance(small, cst.AugAssign):
                self._exprs(scope, line, [small.value], ctx)
                op = small.operator.__class__.__name__
                flavor = {"AddAssign": "+=", "DivideAssign": "/=", "MultiplyAssign": "*=", "SubtractAssign": "-="}.get(op, "op=")
                target = _container(small.target)
                if target:
                    self._emit(scope, EventKind.ASSIGN, small, line, ctx, target=target, value=small.value, flavor=flavor)
            elif isinstance(small, cst.Expr):
                self._exprs(scope, line, [small.value], ctx)
            elif isinstance(small, cst.Return) and small.value is not None:
                self._exprs(scope, line, [small.value], ctx)
                self._emit(scope, EventKind.RETURN, small, line, ctx, value=small.value)
            elif isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
                for alias in small.names:
                    bound = alias.asname.name if alias.asname is not None else alias.name
                    name = dotted(bound)  # type: ignore[arg-type]
                    if name:
                        self.model.imported.add(name.split(".", 1)[0])
            elif isinstance(small, cst.Del):
                targets = small.target.elements if isinstance(small.target, cst.Tuple) else [small.target]
                for t in targets:
                    node = t.value if isinstance(t, cst.Element) else t
                    name = dotted(node)
                    if name:
                        self._emit(scope, EventKind.RESET, small, line, ctx, target=name)

    def _assign_targets(
        self, scope: Scope, line: cst.CSTNode, target: cst.BaseExpression, value: cst.BaseExpression, ctx: _Ctx, how: str
    ) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for i, el in enumerate(_flatten(target)):
                name = dotted(el)
                if name:
                    flavor = "for" if how == "for" else ("tuple0" if i == 0 else "tuple")
                    self._emit(scope, EventKind.ASSIGN, line, line, ctx, target=name, value=value, flavor=flavor,
                               index=i)
            return
        name = dotted(target)
        if name is None:
            container = _container(target)
            if container and how == "=":
                # `d[k] = v` stores data in the container without rebinding it.
                self._emit(scope, EventKind.ASSIGN, line, line, ctx, target=container, value=value, flavor="item=")
            return
        if name.endswith(".grad") and isinstance(value, cst.Name) and value.value == "None":
            self._emit(scope, EventKind.ZERO_GRAD, line, line, ctx, target=name, flavor="param")
            return
        if how == "for":
            self._emit(scope, EventKind.ASSIGN, line, line, ctx, target=name, value=value, flavor="for")
            return
        added = is_self_accumulation(name, value)
        if added is not None:
            self._emit(scope, EventKind.ASSIGN, line, line, ctx, target=name, value=added, flavor="=+")
        else:
            self._emit(scope, EventKind.ASSIGN, line, line, ctx, target=name, value=value, flavor="=")

    def _exprs(self, scope: Scope, line: cst.CSTNode, exprs: Iterable[cst.CSTNode], ctx: _Ctx) -> None:
        for expr in exprs:
            for call in calls_in_evaluation_order(expr):
                self._call(scope, line, call, ctx)

    def _call(self, scope: Scope, line: cst.CSTNode, call: cst.Call, ctx: _Ctx) -> None:
        func = call.func
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in _METHODS:
                if method == "step" and call.args:
                    closure = call.args[0].value
                    if isinstance(closure, cst.Name):
                        self._emit(scope, EventKind.LOCAL_CALL, call, line, ctx, callee=closure.value, flavor="closure")
                    elif isinstance(closure, cst.Lambda):
                        self._exprs(scope, line, [closure.body], ctx)
                self._emit(scope, EventKind.METHOD, call, line, ctx)
                if not (isinstance(func.value, cst.Name) and func.value.value == "self"):
                    return
                # `self.clear()` / `self.step()` may be methods of this class: follow them too.
            name = dotted(func)
            if name and name.startswith("self.") and name.count(".") == 1:
                self._emit(scope, EventKind.LOCAL_CALL, call, line, ctx, callee=name)
            elif name and name.split(".", 1)[0] in self.model.project_modules:
                # `engine.train_one_epoch(...)`: a function of another file of the project, resolved on expansion
                self._emit(scope, EventKind.LOCAL_CALL, call, line, ctx, callee=name, flavor="module")
        elif isinstance(func, cst.Name):
            if func.value in ("clip_grad_norm_", "clip_grad_value_"):
                self._emit(scope, EventKind.CLIP, call, line, ctx, flavor="torch")
            else:
                self._emit(scope, EventKind.LOCAL_CALL, call, line, ctx, callee=func.value)

    def _emit(self, scope: Scope, kind: EventKind, node: cst.CSTNode, line: cst.CSTNode, ctx: _Ctx, **kw) -> None:
        loops, guards, contexts = ctx
        event = Event(kind, node, line, scope.node, loops, guards, contexts, path=(line,), **kw)
        scope.raw.append(event)
        top = self.model.top_of
        top[id(node)] = top[id(line)] = self._top
        if event.value is not None:
            top[id(event.value)] = self._top


def _flatten(target: cst.BaseExpression) -> list[cst.BaseExpression]:
    """`a, (b, c)` -> [a, b, c]; starred names included."""
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for el in target.elements for n in _flatten(el.value)]
    if isinstance(target, cst.StarredElement):
        return [target.value]
    return [target]


def _container(target: cst.BaseExpression) -> str | None:
    while isinstance(target, cst.Subscript):
        target = target.value
    return dotted(target)


def _tracked(call: cst.Call) -> bool:
    """A call the model already understands (`scaler.step(opt)`, `opt.zero_grad()`), not an unknown helper."""
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in _METHODS


def _kills(e: Event) -> bool:
    """An event that gives `e.target` a new value (what the name held before no longer reaches later uses)."""
    if e.kind is EventKind.ASSIGN:
        return e.flavor != "item="
    return e.kind is EventKind.RESET


def _innermost_common(a: tuple[cst.CSTNode, ...], b: tuple[cst.CSTNode, ...]) -> cst.CSTNode | None:
    common = None
    for x, y in zip(a, b):
        if x is not y:
            break
        common = x
    return common


def _positional(params: list[str], call_event: Event) -> list[str]:
    """The callee's positional parameters as the call fills them: `self` is not passed by `self.method(...)`."""
    return params[1:] if (call_event.callee or "").startswith("self.") else params


def _runs(call_event: Event, steps, params: list[str], same_file: bool = False, origin=None) -> list[Event]:
    """A call to a function that trains, as the caller sees it: one RUN event per optimizer it steps, named as the
    caller names it."""
    params = _positional(params, call_event)
    return [dataclasses.replace(call_event, kind=EventKind.RUN, target=_mapped(opt, params, call_event, same_file),
                                flavor="run", origin=origin) for opt in steps]


def _mapped(name: str | None, params: list[str], call_event: Event, same_file: bool = False) -> str | None:
    """A callee's name for a value (`optimizer`, `self.opt`, `model.module`), as the caller names it: a parameter
    becomes the argument passed for it; `self.` stays (a method of the same object); anything else (the callee's
    own globals and locals) is not a name of the caller: None (in the same file, a global keeps its name)."""
    if name is None:
        return None
    if name.startswith("self."):
        return name
    head, dot, rest = name.partition(".")
    call = call_event.node
    if head not in params:
        return name if same_file else None
    if not isinstance(call, cst.Call):
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
