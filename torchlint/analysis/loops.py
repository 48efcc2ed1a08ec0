"""Queries over one loop's iterations: what runs between two events, whether an iteration can end after an
event, the trip count, whether an unknown call is handed a name, which backwards a step is gated with."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable

import libcst as cst

from torchlint.analysis.events import AssignForm, CallVia, Event, EventKind, Guard, loop_counter
from torchlint.analysis.exprs import (
    calls_anything, code_of, dotted, equals_integer, modulo_divisor, names_in, summand_names,
)
from torchlint.analysis.scopes import Scope
from torchlint.analysis.semantics import ACCUMULATION_NAME, TENSOR_CONSTRUCTORS, is_criterion_name, is_module_name
from torchlint.analysis.walker import tracked_call
from torchlint.source.walk import calls_in_evaluation_order, walk


@dataclass(eq=False)
class Loop:
    """One loop of a scope, with the events of its iterations (inner loops and placed helpers included)."""

    node: cst.CSTNode
    scope: Scope
    events: list[Event]
    _of: dict = field(default_factory=dict, repr=False)  # `of`, by the kinds asked (the events never change)

    def of(self, *kinds: EventKind) -> list[Event]:
        found = self._of.get(kinds)
        if found is None:
            found = self._of[kinds] = tuple(e for e in self.events if e.kind in kinds)
        return list(found)

    @functools.cached_property
    def called(self) -> frozenset[str]:
        """The dotted names the loop's body calls (`model(x)`: `model`), read once per loop."""
        return frozenset(d for n in walk(self.node) if type(n) is cst.Call and (d := dotted(n.func)) is not None)

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

    def invariant(self, expr: cst.BaseExpression) -> bool:
        """`expr` has the same value in every iteration (a configuration flag, `cfg.noam` or `args.sched == "x"`):
        it calls nothing and reads no name this loop binds (its targets, its assignments, those of helpers placed
        in it), nor an attribute of `self` (any method of the object, followed or not, may set it)."""
        if calls_anything(expr):
            return False
        read = names_in(expr)
        return "self" not in read and not read & self.bound

    def first_pass(self, test: cst.BaseExpression, at: Event) -> bool:
        """`test`, read at `at`, may hold in the loop's first pass: it is `invariant` (when it holds, it holds from
        the first pass), or a flag the code sets true before the loop that no assignment inside the loop may change
        ahead of `at` in an iteration (`first = True` ... `if first: sched.step() ... first = False`), or an `and` of
        such tests, or an `or` with one. A flag set false before the loop and true in it (`if started:`), a loop
        counter (`if i > 0:`) or a call are not: they hold later, if ever."""
        if self.invariant(test):
            return True
        if type(test) is cst.BooleanOperation:
            left, right = self.first_pass(test.left, at), self.first_pass(test.right, at)
            return (left and right) if type(test.operator) is cst.And else (left or right)
        if type(test) is not cst.Name or at.scope is not self.scope.node:
            return False
        defs, entry = self.scope.reaching(test.value, at)
        if entry or not defs:
            return False
        inside = [d for d in defs if self.node in d.loops]
        outside = [d for d in defs if self.node not in d.loops]
        return (bool(outside) and all(d.variant is AssignForm.PLAIN and _truthy(d.value) for d in outside)
                and not any(self.may_follow(d, at) for d in inside))

    def first_pass_only(self, test: cst.BaseExpression, at: Event | None = None) -> bool:
        """`test` holds in the loop's first pass and in no other: the loop's counter compared equal to the value it
        starts from (`i == 0` over `enumerate(loader)` or `range(n)`, `step == 1` over `enumerate(loader, 1)`),
        or an `and` with such a test. A counter the loop also assigns is not one. With `at`, the event under the
        test, also a copy of the counter made in the same iteration before `at` (`counter_copies`); when `at` sits
        in a helper, only such a copy in an attribute of `self` (`self.batch_index = i` then `self.step()`)."""
        if type(test) is cst.BooleanOperation:
            return type(test.operator) is cst.And and (self.first_pass_only(test.left, at)
                                                       or self.first_pass_only(test.right, at))
        compared = equals_integer(test)
        counter = self.counter
        if compared is None or counter is None:
            return False
        names = {counter[0]} if at is None or at.scope is self.scope.node else set()
        if at is not None and (at.scope is self.scope.node or self._method_of_same_class(at)):
            names |= {n for n in self.counter_copies(at) if at.scope is self.scope.node or n.startswith("self.")}
        side, value = compared
        return type(side) in (cst.Name, cst.Attribute) and dotted(side) in names and value == counter[1]

    def _method_of_same_class(self, at: Event) -> bool:
        """`at` sits in a method of the loop's own class (its `self` is the loop's `self`)."""
        helper = self.scope.stmt_scope.get(id(at.stmt))
        return helper is not None and helper.class_name is not None and helper.class_name == self.scope.class_name

    def counter_copies(self, at: Event) -> set[str]:
        """Names and attributes the loop binds to its counter (`self.batch_index = i`), unconditionally in its own
        body, ahead of `at` in every iteration, and to nothing else in the loop."""
        counter = self.counter
        if counter is None or self.node is None:
            return set()
        assigns: dict[str, list[Event]] = {}
        for e in self.events:
            if e.kind is EventKind.ASSIGN and e.target and e.target != counter[0]:
                assigns.setdefault(e.target, []).append(e)
        return {name for name, defs in assigns.items() if all(
            d.variant is AssignForm.PLAIN and type(d.value) is cst.Name and d.value.value == counter[0]
            and d.scope is self.scope.node and d.loops and d.loops[-1] is self.node and not d.guards_within(self.node)
            and self.may_follow(d, at) and not self.may_follow(at, d) for d in defs)}

    @functools.cached_property
    def counter(self) -> tuple[str, int] | None:
        """The loop's counter and its first value: `i` from 0 in `for i in range(n)` and `for i, x in
        enumerate(xs)`, from `a` in `range(a, n)` and `enumerate(xs, a)` (integer literals); None when the loop has
        none or assigns it in its body."""
        counter = loop_counter(self.node)
        if counter is None:
            return None
        if any(e.kind is EventKind.ASSIGN and e.target == counter[0] and e.variant is not AssignForm.FOR
               for e in self.events):
            return None
        return counter

    @functools.cached_property
    def bound(self) -> frozenset[str]:
        """The names an iteration binds: the loop's targets, its assignments, those of helpers placed in it."""
        bound = {e.target for e in self.events if e.kind is EventKind.ASSIGN and e.target}
        if type(self.node) is cst.For:
            bound |= names_in(self.node.target)
        return frozenset(bound)

    def unchanged_between(self, expr: cst.BaseExpression, a: Event, b: Event) -> bool:
        """No name `expr` reads is bound on a way from `a` to `b` within one iteration, and it calls nothing: a
        test of it gives at `b` what it gave at `a`. Not an attribute of `self` (a method may set it)."""
        if calls_anything(expr):
            return False
        read = names_in(expr)
        if "self" in read:
            return False
        return not any(e.kind is EventKind.ASSIGN and e.target in read and self.may_follow(a, e)
                       and self.may_follow(e, b) for e in self.events)

    def trip_count(self) -> int | None:
        """How many times the loop runs when that is a constant (`for _ in range(5)`, `range(n)` with `n = 2`)."""
        node = self.node
        if type(node) is not cst.For or type(node.iter) is not cst.Call or dotted(node.iter.func) != "range":
            return None
        args = [a.value for a in node.iter.args if a.keyword is None and not a.star]
        if len(args) not in (1, 2):
            return None
        bounds = [self._constant(a) for a in args]
        if any(b is None for b in bounds):
            return None
        return max(0, bounds[-1] - (bounds[0] if len(bounds) == 2 else 0))  # type: ignore[operator]  # no None (above)

    def _constant(self, expr: cst.BaseExpression) -> int | None:
        if type(expr) is cst.Integer:
            return int(expr.evaluated_value)
        if type(expr) is cst.Name and self.events:
            defs, entry = self.scope.reaching(expr.value, self.events[0])
            if defs and not entry and all(type(d.value) is cst.Integer and d.variant is AssignForm.PLAIN for d in defs):
                values = {int(d.value.evaluated_value) for d in defs}  # type: ignore[union-attr]
                return values.pop() if len(values) == 1 else None
        return None

    def handed_to_unknown(self, name: str) -> bool:
        """A call the model cannot follow is handed `name` in this loop (or, for `self.x`, an unresolved method
        of `self` runs): what that call does with it is not known."""
        last = name.rsplit(".", 1)[-1]
        opaque = self.of(EventKind.OPAQUE)
        if name.startswith("self.") and any((e.callee or "").startswith("self.") and _may_clear(e) for e in opaque):
            return True
        if any(e.variant is CallVia.EXTERNAL and e.target is not None
               and (e.target == name or e.target.rsplit(".", 1)[-1] == last) for e in opaque):
            return True  # another file's function hands it to a call that file cannot follow
        calls = [e.node for e in opaque if e.variant is not CallVia.EXTERNAL]
        # Method calls of other objects (`engine.train_step(model, optimizer)`) are not events: look for them
        # only now, when a rule needs the answer.
        body = self.node if self.node is not None else self.scope.node  # a headless iteration: its function
        calls += [c for c in calls_in_evaluation_order(body)
                  if type(c.func) is cst.Attribute and id(c) not in self.scope.resolved_calls]
        stepping = {id(e.node) for e in self.of(EventKind.STEP)}  # `xm.optimizer_step(opt)`: known to step it
        for call in calls:
            if type(call) is cst.Call and not tracked_call(call) and id(call) not in stepping:
                for a in call.args:
                    arg = dotted(a.value)
                    if arg is not None and (arg == name or arg.rsplit(".", 1)[-1] == last):
                        return True
        return False

    def backpropagated_term(self, e: Event, terms=None) -> Event | None:
        """A backward of this iteration that shows the value `e` keeps to carry a graph, whoever built it: the
        kept value and the back-propagated one share the definition of a term (`loss` itself, `loss / n`,
        `out["loss"]`, the tuple of parts whose `sum(parts)` is back-propagated). A value is back-propagated only
        if it has a graph there, so this holds for a method's result the analysis cannot resolve. `terms` narrows
        the terms of an expression as in `Scope.summand_defs`. Only a backward of the same innermost loop counts:
        an epoch loop that keeps what the batch loop summed is judged where the sum grows."""
        assert e.value is not None and e.loops  # the events asked about keep a value, in a loop
        scope = self.scope
        kept = {id(d) for d in scope.summand_defs(e.value, e, terms)}
        same = dotted(e.value)
        for b in self.of(EventKind.BACKWARD):
            if b.scope is not scope.node or b.value is None or not b.loops or b.loops[-1] is not e.loops[-1]:
                continue  # an inner loop's backward: what the outer one keeps is a total, judged where it grows
            if any(id(d) in kept for d in scope.summand_defs(b.value, b, terms)):
                return b
            if same is not None and "." in same and not same.startswith("self.") and dotted(b.value) == same:
                root = same.split(".", 1)[0]  # `out.loss`, back-propagated and kept: the same `out`
                defs = scope.reaching(root, b)
                if defs[0] and not defs[1] and defs == scope.reaching(root, e):
                    return b
        return None

    def carries(self, e: Event) -> bool:
        """The container `e` adds into outlives the iteration: bound before the loop and not rebound inside it
        (or an attribute of `self`)."""
        scope, target = self.scope, e.target or ""
        resets = [a for a in self.events if a.target == target and a.rebinds and a.scope is scope.node
                  and a.node is not e.node  # (not `e` itself, read as an addition: `total = add(total, loss)`)
                  and not a.seeds]  # (`if total is None: total = loss`)
        if resets:
            # Reset only every k-th iteration (`if i % log_every == 0: total = 0`), k not a small constant: between
            # resets it keeps k iterations' graphs.
            return all(self.periodic(a) for a in resets)
        return any(a.rebinds and self.node not in a.loops for a in scope.assignments(target)) or (
            target.startswith("self.")) or target in scope.params  # (a parameter: the caller's object, or its default)

    def periodic(self, e: Event) -> bool:
        """Does `e` run only every k-th iteration of this loop (under `i % k == r`), k not a constant of at most
        30, nor the divisor of the window an optimizer steps in or one named as accumulation steps (a reset per
        step of an accumulation window keeps one step's micro-batches)?"""
        if self.node is None:
            return False
        k = self._divisor(e)
        if k is None or type(k) is cst.Integer and int(k.evaluated_value) <= 30 or ACCUMULATION_NAME.search(code_of(k)):
            return False  # (a divisor named as accumulation steps: the window of one optimizer step)
        return not any((w := self._divisor(s)) is not None and code_of(w) == code_of(k)
                       for s in self.of(EventKind.STEP))

    def _divisor(self, e: Event) -> cst.BaseExpression | None:
        for g in e.guards_within(self.node) if self.node is not None else ():
            test = self.scope.test_of(g, e) if not g.negated else None
            k = modulo_divisor(test) if isinstance(test, cst.BaseExpression) else None
            if k is not None:
                return k
        return None

    def within_one_step(self, e: Event) -> bool:
        """The container `e` adds into is carried across a loop that never steps (the micro-batches of one step),
        and an enclosing loop binds it afresh: it holds one step's graphs at most, already back-propagated."""
        if self.of(EventKind.STEP, EventKind.RUN):
            return False
        scope, target = self.scope, e.target or ""
        defs = scope.assignments(target)
        if any(a.target == target and a.rebinds and a.loops and self.node not in a.loops
               and any(outer in e.loops for outer in a.loops) for a in defs):
            return True
        # A local of a function, bound outside any loop, summed over its one loop of micro-batches, with the
        # optimizer stepped once after that loop (`for i in range(accumulate): ... backward(); total += loss`, then
        # `opt.step()`): one step's graphs, dropped when the call returns.
        if type(scope.node) is not cst.FunctionDef or "." in (target or ".") or e.loops != (self.node,):
            return False
        last = max(x.seq for x in self.events)
        return all(not a.loops for a in defs if a.rebinds) and any(
            s.kind is EventKind.STEP and not s.loops and s.seq > last for s in scope.events)

    def repeats_one_batch(self, e: Event) -> bool:
        """The container `e` adds into is bound afresh by an enclosing loop (once per batch), and this loop, the
        innermost around `e`, repeats work on that batch: a `for` whose body never reads its target (`for _ in
        range(n_critic)`: the critic's updates on one batch; not one that draws data, `next(it)`). It keeps the graphs
        of one batch's repetitions, dropped at the next batch: as many as the repetitions, not a number that grows
        with training."""
        node = self.node
        if type(node) is not cst.For or not e.loops or e.loops[-1] is not node:
            return False
        if names_in(node.target) - {"_"} & names_in(node.body) or self._draws_data(node):
            return False  # (`x, y = next(batches)`, `users = sampler.sample()`: a new batch each round)
        target = e.target or ""
        return any(a.rebinds and a.loops and node not in a.loops and any(outer in e.loops for outer in a.loops)
                   for a in self.scope.assignments(target))

    def _draws_data(self, node: cst.CSTNode) -> bool:
        """Does the loop `node` bind a name to what a call other than a model's, a criterion's or torch's returns
        (`batch = next(it)`, `users, items = sampler.sample()`): data that may be new each round?"""
        for e in self.events:
            if (e.kind is not EventKind.ASSIGN or node not in e.loops or type(e.value) is not cst.Call
                    or e.variant is AssignForm.FOR):
                continue  # (an inner loop's own target: what it iterates is judged where it accumulates)
            name = dotted(e.value.func) or ""
            if name.split(".", 1)[0] in ("torch", "F", "nn") or is_module_name(name) or is_criterion_name(name):
                continue
            return True
        return False

    def takes_items(self, name: str) -> bool:
        """The loop takes items out of the list `name` (`window.pop(0)`, `del window[0]`, `clear()`)."""
        return _takes_items(self.node, name)

    def backpropagates_latest(self, e: Event) -> Event | None:
        """`history.append(loss)`, then `history[-1].backward()`: the backward of this iteration that reads only the
        item `e` just appended, while the list keeps every earlier one. What is back-propagated carries a graph,
        so the appended value does, whoever built it; and no backward reads the earlier items again. A list the
        loop takes items out of (`pop`, `clear`, `del xs[0]`), or not built as a plain list (a `deque(maxlen=k)`),
        or that another backward reads as a whole, is not one."""
        scope, name = self.scope, e.target
        if e.kind is not EventKind.APPEND or name is None or e.scope is not scope.node:
            return None
        defs = [a for a in scope.assignments(name) if a.rebinds]
        if not defs or not all(_new_list(a.value) for a in defs):
            return None
        latest = None
        for b in self.scope.own_backwards():
            if name not in scope.depends(b.value):  # type: ignore[arg-type]  # own_backwards: each with a value
                continue
            if (not _last_item_of(b.value, name) or not b.loops or not e.loops or b.loops[-1] is not e.loops[-1]
                    or not self.may_follow(e, b)):
                return None
            latest = b
        if latest is None or _takes_items(self.node, name):
            return None
        return latest

    def keeps_inner_total(self, e: Event, graph_free: Callable[[str], bool]) -> bool:
        """What `e` keeps is a running total an inner loop sums (`running += loss` over the batches, then
        `history.append(running / n)` per epoch), beside terms without a graph (`graph_free`): the total is judged
        where it grows, not again where it is kept. Not a sum that is back-propagated (a batch's loss summed over
        its sequences): that one is no log, and what keeps it is."""
        assert e.value is not None  # the events asked about keep a value
        inner = set()
        names = summand_names(e.value)
        backpropagated = self.scope.backpropagated()
        for name in names:
            if name not in backpropagated and any(
                    d.accumulates and len(d.loops) > len(e.loops) and d.loops[:len(e.loops)] == e.loops
                    for d in self.scope.reaching(name, e)[0]):
                inner.add(name)
        return bool(inner) and all(graph_free(n) for n in names - inner)

    def fills_local_buffer(self, e: Event) -> bool:
        """`q[:, t] = q_t` over `for t in range(T)`, into a tensor the function allocates before its loops
        (`q = torch.zeros_like(...)`): a buffer of fixed shape, filled slot by slot over a counted loop and dropped
        when the call returns. What it holds is bounded by its shape, not by the number of training steps."""
        scope, node = self.scope, self.node
        if e.variant is not AssignForm.ITEM or e.accumulates or type(scope.node) is not cst.FunctionDef:
            return False
        it = node.iter if type(node) is cst.For else None
        while type(it) is cst.Call and dotted(it.func) == "reversed" and it.args:
            it = it.args[0].value
        if type(it) is not cst.Call or dotted(it.func) != "range" or not e.loops or e.loops[0] is not node:
            return False
        defs = [a for a in scope.assignments(e.target or "") if a.rebinds]
        return bool(defs) and "." not in (e.target or ".") and all(not a.loops and _allocated(a.value) for a in defs)

    def backwards_into_grad(self) -> list[Event]:
        """The backwards of the iteration that add into `.grad` (not `autograd.grad`, not dist_autograd)."""
        return [b for b in self.of(EventKind.BACKWARD) if b.into_grad()]

    def gated_with(self, step: Event, guard: Guard | None = None) -> list[Event]:
        """Backwards under the same guard as `step` (within this loop; only `guard`, one of the step's, when given):
        the guard that gates a step also gates the backward that serves it, so such a step is not fed by the
        backwards that run every iteration (a GAN's generator trained every n_critic steps)."""
        tests = {id(g.test) for g in step.guards_within(self.node) if not g.negated and (guard is None or g is guard)}
        return [
            b for b in self.backwards_into_grad()
            if tests & {id(g.test) for g in b.guards_within(self.node) if not g.negated}
        ]

    @property
    def outermost(self) -> bool:
        """Not nested in another loop of the same function."""
        return self.events[0].loops[0] is self.node if self.events else True


def _may_clear(e: Event) -> bool:
    """Can the unresolved call of `e` clear gradients? Not a context manager's factory (`with
    self.train_context(ctx):` enters and leaves a context), nor a criterion or a model an attribute holds (`loss =
    self.loss_fn(pred, y)`, `self.net(x)`: it computes a loss, runs a forward)."""
    if type(e.stmt) is cst.With and any(item.item is e.node for item in e.stmt.items):
        return False
    callee = e.callee or ""
    return not (callee.count(".") == 1 and (is_criterion_name(callee) or is_module_name(callee)))


def _allocated(value: cst.BaseExpression | None) -> bool:
    """`torch.zeros(...)`, `th.zeros_like(x)[:, :-1]`: a new tensor without a graph (no `requires_grad`)."""
    while type(value) is cst.Subscript:
        value = value.value
    if type(value) is not cst.Call or (func := dotted(value.func)) is None or "." not in func:
        return False
    return func.rsplit(".", 1)[1] in TENSOR_CONSTRUCTORS and not any(
        a.keyword is not None and a.keyword.value == "requires_grad" for a in value.args)


def _truthy(value: cst.BaseExpression | None) -> bool:
    """`True` or a non-zero integer literal."""
    if type(value) is cst.Name:
        return value.value == "True"
    return type(value) is cst.Integer and int(value.evaluated_value) != 0


def _new_list(value: cst.BaseExpression | None) -> bool:
    """`[]` or `list()`: a list that grows without bound as items are appended."""
    return type(value) is cst.List or (type(value) is cst.Call and dotted(value.func) == "list" and not value.args)


def _last_item_of(value: cst.BaseExpression | None, name: str) -> bool:
    """`xs[-1]`: the item appended last."""
    if type(value) is not cst.Subscript or dotted(value.value) != name or len(value.slice) != 1:
        return False
    index = value.slice[0].slice
    if type(index) is not cst.Index:
        return False
    v = index.value
    return (type(v) is cst.UnaryOperation and type(v.operator) is cst.Minus and type(v.expression) is cst.Integer
            and v.expression.value == "1") or (type(v) is cst.Integer and v.value == "-1")


_TAKING = frozenset({"pop", "popleft", "clear", "remove"})


def _takes_items(loop: cst.CSTNode, name: str) -> bool:
    """The loop takes items out of the list `name` (`xs.pop(0)`, `xs.clear()`, `del xs[0]`): it stays bounded."""
    for n in walk(loop):
        if type(n) is cst.Call and type(n.func) is cst.Attribute and n.func.attr.value in _TAKING \
                and dotted(n.func.value) == name:
            return True
        if type(n) is cst.Del and name in names_in(n.target):
            return True
    return False


def optimizer_loop(loop: Loop, update: Event) -> cst.For | None:
    """The `for` loop `update` runs in, when its target is the optimizer the scaler steps in it (`for opt in
    optimizers: scaler.step(opt)`), and the scaler the same in every pass (not bound by the loop's target, directly
    or through an assignment in the loop that reads it: `scaler = scalers[i]`)."""
    inner = update.loops[-1] if update.loops else None
    if type(inner) is not cst.For or update.target is None:
        return None
    per_pass = names_in(inner.target)
    if update.target in per_pass or update.target.split(".")[0] in per_pass or any(
            e.target == update.target and e.loops and e.loops[-1] is inner and (e.value is None or names_in(e.value) & per_pass)
            for e in loop.of(EventKind.ASSIGN)):
        return None
    steps = [s for s in loop.of(EventKind.STEP) if s.via == update.target]
    return inner if any(f is inner for f in optimizers_loops(steps)) else None


def optimizers_loops(steps: list[Event]) -> list[cst.For]:
    """The `for opt in optimizers:` loops some step of `steps` runs in directly, stepping the optimizer of the pass
    (`scaler.step(opt)`, `scaler.step(opt[0])`)."""
    found = {id(f): f for s in steps if s.kind is EventKind.STEP and s.target and s.loops
             and type(f := s.loops[-1]) is cst.For and s.target.split(".")[0].split("[")[0] in names_in(f.target)}
    return list(found.values())
