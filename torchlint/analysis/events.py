"""The data the training-loop model is made of: events in program order, with their guards and loops."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from enum import Enum

import libcst as cst

from torchlint.source.cstfast import code_of

# How deep a helper's events are placed at its call (a helper of a helper, no further): the file model inlines
# this deep, and pruning keeps the helpers a loop reaches this deep.
INLINE_DEPTH = 2


class EventKind(str, Enum):
    BACKWARD = "backward"  # loss.backward(), scaler.scale(loss).backward(), accelerator.backward(loss), autograd.grad
    STEP = "step"  # optimizer.step(), scaler.step(optimizer)
    ZERO_GRAD = "zero_grad"  # optimizer.zero_grad(), model.zero_grad(), p.grad = None, p.grad.zero_()
    SCHED_STEP = "scheduler_step"
    SCALER_UPDATE = "scaler_update"
    SCALER_UNSCALE = "scaler_unscale"
    CLIP = "clip_grad"
    ASSIGN = "assign"  # x = ..., x += ..., x /= ...
    APPEND = "append"  # xs.append(v)
    RESET = "reset"  # del x, xs.clear(), x.detach_()
    FAKE_RESET = "fake_reset"  # x.data.zero_(): clears the value, keeps the graph
    LOCAL_CALL = "local_call"  # a call to a function of this file; expanded into the callee's events
    METHOD = "method"  # a method call of interest, before classification
    OPAQUE = "opaque"  # a call the model cannot follow (another file, a library) that is handed names
    RETURN = "return"  # `return value`: what the function summary's return kind is computed from
    RUN = "run"  # a call to a function that trains (its own loop steps `target`): a whole run, at its call


@dataclass(frozen=True)
class Guard:
    """An `if` (or `except`/`case`) that an event sits under; `negated` for its `else` branch."""

    test: cst.CSTNode
    negated: bool = False
    depth: int = 0  # how many loops enclosed the guard when it was entered
    _condition: object = field(default=None, compare=False, repr=False)  # memo of condition()

    def condition(self) -> tuple[str, bool] | None:
        if self._condition is None:
            object.__setattr__(self, "_condition", (self._compute_condition(),))
        return self._condition[0]  # type: ignore[index]  # the memo, set just above when it was None

    def _compute_condition(self) -> tuple[str, bool] | None:
        """The condition as (text, polarity), with `x is not None` read as `x` and `not x`/`x is None` as the
        negation of `x`: two guards with the same text and opposite polarity never hold together, even when
        one is in a helper (`if scaler is not None: scaler.scale(loss).backward()`) and one in its caller
        (`else: optimizer.step()` under `if scaler is not None`)."""
        if not isinstance(self.test, cst.BaseExpression):
            return None
        return _literal(self.test, not self.negated)


def _literal(test: cst.BaseExpression, polarity: bool) -> tuple[str, bool]:
    while type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        test, polarity = test.expression, not polarity
    if (type(test) is cst.Comparison and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].comparator, cst.Name)
            and test.comparisons[0].comparator.value == "None"):
        op = test.comparisons[0].operator
        if type(op) is cst.IsNot:
            test = test.left
        elif type(op) is cst.Is:
            test, polarity = test.left, not polarity
    return code_of(test), polarity


def _conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """`a and b and c` -> [a, b, c]; anything else -> [itself]."""
    if type(test) is cst.BooleanOperation and type(test.operator) is cst.And:
        return _conjuncts(test.left) + _conjuncts(test.right)
    return [test]


def contradict(a: tuple[Guard, ...], b: tuple[Guard, ...]) -> bool:
    """Some condition `a` needs is the negation of one `b` needs. A guard `if x and y:` needs x and y; its `else`
    contradicts guards that need both (`if args.fp16 and args.amp == "pytorch": scaler.step(...) else:
    optimizer.step()` never runs with a backward under `if args.fp16:` and `if args.amp == "pytorch":`)."""
    if not a or not b:
        return False
    need_a, need_b = _needs(a), _needs(b)
    if any((text, not polarity) in need_a for text, polarity in need_b):
        return True
    return _denies_all(a, need_b) or _denies_all(b, need_a)


def _needs(guards: tuple[Guard, ...]) -> set[tuple[str, bool]]:
    """What holding all `guards` implies: each condition, and each conjunct of an `and` that holds."""
    out = {c for g in guards if (c := g.condition()) is not None}
    for g in guards:
        if not g.negated and type(g.test) is cst.BooleanOperation:
            out.update(_literal(t, True) for t in _conjuncts(g.test))
    return out


def _denies_all(guards: tuple[Guard, ...], need: set[tuple[str, bool]]) -> bool:
    """One of `guards` is the `else` of an `and` whose every conjunct `need` holds."""
    for g in guards:
        if g.negated and type(g.test) is cst.BooleanOperation and type(g.test.operator) is cst.And:
            if all(_literal(t, True) in need for t in _conjuncts(g.test)):
                return True
    return False


@dataclass(frozen=True, eq=False)
class Event:
    kind: EventKind
    node: cst.CSTNode  # the call / statement the event stands for; diagnostics point here
    stmt: cst.CSTNode  # the statement line holding it (where fixes insert)
    scope: cst.CSTNode  # the function (or module) whose names `value` and `target` refer to
    loops: tuple[cst.CSTNode, ...] = ()  # enclosing for/while nodes, outermost first
    guards: tuple[Guard, ...] = ()
    contexts: tuple[str, ...] = ()  # "no_grad", "accumulate", "autocast", "no_sync", "enable_grad"
    target: str | None = None  # optimizer / total / container / receiver, as a dotted name
    value: cst.BaseExpression | None = None  # back-propagated expression, assigned or appended value
    flavor: str = ""  # backward: tensor|scaler|accelerator|engine|lightning|autograd|grad; assign: the operator
    retain_arg: cst.Arg | None = None  # the `retain_graph=True` argument of a backward
    create_graph: bool = False
    via: str | None = None  # the GradScaler involved, if any
    callee: str | None = None  # LOCAL_CALL: "name" or "self.name"
    inlined_from: cst.CSTNode | None = None  # the call site when the event comes from a helper
    # The call statements from the owning scope down to `stmt`, then `stmt`: `path[0]` is where the event happens
    # in the owning scope (the call, for a helper's event).
    path: tuple[cst.CSTNode, ...] = ()
    origin: tuple[str, int] | None = None  # (file, line) of the event in another file of the project
    index: int = -1  # ASSIGN to one name of a tuple target: its position (`out, hidden = model(x, hidden)`)
    seq: int = 0

    @staticmethod
    def at(kind: EventKind, node: cst.CSTNode, stmt: cst.CSTNode, scope: cst.CSTNode, loops: tuple, guards: tuple,
           contexts: tuple, **rest: object) -> "Event":
        """`Event(...)` without the generated constructor's per-field work (the walk makes one per call it sees)."""
        assert rest.keys() <= _EVENT_FIELDS, rest.keys() - _EVENT_FIELDS
        new = object.__new__(Event)
        state = new.__dict__
        state.update(_EVENT_DEFAULTS)
        state.update(kind=kind, node=node, stmt=stmt, scope=scope, loops=loops, guards=guards, contexts=contexts)
        state.update(rest)
        return new

    def but(self, **changes: object) -> "Event":
        """A copy with `changes`: `dataclasses.replace` without its per-field work (events are copied in bulk)."""
        assert changes.keys() <= _EVENT_FIELDS, changes.keys() - _EVENT_FIELDS
        new = object.__new__(Event)
        state = new.__dict__
        state.update(self.__dict__)
        state.update(changes)
        return new

    @property
    def accumulates(self) -> bool:
        """`t += x` or `t = t + x`: the value is added to what the target already holds."""
        return self.kind is EventKind.ASSIGN and self.flavor in ("+=", "=+")

    @property
    def rebinds(self) -> bool:
        """A plain assignment that drops what the target held (and with it any graph)."""
        if self.kind is EventKind.ASSIGN:
            return self.flavor in ("=", "tuple0", "tuple")
        return self.kind is EventKind.RESET

    def guards_within(self, loop: cst.CSTNode) -> tuple[Guard, ...]:
        """Guards between `loop` and the event (ignoring those outside the loop)."""
        depth = self.loops.index(loop) + 1 if loop in self.loops else 0
        return tuple(g for g in self.guards if g.depth >= depth)


_EVENT_FIELDS = frozenset(f.name for f in fields(Event))
_EVENT_DEFAULTS = {f.name: f.default for f in fields(Event) if f.default is not MISSING}
