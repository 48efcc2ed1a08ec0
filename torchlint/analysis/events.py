"""The data the training-loop model is made of: events in program order, with their guards and loops."""

from __future__ import annotations

import functools
import operator
import re

from dataclasses import MISSING, dataclass, field, fields
from enum import Enum

import libcst as cst

from torchlint.analysis.exprs import dotted, equals_integer
from torchlint.source.cstfast import code_of

# How deep a helper's events are placed at its call (a helper of a helper, no further): the file model inlines
# this deep, and pruning keeps the helpers a loop reaches this deep.
INLINE_DEPTH = 2
# Below that depth, only the clearings of a helper's helpers are placed, this many calls further
# (`self._train_step()` calling `self._reset_grad()`, which calls `optimizer.zero_grad()`): a gradient cleared
# there is cleared for the loop, however deep the call.
CLEARING_DEPTH = 2


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


# What variant of its kind an event is (`Event.variant`): one plain `Enum` per kind that has variants, not a
# `str` enum, so that comparing a variant with a string is never true by accident. The values are the words an
# exported event is written with (`foreign.ExportedEvent.variant`).


class BackwardVia(Enum):
    """How a BACKWARD back-propagates, and so where its gradients go."""

    TENSOR = "tensor"  # `loss.backward()`
    SCALER = "scaler"  # `scaler.scale(loss).backward()`: `via` names the GradScaler
    ACCELERATOR = "accelerator"  # `accelerator.backward(loss)` (Accelerate, Fabric)
    ENGINE = "engine"  # `engine.backward(loss)` (a DeepSpeed engine)
    LIGHTNING = "lightning"  # `self.manual_backward(loss)`
    OPTIMIZER = "optimizer"  # `optimizer.backward(loss)` (apex FP16_Optimizer, DeepSpeed, ColossalAI wrappers)
    AUTOGRAD = "autograd"  # `torch.autograd.backward(loss)`: into `.grad`, like `loss.backward()`
    AUTOGRAD_GRAD = "grad"  # `torch.autograd.grad(loss, params)`: the gradients are returned, `.grad` untouched
    DIST = "dist"  # `dist_autograd.backward(context_id, roots)`: the gradients go to the dist_autograd context

    @property
    def into_grad(self) -> bool:
        """Its gradients are added into the leaves' `.grad` (not returned, as `autograd.grad`'s, nor kept in a
        dist_autograd context, read by `DistributedOptimizer.step(context_id)`, where there is nothing to zero)."""
        return self is not BackwardVia.AUTOGRAD_GRAD and self is not BackwardVia.DIST


# Backwards whose framework divides the loss by the number of accumulation steps itself.
SELF_SCALING_BACKWARDS = (BackwardVia.ACCELERATOR, BackwardVia.ENGINE)


class StepVia(Enum):
    """A STEP other than a plain `optimizer.step()` / `scaler.step(optimizer)` (variant None)."""

    DIST_CONTEXT = "context"  # `DistributedOptimizer.step(context_id)` under `dist_autograd.context()`


class ZeroGradOf(Enum):
    """What a ZERO_GRAD clears."""

    OPTIMIZER = "optimizer"  # `optimizer.zero_grad()`: the parameters that optimizer steps
    MODEL = "model"  # `model.zero_grad()` (any receiver not known as an optimizer): that model's parameters
    PARAM = "param"  # `p.grad = None`, `p.grad.zero_()`, `zero_grad(params)`: the gradients it names


class ClipVia(Enum):
    """How a CLIP clips the gradients."""

    TORCH = "torch"  # `torch.nn.utils.clip_grad_norm_(...)`, `clip_grad_value_(...)`
    ACCELERATOR = "accelerator"  # `accelerator.clip_grad_norm_(...)`: unscales a prepared GradScaler's first
    BY_HAND = "by_hand"  # `p.grad.data.clamp_(-c, c)`: each gradient clamped to a range


class ResetOf(Enum):
    """A RESET of what a container holds rather than of the name itself (`del x`, `xs.clear()`,
    `x.detach_()`: variant None)."""

    ITEMS = "item"  # `hidden[0].detach_()`, `for s in state: s.detach_()`: the container's tensors, in place


class AssignForm(Enum):
    """The form of an ASSIGN: how the target gets its new value."""

    PLAIN = "="  # `x = v` (also `x: T = v`, `with ... as x`)
    SELF_ADD = "=+"  # `x = x + v`: `value` is the added term `v`
    ADD = "+="  # `x += v`
    SUB = "-="  # `x -= v`
    MUL = "*="  # `x *= v`
    DIV = "/="  # `x /= v`
    OTHER_OP = "op="  # any other augmented assignment (`x //= v`, `x |= v` ...)
    UNPACK_FIRST = "tuple0"  # `x, y = v`: the first name of an unpacked target (`index` 0)
    UNPACK = "tuple"  # `x, y = v`: a later name of an unpacked target (`index` says which)
    ITEM = "item="  # `d[k] = v`, `d.x[k] = v`: stores into the container `target` without rebinding it
    FOR = "for"  # `for x in v:`: the loop target, bound to each item of `v` (`index` for `for x, y in v`)


class CallVia(Enum):
    """A LOCAL_CALL (and the OPAQUE or RUN event it may become) other than a call of a function or `self.`
    method of the file by its name (variant None)."""

    CLOSURE = "closure"  # `optimizer.step(closure)`: the function named `closure`, which step calls
    FACTORY = "factory"  # `optimizer.step(self.make_closure(x))`: the closure a function of the file returns
    MODULE = "module"  # `engine.train_one_epoch(...)`: a function of another module of the project
    OBJECT = "object"  # `trainer.train_step(x)`: a method of an object whose class is known only after the walk
    EXTERNAL = "external"  # OPAQUE: another file's function hands `target` to a call that file cannot follow
    RUN = "run"  # RUN: the call trains (a whole run, its own loop steps `target`)


Variant = BackwardVia | StepVia | ZeroGradOf | ClipVia | ResetOf | AssignForm | CallVia

# The variants each kind's events take (kinds not listed have none).
VARIANTS: dict[EventKind, type[Enum]] = {
    EventKind.BACKWARD: BackwardVia, EventKind.STEP: StepVia, EventKind.ZERO_GRAD: ZeroGradOf,
    EventKind.CLIP: ClipVia, EventKind.RESET: ResetOf, EventKind.ASSIGN: AssignForm,
    EventKind.LOCAL_CALL: CallVia, EventKind.OPAQUE: CallVia, EventKind.RUN: CallVia,
}


def variant_named(kind: EventKind, word: str) -> Variant | None:
    """The variant of a `kind` event written as `word` (an exported event's), None for ""."""
    return VARIANTS[kind](word) if word else None  # type: ignore[return-value]


def variant_word(variant: Variant | None) -> str:
    """How an exported event writes its variant: its value, "" for none."""
    return variant.value if variant is not None else ""


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
    name = dotted(test) if type(test) is cst.Name or type(test) is cst.Attribute else None  # (no code generated)
    return (name if name is not None else code_of(test)), polarity


def _first_pass(test: cst.CSTNode, loop: cst.CSTNode) -> bool:
    """`i == 0` (`0 == i`, `not i`) where `i` is the counter of `loop` and counts from 0 (`loop_counter`): true on
    the loop's first pass only."""
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        compared: tuple[cst.BaseExpression, int] | None = (test.expression, 0)
    else:
        compared = equals_integer(test)
    return compared is not None and compared[1] == 0 and type(compared[0]) is cst.Name \
        and loop_counter(loop) == (compared[0].value, 0)


def loop_counter(loop: cst.CSTNode) -> tuple[str, int] | None:
    """The counter a `for` loop's header binds and its first value: `i` from 0 in `for i in range(n)` and `for i,
    x in enumerate(xs)`, from `a` in `range(a, n)` and `enumerate(xs, a)` (integer literals); None for any other
    loop. Whether the body assigns the counter too is the loop's to say (`Loop.counter`)."""
    if type(loop) is not cst.For or type(loop.iter) is not cst.Call:
        return None
    func = dotted(loop.iter.func)
    args = [a for a in loop.iter.args if not a.star]
    target: cst.BaseExpression = loop.target
    if func == "enumerate" and type(target) is cst.Tuple and len(target.elements) == 2:
        target = target.elements[0].value
        start = [a.value for a in args[1:2] if a.keyword is None or a.keyword.value == "start"]
    elif func == "range" and len(args) in (1, 2, 3) and all(a.keyword is None for a in args):
        start = [args[0].value] if len(args) > 1 else []
    else:
        return None
    if type(target) is not cst.Name or (start and type(start[0]) is not cst.Integer):
        return None
    return target.value, int(start[0].evaluated_value) if start else 0  # type: ignore[attr-defined]  # an Integer


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
    if any(_disjoint(x, y) for x in need_a for y in need_b):
        return True
    return _denies_all(a, need_b) or _denies_all(b, need_a)


_BOUND = re.compile(r"^(.+?)\s*(==|!=|>=|<=|>|<)\s*(-?\d+)$")
_HOLDS = {"==": operator.eq, "!=": operator.ne, ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}


@functools.lru_cache(maxsize=4096)
def _bound(text: str) -> re.Match | None:
    return _BOUND.match(text) if text[-1:].isdigit() else None


def _disjoint(x: tuple[str, bool], y: tuple[str, bool]) -> bool:
    """Two bounds of one expression by integer constants that no value meets both (`k == 1` and `k > 1`, the
    branches of an accumulation setting tested twice)."""
    mx = _bound(x[0])
    my = _bound(y[0]) if mx is not None else None
    if mx is None or my is None or mx.group(1) != my.group(1):
        return False
    cx, cy = int(mx.group(3)), int(my.group(3))
    values = range(min(cx, cy) - 2, max(cx, cy) + 3)  # enough to tell: the bounds change only at the constants
    return not any(_HOLDS[mx.group(2)](v, cx) == x[1] and _HOLDS[my.group(2)](v, cy) == y[1] for v in values)


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
    variant: Variant | None = None  # which variant of its kind (BackwardVia, AssignForm ...: see VARIANTS)
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

    def into_grad(self) -> bool:
        """A backward whose gradients are added into the leaves' `.grad` (`BackwardVia.into_grad`)."""
        return isinstance(self.variant, BackwardVia) and self.variant.into_grad

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
        return self.kind is EventKind.ASSIGN and self.variant in (AssignForm.ADD, AssignForm.SELF_ADD)

    @property
    def rebinds(self) -> bool:
        """A plain assignment that drops what the target held (and with it any graph)."""
        if self.kind is EventKind.ASSIGN:
            return self.variant in (AssignForm.PLAIN, AssignForm.UNPACK_FIRST, AssignForm.UNPACK)
        return self.kind is EventKind.RESET

    @property
    def seeds(self) -> bool:
        """A binding under its own target's `is None` test (`if total is None: total = loss`), or under the test of
        a loop's first pass (`if i == 0: total = loss` in `for i, b in enumerate(loader)` or `for i in range(n)`):
        it starts a total once, and the additions after it never bring `None` back, so it drops no graph."""
        return self.target is not None and any(
            g.condition() == (self.target, False)
            or not g.negated and 0 < g.depth <= len(self.loops) and _first_pass(g.test, self.loops[g.depth - 1])
            for g in self.guards)

    def guards_within(self, loop: cst.CSTNode) -> tuple[Guard, ...]:
        """Guards between `loop` and the event (ignoring those outside the loop)."""
        depth = self.loops.index(loop) + 1 if loop in self.loops else 0
        return tuple(g for g in self.guards if g.depth >= depth)


_EVENT_FIELDS = frozenset(f.name for f in fields(Event))
_EVENT_DEFAULTS = {f.name: f.default for f in fields(Event) if f.default is not MISSING}


def innermost_common(a: tuple[cst.CSTNode, ...], b: tuple[cst.CSTNode, ...]) -> cst.CSTNode | None:
    """The innermost loop (or other node) that both nestings share."""
    common = None
    for x, y in zip(a, b):
        if x is not y:
            break
        common = x
    return common
