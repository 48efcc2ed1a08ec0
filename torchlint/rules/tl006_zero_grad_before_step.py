"""TL006: zero_grad() between backward() and step(), so the step sees no (or only the last micro-batch's) gradients.

Also zero_grad on every micro-step while step() runs only every k-th, and `model.zero_grad()` inside
`accelerator.accumulate`: the model trains on one batch in k, or not at all, and nothing raises.
"""

from __future__ import annotations

import re
from typing import Iterator

import libcst as cst

from torchlint.analysis import Event, EventKind, FileModel, Loop, ZeroGradOf
from torchlint.analysis.bindings import module_constant
from torchlint.analysis.clearing import (
    clears, cleared_between, cleared_early, divided_without_window, stepped_outside_window,
)
from torchlint.analysis.exprs import calls_anything, code_of, dotted, names_in, modulo_divisor
from torchlint.analysis.scopes import kills
from torchlint.analysis.hooks import lightning_steps
from torchlint.diagnostic import Fix
from torchlint.fixes import expression, movable, move_after
from torchlint.source.walk import walk
from torchlint.rules.base import BACKWARD_CALL, DEF_TRAINING_STEP, LOOP, STEP_CALL, Finding, Rule
from torchlint.verify.signs import Sign

ZERO_GRAD = re.compile(r"zero_grad")


class ZeroGradBeforeStep(Rule):
    code = "TL006"
    name = "zero-grad-before-step"
    summary = "zero_grad() between backward() and step() wipes the gradients the step needs"
    fix_safety = "unsafe"
    requires = (BACKWARD_CALL, STEP_CALL, ZERO_GRAD)
    scope_requires = (BACKWARD_CALL, LOOP, STEP_CALL, ZERO_GRAD)
    # Lightning's training_step with manual optimization: one iteration of Lightning's own batch loop; a function
    # that back-propagates and steps outside any loop of its own: one iteration of its caller's loop
    scope_alternatives = ((DEF_TRAINING_STEP, re.compile(r"manual_backward\s*\("), STEP_CALL,
                           ZERO_GRAD), (BACKWARD_CALL, STEP_CALL, ZERO_GRAD))
    runtime_signs = (Sign.ZERO_GRAD_BETWEEN_BACKWARD_AND_STEP, Sign.GRADIENTS_CLEARED_BEFORE_STEP)
    runtime_also = (Sign.SCALER_REFUSED,)
    runtime_same_line = True
    fix_promise = "the gradients now reach the step (nothing clears them between the backward and the step)"
    fixture_errors = {"trainer_amp": "No inf checks were recorded for this optimizer"}
    doc = """
## What it flags
- `optimizer.zero_grad()` (or `model.zero_grad()` of a model that holds all the optimizer's parameters, such as
  `ddp.module.zero_grad()` where the file binds `ddp = DDP(model)`) after
  `loss.backward()` and before that optimizer's `step()` in the same iteration, also when the backward and the
  `zero_grad()` run in an inner micro-batch loop that the step follows (every micro-batch's gradient is cleared
  before the loop ends; a backward that can reach the step without passing the clearing again refills it);
- an inner loop of the iteration (`for j in range(0, len(x), micro):`, `for task in batch:`) that clears the
  gradients and then back-propagates on every pass, with that optimizer's `step()` after the inner loop: each pass
  wipes the micro-batches before it, so the step applies the last one only. No fix is offered (clear once before the
  inner loop, or after the step). Not followed: an inner loop that reads `.grad` or an iteration that writes it
  (per-sample gradients gathered and set by hand), or hands them to the optimizer's own method each pass
  (`optimizer.aggregate_grads(n)`, a Bayesian optimizer's Monte-Carlo passes), one that also steps, a `while` or
  one left by `break` (a retry), a clearing guarded inside it (`if j == 0:`), or another clearing between the inner
  loop and the step;
- gradient accumulation where `zero_grad()` runs on every micro-step while `step()` runs only under a modulo
  guard (`if (i + 1) % k == 0:`): each step sees only the last micro-batch;
- an unguarded `model.zero_grad()` inside `with accelerator.accumulate(model):` (Accelerate makes the prepared
  optimizer's `zero_grad()` a no-op between sync steps, but not the model's);
- the window cleared on its last micro-step, before that micro-step's backward: `zero_grad()` under the step's
  own guard (`if (i + 1) % k == 0:`) but ahead of the backward, or the prepared optimizer's `zero_grad()` at the top
  of `with accelerator.accumulate(model):` (Accelerate runs it on the window's last micro-step, just before its
  backward): each step applies the last micro-batch only. (TL005 is silent there: dividing the loss would make the
  step smaller still.)
- a window declared and not applied: a guard over the loop's count with a divisor named as accumulation steps
  (`if n % accumulation_steps == 0:`) holds the clipping (or the GradScaler's `unscale_`) and no step, while the
  step and the `zero_grad()` of its optimizer run in every iteration (or under a condition fixed for the whole loop,
  `if optimizer is not None:`): each step applies one micro-batch. No fix is offered: the step and the clearing
  belong under the window's condition. Not followed: a window whose divisor is not named as accumulation steps
  (`if i % clip_every == 0:`), one that holds no clipping or unscaling (a target network synced every
  `target_update_freq` steps), a step under a condition the loop changes, `accelerator.accumulate`, and
  `accelerator.backward` / an engine's backward (they accumulate by themselves);
- accumulation declared only by its division: the back-propagated loss is divided by a setting named as
  accumulation steps (`loss /= gradient_accumulation_steps`, `(loss / args.accum_iter).backward()`), while the step
  and the `zero_grad()` of its optimizer run on every iteration, at the loop's own level, with no window: nothing
  accumulates, and each step applies one micro-batch's gradient, k times smaller. No fix is offered. Not followed:
  a backward in an inner loop (`for _ in range(k):`, that loop is the window), any step under a window (or
  after `if (i + 1) % k != 0: continue`), a divisor
  not named as accumulation steps (`/ x.size(0)`), `accelerator.accumulate` and self-accumulating backwards.

Lightning's `training_step` with manual optimization is checked as one iteration of Lightning's batch loop
(`self.manual_backward(loss)`, then `opt.zero_grad(); opt.step()` under `if (batch_idx + 1) % k == 0:`).
So is a function that back-propagates and steps outside any loop of its own (an agent's `learn(batch)`, a
model's `optimize_parameters()`), once per step of whatever loop calls it: `loss.backward();
self.optimizer.zero_grad(); self.optimizer.step()` there, and a window that counts its calls: `zero_grad()` on every
call while the step waits for `if (itr + 1) % k == 0:` over a parameter (`itr`, handed in by the caller's loop) or
an attribute of `self` (`self.global_step`); a window over anything else (`len(batch) % k`) is not a count of calls.
Not when a helper it calls, past the depth helpers are followed to, back-propagates: that backward may refill what
the clearing wiped.

## Why it is wrong
`step()` updates with whatever is in `.grad`. Cleared just before, the update is zero (plain SGD) or driven only
by momentum and weight decay; cleared every micro-step, accumulation silently becomes "train on 1 batch in k".

## Example
```python
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.zero_grad()     # TL006
    optimizer.step()
```

## Fix
Move the `zero_grad()` to right after the step (inside the accumulation guard when there is one); inside
`accelerator.accumulate`, call the prepared optimizer's `zero_grad()` after its step instead of the model's.
**Unsafe**: the updates change, to the intended ones.

## Correct look-alikes (not flagged)
`zero_grad()` at the top of the iteration before the backward, after the step, or under the same accumulation
guard as the step, or before a gradient written by hand (`p.grad = noise * scale`), which the step then applies;
a step on all but every k-th iteration (`if i % n_critic != 0:`, `if i % k:`), each on that
iteration's own gradient: no window; a step under a modulo test that the loop does not change
(`if self.updates % k == 0:` with the counter advanced after the loop, no method of `self` called in it that binds
it): every iteration of one run steps, or none does, an alternating schedule, not a window;
`optimizer.zero_grad()` inside `accelerator.accumulate`; GANs that clear one network while
stepping the other (`netD.zero_grad()` before `optimizerG.step()` when `optimizerG` owns only `netG`), and GANs
that share one optimizer and clear one sub-network between the backward and the step so that the step leaves it
out (`model.generator.zero_grad()` before `optimizer.step()` when the optimizer owns all of `model`, or when its
models are not known and the loop runs the whole `model(x)`): a module's `zero_grad()` clears its own parameters
only, the step still applies the others' gradients;
`optimizer_G.zero_grad()` every iteration while the generator steps every `n_critic` iterations with its own
backward under the same guard (it clears the stray gradients the discriminator loss left in the generator);
a `zero_grad()` guarded by a loop variable (`if micro == 1:`, the first micro-step of each window); a step helper
that clears, called on exclusive branches (every iteration without accumulation, every k-th with it); a branch
that skips one update on purpose (`if norm > limit: opt.zero_grad(); scaler.step(opt); scaler.update(); continue`,
under a condition the backward does not hold, leaving before the optimizer's regular step); a step outside an
accumulation window that is a constant 1 of the script (`accumulation_steps = 1`, bound to nothing else).

```python
for x, y in loader:
    optimizer.zero_grad()           # before the backward: nothing computed yet is cleared
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
```
"""

    def check(self, model: FileModel) -> Iterator[Finding]:
        lightning = lightning_steps(model)
        bodies = [Loop(None, b.scope, [e for e in b.events if not e.loops])  # type: ignore[arg-type]  # no head
                  for b in model.step_bodies() if all(b.scope is not t.scope for t in lightning)]
        for loop in [*model.loops, *lightning, *bodies]:
            steps = loop.of(EventKind.STEP)
            if not steps or not loop.of(EventKind.BACKWARD):
                continue
            for z in loop.of(EventKind.ZERO_GRAD):
                if z.variant is ZeroGradOf.PARAM:
                    continue
                if loop.node is None and _backward_unseen(model, loop):
                    break  # a helper past the inlining depth back-propagates: what refills the step is not known
                found = _between(model, loop, z, steps)
                if found is None and loop.node is None:  # a step function: its window counts its calls
                    found = _every_micro_step(model, loop, z, steps)
                if found is None and loop.node is not None:
                    found = _every_micro_step(model, loop, z, steps) or _cleared_early(model, loop, z, steps)
                    if found is None and (micro := _each_micro_batch(model, loop, z, steps)) is not None:
                        yield Finding(z.node, f"`{code_of(z.node)}` {micro[1]}")  # no fix: where it goes is a choice
                        continue
                    if found is None and (outside := _outside_window(model, loop, z, steps)) is not None:
                        yield Finding(z.node, f"`{code_of(z.node)}` {outside[1]}")  # moving the zero_grad mends nothing
                        continue
                    if found is None and (divided := divided_without_window(model, loop, z, steps)) is not None \
                            and not _one(model, divided[1]):
                        yield Finding(z.node, (
                            f"`{code_of(z.node)}` runs on every iteration, and so does `{code_of(divided[0].node)}`, "
                            f"while the loss is divided by `{divided[1]}` for gradient accumulation: no window holds "
                            f"the step, so nothing accumulates and each step applies one micro-batch's gradient, "
                            f"`{divided[1]}` times smaller; step and clear only every `{divided[1]}` iterations"))
                        continue
                if found is not None:
                    step, why = found
                    yield Finding(z.node, f"`{code_of(z.node)}` {why}", _fix(loop, z, step))


def _backward_unseen(model: FileModel, loop: Loop) -> bool:
    """Does a function of the file that the iteration calls, directly or through others, back-propagate where
    the iteration's events do not show it (past the depth helpers are inlined to)? `optimize()` calling
    `backward_d()` calling `backward_basic(net)`: the discriminator's backward refills the gradients that
    `opt_d.zero_grad()` cleared before `opt_d.step()`."""
    shown = {id(e.node) for e in loop.events if e.kind is EventKind.BACKWARD}
    stack, visited = [loop.scope], set()
    while stack:
        scope = stack.pop()
        if id(scope.node) in visited:
            continue
        visited.add(id(scope.node))
        if scope is not loop.scope and model.summary(scope).backprops and any(
                e.kind is EventKind.BACKWARD and id(e.node) not in shown for e in scope.events):
            return True
        for e in scope.raw:
            if e.kind is EventKind.LOCAL_CALL and (callee := model.resolve(scope, e.callee or "")) is not None:
                stack.append(callee)
    return False


def _between(model: FileModel, loop: Loop, z: Event, steps: list[Event]) -> tuple[Event, str] | None:
    found = cleared_between(model, loop, z, steps)
    if found is None:
        return None
    step, before = found
    if _skipped_update(loop, z, step, before, steps):
        return None
    return step, (f"clears the gradients between `{code_of(before.node)}` and `{code_of(step.node)}`: "
                  f"the step applies zero gradients; move it after the step")


def _skipped_update(loop: Loop, z: Event, step: Event, before: Event, steps: list[Event]) -> bool:
    """`if norm > limit: opt.zero_grad(); scaler.step(opt); scaler.update(); break`: a branch the backward does not
    always lead to clears and steps (a GradScaler's bookkeeping) and leaves before the optimizer's regular step,
    which the backward reaches past it: one update skipped on purpose."""
    return not set(z.guards) <= set(before.guards) and any(
        s is not step and s.target == step.target and loop.may_follow(before, s) and not loop.may_follow(z, s)
        for s in steps)


def _cleared_early(model: FileModel, loop: Loop, z: Event, steps: list[Event]) -> tuple[Event, str] | None:
    step = cleared_early(model, loop, z, steps)
    if step is None:
        return None
    return step, (f"clears the gradients on the window's last iteration, before its backward, so "
                  f"`{code_of(step.node)}` applies the last micro-batch's gradient only (the window's others "
                  f"are wiped): gradient accumulation is lost; move it after the step")


def _outside_window(model: FileModel, loop: Loop, z: Event, steps: list[Event]) -> tuple[Event, str] | None:
    found = stepped_outside_window(model, loop, z, steps)
    if found is None:
        return None
    step, gated = found
    if any(_one(model, code_of(k)) for g in gated.guards_within(loop.node)
           if (k := modulo_divisor(loop.scope.test_of(g, gated))) is not None):
        return None  # `ACCUM_STEPS = 1`, a constant of the script: every iteration is a window, as it steps
    return step, (f"runs on every iteration, and so does `{code_of(step.node)}`, while the loop's accumulation "
                  f"window gates `{code_of(gated.node)}` only: each step applies one micro-batch and nothing "
                  f"accumulates; put the step and the zero_grad() under the window's condition")


def _one(model: FileModel, window: str) -> bool:
    """The accumulation window is a constant 1 of the script (`gradient_accumulation_steps = 1`, never bound to
    anything else): each iteration is a window of its own, as the step and the clearing have it."""
    return window.isidentifier() and module_constant(model, window) == 1


def _every_micro_step(model: FileModel, loop: Loop, z: Event, steps: list[Event]) -> tuple[Event, str] | None:
    """zero_grad every iteration while the step waits for k backwards (modulo guard or accelerate)."""
    z_guards = z.guards_within(loop.node)
    if any(modulo_divisor(loop.scope.test_of(g, z)) is not None for g in z_guards if not g.negated):
        return None
    counters = {n for lp in z.loops[z.loops.index(loop.node):] if type(lp) is cst.For
                for n in names_in(lp.target)} if loop.node is not None else set()
    if any(names_in(g.test) & counters for g in z_guards if isinstance(g.test, cst.BaseExpression)):
        return None  # `if accum_step == 1:` over a loop variable: once per window, not every iteration
    for step in steps:
        if step.target is None or not clears(model, step.target, z):
            continue
        if loop.scope.exclusive(z, step):
            continue  # `if not accumulating: take_step() else: ... take_step()`: never in one pass
        if "accumulate" in z.contexts and z.variant is ZeroGradOf.MODEL:
            return step, ("runs on every micro-step inside `accelerator.accumulate`: the model's gradients are "
                          "cleared before they are accumulated; use the prepared optimizer's zero_grad()")
        if loop.gated_with(step):
            continue  # the step's own backward runs under its guard: nothing accumulates across iterations
        for g in step.guards_within(loop.node):
            test = loop.scope.test_of(g, step)
            k = modulo_divisor(test) if not g.negated else None
            if k is not None and loop.node is None and not _counts_calls(loop.scope, test):
                continue  # a step function's window must count its calls: a counter handed in, or kept in self
            if k is not None and 0 < g.depth <= len(step.loops) and step.loops[g.depth - 1] not in z.loops:
                # the guard counts the iterations of a loop that the zero_grad is outside of (an inner loop, or a
                # sibling one): it runs between runs of that loop, dropping at most an unfinished window, not
                # every micro-step
                continue
            if k is not None and _fixed_schedule(model, loop, test):
                continue  # `if self.updates % k == 0:` with `self.updates` advanced after the loop: an alternating
                # schedule (each pass of the loop steps on every iteration, or on none), not a window
            if k is not None and not any(g2.test is g.test for g2 in z_guards):
                every = "iteration" if loop.node is not None else "call of this step function"
                return step, (f"runs on every {every} but `{code_of(step.node)}` only every `{code_of(k)}`: "
                              f"gradient accumulation is lost, each step sees one micro-batch; move it after the step")
    return None


def _fixed_schedule(model: FileModel, loop: Loop, test: cst.CSTNode) -> bool:
    """Does the left side of the window test's modulo read only what stays the same while the loop runs: nothing
    the loop binds, no call, and no attribute of `self` that a method of the class binds while the loop calls a
    method of `self`? Then every iteration of one run of the loop gives the same answer."""
    if loop.node is None:
        return False
    counted = _modulo_counts(test)
    if counted is None or calls_anything(counted[0]):
        return False
    read = counted[1]
    scope = loop.scope
    bound = {e.target for e in scope.events if e.target and kills(e) and (loop.node in e.loops or e.stmt is loop.node)}
    if not read or any(n in bound or n.split(".")[0] in bound for n in read):
        return False
    cls = scope.class_name
    attrs = {e.target for s in model.scopes if cls is not None and s.class_name == cls for e in s.events
             if e.target and e.target.startswith("self.") and kills(e)}
    methods = [c for c in loop.called if c.startswith("self.") and c.count(".") == 1 and c not in attrs]
    if methods and any(n in attrs for n in read):
        return False
    plain = [n for n in read if not n.startswith("self.")]
    return not (plain and any(not n.startswith("self.") for n in loop.called if model.resolve(scope, n)))


def _counts_calls(scope, test: cst.CSTNode) -> bool:
    """Does a step function's window test count what changes from call to call: its modulo's left side reads one of
    its parameters (`itr`, handed in by the loop that calls it) or an attribute of `self` (`self.global_step`)?"""
    counted = _modulo_counts(test)
    return counted is not None and any(n in scope.params or n.startswith("self.") and n.count(".") == 1
                                       for n in counted[1])


def _modulo_counts(test: cst.CSTNode) -> tuple[cst.BaseExpression, set[str]] | None:
    """The left side of the first modulo in a window test (outside calls), and the names and attribute chains it
    reads outside calls (`len(batch) % k` counts no call); None without a modulo."""
    for node in walk(test, prune=lambda n: type(n) is cst.Call):
        if type(node) is cst.BinaryOperation and type(node.operator) is cst.Modulo:
            return node.left, {d for n in walk(node.left, prune=lambda n: type(n) in (cst.Call, cst.Attribute))
                               if type(n) in (cst.Name, cst.Attribute) and (d := dotted(n)) is not None}
    return None


# torch.optim.Optimizer's own methods: any other an optimizer is called with is its class's own (a Bayesian
# optimizer gathering each Monte-Carlo pass's gradients, `optimizer.aggregate_grads(n)`).
_OPTIMIZER_API = frozenset({"step", "zero_grad", "state_dict", "load_state_dict", "add_param_group"})


def _each_micro_batch(model: FileModel, loop: Loop, z: Event, steps: list[Event]) -> tuple[Event, str] | None:
    """An inner loop of the iteration clears the gradients and then back-propagates, on every pass, and the step of that
    optimizer follows the inner loop (`for j in range(0, len(x), micro): optimizer.zero_grad(); loss.backward()`,
    then `optimizer.step()`): each pass wipes the micro-batches before it, so the step applies the last one only.
    Not when the inner loop reads or the iteration writes `.grad` (per-sample gradients gathered and set by hand,
    or handed to a method of the optimizer's own class), steps inside the inner loop (that optimizer, or any
    after the clearing), or clears again between the inner loop and the step; nor when the clearing is guarded
    inside the inner loop (`if j == 0:`), nor in a retry loop (`while`, or one left by `break`)."""
    node = loop.node
    if node is None or node not in z.loops or "accumulate" in z.contexts:
        return None
    depth = z.loops.index(node)
    if len(z.loops) != depth + 2:
        return None
    inner = z.loops[-1]
    if type(inner) is not cst.For or z.guards_within(inner):
        return None  # a `while`: a retry (out of memory, a bad batch), not micro-batches
    if any(lp.node is inner and (trips := lp.trip_count()) is not None and trips <= 1 for lp in model.loops):
        return None  # `for _ in range(1)`: one pass, nothing before it to wipe
    refills = [b for b in loop.backwards_into_grad() if inner in b.loops and b.seq > z.seq and b.scope is z.scope]
    if not refills:
        return None
    end = max(e.seq for e in loop.events if inner in e.loops)
    for step in steps:
        if (step.target is None or not step.loops or step.loops[-1] is not node or step.seq < end
                or step.scope is not z.scope or not clears(model, step.target, z)):
            continue
        if any(inner in s.loops and (s.target == step.target or s.seq > z.seq) for s in steps):
            return None  # (a critic's loop: each pass clears, back-propagates and steps an optimizer of its own)
        if any(c is not z and end < c.seq < step.seq and clears(model, step.target, c)
               for c in loop.of(EventKind.ZERO_GRAD)):
            return None
        if any(type(n) is cst.Break for n in walk(inner)):
            return None  # a loop left by `break`: a retry as well
        if _GRAD_READ.search(code_of(inner)) or _GRAD_WRITE.search(code_of(node)) or any(
                type(n) is cst.Call and type(n.func) is cst.Attribute and dotted(n.func.value) == step.target
                and n.func.attr.value not in _OPTIMIZER_API for n in walk(inner)):
            return None  # (or each pass hands them to the optimizer's own method: `opt.aggregate_grads()`)
        return step, (f"runs on every pass of the inner loop, before its `{code_of(refills[0].node)}`, and "
                      f"`{code_of(step.node)}` follows that loop: each pass wipes the gradients of the "
                      f"micro-batches before it, so the step applies the last one only; clear once, before the "
                      f"inner loop or after the step")
    return None


_GRAD_READ = re.compile(r"\.grad\b|autograd\.grad\b")
_GRAD_WRITE = re.compile(r"\.grad\s*=[^=]|\.grad\.(data|copy_|add_|set_|mul_|div_)")


def _fix(loop: Loop, z: Event, step: Event) -> Fix | None:
    if z.scope is not step.scope or z.inlined_from is not None or step.inlined_from is not None:
        return None
    anchor = loop.after_step(step)
    if not movable(z.stmt) or not movable(anchor.stmt) or z.stmt is anchor.stmt:
        return None
    if "accumulate" in z.contexts and z.variant is ZeroGradOf.MODEL and step.target:
        new = z.stmt.with_changes(body=[cst.Expr(expression(f"{step.target}.zero_grad()"))])
        if z.seq > anchor.seq:
            return Fix("unsafe", f"call `{step.target}.zero_grad()` instead", ((z.stmt, new),))
        return Fix("unsafe", f"call `{step.target}.zero_grad()` after the step instead",
                   ((z.stmt, cst.RemovalSentinel.REMOVE), (anchor.stmt, cst.FlattenSentinel([anchor.stmt, new]))))
    return Fix("unsafe", "move zero_grad() after the step", move_after(z.stmt, anchor.stmt))
