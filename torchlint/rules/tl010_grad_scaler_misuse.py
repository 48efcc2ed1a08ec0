"""TL010: GradScaler misuse after `scaler.scale(loss).backward()`.

`optimizer.step()` applies gradients still multiplied by the scale (65536 by default) and skips the inf/nan
check; clipping before `scaler.unscale_()` clips the scaled gradients; without `scaler.update()` the scale never
adapts, so fp16 overflow keeps skipping steps.
"""

from __future__ import annotations

import re
from typing import Iterator

import libcst as cst

from torchlint.analysis import BackwardVia, ClipVia, Event, EventKind, FileModel, Loop
from torchlint.analysis.scaling import (
    clipped_before_scaler_step, conditions, crossed, decided_after, every_time_after, handed_scaler, level,
    optimizers_in_turn, sets_scale, steps_again, without_scaler,
)
from torchlint.analysis.engines import called_per_run
from torchlint.analysis.loops import optimizer_loop, optimizers_loops
from torchlint.analysis.exprs import clamping_hooks, code_of, modulo_divisor
from torchlint.analysis.names import Role, role_of_value
from torchlint.diagnostic import Fix
from torchlint.fixes import expression, insert_after, insert_before, movable
from torchlint.rules.base import BACKWARD_CALL, STEP_CALL, Finding, Rule
from torchlint.verify.signs import Sign

SCALE_CALL = re.compile(r"\.\s*scale\s*\(")  # scaler.scale(loss).backward()
SCALER_STEP = re.compile(r"[sSſ](?i:caler\s*\.\s*step\s*\()")  # `self.grad_scaler.step(opt)`
CLIP_CALL = re.compile(r"clip_grad|clamp_\s*\(")  # `clip_grad_norm_(...)`, `p.grad.data.clamp_(-c, c)`
SCALER_BUILT = re.compile(r"GradScaler\s*\(")  # a scaler built in the file, whose step unscales what was not scaled
ACCUMULATE_CALL = re.compile(r"accumulate\s*\(")  # `with accelerator.accumulate(model):` around a clip (8.)


class GradScalerMisuse(Rule):
    code = "TL010"
    name = "grad-scaler-misuse"
    summary = "GradScaler misuse: optimizer.step() instead of scaler.step(), clipping scaled grads, no update()"
    fix_safety = "unsafe"
    # no loop: a per-step function runs in its caller's loop; no backward: a step function handed the scaler
    requires = ((BACKWARD_CALL, SCALER_STEP), (SCALE_CALL, SCALER_BUILT, ACCUMULATE_CALL, SCALER_STEP))
    scope_requires = (BACKWARD_CALL, SCALE_CALL)
    # a plain backward before a scaler's step; a clip before a scaler's step in a function with no backward
    scope_alternatives = ((BACKWARD_CALL, STEP_CALL), (SCALER_STEP, CLIP_CALL))
    runtime_signs = (Sign.CLIPPED_WHILE_SCALED, Sign.SCALER_REFUSED)
    fix_promise = "GradScaler now unscales before clipping, checks for inf and updates at every step"
    fixture_errors = {"direct_step": "No inf checks were recorded prior to update",
                      "no_update": "step() has already been called since the last update()"}
    doc = """
## What it flags
In a loop that back-propagates through a GradScaler (`scaler.scale(loss).backward()`, or `scaled.backward()` of a
name every binding of which in the file is `scaled = scaler.scale(loss)`):
1. `optimizer.step()` called directly instead of `scaler.step(optimizer)`, or a second time after
   `scaler.step(optimizer)` in the same iteration (the message says so; no fix);
2. `clip_grad_norm_` / `clip_grad_value_` (or the old `clip_grad_norm`), or gradients clamped by hand
   (`p.grad.data.clamp_(-c, c)`, also in a loop over the parameters), with no `scaler.unscale_(optimizer)` between
   the backward and the clip; also a clip in a function of the file or of another project file that the loop calls
   there (even one under a test in that function, `if max_norm > 0:`), reported at the call for the latter; and a
   function that back-propagates nothing, clips, then calls `scaler.step(opt)` (the scaler a parameter or an
   attribute), with no `unscale_` anywhere in the file: a trainer's `step()` after its `backward()` method, an
   updater's `step(grad_scaler)` after the caller's scaled backward (also in a file of its own). Not followed: a
   helper that unscales on some path of its own;
3. `scaler.step(...)` with no `scaler.update()` in the iteration, or with updates after it only under a periodic
   test the step does not share (`if i % 100 == 0:`, or its `else:`), so that most iterations step without one;
4. `scaler.update()` under a condition decided after `scaler.unscale_(optimizer)` (`if not skip:` with `skip`
   set when the clipped norm is too large, `if torch.isfinite(norm):`);
5. `scaler.update()` more than once per iteration where a gradient is unscaled at another scale than the one it
   was made at: after each optimizer's `scaler.step` (a GAN's generator, then its discriminator, with one
   scaler), or inside a loop over the optimizers (`for opt in optimizers: scaler.step(opt); scaler.update()`, also
   through a helper), when an optimizer steps gradients not cleared and made again since the earlier update, or
   steps under an accumulation window. Complete cycles (clear, scaled backward, step, update, per network) are not
   reported: each gradient meets its own scale;
5b. `scaler.unscale_(optimizer)` that can run again for the same optimizer before `scaler.update()`: twice in one
   iteration, or on every iteration while the step and the update wait for the end of an accumulation window
   (`if (i + 1) % k == 0:`). PyTorch raises 'unscale_() has already been called on this optimizer since the last
   update()' at the second call. Not followed: an update left to a helper, or one under only conditions the unscale
   also holds (`if step_now:` tested once for the unscale and again for the update), or under a window of one
   (`assert k == 1` ahead of the unscale, then `if (i + 1) % k == 0: scaler.update()`). A helper of another project
   file that updates under `if scaler:` only, handed the scaler, updates as the caller would.
5c. `scaler.update()` on every iteration while `scaler.step(optimizer)` waits for an accumulation window: the
   first iteration that does not step finds no inf checks and PyTorch asserts 'No inf checks were recorded prior to
   update.'. Not followed: a step left to a helper, or one under only conditions the update also holds. A loop over
   the optimizers that steps the one of each pass on every path of the pass (`for o in opts.values(): if hvd: ...
   scaler.step(o) else: scaler.step(o)`) has stepped: the optimizers a run trains are never none.

And in a loop whose backwards are all plain (`loss.backward()`):
6. `scaler.step(optimizer)` of a GradScaler built in the file: the step unscales, dividing by the loss scale
   gradients that were never multiplied by it, so each update is 65536 times (and more, as the scale grows) too
   small. Not followed: a scaler built with `enabled=False` (anywhere under that name in the file), one handed in
   from elsewhere, and a function that scales a loss anywhere (`scaled = scaler.scale(loss)` then
   `scaled.backward()`).

7. A GradScaler built again where it is used: `scaler = GradScaler()` inside the iteration that scales and steps
   with it (not under a condition that changes there, `if scaler is None:`; under a setting fixed for the loop, `if
   cfg.fp16:`, it is built on every iteration that uses it; such a fresh scaler carries no unscaled state, so 4 does
   not ask about it; not with the optimizer built again beside it, a new run each pass), or at the start of a function whose loop steps with
   it when a loop of the same file calls that function handing it an optimizer bound before that loop (an epoch
   function, `for epoch in ...: train_one_epoch(model, optimizer)`), or stepping one it is not handed and does not
   bind (the module's, `self.optimizer` of the trainer) that the loop does not bind again: each new scaler starts again from its initial
   scale (65536) and growth count. Not followed: a disabled scaler (`enabled=False`), a function called once, or one
   a loop calls with a new optimizer each time (a fold of cross-validation: a new run). No fix is offered.

8. `accelerator.clip_grad_norm_(...)` inside `with accelerator.accumulate(model):` with no test of
   `accelerator.sync_gradients` around it: on every micro-step it unscales a prepared fp16 GradScaler (the step and
   the update wait for the window: PyTorch raises at the second micro-step) and clips a partial sum. No fix.
9. A gradient hook that clamps (`p.register_hook(lambda g: g.clamp(-c, c))`, a lambda or a function of the file),
   registered in a file that steps through a GradScaler, or by a function of another project file it calls
   (`util.enable_gradient_clipping(model, c)`): the hook runs inside the backward on the scaled gradients, so it
   clamps the true ones at `c / scale`. No fix (unscale, then `clip_grad_value_`, after the backward).

A function that back-propagates outside any loop of its own and steps an optimizer (an optimizer wrapper's
`step(loss)`, an agent's `learn(batch)`) runs once per step of whatever loop calls it, in this file or another:
1, 2 and 5 are checked in its body as in one iteration. 3 is not (its caller may update the scale once it returns).
So is a function that back-propagates in a loop of its own, the micro-batches of one window, and steps after it
(`for _ in range(accum): scaler.scale(loss).backward()`, then the clip and `scaler.step(opt)`): one step per call.

## Why it is wrong
1. The gradients are still multiplied by the loss scale (65536 at first): the update is tens of thousands of
   times too large, and the step is not skipped when the gradients contain inf/nan. After `scaler.step`, they
   are unscaled, but a second plain step applies them twice and takes the steps the scaler skipped.
2. The clipping threshold is compared with scaled gradients, so it clips far too hard (effectively always).
3. The scale never shrinks after an overflow nor grows back: steps keep being skipped, or precision is lost; an
   enabled GradScaler also refuses a second `step()` before an `update()` ("step() has already been called since
   the last update()"), so a step on iterations the update skips raises.
4. Only `update()` resets the optimizer's unscaled state: on an iteration that skips it, the next `unscale_`
   raises "unscale_() has already been called on this optimizer since the last update()".
7. The scale a GradScaler learned (lowered after each overflow, raised after `growth_interval` clean steps) lives in
   that object: a new one starts at 65536 again, so the iterations after it overflow and skip their steps until
   the scale comes back down (every iteration, for one rebuilt in the loop: where fp16 gradients overflow at 65536,
   nothing ever trains).
5. PyTorch's GradScaler wants one `update()` per iteration, after every optimizer used in it has stepped (the
   documented multi-optimizer recipe updates once, at the end): an update between a backward and the step of its
   gradients changes the scale they are divided by, so they are unscaled wrongly (or, after an overflow, by half).

## Example
```python
for x, y in loader:
    loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)   # TL010: clip before unscale_
    optimizer.step()                                          # TL010: not scaler.step(optimizer)
    optimizer.zero_grad()
```

## Fix
1. `optimizer.step()` → `scaler.step(optimizer)`; 2. insert `scaler.unscale_(optimizer)` before the clip (not
offered where the scaled backward runs under a test the clip is not under, `if scaler:`: the scaler may be None);
3. insert `scaler.update()` after the last `scaler.step(...)`; 4. (no fix) call `scaler.update()` on every path
after the unscale: it is valid after a skipped step; 5. (no fix) keep one `scaler.update()`, after the last
optimizer's step of the iteration. **Unsafe**: the updates change, to the correct ones.

## Correct look-alikes (not flagged)
The documented AMP recipe (`scale → backward → unscale_ → clip → scaler.step → scaler.update`); a clip after
`scaler.step(opt)` (the step unscaled the gradients: too late to matter, but not a clip of scaled ones);
`accelerator.clip_grad_norm_` (it unscales); loops that do not use a GradScaler; a disabled scaler's
`scaler.step` is still used the same way; the plain arm of `if use_amp: ... else: loss.backward();
optimizer.step()` (exclusive branches are never sequenced), also when the scaled backward sits in a helper
under `if scaler is not None:` and the step in the caller's `else:`; a plain step under `if self.scaler is None:`
(or the `else:` of `if self.scaler is not None:`), also when the backward is in another method that scales only
past `if self.scaler is None: loss.backward(); return` (with no scaler, `scaler.scale(...)` cannot have run); two
training functions called one after the other (an AMP run, then a plain run); `scaler.update()` after a step
skipped under `if torch.isfinite(norm):`; a second `scaler.update(new_scale)` that sets the scale by hand
(`if scale < 1.0: scaler.update(scale * 2.0)`), which counts nothing toward growth;
the update under the same window test as the unscale, tested again, or under a flag set before the unscale;
an update under the step's own window test (`if (i + 1) % k == 0:` twice), under a flag fixed for the loop
(`if use_amp:`: a disabled scaler needs none), under a test that is not periodic, or in a helper called every
iteration;
one `scaler.update()` after the last of several `scaler.step(...)`, or after a loop that steps another optimizer each
pass (`for opt in optimizers:`, `opt = optims[axis]`); one scaler per network, each updated once; a loop over the
optimizers that takes each its own scaler (`for opt, scaler in zip(optimizers, scalers)`, `scaler = scalers[i]`); an
inner loop over micro-batches that steps and updates once per micro-batch; two training steps in one pass (a helper
that steps and updates, called for two batches: the same optimizer steps again between the updates); a step call
handed the scaler
(`self.optimizer.step("generator", scaler=scaler)`): not `Optimizer.step`, which takes only a closure, but a wrapper
that may step through the scaler itself; a stand-in class the file defines where the import of its name fails
(`try: from torch.cuda.amp import GradScaler` / `except ImportError: class GradScaler: ...`, or the two arms of an
`if`): where the import runs, `scaler.step(opt)` and `scaler.unscale_(opt)` are GradScaler's own, not the stand-in's.

```python
scaler = torch.cuda.amp.GradScaler()
for x, y in loader:
    with torch.autocast("cuda"):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
```
"""

    def check(self, model: FileModel) -> Iterator[Finding]:
        seen: set[int] = set()  # a per-step function called in a loop of the file is judged there and alone
        for loop in [*model.loops, *model.step_bodies(), *_window_bodies(model)]:
            scaled = [b for b in loop.of(EventKind.BACKWARD) if b.variant is BackwardVia.SCALER]
            if not scaled:
                for finding in _unscaled_backward(model, loop):
                    if id(finding.node) not in seen:
                        seen.add(id(finding.node))
                        yield finding
                continue
            scaler = scaled[0].via or "scaler"
            found = [*_direct_steps(loop, scaled, scaler), *_clip_before_unscale(loop, scaled, scaler),
                     *_updated_twice(model, loop)]
            if loop.node is not None:
                # A per-step function may leave `update()` to its caller, once its step returns.
                found += _no_update(loop, scaler)
                found += _update_skipped_after_unscale(loop)
                found += _unscaled_again(loop)
                found += _updated_without_step(loop)
            for finding in found:
                if id(finding.node) not in seen:
                    seen.add(id(finding.node))
                    yield finding
        for clip, step, backward in clipped_before_scaler_step(model):
            if id(clip.node) not in seen:
                seen.add(id(clip.node))
                made = f"`{code_of(backward.node)}` made them, in another method" if backward is not None else \
                    f"`{code_of(step.node)}` unscales them only after it"
                yield Finding(clip.node, f"`{code_of(clip.node)}` clips gradients still multiplied by the loss scale "
                              f"({made}): call `{step.via}.unscale_({step.target})` before it")
        yield from _rebuilt_scalers(model)
        yield from _clipped_every_micro_step(model)
        yield from _clamping_hooks(model)


def _window_bodies(model: FileModel) -> list[Loop]:
    """A function that back-propagates in a loop of its own (the micro-batches of one window) and steps outside
    any (`for _ in range(accum): scaler.scale(loss).backward()`, then `clip_grad_norm_(...)`, `scaler.step(opt)`):
    one training step per call, its whole body one iteration (a Loop with no head)."""
    bodies = {id(b.scope) for b in model.step_bodies()}
    return [Loop(None, scope, scope.events) for scope in model.scopes  # type: ignore[arg-type]  # no head
            if type(scope.node) is cst.FunctionDef and id(scope) not in bodies
            and any(e.kind is EventKind.BACKWARD and e.loops and e.variant is BackwardVia.SCALER for e in scope.events)
            and any(e.kind is EventKind.STEP and not e.loops for e in scope.events)]


def _serves(loop: Loop, backward: Event, later: Event) -> bool:
    """`later` can run after `backward` in the same iteration, inside the loop `backward` runs in (a backward in
    one training function never serves the step of another function called after it)."""
    return (level(later) is None or level(later) in backward.loops) and loop.may_follow(backward, later)


def _direct_steps(loop: Loop, scaled: list[Event], scaler: str) -> Iterator[Finding]:
    for step in loop.of(EventKind.STEP):
        if step.via is not None or step.target is None or not any(_serves(loop, b, step) for b in scaled):
            continue
        if level(step) is not loop.node:
            continue  # judged in its own loop
        call = step.node
        if handed_scaler(call, scaled, scaler):
            continue  # `opt.step(name, scaler=scaler)`: a wrapper that steps through the scaler, not a plain step
        if without_scaler(step, scaled, scaler):
            continue
        stepped = [s for s in loop.of(EventKind.STEP) if s.via is not None and s.target == step.target
                   and loop.may_follow(s, step) and s.seq < step.seq]
        if stepped:
            yield Finding(
                call,
                f"`{code_of(call)}` after `{code_of(stepped[-1].node)}` steps `{step.target}` a second time in the "
                f"iteration, bypassing the scaler's inf/nan check: a step the scaler skipped for inf/nan gradients "
                f"is taken anyway; remove it",
            )
            continue
        fix = None
        if type(call) is cst.Call and not call.args:
            new = expression(f"{scaler}.step({step.target})")
            fix = Fix("unsafe", f"use `{scaler}.step({step.target})`", ((call, new),))
        yield Finding(
            call,
            f"`{code_of(call)}` after `{scaler}.scale(...).backward()` applies gradients still multiplied by the loss "
            f"scale and skips the inf/nan check; call `{scaler}.step({step.target})`",
            fix,
        )


def _clip_before_unscale(loop: Loop, scaled: list[Event], scaler: str) -> Iterator[Finding]:
    for clip in loop.of(EventKind.CLIP):
        if clip.variant is ClipVia.ACCELERATOR:
            continue
        # A clip in a loop of its own with no backward (`for p in model.parameters(): p.grad.data.clamp_(-1, 1)`)
        # is judged here, as one clip; one in a loop that back-propagates too is judged in that loop.
        inner = clip.loops[clip.loops.index(loop.node) + 1:] if loop.node in clip.loops else clip.loops
        if inner and any(set(inner) & set(b.loops) for b in scaled):
            continue
        before = [b for b in scaled if (loop.node is None or loop.node in b.loops) and loop.may_follow(b, clip)]
        if not before:
            continue
        by = before[-1].via or scaler  # the scaler of the backward just before (one per network)
        unscales = [e for e in loop.of(EventKind.SCALER_UNSCALE) if loop.may_follow(e, clip)]
        if any(loop.may_follow(b, u) for b in before for u in unscales) or any(
                s.via == by and loop.may_follow(before[-1], s) and loop.may_follow(s, clip) for s in loop.of(EventKind.STEP)):
            continue  # (`scaler.step(opt)` after the backward unscales too: a clip after it sees the true gradients)
        steps = [s for s in loop.of(EventKind.STEP) if s.target and loop.may_follow(clip, s)]
        opt = steps[0].target if steps else None
        fix = None
        # Not when the optimizer is a name bound by a loop after the clip (`for opt in optimizers: scaler.step(opt)`).
        # (not when the scaled backward runs under a test the clip is not under, `if scaler:`: the scaler may be None)
        tests = {id(g.test) for g in clip.guards}
        if opt and steps[0].loops == clip.loops and movable(clip.stmt) and clip.inlined_from is None \
                and all({id(g.test) for g in b.guards} <= tests for b in before):
            fix = Fix("unsafe", f"insert `{by}.unscale_({opt})` before clipping",
                      (insert_before(clip.stmt, f"{by}.unscale_({opt})\n"),))
        yield Finding(
            clip.node,
            f"`{code_of(clip.node.func) if type(clip.node) is cst.Call else 'clipping'}` clips gradients still "
            f"multiplied by the loss scale: call `{by}.unscale_({opt or 'optimizer'})` before it",
            fix,
        )


def _no_update(loop: Loop, scaler: str) -> Iterator[Finding]:
    steps = [s for s in loop.of(EventKind.STEP) if s.via is not None]
    if not steps or steps[-1].loops[-1] is not loop.node:
        return  # stepped in an inner loop; judged there
    last = steps[-1]
    updates = loop.of(EventKind.SCALER_UPDATE)
    if not updates and optimizers_in_turn(loop, last):
        return
    periodic = None
    if updates:
        periodic = _periodic_update(loop, last, updates)
        if periodic is None:
            return
    fix = None
    if movable(last.stmt) and last.inlined_from is None:
        fix = Fix("unsafe", f"insert `{last.via}.update()` after the step", (insert_after(last.stmt, f"{last.via}.update()\n"),))
    if periodic is not None:
        update, test, negated = periodic
        message = (f"`{code_of(last.node)}` runs on iterations that skip `{code_of(update.node)}` (only when "
                   f"`{code_of(test)}` {'fails' if negated else 'holds'}): GradScaler needs an update after every "
                   f"step, so the next step raises 'step() has already been called since the last update()'; call "
                   f"`{last.via}.update()` after every step")
    else:
        message = (f"`{code_of(last.node)}` without `{last.via}.update()` in the iteration: the loss scale never "
                   f"adapts, so overflowing steps keep being skipped; call `{last.via}.update()` after the step")
    yield Finding(last.node, message, fix)


def _periodic_update(loop: Loop, step: Event, updates: list[Event]) -> tuple[Event, cst.CSTNode, bool] | None:
    """The scaler's updates after `step` run only on some iterations, by a periodic test the step does not share
    (`if i % 100 == 0:`), so that the iteration may end after the step with no update: `(an update, its test,
    whether it runs when the test fails)`. An update under the step's own condition, under a test fixed for the
    loop, or in a helper called every iteration runs whenever the step does."""
    after = [u for u in updates if u.target == step.via and loop.may_follow(step, u)]
    if not after or not loop.ends_iteration_after(step, after):
        return None
    shared = {g.condition() for g in step.guards}
    tests = []
    for u in after:
        periodic = [(t, g.negated) for g in u.guards_within(loop.node) if g.condition() not in shared
                    and modulo_divisor(t := loop.scope.test_of(g, u)) is not None]
        if not periodic:
            return None
        tests.append(periodic[0])
    return after[0], *tests[0]


def _update_skipped_after_unscale(loop: Loop) -> Iterator[Finding]:
    """`scaler.unscale_(opt)`, then `scaler.update()` under a condition decided after it (`if not skip:` with
    `skip = True` when the clipped norm is too large): on the iterations it skips, the optimizer stays unscaled and
    the next `unscale_` raises. A condition the unscale was already under, tested again, decides nothing new."""
    for unscale in loop.of(EventKind.SCALER_UNSCALE):
        if level(unscale) is not loop.node:
            continue
        updates = [u for u in loop.of(EventKind.SCALER_UPDATE)
                   if u.target == unscale.via and loop.may_follow(unscale, u)]
        if not updates or not loop.ends_iteration_after(unscale, updates):
            continue
        if not all(decided_after(loop, unscale, u) for u in updates) or any(
                e.target == unscale.via and e.rebinds and level(e) is loop.node for e in loop.of(EventKind.ASSIGN)):
            continue  # (a scaler built again in each iteration keeps no unscaled state: that is 7's concern)
        last = updates[-1]
        yield Finding(
            last.node,
            f"`{code_of(last.node)}` is skipped by a condition decided after `{code_of(unscale.node)}`: on those "
            f"iterations the optimizer stays unscaled and the next `unscale_` raises 'unscale_() has already been "
            f"called on this optimizer since the last update()'; call `{unscale.via}.update()` on every path after "
            f"the unscale (it is safe after a skipped step)",
        )


def _unscaled_again(loop: Loop) -> Iterator[Finding]:
    """`scaler.unscale_(opt)` that can run again for the same optimizer before any `scaler.update()` of that
    scaler: twice in one iteration, or on every iteration while the update waits under a condition (an accumulation
    window: `if (i + 1) % k == 0: scaler.step(opt); scaler.update()`). PyTorch raises 'unscale_() has already been
    called on this optimizer since the last update()' at the second one. Asked only where the iteration updates the
    scaler itself (an update left to a helper is not seen) and both calls are statements of the loop's function, and
    not when an update sits under no condition the unscale does not also hold (the flow graph does not know that
    `if step_now:` tested twice gives the same answer)."""
    scope = loop.scope
    flow = scope.flow
    unscales = [u for u in loop.of(EventKind.SCALER_UNSCALE)
                if u.via and u.target and level(u) is loop.node and u.scope is scope.node and u.inlined_from is None]
    for u in unscales:
        updates = [v for v in loop.of(EventKind.SCALER_UPDATE) if v.target == u.via]
        if not updates or any(v.scope is not scope.node or v.inlined_from is not None for v in updates):
            continue
        held = conditions(loop, u)
        # an update under conditions the unscale holds too (`if step_now:` tested twice) follows it every time
        follows = any(conditions(loop, v) <= held for v in updates) or all(
            decided_after(loop, u, v) for v in updates) or all(  # (4. reports that at the update)
            every_time_after(loop, u, v) for v in updates)
        start, head = scope.flow_node(u), flow.loop_head.get(id(loop.node))
        avoid = frozenset(n for v in updates if (n := scope.flow_node(v)) is not None)
        if start is None or head is None or len(avoid) < len(updates):
            continue
        for again in unscales:
            target = scope.flow_node(again)
            if again.via != u.via or again.target != u.target or target is None or (again is u and follows):
                continue
            within = frozenset() if again is u else frozenset((head,))  # another: in the same iteration
            if flow.reaches_avoiding(start, target, avoid | within, normal_only=True):
                yield Finding(
                    again.node,
                    f"`{code_of(again.node)}` can run again before `{u.via}.update()` "
                    + ("in the same iteration" if again is not u else "on the next iteration (the update waits "
                       "under a condition)")
                    + f": PyTorch raises 'unscale_() has already been called on this optimizer since the last "
                    f"update()'; unscale `{u.target}` once per step, right before clipping, under the step's "
                    f"condition",
                )
                break


def _updated_without_step(loop: Loop) -> Iterator[Finding]:
    """`scaler.update()` on every iteration while `scaler.step(opt)` waits for an accumulation window (`if (i + 1)
    % k == 0:`): an update with no step or unscale of that scaler since the previous one finds no inf checks, and
    PyTorch asserts 'No inf checks were recorded prior to update.' (the first iteration that does not step). Asked
    only where the iteration steps through the scaler itself, and not when a step sits under no condition the update
    does not also hold."""
    scope = loop.scope
    flow = scope.flow
    for v in loop.of(EventKind.SCALER_UPDATE):
        if (not v.target or level(v) is not loop.node or v.scope is not scope.node or v.inlined_from is not None
                or sets_scale(v)):
            continue
        records = [e for e in loop.of(EventKind.STEP, EventKind.SCALER_UNSCALE) if e.via == v.target]
        if not any(e.kind is EventKind.STEP for e in records) or any(
                e.scope is not scope.node or e.inlined_from is not None for e in records):
            continue
        held = conditions(loop, v)
        if any(conditions(loop, e) <= held for e in records):
            continue
        start = scope.flow_node(v)
        avoid = frozenset(n for e in records if (n := scope.flow_node(e)) is not None)
        if start is None or len(avoid) < len(records):
            continue
        # a loop over the optimizers stepping each one in every pass steps: a run's optimizers are never none
        avoid |= {h for f in optimizers_loops(records) if flow.every_pass_meets(f, avoid)
                  and (h := flow.loop_head.get(id(f))) is not None}
        if flow.reaches_avoiding(start, start, avoid, normal_only=True):
            yield Finding(
                v.node,
                f"`{code_of(v.node)}` runs on iterations where no `{v.target}.step(...)` ran since the previous update "
                f"(the step waits under a condition, the update does not): PyTorch asserts 'No inf checks were "
                f"recorded prior to update.'; call `{v.target}.update()` right after the step, under its condition",
            )


def _updated_twice(model: FileModel, loop: Loop) -> Iterator[Finding]:
    """`scaler.update()` twice in one iteration: two updates of the same scaler, one after the other (one after each
    optimizer's `scaler.step`), or one inside a loop over the optimizers (`for opt in optimizers: scaler.step(opt);
    scaler.update()`). PyTorch's GradScaler wants one `update()` per iteration, after every optimizer has stepped.
    An update given the new scale (`scaler.update(scale * 2.0)`) sets it and counts nothing toward growth: it is
    no second update."""
    updates = [u for u in loop.of(EventKind.SCALER_UPDATE) if u.target and "[" not in u.target
               and not sets_scale(u)]
    steps = [s for s in loop.of(EventKind.STEP) if s.via]
    for u in updates:
        again = [v for v in updates if v is not u and v.target == u.target and level(v) is level(u)
                 and level(u) is loop.node and loop.may_follow(u, v) and not loop.may_follow(v, u)
                 and not steps_again(loop, u, v) and crossed(model, loop, u, [
                     s for s in steps if s.via == u.target and loop.may_follow(u, s) and loop.may_follow(s, v)])]
        if again:
            yield Finding(
                u.node,
                f"`{code_of(u.node)}` runs, then `{code_of(again[0].node)}` again in the same iteration: the loss "
                f"scale is adjusted twice per iteration; call `{u.target}.update()` once, after the last optimizer "
                f"has stepped",
            )
            continue
        per = optimizer_loop(loop, u)
        if per is not None and crossed(model, loop, u, [s for s in steps if s.via == u.target and per in s.loops]):
            yield Finding(
                u.node,
                f"`{code_of(u.node)}` inside `for {code_of(per.target)} in {code_of(per.iter)}`, a loop over the "
                f"optimizers `{u.target}` steps, runs once per optimizer: the loss scale is adjusted several times per iteration; call "
                f"`{u.target}.update()` once, after the loop",
            )


def _unscaled_backward(model: FileModel, loop: Loop) -> Iterator[Finding]:
    """`scaler.step(opt)` of a GradScaler built in the file, while every backward before it is a plain one: the step
    unscales (divides by the loss scale) gradients that were never scaled. Silent when the function scales a loss
    anywhere (`scaled = scaler.scale(loss)` then `scaled.backward()`), when the scaler may be disabled
    (`enabled=False`), or when a backward comes from code not read."""
    steps = [s for s in loop.of(EventKind.STEP) if s.via is not None and model.symbols.scaler_enabled.get(s.via)]
    if not steps:
        return
    backwards = loop.of(EventKind.BACKWARD)
    if not backwards or any(b.variant not in (BackwardVia.TENSOR, BackwardVia.AUTOGRAD) for b in backwards):
        return
    if ".scale(" in code_of(loop.scope.node):
        return
    for step in steps:
        before = [b for b in backwards if loop.may_follow(b, step) and b.seq < step.seq]
        if not before or level(step) is not loop.node:
            continue
        yield Finding(
            step.node,
            f"`{code_of(step.node)}` unscales gradients that `{code_of(before[-1].node)}` never scaled: it divides "
            f"them by the loss scale (65536 at first, growing), so every update is that much too small; "
            f"back-propagate `{step.via}.scale(loss)` instead",
        )


def _rebuilt_scalers(model: FileModel) -> Iterator[Finding]:
    """7. `scaler = GradScaler()` built again for each iteration that steps with it, or at the start of a function
    whose loop steps with it when a loop of the file calls that function with an optimizer that outlives the call
    (an epoch function, `for epoch in ...: train_one_epoch(model, optimizer)`): the scale it learned is dropped."""
    if "GradScaler" not in model.text:
        return
    for scope in model.scopes:
        for a in scope.raw:
            if (a.kind is not EventKind.ASSIGN or not a.target or a.value is None or a.scope is not scope.node
                    or role_of_value(a.value) is not Role.SCALER or not model.symbols.scaler_enabled.get(a.target, True)):
                continue
            uses = [e for e in scope.events if e.via == a.target and e.scope is scope.node
                    and (e.kind is EventKind.STEP or e.kind is EventKind.BACKWARD)]
            built = code_of(a.value)
            if a.loops:
                inner = a.loops[-1]
                lp = next((lp for lp in model.loops if lp.node is inner), None)
                fixed = lp is not None and all(isinstance(g.test, cst.BaseExpression) and lp.invariant(g.test)
                                               for g in a.guards_within(inner))  # `if cfg.fp16:`, the same each pass
                renewed = {o.target for o in scope.events if o.kind is EventKind.ASSIGN and o.rebinds and inner in o.loops}
                if fixed and any(inner in u.loops and u.seq > a.seq for u in uses) and not any(
                        u.kind is EventKind.STEP and u.target in renewed for u in uses if inner in u.loops):
                    # (not with an optimizer built again beside it: a new run each pass, `for run in range(n)`)
                    yield Finding(a.value, (
                        f"`{built}` builds a new GradScaler on every iteration that steps with it: the loss scale "
                        f"starts again at its initial value (65536) each time and what `{a.target}.update()` "
                        f"learned is dropped, so where fp16 gradients overflow at that scale every step is "
                        f"skipped; build the scaler once, before the loop"))
                continue
            steps = [u for u in uses if u.kind is EventKind.STEP and u.loops and u.target]
            call = called_per_run(model, scope, [u.target for u in steps if u.target]) if steps else None
            if call is not None:
                yield Finding(a.value, (
                    f"`{built}` builds a new GradScaler on each call of `{scope.name}`, which a loop of `{call}` "
                    f"calls with the same optimizer: the loss scale starts again at 65536 each time (the first "
                    f"steps of every call overflow and are skipped until it comes down again); build the scaler "
                    f"once, outside that loop, and hand it in"))


def _clipped_every_micro_step(model: FileModel) -> Iterator[Finding]:
    """8. `accelerator.clip_grad_norm_(...)` inside `with accelerator.accumulate(model):` under no test of
    `accelerator.sync_gradients`: it runs on every micro-step, unscaling a prepared fp16 GradScaler's gradients
    before the window's step and update (PyTorch raises at the second micro-step) and clipping a partial sum."""
    seen: set[int] = set()
    for loop in model.loops:
        for c in loop.of(EventKind.CLIP):
            if (c.variant is not ClipVia.ACCELERATOR or "accumulate" not in c.contexts or id(c.node) in seen
                    or any("sync_gradients" in code_of(g.test) for g in c.guards)):
                continue
            seen.add(id(c.node))
            yield Finding(c.node, (
                f"`{code_of(c.node)}` runs on every micro-step of `accelerator.accumulate`, not only when "
                f"`accelerator.sync_gradients`: with fp16 it unscales the GradScaler's gradients again before the "
                f"window's step and update (PyTorch raises 'unscale_() has already been called on this optimizer "
                f"since the last update()'), and otherwise it clips a partial sum of the window's gradients; clip "
                f"under `if accelerator.sync_gradients:`"))


def _clamping_hooks(model: FileModel) -> Iterator[Finding]:
    """8. A gradient hook that clamps (`p.register_hook(lambda g: g.clamp(-c, c))`), registered in a file whose
    backwards go through a GradScaler, directly or by a function of another project file it calls: the hook runs
    during the backward on the scaled gradients, so it clamps the true ones at `c / scale`."""
    if not any(e.kind is EventKind.BACKWARD and e.variant is BackwardVia.SCALER or e.kind is EventKind.SCALER_UPDATE
               for s in model.scopes for e in s.events):
        return  # (the scaled backward may be another file's: `scaler.update()` says a GradScaler trains here)
    why = ("runs during the backward, on gradients still multiplied by the GradScaler's loss scale (65536 at first): "
           "it clamps the true gradients at a bound that many times smaller; unscale first and clip after the "
           "backward (`scaler.unscale_(optimizer)`, then `clip_grad_value_`)")
    for call in clamping_hooks(model.module) if "register_hook" in model.text else ():
        yield Finding(call, f"the gradient hook `{code_of(call)}` clamps, and {why}")
    if model.project is None:
        return  # (alone, no function of another file is known)
    for scope in model.scopes:
        for e in scope.raw:
            if e.kind is EventKind.LOCAL_CALL and type(e.node) is cst.Call and e.callee \
                    and model.resolve(scope, e.callee) is None and (found := model.external(scope, e.callee)) is not None \
                    and found.export.clamps:
                yield Finding(e.node, f"`{code_of(e.node)}` registers a gradient hook that clamps ({found.path}), and "
                                      f"it {why}")
