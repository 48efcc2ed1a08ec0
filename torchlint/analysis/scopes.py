"""Queries over one scope's events: reaching definitions (backwards over the flow graph, memoised), what flows
into an expression, whether B can follow A, whether two events are exclusive, whether a value goes round a loop."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from torchlint.analysis.events import AssignForm, Event, EventKind, Guard, contradict, innermost_common
from torchlint.analysis.exprs import calls_anything, dotted, literal_key, names_in, operand_names, read_keys, summand_names
from torchlint.analysis.flow import FlowGraph
from torchlint.analysis.semantics import LOSS_FUNCTION_WORDS
from torchlint.analysis.walker import RawScope
from torchlint.source.walk import walk


@dataclass(eq=False)
class Scope(RawScope):
    """A function (or the module body) with its events in program order, and the queries over them."""

    events: list[Event] = field(default_factory=list)  # after classification and inlining of helpers
    _assigns: dict[str, list[Event]] | None = None
    _depends: dict[str, frozenset[str]] = field(default_factory=dict)
    _value_names: dict[int, set[str]] = field(default_factory=dict)
    _backpropagated: frozenset[str] | None = None
    _flow: FlowGraph | None = None
    _def_nodes: dict[str, frozenset[int]] | None = None
    _kill_events: dict[tuple[str, int | None], list[Event]] | None = None
    _defined: set[str] | None = None
    _called: frozenset[str] | None = None
    _followed: dict[tuple[int, int, str], list[Event]] = field(default_factory=dict)  # operand_defs, summand_defs
    stmt_scope: dict[int, "Scope"] = field(default_factory=dict)  # shared by a file's scopes: id(stmt) -> scope
    _reaching: dict[tuple[str, int], tuple[tuple[Event, ...], bool]] = field(default_factory=dict)
    _reached: dict[str, dict[int, tuple[frozenset[int], bool]]] = field(default_factory=dict)  # name -> node -> walk
    _stores: dict[str, list[Event]] | None = None
    resolved_calls: set[int] = field(default_factory=set)  # shared by a file's scopes: FileModel.resolved_calls

    def forget(self) -> None:
        """Drop what was derived from `events` (they changed: `arity.drop_dead`); the flow graph stays."""
        self._assigns = self._backpropagated = self._def_nodes = self._kill_events = self._defined = None
        self._called = self._stores = None
        for memo in (self._depends, self._value_names, self._followed, self._reaching, self._reached):
            memo.clear()

    def assignments(self, name: str) -> list[Event]:
        """Every ASSIGN/APPEND event of this scope whose target is `name`."""
        if self._assigns is None:
            self._assigns = {}
            for e in self.events:
                if e.scope is self.node and e.kind in (EventKind.ASSIGN, EventKind.APPEND) and e.target:
                    self._assigns.setdefault(e.target, []).append(e)
        return self._assigns.get(name, [])

    def stores(self, name: str) -> list[Event]:
        """The events that put a value into the container `name` without rebinding it (`x.append(v)`, `x[i] = v`)."""
        if self._stores is None:
            self._stores = {}
            for e in self.events:
                if e.scope is self.node and e.target and (e.kind is EventKind.APPEND or e.variant is AssignForm.ITEM):
                    self._stores.setdefault(e.target, []).append(e)
        return self._stores.get(name, [])

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
            within = loop if i == 0 else innermost_common(
                tuple(x for x in a.loops if id(x) in flow.loop_head),
                tuple(x for x in b.loops if id(x) in flow.loop_head),
            )
            return flow.may_follow(na, nb, within)
        return b.seq > a.seq

    def exclusive(self, a: Event, b: Event) -> bool:
        """`a` and `b` never run in the same pass: different arms of an if/elif/else, match or try/except."""
        loop = innermost_common(a.loops, b.loops)
        return not self.may_follow(a, b, loop) and not self.may_follow(b, a, loop)

    def reaching(self, name: str, at: Event) -> tuple[tuple[Event, ...], bool]:
        """The definitions of `name` (assignments, `del`, in-place resets) that reach `at`, and whether a path
        from the scope's entry (a parameter, a global, an attribute set elsewhere) reaches it too."""
        if name not in self._defined_names():
            return (), True  # never defined in this scope: it comes from outside (parameter, global)
        node = self.flow_node(at)
        if node is None:
            return tuple(e for e in self.assignments(name) if e.seq < at.seq), False
        same = [e for e in self._defs_in(name, node) if e.seq < at.seq]
        if same:
            return (same[-1],), False
        defs, entry = self._reaching_node(name, node)
        fresh = self._refreshed(name, at) if entry or len(defs) > 1 else None
        if fresh is not None and any(d is fresh for d in defs):  # a path that skips it tests an option both ways
            return tuple(d for d in defs if fresh.seq <= d.seq < at.seq), False
        if at.guards and any(d.guards for d in defs) and at.scope is self.node:
            held = {g.condition() for g in at.guards}
            defs = tuple(d for d in defs if not self._opposed(d, held))
        return defs, entry

    def _opposed(self, d: Event, held: set) -> bool:
        """`d` sits under the opposite answer of one of the conditions `held` where a use runs, of a test fixed for
        the call (`_fixed`: `if train: total += loss` ... `else: total += loss.item()`, then `if train:
        total.backward()`): no path holds both."""
        return d.scope is self.node and any(
            (c := g.condition()) is not None and (c[0], not c[1]) in held and self._fixed(g.test, None) for g in d.guards)

    def _refreshed(self, name: str, at: Event) -> Event | None:
        """The last fresh binding of `name` (its value does not read it) that runs whenever `at` does: in the same
        loops, ahead of it, under `at`'s guards or the same tests of what the loop never binds (an option tested
        twice: `if cfg.model == "PG": out, cov = res` ... `if cfg.model == "PG": cov = cov.sum()`)."""
        if at.scope is not self.node or not at.loops:
            return None
        held = {g.condition() for g in at.guards}
        for e in reversed(self.assignments(name)):
            if e.seq >= at.seq or e.loops != at.loops or e.kind is not EventKind.ASSIGN or not e.rebinds \
                    or e.value is None or name in names_in(e.value):
                continue
            if all(any(g is h for h in at.guards) or g.condition() in held and self._fixed(g.test, at.loops[0])
                   for g in e.guards):
                return e
        return None

    def _fixed(self, test: cst.CSTNode, loop: cst.CSTNode | None) -> bool:
        """`test` calls nothing and reads nothing `loop` binds (nor `self`): it gives one answer in a pass. With no
        `loop`, nothing the function binds: one answer in a call."""
        read = names_in(test) if isinstance(test, cst.BaseExpression) else {"self"}
        return not calls_anything(test) and "self" not in read and not any(
            e.target.split(".")[0] in read for e in self.events if e.target and (loop is None or loop in e.loops) and kills(e))

    def _defined_names(self) -> set[str]:
        if self._defined is None:
            self._defined = {e.target for e in self.events if e.scope is self.node and e.target and kills(e)}
        return self._defined

    def reaching_statement(self, name: str, stmt: cst.CSTNode) -> tuple[tuple[Event, ...], bool] | None:
        """`reaching` for the start of a statement of this scope that holds no event (`animator.add(x)`); None
        when the statement is not one of the scope's flow graph."""
        node = self.flow.node_of.get(id(stmt))
        if node is None:
            return None
        if name not in self._defined_names():
            return (), True
        return self._reaching_node(name, node)

    def test_of(self, guard: Guard, at: Event) -> cst.CSTNode:
        """What `guard` tests where `at` runs under it: `if is_step:` stands for `(i + 1) % k == 0` when
        `is_step = (i + 1) % k == 0` is the one definition of the flag that reaches `at` (a condition computed
        ahead of its `if`); any other test is itself."""
        test = guard.test
        if type(test) is not cst.Name or at.scope is not self.node:
            return test
        defs, entry = self.reaching(test.value, at)
        if entry or len(defs) != 1 or defs[0].variant is not AssignForm.PLAIN or defs[0].kind is not EventKind.ASSIGN:
            return test
        value = defs[0].value
        return value if type(value) is cst.Comparison or type(value) is cst.BooleanOperation else test

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
                found, entry = self.flow.backward(node, stops, self._reached.setdefault(name, {}))
                cached = (tuple(self._defs_in(name, n)[-1] for n in sorted(found)), entry)
            self._reaching[key] = cached
        return cached

    def def_nodes(self) -> dict[str, frozenset[int]]:
        if self._def_nodes is None:
            nodes: dict[str, set[int]] = {}
            for e in self.events:
                if e.scope is self.node and e.target and kills(e):
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
                if e.scope is self.node and e.target and kills(e):
                    self._kill_events.setdefault((e.target, self.flow_node(e)), []).append(e)
        return self._kill_events.get((name, node), [])

    def returns_term(self, r: Event, part: int, whole: int) -> bool:
        """In the tuple the return `r` gives, element `part` (a name) is a term of element `whole` (`total = fit +
        reg; return total, reg`)."""
        elements = r.value.elements if type(r.value) is cst.Tuple else []
        if part == whole or max(part, whole) >= len(elements) or min(part, whole) < 0:
            return False
        name = dotted(elements[part].value)
        defs = self.reaching(name, r)[0] if name is not None else ()
        terms = {id(x) for x in self.summand_defs(elements[whole].value, r)}
        return bool(defs) and all(id(x) in terms for x in defs)

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
                assert b.value is not None  # own_backwards keeps those with a value
                names |= self.depends(b.value)
            self._backpropagated = frozenset(names)
        return self._backpropagated

    def feeds_backward(self, kept: set[str], derived: set[str]) -> bool:
        """Does a value the containers `kept` hold, or one of the names `derived` computed from them, flow into a
        backward of this scope where it runs? Flow-sensitive, unlike `backpropagated`: the definitions reaching
        each backward, followed through their operands and the stores into the containers involved, of `kept` or
        reading `derived` (`output = model(batch)` rebound every batch cuts what an earlier epoch stored into
        `output` from the epoch's list of losses)."""
        backwards = self.own_backwards()
        if any(self._names(b.value) & kept for b in backwards):  # type: ignore[arg-type]  # each with a value
            return True
        return any(d.target in kept or d.value is not None and self._names(d.value) & derived
                   for b in backwards for d in self.operand_defs(b.value, b))  # type: ignore[arg-type]  # as above

    def backpropagated_before(self, value: cst.BaseExpression, at: Event) -> bool:
        """A term of `value` is what a backward of the function back-propagated before `at`, with the same
        definitions reaching both (no rebinding between): it carries a graph, whoever built it (`loss =
        self.compute(batch); loss.backward(); opt.step(); return loss`)."""
        backwards = [b for b in self.own_backwards() if b.seq < at.seq]
        for name in summand_names(value) if backwards else ():
            defs = self.reaching(name, at)
            if not defs[0] and not defs[1]:
                continue
            for b in backwards:
                assert b.value is not None  # own_backwards: each with a value
                if name in summand_names(b.value) and self.reaching(name, b) == defs:
                    return True
        return False

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

    def operand_defs(self, expr: cst.BaseExpression, at: Event) -> list[Event]:
        """The definitions whose values `expr` computes with at `at`: reaching definitions followed through terms
        and the arguments of calls, not through what is called (`model(x)` reaches `x`'s definitions, not
        `model = self.train()`), plus what is appended or stored into the containers involved. A loop variable
        ends the walk (its iterable is where the batches come from, not part of a graph)."""
        key = (id(expr), id(at), "operands")
        cached = self._followed.get(key)
        if cached is None:
            cached = self._followed[key] = self._follow(expr, at, lambda e, _at: operand_names(e))
        return cached

    def _follow(self, expr: cst.BaseExpression, at: Event, names_of) -> list[Event]:
        """Reaching definitions of the names `names_of(expr, at)` gives, followed through the values of those
        definitions (and through the old value of an accumulation); loop variables and definitions without a
        value (`del`, `detach_()`) end the walk."""
        out: list[Event] = []
        seen: set[tuple[str, int]] = set()
        seen_defs: set[int] = set()
        todo: list[tuple[str, Event, cst.BaseExpression | None]] = [(n, at, expr) for n in names_of(expr, at)]
        held = {g.condition() for g in at.guards} if at.guards and at.scope is self.node else None
        while todo:
            name, where, read = todo.pop()
            if (name, id(where)) in seen:
                continue
            seen.add((name, id(where)))
            defs, _ = self.reaching(name, where)
            adds = [e for e in self.stores(name) if self.store_reaches(e, where)]
            if read is not None and any(e.variant is AssignForm.ITEM for e in adds):
                # `out["loss"]` read: not what is stored under another literal key (`out["pred"] = p.detach()`)
                keys = read_keys(read, name)
                adds = [e for e in adds if keys is None or e.variant is not AssignForm.ITEM
                        or (key := _store_key(e)) is None or key in keys]
            for d in (*defs, *adds):  # (not one that cannot run in a call that reaches `at`: `_opposed`)
                if id(d) in seen_defs or d.value is None or d.variant is AssignForm.FOR or held and self._opposed(d, held):
                    continue
                seen_defs.add(id(d))
                out.append(d)
                todo.extend((n, d, d.value) for n in names_of(d.value, d))
                if d.accumulates and d.target:
                    todo.append((d.target, d, None))  # the old value, read whole
        return out

    def store_reaches(self, store: Event, at: Event) -> bool:
        """Can what `store` put into its container (`x[i] = v`, `x.append(v)`) still be in it at `at`? Not when
        every path from the store to `at` rebinds the container's name first (`x = batch.float()`)."""
        start, end = self.flow_node(store), self.flow_node(at)
        if start is None or end is None or start == end or store.target is None:
            return True
        kills = self.def_nodes().get(store.target, frozenset())
        return self.flow.reaches_avoiding(start, end, kills)

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

    def declared_shared(self) -> set[str]:
        """The names the function declares `global` or `nonlocal` (its nested functions' declarations aside)."""
        return {n.name.value for node in walk(self.node) if type(node) in (cst.Global, cst.Nonlocal)
                for n in node.names}  # type: ignore[attr-defined]  # Global / Nonlocal

    def mode_params(self) -> frozenset[str]:
        """The parameters a `no_grad` block of the function is guarded by (`if cross_valid:`, `if not train:`)."""
        if not self.params:
            return frozenset()
        found: set[str] = set()
        for e in self.events:
            if "no_grad" in e.contexts and e.scope is self.node:
                found.update(c[0] for g in e.guards if (c := g.condition()) is not None and c[0] in self.params)
        return frozenset(found)

    def given_any(self, call: cst.Call, names: frozenset[str]) -> bool:
        """Does `call` of this function pass an argument for one of `names` (by keyword, or by position, `self` not
        counted)?"""
        positional = [n for n in self.params if n not in ("self", "cls")]
        index = 0
        for arg in call.args:
            if arg.star:
                return True
            if arg.keyword is not None:
                if arg.keyword.value in names:
                    return True
                continue
            if index < len(positional) and positional[index] in names:
                return True
            index += 1
        return False

    def called_names(self) -> frozenset[str]:
        """The names (and dotted names) this scope calls: `criterion(out, y)` gives `criterion`. A value that is
        called is a function, a class or a module, not a tensor."""
        if self._called is None:
            self._called = frozenset(
                name for stmt in self.body for n in walk(stmt)
                if type(n) is cst.Call and (name := dotted(n.func)) is not None
            )
        return self._called

    def is_numeric(self, expr: cst.BaseExpression, _depth: int = 0) -> bool:
        """True when `expr` is plainly a Python number or a size (`1`, `len(x)`, `x.size(0)`, `bs` = such)."""
        if type(expr) in (cst.Integer, cst.Float):
            return True
        if type(expr) is cst.Call:
            func = expr.func
            if type(func) is cst.Name and func.value in ("len", "int", "float", "round"):
                return True
            if type(func) is cst.Attribute and func.attr.value in ("size", "numel", "item", "dim", "tolist"):
                return True
        if type(expr) is cst.Subscript and type(expr.value) is cst.Attribute and expr.value.attr.value == "shape":
            return True
        if type(expr) is cst.BinaryOperation:
            return self.is_numeric(expr.left, _depth) and self.is_numeric(expr.right, _depth)
        name = dotted(expr)
        if name is not None and _depth < 3:
            values = [e.value for e in self.assignments(name) if e.value is not None]
            return bool(values) and all(self.is_numeric(v, _depth + 1) for v in values)
        return False

    def is_loss(self, expr: cst.BaseExpression) -> bool:
        """A value that is a training loss: named like one, or computed by a criterion / loss function (also the
        call itself: `criterion_at(s_feat, t_feat).detach()` detaches a loss)."""
        if type(expr) is cst.Call:
            return _calls_loss_function(expr)
        name = dotted(expr)
        if name is None:
            return False
        last = name.rsplit(".", 1)[-1].lower()
        if "loss" in last or "cost" in last or last in ("l", "nll", "objective"):
            return True
        return any(type(e.value) is cst.Call and _calls_loss_function(e.value) for e in self.assignments(name))


def kills(e: Event) -> bool:
    """An event that gives `e.target` a new value (what the name held before no longer reaches later uses)."""
    if e.kind is EventKind.ASSIGN:
        return e.variant is not AssignForm.ITEM
    return e.kind is EventKind.RESET


def _calls_loss_function(call: cst.Call) -> bool:
    """A call of a criterion or loss function, by its name (`criterion(out, y)`, `F.cross_entropy(...)`)."""
    func = (dotted(call.func) or "").lower()
    return any(w in func for w in LOSS_FUNCTION_WORDS)


def _store_key(e: Event) -> str | None:
    """The literal key an item store writes (`d["kl"] = v`, `d["loss"] += v`), or None."""
    for small in getattr(e.node, "body", ()):
        targets = [t.target for t in small.targets] if type(small) is cst.Assign else \
            [small.target] if type(small) in (cst.AugAssign, cst.AnnAssign) else []
        for t in targets:
            if type(t) is cst.Subscript and dotted(t.value) == e.target:
                return literal_key(t)
    return None
