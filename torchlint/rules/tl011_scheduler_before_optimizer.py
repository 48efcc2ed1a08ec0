"""TL011: a per-iteration `lr_scheduler.step()` before `optimizer.step()` in the same iteration.

The first value of the schedule is skipped and every step uses the next one; PyTorch warns "Detected call of
`lr_scheduler.step()` before `optimizer.step()`", which is easy to miss in a log.
"""

from __future__ import annotations

import re
from typing import Iterator

import libcst as cst

from torchlint.analysis import Event, EventKind, FileModel, Loop
from torchlint.analysis.scopes import Scope
from torchlint.analysis.exprs import code_of, dotted, names_in
from torchlint.analysis.bindings import bound_values, configuration_test
from torchlint.analysis.semantics import LAST_LR_METHOD, LR_KEY, PARAM_GROUPS
from torchlint.source.walk import walk
from torchlint.analysis.names import role_suffix
from torchlint.diagnostic import Fix
from torchlint.fixes import movable, move_after
from torchlint.rules.base import LOOP, STEP_CALL, Finding, Rule, where
from torchlint.verify.signs import Sign

# Every name or constructor torchlint.analysis.names takes for a scheduler contains one of these.
SCHEDULER = re.compile(r"[sSſ](?i:ched)|LR\s*\(|ReduceLROnPlateau")  # (?i:sched): first letter as a set, to be looked for


class SchedulerBeforeOptimizer(Rule):
    code = "TL011"
    name = "scheduler-before-optimizer"
    summary = "lr_scheduler.step() before optimizer.step() in the same iteration"
    fix_safety = "unsafe"
    # A scheduler is known by its name (`lr_sched`, `schedulerG`) or its constructor (`StepLR(`,
    # `get_linear_schedule_with_warmup(`), which may sit elsewhere in the file (`__init__`); the function with the
    # finding steps both (in a loop, or once per call in a wrapper).
    requires = (STEP_CALL, SCHEDULER)
    scope_requires = (STEP_CALL, LOOP)
    scope_alternatives = ((STEP_CALL, SCHEDULER),)
    runtime_signs = (Sign.SCHEDULER_BEFORE_OPTIMIZER_WARNING,)
    runtime_same_line = True
    fix_promise = "the scheduler now steps after the optimizer (PyTorch no longer warns)"
    doc = """
## What it flags
In one iteration of a loop, `scheduler.step()` (no argument) before the `optimizer.step()` it schedules —
directly, or inside a small wrapper method of the same file that steps both. The optimizer may step in a loop
inside that one: an epoch loop that steps the scheduler at its top, before its batch loop, skips the schedule's
first rate in its first epoch, and every epoch then trains at the next one. A guard that tests the scheduler
itself (`if scheduler is not None:`, `if self.lr_scheduler:`, or its type: the `else:` of `if isinstance(scheduler,
Noam):`) does not change that, nor does a repeat of its step (`for _ in range(k): scheduler.step()`), nor a configuration flag
of the loop (`if cfg.noam_schedule:`: it calls nothing and reads nothing the loop assigns, so when it holds it
holds from the first iteration), nor a flag set true before the loop that the loop clears only after the
scheduler's step (`first = True` then `if first and warming_up: sched.step()` ... `first = False`: it holds in the
first pass), nor a condition the optimizer's step is tested under again (`if phase ==
"train":` around the scheduler, and again around the step in the batch loop). A guard of its own that may change
between iterations and does not hold in the first pass (`if epoch > 0:`, a flag set false before the loop and true
in it, a call, an attribute of `self`), or one around the batch loop only, keeps the rule silent. The same holds
for an epoch function whose loop steps the optimizer (`train_one_epoch()`, run by the epoch loop): a configuration
flag around its scheduler step (`if self.args.enable_lr_schedule:`, an attribute of an object `self` holds that no
method but `__init__` binds; a name only the module binds) does not keep it from being reported; a parameter
(`if epoch > 0:`), the object's own state (`self.epoch`) or a call does.

Also `scheduler.step(n)` (or `step(epoch=n)`) where `n` is a count the same iteration or call advances (`n += 1`)
before it with no optimizer step in between, then the optimizer steps: the scheduler is set to the count of the
step about to run, so that step already uses the next rate. In a function that runs once per training step its
own guards do not matter (whenever it steps, it is one count ahead); the optimizer's step must not sit under a
guard the scheduler's does not.

## Why it is wrong
Since PyTorch 1.1 the scheduler must step after the optimizer. Stepping it first skips the first learning rate of
the schedule (warm-up starts one step late, the last step overshoots), and PyTorch prints
`UserWarning: Detected call of lr_scheduler.step() before optimizer.step()`.

## Example
```python
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    scheduler.step()          # TL011
    optimizer.step()
    optimizer.zero_grad()
```

## Fix
Move the scheduler step to right after the optimizer step (after `scaler.update()` with AMP), or, when the
optimizer steps in an inner loop, to right after that loop. **Unsafe**: the learning rates of every step change,
to the intended ones. No fix is offered when the scheduler's step sits under a guard the optimizer's does not
share (moving it would take it out of its `if`), or when the two are not statements of the same block.

A function outside any loop of its own (an optimizer wrapper's `step()`, a per-batch helper) that steps the
scheduler and then, on every path, the optimizer is reported too: it runs once per training step. So is a function
that steps the scheduler outside its loops and then the optimizer in a loop of its own (a `train_epoch()` called
once per epoch): in its first call the scheduler steps before the optimizer has stepped once. So is an epoch
loop that steps the scheduler before calling a training function (of the same file or, with project analysis,
of another file) that steps the optimizer; the message names that function's file and line.

## Correct look-alikes (not flagged)
`scheduler.step(start_epoch)` when resuming; per-epoch scheduling after the inner batch loop; a schedule of
something else than the learning rate, by its class or its name (a diffusion model's `noise_scheduler =
DDPMScheduler(...)`, whose `step()` takes a sampling step; a pipeline-parallel `pipeline_schedule = ScheduleGPipe(...)`,
whose `step(batch)` runs the forwards and backwards; a `kl_scheduler` annealing a loss weight); a scheduler bound only
to None in the file (`self.lr_scheduler = None`, stepped under `if self.lr_scheduler is not None:`: it never runs);
`ReduceLROnPlateau.step(val_loss)` after validation; any other `scheduler.step(...)` with an argument (the epoch
a loop binds, a count advanced after the optimizer's step, a count advanced by anything but an integer); a scheduler
stepped after its own optimizer's batch loop and before another optimizer's (GAN); `if epoch > 0:
scheduler.step()` at the top of the epoch (or of a `train_epoch()`); a `train_epoch()` whose batch loop runs under
a guard the scheduler's step does not share; a step under `with warnings.catch_warnings():` (the author silences the
warning PyTorch gives for this order: the order is chosen, as YOLO trainers do with `last_epoch = start_epoch - 1`).

A scheduler of the project's own class that derives from nothing outside its file (`class CycleScheduler:`, or
`(object)`, or a base of the same file that does the same) and writes the learning rate into the optimizer's param
groups itself (`group["lr"] = lr`, in its `step()` or another method such as `set_lr(optimizer)`, or through a
function of its file that does, `adjust_lr(self.optimizer, self.lr)`): its `step()`
sets the rate for the step about to run. Every binding of the stepped name (followed into the callers of the file
for a parameter; `None` aside) must build such a class, of this file or, with project analysis, of the file it is
imported from, or call a function of that file every return of which builds one (`schedule.get_scheduler(cfg)`
choosing among the file's own classes by configuration). A subclass of a torch scheduler, a plain wrapper that
sets no rate itself (it may step a torch scheduler it holds), a factory of this file or one that may return
anything else, or any binding not known is still reported.

An LR range test: each iteration records the rate the optimizer applied (`rates.append(optimizer.param_groups[0]
["lr"])`, or `get_last_lr()`) and the loop leaves with `break` when the loss it back-propagates diverges (`if
torch.isnan(loss): break`). What it measures is each (rate, loss) pair as recorded, so stepping the sweep first
only starts it one factor higher. A loop that only shows the rate, or stops on a count, is still reported.

```python
for epoch in range(epochs):
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    scheduler.step()                # per epoch, after the batch loop
```
"""

    def check(self, model: FileModel) -> Iterator[Finding]:
        yield from _wrappers(model)
        for loop in model.loops:
            steps = loop.of(EventKind.STEP, EventKind.RUN)  # RUN: a call to a function that trains and steps
            if not steps:
                continue
            for sched in loop.of(EventKind.SCHED_STEP):
                call = sched.node
                # (a repeat of the step in the iteration, `for _ in range(k): sched.step()`, steps it all the same)
                own_loops = _unrepeated(loop.scope, sched, loop.node)
                if own_loops[-1:] != (loop.node,) or _only_none(model, sched):
                    continue
                if type(call) is cst.Call and call.args and not _counted(loop.scope, sched, steps, loop.node):
                    continue
                # The optimizer steps of this iteration, at the scheduler's level or in a loop inside it (the batch
                # loop of an epoch loop): the first of them must come after the scheduler's step.
                level = len(own_loops)
                mine = [s for s in _scheduled(model, sched, steps) if tuple(s.loops[:level]) == own_loops]
                later = [s for s in mine if loop.may_follow(sched, s)]
                earlier = [s for s in mine if loop.may_follow(s, sched)]
                if not later or earlier:
                    continue
                # Guards must agree down to the scheduler's level, except one that tests the scheduler itself
                # (`if scheduler is not None:`): whenever it steps, it exists. A guard inside the batch loop
                # (an accumulation window) only delays the first optimizer step further.
                later = [s for s in later if _agree(loop, sched, s, level)]
                if not later:
                    continue
                if _range_test(loop) or _not_torchs(model, sched):
                    continue  # a sweep that measures the rates, or a scheduler PyTorch's order does not bind
                if "warnings_caught" in sched.contexts:
                    continue  # PyTorch warns of this order; a step under `warnings.catch_warnings()` silences it knowingly
                opt = later[0]
                before = f"`{code_of(opt.node)}`{where(opt)}"
                if opt.kind is EventKind.RUN:
                    before += f", which steps `{opt.target}`," if opt.target else ", which steps an optimizer,"
                if len(opt.loops) > level:
                    yield Finding(
                        call,
                        f"`{code_of(call)}` runs before the inner loop's {before}: in the first iteration the "
                        f"scheduler steps before the optimizer has stepped once, so the schedule's first learning rate "
                        f"is skipped and every iteration trains with the next one ('Detected call of "
                        f"lr_scheduler.step() before optimizer.step()'); step the scheduler after the inner loop",
                        _after_inner_loop(sched, opt.loops[level]) if sched.guards == opt.guards[:len(sched.guards)]
                        and len(own_loops) == len(sched.loops) else None,
                    )
                    continue
                yield Finding(
                    call,
                    f"`{code_of(call)}` runs before {before} in the same iteration: the schedule's first learning rate "
                    f"is skipped ('Detected call of lr_scheduler.step() before optimizer.step()'); step the scheduler "
                    f"after the optimizer",
                    _fix(loop, sched, opt) if set(sched.guards) == set(opt.guards) and len(own_loops) == len(sched.loops)
                    else None,
                )


def _unrepeated(scope: Scope, sched: Event, outer: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    """The loops of the scheduler's step, less the innermost ones inside `outer` that only repeat it (`for _ in
    range(k): scheduler.step()`, no backward or optimizer step in them): the step belongs to the iteration of the
    loop around them."""
    loops = tuple(sched.loops)
    while len(loops) > 1 and loops[-1] is not outer and outer in loops and _repeats(scope, loops[-1]):
        loops = loops[:-1]
    return loops


def _repeats(scope: Scope, node: cst.CSTNode) -> bool:
    if type(node) is not cst.For or type(node.iter) is not cst.Call or dotted(node.iter.func) != "range":
        return False
    return not any(node in e.loops and e.kind in (EventKind.STEP, EventKind.BACKWARD, EventKind.RUN) for e in scope.events)


def _counted(scope: Scope, sched: Event, steps: list[Event], loop: cst.CSTNode | None = None) -> bool:
    """`scheduler.step(n)` (or `step(epoch=n)`) where `n` is a count the same call or iteration advances (`n += 1`)
    before it, with no optimizer step in between: the scheduler is set to the count of the step about to run, so
    that step already uses the next rate, as with a plain `step()` before the optimizer's. Not a count advanced
    after the optimizer's step (the next iteration's scheduler is then at the count of steps taken), nor an epoch
    bound by the loop (`for epoch in range(n): scheduler.step(epoch)`), nor a value (`ReduceLROnPlateau.step(val_loss)`)."""
    call = sched.node
    if type(call) is not cst.Call or len(call.args) != 1 or call.args[0].star:
        return False
    arg = call.args[0]
    if arg.keyword is not None and arg.keyword.value != "epoch":
        return False
    name = dotted(arg.value)
    if name is None:
        return False
    adds = [e for e in scope.events
            if e.kind is EventKind.ASSIGN and e.target == name and e.accumulates and type(e.value) is cst.Integer
            and e.scope is sched.scope and e.loops == sched.loops and scope.may_follow(e, sched, loop)]
    return any(not any(scope.may_follow(a, s, loop) and scope.may_follow(s, sched, loop) for s in steps) for a in adds)


def _not_torchs(model: FileModel, sched: Event) -> bool:
    """The scheduler is an object of the project's own class that derives from nothing outside its file and sets
    the rate itself (`class CycleScheduler:` whose `step()` writes `group["lr"]` for the coming step), in every
    binding of the stepped name (`None` aside): not a `torch.optim.lr_scheduler` scheduler, so PyTorch's order
    does not apply to it."""
    values = bound_values(model, model.scope_of(sched), sched.target)
    if not values:
        return False
    built = [v for v in values if not (type(v) is cst.Name and v.value == "None")]
    return bool(built) and all(
        type(v) is cst.Call and (name := dotted(v.func)) is not None and model.receivers.rate_setter(name)
        for v in built
    )


def _range_test(loop: Loop) -> bool:
    """An LR range test: each iteration keeps the learning rate the optimizer applied (`lrs.append(
    optimizer.param_groups[0]["lr"])`), and the loop stops when the loss it back-propagates diverges (`if
    torch.isnan(loss): break`). The sweep's result is the (rate, loss) pairs as recorded, so a scheduler stepped
    first only starts the sweep one factor later: no rate of a schedule is skipped in training."""
    losses = {n for b in loop.of(EventKind.BACKWARD) if b.value is not None for n in names_in(b.value)}
    if not losses:
        return False
    scope = loop.scope
    recorded = False
    for e in loop.of(EventKind.APPEND):
        if e.scope is not scope.node or e.value is None:
            continue
        values = [e.value]
        if type(e.value) is cst.Name:
            values += [d.value for d in scope.reaching(e.value.value, e)[0] if d.value is not None]
        if any(_applied_rate(v) for v in values):
            recorded = True
            break
    return recorded and any(names_in(test) & losses for test in _break_tests(loop.node))


def _applied_rate(expr: cst.CSTNode) -> bool:
    """`optimizer.param_groups[0]["lr"]` or `scheduler.get_last_lr()` is read in `expr`."""
    for node in walk(expr):
        if type(node) is cst.Subscript and len(node.slice) == 1 and type(node.slice[0].slice) is cst.Index:
            key = node.slice[0].slice.value
            if (type(key) is cst.SimpleString and key.evaluated_value == LR_KEY
                    and any(type(n) is cst.Attribute and n.attr.value == PARAM_GROUPS for n in walk(node.value))):
                return True
        if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == LAST_LR_METHOD:
            return True
    return False


def _break_tests(loop: cst.CSTNode) -> list[cst.BaseExpression]:
    """The tests of the `if`s whose body leaves this loop with `break` (not an inner loop's, nor a nested
    function's)."""
    out: list[cst.BaseExpression] = []

    def visit(node: cst.CSTNode, tests: tuple[cst.BaseExpression, ...]) -> None:
        kind = type(node)
        if kind in (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda):
            return
        if kind is cst.Break:
            out.extend(tests)
        elif isinstance(node, cst.If):
            inner = (*tests, node.test)  # an `else:` / `elif` that breaks is decided by the same test
            visit(node.body, inner)
            if node.orelse is not None:
                visit(node.orelse, inner)
        else:
            for child in node.children:
                visit(child, tests)

    body = getattr(loop, "body", None)
    if body is not None:
        visit(body, ())
    return out


def _agree(loop: Loop, sched: Event, opt: Event, level: int) -> bool:
    """The optimizer steps whenever the scheduler does, as far as guards down to the scheduler's level tell: the
    optimizer has no guard of its own there, and each of the scheduler's is the optimizer's too, or tests the same
    condition again deeper (`if phase == "train":` around the step in the batch loop), or is a configuration flag
    of the whole loop (`if cfg.warmup:`), true from the first iteration whenever it is true, or a flag true in the
    first pass (`Loop.first_pass`). A guard that may change from one iteration to the next (`if epoch > 0:`) may be
    what delays the scheduler: the rule is silent."""
    own, theirs = _guards(sched, level), _guards(opt, level)
    if not theirs <= own:
        return False
    for g in own - theirs:
        test = g.test
        if not isinstance(test, cst.BaseExpression):
            return False
        if loop.first_pass(test, sched):
            continue
        if not (any(h.condition() == g.condition() for h in opt.guards)
                and loop.unchanged_between(test, sched, opt)):
            return False
    return True


def _guards(e: Event, level: int) -> frozenset:
    """The guards of `e` entered at most `level` loops deep, less those that test a scheduler's presence."""
    return frozenset(g for g in e.guards if g.depth <= level and not _presence(g, e))


def _presence(guard, e: Event) -> bool:
    """`if scheduler is not None:` / `if self.scheduler:` around the step of that scheduler, or a test of its type
    (`if isinstance(scheduler, Noam): ... else: scheduler.step()`): the same object in every iteration."""
    if e.kind is not EventKind.SCHED_STEP:
        return False
    if not guard.negated and guard.condition() == (e.target, True):
        return True
    test = guard.test
    return (type(test) is cst.Call and dotted(test.func) in ("isinstance", "hasattr") and len(test.args) == 2
            and e.target is not None and dotted(test.args[0].value) == e.target)


def _after_inner_loop(sched: Event, inner: cst.CSTNode, outer: cst.CSTNode | None = None) -> Fix | None:
    """Move the scheduler step to just after the inner loop, when both are statements of the same block (of the
    scheduler's loop, or of `outer`)."""
    outer = outer if outer is not None else sched.loops[-1]
    body = getattr(getattr(outer, "body", None), "body", ())
    if not movable(sched.stmt) or not any(s is sched.stmt for s in body) or not any(s is inner for s in body):
        return None
    return Fix("unsafe", "move the scheduler step after the inner loop", move_after(sched.stmt, inner))


def _wrappers(model: FileModel) -> Iterator[Finding]:
    """A function or method that steps the scheduler outside any loop of its own and then, on every path, the
    optimizer it schedules: at once (an optimizer wrapper's `step()`, a `train_step` helper: each call, one per
    training step, uses the next learning rate) or in a loop of its own (a `train_epoch()` called once per epoch:
    in the first epoch the scheduler steps before the optimizer has stepped once). Either way the schedule's first
    learning rate is skipped."""
    for scope in model.scopes:
        if type(scope.node) is not cst.FunctionDef:
            continue
        own = [e for e in scope.events if e.scope is scope.node and e.inlined_from is None]
        steps = [e for e in own if e.kind is EventKind.STEP]
        for sched in own:
            if sched.kind is not EventKind.SCHED_STEP or sched.loops or _only_none(model, sched):
                continue
            counted = type(sched.node) is cst.Call and bool(sched.node.args)
            if counted and not _counted(scope, sched, steps):
                continue
            # Guards outside the function's loops must agree (a scheduler's presence aside); one inside the
            # optimizer's loop (an accumulation window) only delays its first step further. A scheduler handed the
            # count it is at may have guards of its own: whenever it steps, it sets the rate one count ahead. So may
            # any scheduler, a guard that tests configuration (`if self.args.enable_lr_schedule:`): whenever it
            # holds, the scheduler steps first.
            later = [s for s in _scheduled(model, sched, steps)
                     if _guards(s, 0) <= _guards(sched, 0) and (counted or not _changing(
                         model, scope, _guards(sched, 0) - _guards(s, 0)))
                     and scope.may_follow(sched, s) and not scope.may_follow(s, sched)
                     and not (counted and s.loops)]
            if not later or _not_torchs(model, sched):
                continue
            opt = later[0]
            if opt.loops:
                yield Finding(
                    sched.node,
                    f"`{code_of(sched.node)}` runs before the loop of `{scope.name}()` whose `{code_of(opt.node)}` "
                    f"it schedules: in the first call the scheduler steps before the optimizer has stepped once, so "
                    f"the schedule's first learning rate is skipped and every call trains with the next one "
                    f"('Detected call of lr_scheduler.step() before optimizer.step()'); step the scheduler after "
                    f"the loop",
                    _after_inner_loop(sched, opt.loops[0], scope.node)
                    if sched.guards == opt.guards[:len(sched.guards)] else None,
                )
                continue
            yield Finding(
                sched.node,
                f"`{code_of(sched.node)}` runs before `{code_of(opt.node)}` in `{scope.name}()`, which runs once per "
                f"training step: every step uses the next learning rate and the schedule's first one is skipped "
                f"('Detected call of lr_scheduler.step() before optimizer.step()'); step the scheduler after the "
                f"optimizer",
                _move(sched, opt) if not counted or sched.guards == opt.guards else None,
            )


def _changing(model: FileModel, scope: Scope, guards: frozenset) -> frozenset:
    """Of the scheduler's own guards, those that do not test configuration (`if self.args.enable_lr_schedule:`,
    the same on every call: whenever it holds, the scheduler steps first)."""
    return frozenset(g for g in guards if not (isinstance(g.test, cst.BaseExpression)
                                               and configuration_test(model, scope, g.test)))


def _move(sched: Event, opt: Event) -> Fix | None:
    """Move the scheduler step to right after `opt`, when both statements can move and share their contexts."""
    if sched.contexts != opt.contexts or not movable(sched.stmt) or not movable(opt.stmt):
        return None
    return Fix("unsafe", "move the scheduler step after the optimizer step", move_after(sched.stmt, opt.stmt))


def _scheduled(model: FileModel, sched: Event, steps: list[Event]) -> list[Event]:
    """The optimizer steps this scheduler schedules: by construction (`StepLR(opt)`, a factory's argument named like an
    optimizer: `get_scheduler(cfg, optimizer)`), else by name (G/D)."""
    name = sched.target or ""
    opt = model.symbols.scheduler_optimizer.get(name) or model.symbols.scheduler_optimizer.get(name.rsplit(".", 1)[-1])
    if opt is not None:
        return [s for s in steps if s.target and s.target.rsplit(".", 1)[-1] == opt.rsplit(".", 1)[-1]]
    suffix = role_suffix(name)
    if suffix:
        paired = [s for s in steps if s.target and role_suffix(s.target) == suffix]
        if paired:
            return paired
    return steps


def _fix(loop: Loop, sched: Event, opt: Event) -> Fix | None:
    anchor = loop.after_step(opt)  # after `scaler.update()` when a GradScaler steps the optimizer
    return _move(sched, anchor) if sched.scope is anchor.scope else None


def _only_none(model: FileModel, sched: Event) -> bool:
    """The scheduler is bound only to None (`self.lr_scheduler = None` and no other binding in the class): its step
    never runs (it sits under `if self.lr_scheduler is not None:`, or would raise)."""
    target = sched.target or ""
    last = target.rpartition(".")[2]
    if not target.startswith("self.") or target.count(".") != 1 or last not in model.text \
            or not re.search(rf"\b{re.escape(last)}\s*(?::[^=\n]*)?=\s*None\b", model.text):
        return False  # (the cheap question first: no binding to None is written)
    values = bound_values(model, model.scope_of(sched), sched.target)
    return bool(values) and all(type(v) is cst.Name and v.value == "None" for v in values)  # type: ignore[union-attr]
