"""Which `zero_grad()` clears the gradients of which optimizer, and when a clearing wipes what a step needs:
queries over one loop that the rules about clearing (a missing one, one in the wrong place, an accumulation window
wiped) share."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.events import SELF_SCALING_BACKWARDS, AssignForm, Event, EventKind, Guard, ZeroGradOf
from torchlint.analysis.exprs import calls_anything, code_of, dotted, last_part, modulo_divisor, names_in
from torchlint.analysis.loops import Loop
from torchlint.analysis.model import FileModel
from torchlint.analysis.semantics import ACCUMULATION_NAME, GRAD_RESCALING_METHODS, MODULE_WRAPPERS
from torchlint.source.walk import calls_in_evaluation_order, walk


def clears(model: FileModel, opt: str, z: Event) -> bool:
    """Does the ZERO_GRAD event `z` clear the gradients that optimizer `opt` steps with?"""
    if z.variant is ZeroGradOf.PARAM:
        return True
    target = z.target or ""
    if z.variant is ZeroGradOf.OPTIMIZER:
        return (target == opt or target.rsplit(".", 1)[-1] == opt.rsplit(".", 1)[-1]
                or opt.startswith(target + ".")  # the wrapper holding it (`self.optim.zero_grad()`, `.optimizer` stepped)
                or handed_to_base(model, opt, target))
    # model.zero_grad(): clears the optimizer unless we know it optimizes other models (not known of a parameter:
    # `def train_both(adv, adv_optimizer): ... adv.zero_grad()`, whatever the file binds under that name elsewhere)
    scope = model.scope_at(z.scope)
    root = opt.split(".", 1)[0]
    if scope is not None and root in scope.params and root not in ("self", "cls") and not scope.assignments(opt):
        return True
    owned = _owned(model, opt)
    return not owned or target == "self" or any(_related(target, m) for m in owned)


def handed_to_base(model: FileModel, opt: str, target: str) -> bool:
    """May `self.<target>` be the optimizer `self.<opt>` under another name? When the file never binds the cleared
    attribute (a base class of another file does) and the `__init__` that binds the stepped one from a parameter
    also hands that parameter to the base's `__init__` (`super().__init__(model, optimizer)`; `self.opt_d =
    optimizer`), the base may keep the same object as `self.optimizer`: which one it is, is not known here."""
    if not (opt.startswith("self.") and target.startswith("self.")):
        return False
    if any(e.kind is EventKind.ASSIGN and e.target == target for scope in model.scopes for e in scope.events):
        return False
    for scope in model.scopes:
        if scope.name != "__init__" or scope.class_name is None:
            continue
        params = {e.value.value for e in scope.events if e.kind is EventKind.ASSIGN and e.target == opt
                  and type(e.value) is cst.Name and e.value.value in scope.params}
        if params and params & _handed_to_base_init(scope.node):
            return True
    return False


def _handed_to_base_init(function: cst.CSTNode) -> set[str]:
    """The names passed to a base class's `__init__` in `function` (`super().__init__(a, b)`, `Base.__init__(self,
    a)`)."""
    found: set[str] = set()
    for call in calls_in_evaluation_order(function):
        name = dotted(call.func) if type(call.func) is cst.Attribute else None
        via_super = (type(call.func) is cst.Attribute and call.func.attr.value == "__init__"
                     and type(call.func.value) is cst.Call and dotted(call.func.value.func) == "super")
        if via_super or (name is not None and name.endswith(".__init__")):
            found |= {a.value.value for a in call.args if type(a.value) is cst.Name}
    return found


def _owned(model: FileModel, opt: str) -> set[str]:
    """The models optimizer `opt` is known to optimize. An optimizer held by another object (`self.netD.optimizer`)
    whose attribute every class of the file builds over that object's own parameters (`self.optimizer =
    Adam(self.parameters())`) optimizes that object (`self.netD`)."""
    known = model.symbols.optimizer_models
    owned = known.get(opt) or known.get(opt.rsplit(".", 1)[-1])
    if owned or opt.count(".") < 2:
        return owned or set()
    holder, _, attr = opt.rpartition(".")
    return {holder} if known.get(f"self.{attr}") == {"self"} else set()


def reaches_step(loop: Loop, z: Event, step: Event) -> bool:
    """Does the clearing `z` run in the iterations that run `step`? Not when they sit on exclusive arms that a
    condition fixed for the whole loop chooses (`if args.amp: optimizer.zero_grad(); scaler.step(optimizer)` /
    `else: optimizer.step()`): the other arm then never clears. A condition the loop may change (`if i == 0:`,
    a call, an `except`) may take the clearing arm in other iterations: it reaches."""
    if loop.node is None:
        return True
    if first_pass_only(loop, z, step):
        return False
    if not loop.scope.exclusive(z, step):
        return True
    mine = {(id(g.test), g.negated): g for g in z.guards_within(loop.node)}
    theirs = {(id(g.test), g.negated): g for g in step.guards_within(loop.node)}
    split = [g for k, g in mine.items() if k not in theirs] + [g for k, g in theirs.items() if k not in mine]
    if not split:
        return True
    for g in split:
        test = g.test
        if not isinstance(test, cst.BaseExpression) or calls_anything(test):
            return True
        names = names_in(test)
        if not names or names & loop.bound:
            return True
    return False


def first_pass_only(loop: Loop, z: Event, step: Event) -> bool:
    """The clearing `z` runs in the loop's first pass only (`if i == 0: optimizer.zero_grad()` over `enumerate(
    loader)`) and `step` is not under that guard: every later step applies the gradients summed since."""
    if loop.node is None:
        return False  # (a helper's guards test the helper's names: only a copy of the counter in `self` is read there)
    theirs = {id(g.test) for g in step.guards}
    return any(not g.negated and id(g.test) not in theirs and isinstance(g.test, cst.BaseExpression)
               and loop.first_pass_only(g.test, z) for g in z.guards_within(loop.node))


def clears_all(model: FileModel, loop: Loop, opt: str, z: Event) -> bool:
    """Does `z` clear every gradient that optimizer `opt` steps with, not only some of them? A module's
    `zero_grad()` clears that module's parameters only: a sub-module's (`model.generator.zero_grad()` while the
    optimizer owns all of `model`, or the loop runs `model(x)` and the optimizer's models are not known) leaves the
    rest of the gradients, and a step after it updates the other sub-modules: a GAN that shares one optimizer
    excludes a network from a step this way (so does `netG.zero_grad()` under an optimizer known to own netG and
    netD). An optimizer's `zero_grad()` and the whole model's clear them all. (Whether a clearing happens at all,
    as TL004 asks, is `clears`.)"""
    if not clears(model, opt, z):
        return False
    if z.variant is not ZeroGradOf.MODEL or not z.target or z.target == "self":
        return True
    target = z.target
    owned = _owned(model, opt)
    if owned:
        same = _unwrapped(model, target)
        # the cleared module holds every model the optimizer owns
        return all(any(_inside(m, t) for t in same) for m in owned)
    return loop.node is None or not (loop.called & _enclosing(target))


def _unwrapped(model: FileModel, target: str) -> list[str]:
    """The names a cleared module is known to be: `ddp.module` is `ddp`, and the `model` it wraps, when the file
    binds `ddp` only to a wrapper (`DDP(model)`, `nn.DataParallel(model)`): the wrapped module holds every parameter
    the wrapper has, so clearing it clears them all."""
    if not target.endswith(".module"):
        return [target]
    base = target.removesuffix(".module")
    wraps = [e.value for scope in model.scopes for e in scope.events
             if e.kind is EventKind.ASSIGN and e.target == base and e.rebinds and e.value is not None]
    if not wraps or not all(type(v) is cst.Call and last_part(dotted(v.func) or "") in MODULE_WRAPPERS for v in wraps):
        return [target]
    calls = [v for v in wraps if type(v) is cst.Call and v.args]
    return [target, base, *(d for v in calls if (d := dotted(v.args[0].value)) is not None)]


def _enclosing(name: str) -> set[str]:
    """The modules `name` is a sub-module of, as the loop may call them: `a.b.c` -> {a.b, a}, `self.a` -> {self}."""
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def _inside(a: str, b: str) -> bool:
    """`a` is `b` or one of its sub-modules (`self.netD` is `netD` passed to __init__; every `self.x` is inside
    `self`, the module whose `self.parameters()` an optimizer of its class steps)."""
    if b == "self":
        return a == "self" or a.startswith("self.")
    a, b = a.removeprefix("self."), b.removeprefix("self.")
    return a == b or a.startswith(b + ".")


def _related(a: str, b: str) -> bool:
    """Same model, or one inside the other (`model` / `model.module`); `self.netD` is `netD` passed to __init__."""
    return _inside(a, b) or _inside(b, a)


def wipes_window(model: FileModel, loop: Loop, step: Event) -> bool:
    """A `zero_grad()` of `step`'s optimizer clears the gradients the step needs: between the backward and the
    step, or on the window's last iteration before its backward (see `cleared_early`)."""
    return any(z.variant is not ZeroGradOf.PARAM
               and (cleared_between(model, loop, z, [step]) is not None
                    or loop.node is not None and cleared_early(model, loop, z, [step]) is not None)
               for z in loop.of(EventKind.ZERO_GRAD))


def cleared_early(model: FileModel, loop: Loop, z: Event, steps: list[Event]) -> Event | None:
    """Accumulation whose window is cleared on its last iteration before that iteration's backward: `zero_grad()`
    under the step's own window guard (`if (i + 1) % k == 0:`) but ahead of the backward, or the prepared
    optimizer's `zero_grad()` ahead of the backward inside `accelerator.accumulate` (Accelerate runs it on the
    window's last micro-step only: just before its backward). Each step then applies the last micro-batch's
    gradient only."""
    in_accumulate = "accumulate" in z.contexts and z.variant is ZeroGradOf.OPTIMIZER
    gates = [g.test for g in z.guards_within(loop.node) if not g.negated
             and isinstance(g.test, cst.BaseExpression) and modulo_divisor(loop.scope.test_of(g, z)) is not None]
    if not gates and not in_accumulate:
        return None
    window: set[str] | None = None  # the gates' code, written only once a step may follow (the cheap tests first)
    for step in steps:
        if step.target is None or not loop.may_follow(z, step):
            continue
        if window is None:
            window = {code_of(test) for test in gates}
        step_window = {code_of(g.test) for g in step.guards_within(loop.node) if not g.negated
                       and isinstance(g.test, cst.BaseExpression)}
        if window and not window & step_window:
            continue
        if not window and not ("accumulate" in step.contexts and not step_window):
            continue
        every = [b for b in loop.backwards_into_grad() if not window & {
            code_of(g.test) for g in b.guards_within(loop.node) if isinstance(g.test, cst.BaseExpression)}]
        if any(loop.may_follow(z, b) and loop.may_follow(b, step) and not loop.may_follow(b, z) for b in every) and (
                clears_all(model, loop, step.target, z)):  # last: what the loop calls is read only if it matters
            return step
    return None


def cleared_between(model: FileModel, loop: Loop, z: Event, steps: list[Event]) -> tuple[Event, Event] | None:
    """backward ... zero_grad ... step, in one pass through the iteration: the step and the last backward before
    the zero_grad `z`. The first step that `z` clears and may precede decides; what each such step would give is
    asked first, so that whether `z` clears it (what the loop calls) is read only when one gives something."""
    followed = [(step, _cleared_before(loop, z, step)) for step in steps
                if step.target is not None and loop.may_follow(z, step)]
    if all(found is None for _, found in followed):
        return None
    return next((found for step, found in followed if clears_all(model, loop, step.target or "", z)), None)


def _cleared_before(loop: Loop, z: Event, step: Event) -> tuple[Event, Event] | None:
    if not set(z.guards) <= set(step.guards):
        return None
    backwards = loop.backwards_into_grad()
    if any(loop.may_follow(z, b) and loop.may_follow(b, step) and _refills(loop, z, b, step) for b in backwards):
        return None  # a backward refills the gradients before the step (the usual zero_grad at the top)
    if any(e.kind is EventKind.ASSIGN and (e.target or "").endswith(".grad") and loop.may_follow(z, e)
           and loop.may_follow(e, step) for e in loop.events):
        return None  # gradients written by hand after the clearing (`p.grad = noise * scale`): the step applies them
    before = [b for b in backwards if loop.may_follow(b, z) and (b.seq < z.seq or not loop.may_follow(z, b))]
    return (step, before[-1]) if before else None


def _refills(loop: Loop, z: Event, b: Event, step: Event) -> bool:
    """Can backward `b`, run after the clearing `z`, reach `step` without passing `z` again? Not when both sit in an
    inner loop, `z` after `b`: every micro-batch's gradients are cleared before the loop ends and the step runs.
    Yes when the places are not three statements of this scope (a helper's own events: as before)."""
    scope = loop.scope
    zn, bn, sn = scope.flow_node(z), scope.flow_node(b), scope.flow_node(step)
    head = scope.flow.loop_head.get(id(loop.node))
    if zn is None or bn is None or sn is None or head is None or len({zn, bn, sn}) < 3:
        return True
    return scope.flow.reaches_avoiding(bn, sn, frozenset((zn, head)))


def stepped_outside_window(model: FileModel, loop: Loop, z: Event, steps: list[Event]) -> tuple[Event, Event] | None:
    """Gradient accumulation declared and not applied: the loop's window (`if n % accumulation_steps == 0:`, a
    divisor named as accumulation steps) holds what belongs right before a step (clipping, unscaling) and no step,
    while a step and the clearing `z` of its optimizer run outside it, in every iteration, after a backward of every
    iteration: each step applies one micro-batch and the window accumulates nothing. The step and the window's
    event; None when the step or the clearing sits under a condition the loop may change, or Accelerate or an
    engine that accumulates by itself is involved."""
    node = loop.node
    if node is None or not z.loops or z.loops[-1] is not node or z.variant is ZeroGradOf.PARAM:
        return None
    gated = [e for e in loop.of(EventKind.CLIP, EventKind.SCALER_UNSCALE)  # the cheap test first: most loops
             if e.loops and e.loops[-1] is node and _window(loop, e) is not None]  # gate no clipping
    if not gated or any(_window(loop, s) is not None for s in loop.of(EventKind.STEP)):
        return None
    if "accumulate" in z.contexts or _window(loop, z) is not None or not _fixed(loop, z):
        return None
    if not any(_window(loop, b) is None and _fixed(loop, b) and "accumulate" not in b.contexts
               and b.variant not in SELF_SCALING_BACKWARDS for b in loop.backwards_into_grad()):
        return None
    for step in steps:
        if (step.target is not None and step.loops and step.loops[-1] is node and "accumulate" not in step.contexts
                and _fixed(loop, step) and clears(model, step.target, z) and not loop.scope.exclusive(z, step)):
            return step, gated[0]
    return None


def divided_without_window(model: FileModel, loop: Loop, z: Event, steps: list[Event]) -> tuple[Event, str] | None:
    """Gradient accumulation declared only by its division: the back-propagated loss is divided by a setting named
    as accumulation steps (`loss /= gradient_accumulation_steps`, `(loss / args.accum_iter).backward()`), while a
    step and the clearing `z` of its optimizer run on every iteration, at the loop's own level, under no window: each
    step applies one micro-batch's gradient, made k times smaller, and nothing accumulates. The step and the
    divisor's code; None where Accelerate or an engine accumulates by itself, any step waits for a window (also one
    made by `continue`), or a backward runs in an inner loop (micro-batches looped over: the window)."""
    node = loop.node
    if node is None or not z.loops or z.loops[-1] is not node or z.variant is ZeroGradOf.PARAM \
            or "accumulate" in z.contexts:
        return None
    backwards = loop.backwards_into_grad()
    if any(b.value is None or not b.loops or b.loops[-1] is not node for b in backwards):
        return None  # (a backward in an inner loop: that loop is the window, `for _ in range(k):`)
    divisor = next((k for b in backwards if (k := _accumulation_divisor(loop, b)) is not None), None)
    if divisor is None or not _fixed(loop, z) or any(  # (the costlier questions once a division is found)
            b.variant in SELF_SCALING_BACKWARDS or "accumulate" in b.contexts or not _fixed(loop, b) for b in backwards):
        return None
    if any(_window(loop, s) is not None or not _fixed(loop, s) for s in steps):
        return None
    if any(type(n) is cst.Continue for n in walk(node)):
        return None  # `if (i + 1) % k != 0: continue` before the step: a window all the same
    for step in steps:
        if (step.target is not None and step.loops and step.loops[-1] is node and clears(model, step.target, z)
                and not loop.scope.exclusive(z, step)):
            return step, divisor
    return None


def _accumulation_divisor(loop: Loop, b: Event) -> str | None:
    """The code of `k` when the value `b` back-propagates is divided by an accumulation setting `k`: in the
    backward's own expression, or by a definition of its name in the loop (`loss = loss / k`, `loss /= k`)."""
    value = b.value
    exprs: list[cst.BaseExpression] = [value] if value is not None else []
    if type(value) is cst.Name:
        defs, _ = loop.scope.reaching(value.value, b)
        for d in defs:
            if d.value is not None and d.loops and d.loops[-1] is loop.node:
                if d.variant is AssignForm.DIV and ACCUMULATION_NAME.search(code_of(d.value)):
                    return code_of(d.value)
                exprs.append(d.value)
    for e in exprs:
        if (type(e) is cst.BinaryOperation and type(e.operator) is cst.Divide
                and ACCUMULATION_NAME.search(code_of(e.right))):
            return code_of(e.right)
    return None


def _window(loop: Loop, e: Event) -> cst.BaseExpression | None:
    """The accumulation setting `k` of a guard of `e` that counts this loop's iterations in windows of `k`
    (`if (i + 1) % args.gradient_accumulation_steps == 0:`)."""
    for g in e.guards_within(loop.node):
        if g.negated or g.depth != len(e.loops):
            continue
        k = modulo_divisor(loop.scope.test_of(g, e))
        if k is not None and ACCUMULATION_NAME.search(code_of(k)):
            return k
    return None


def _fixed(loop: Loop, e: Event) -> bool:
    """Every guard of `e` inside the loop is fixed for the whole loop (`if optimizer is not None:`, a flag)."""
    return all(isinstance(g.test, cst.BaseExpression) and loop.invariant(g.test) for g in e.guards_within(loop.node))


def optional_guard(model: FileModel, loop: Loop, z: Event, step: Event) -> str | None:
    """The clearing `z` runs only when an object that may be None is there (`if self.scheduler:`, `if ema is not
    None:`) and `step` neither sits under that test nor reads the object: without it, nothing clears before the step.
    The object may be None when it is bound None in its class's `__init__` and, elsewhere in the class, only to None
    or a call's result (no class built into it), or when it is a parameter of the loop's function that defaults to
    None and is never bound again. The object's name, or None."""
    if loop.node is None or not z.guards:
        return None  # the cheap test first: most clearings sit under no condition
    theirs = {id(g.test) for g in step.guards}
    read = names_in(step.node)
    for g in z.guards_within(loop.node):
        if g.negated or id(g.test) in theirs or not isinstance(g.test, cst.BaseExpression):
            continue
        name = _presence_of(g.test)
        if name is None or name in read or name in loop.bound or any(
                name in names_in(h.test) for h in step.guards_within(loop.node)):
            continue
        if _may_be_none(model, loop, z, name):
            return name
    return None


def _presence_of(test: cst.BaseExpression) -> str | None:
    """`x` for `if x:` and `if x is not None:` (a name or `self.attr`)."""
    if type(test) is cst.Comparison and len(test.comparisons) == 1:
        c = test.comparisons[0]
        if type(c.operator) is not cst.IsNot or type(c.comparator) is not cst.Name or c.comparator.value != "None":
            return None
        test = test.left
    name = dotted(test)
    if name is None or name.count(".") > (1 if name.startswith("self.") else 0) or name == "self":
        return None
    return name


def _may_be_none(model: FileModel, loop: Loop, z: Event, name: str) -> bool:
    if name.startswith("self."):
        cls = loop.scope.class_name
        if cls is None or any(s.node is z.scope and s.class_name != cls for s in model.scopes):
            return False
        values = [(s.name, e.value) for s in model.scopes if s.class_name == cls for e in s.raw
                  if e.kind is EventKind.ASSIGN and e.target == name]
        none = [where for where, v in values if _is_none(v)]
        return "__init__" in none and all(_is_none(v) or type(v) is cst.Call and not _builds(v) for _, v in values)
    param = loop.scope.params.get(name)
    if z.scope is not loop.scope.node or param is None or param.default is None or not _is_none(param.default):
        return False
    return not any(e.kind is EventKind.ASSIGN and e.target == name for e in loop.scope.raw)


def _is_none(value: cst.CSTNode | None) -> bool:
    return type(value) is cst.Name and value.value == "None"


def _builds(call: cst.Call) -> bool:
    """`StepLR(opt, 10)`, `lr_scheduler.StepLR(...)`: a class instantiated (by the capital of its name)."""
    name = dotted(call.func)
    return name is not None and name.rsplit(".", 1)[-1][:1].isupper()


def stepped_at_once(loop: Loop, b: Event) -> bool:
    """An optimizer steps right after the backward, before any other backward that may follow it in the iteration
    (`alpha_loss.backward()` then `alpha_opt.step()`), under no condition the backward does not also hold (a step
    after an `if amp:` / `else:` pair of backwards serves both; not one after `if accumulating: continue`): those
    gradients serve that step, not the window of another optimizer."""
    later = min((x.seq for x in loop.of(EventKind.BACKWARD)
                 if x.scope is b.scope and x.seq > b.seq and loop.may_follow(b, x)), default=None)
    return any(s.scope is b.scope and b.seq < s.seq and (later is None or s.seq < later)
               and all(g in b.guards for g in s.guards) and s.loops == b.loops and continued_window(loop, s) is None
               for s in loop.of(EventKind.STEP))


def grads_rescaled(node: cst.CSTNode, k: cst.BaseExpression) -> bool:
    """The gradients rescaled by the window (`p.grad /= k`, `p.grad.div_(accum_steps)`: a factor that reads the
    window's names or an accumulation setting), or by a framework's own method; not a factor of another purpose
    (`p.grad *= 1 / loss_ratio` on one module's parameters)."""
    window = code_of(k)  # `args.k`, `cfg["k"]`: the window itself, not what holds it

    def by_window(factor: cst.BaseExpression | None) -> bool:
        return factor is not None and (window in code_of(factor) or ACCUMULATION_NAME.search(code_of(factor)) is not None)

    for n in walk(node):
        if type(n) is cst.Call:
            name = dotted(n.func) or ""
            last = name.rsplit(".", 1)[-1]
            if any(m in last for m in GRAD_RESCALING_METHODS):
                return True
            if last in ("mul_", "div_") and ".grad" in name and by_window(n.args[0].value if n.args else None):
                return True
        elif type(n) is cst.AugAssign and type(n.operator) in (cst.MultiplyAssign, cst.DivideAssign):
            if (".grad" in (dotted(n.target) or "") or ".grad" in code_of(n.target)) and by_window(n.value):
                return True
    return False


def continued_window(loop: Loop, step: Event) -> cst.BaseExpression | None:
    """`if is_accumulating: continue` (`is_accumulating = n % k != 0`) ahead of the step in the loop's own body: the
    step runs only on the iterations the test lets through, every k-th; that k."""
    body = getattr(loop.node, "body", None)
    at = step.path[0] if step.path else step.stmt
    if type(body) is not cst.IndentedBlock or not step.loops or step.loops[-1] is not loop.node \
            or step.guards_within(loop.node):
        return None
    skips = [i for i, stmt in enumerate(body.body) if type(stmt) is cst.If and stmt.orelse is None
             and type(last := stmt.body.body[-1]) is cst.SimpleStatementLine and type(last.body[-1]) is cst.Continue]
    if not skips:
        return None  # (most loops hold no early `continue`: the cheap test first)
    here = next((i for i, stmt in enumerate(body.body) if stmt is at or any(n is at for n in walk(stmt))), -1)
    for i in skips if here > 0 else ():
        if i >= here:
            break
        test = loop.scope.test_of(Guard(body.body[i].test), step)  # type: ignore[attr-defined]  # an If (above)
        k = _skipping(test) if isinstance(test, cst.BaseExpression) else None
        if k is not None:
            return k
    return None


def _skipping(test: cst.BaseExpression) -> cst.BaseExpression | None:
    """The k of a test true on all iterations but every k-th: `n % k != 0`, `n % k`, `not (n + 1) % k == 0`."""
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        return modulo_divisor(test.expression)
    if type(test) is cst.BinaryOperation and type(test.operator) is cst.Modulo:
        return test.right
    if type(test) is cst.Comparison and len(test.comparisons) == 1 and type(test.comparisons[0].operator) is cst.NotEqual:
        for side in (test.left, test.comparisons[0].comparator):
            if type(side) is cst.BinaryOperation and type(side.operator) is cst.Modulo:
                return side.right
    return None
