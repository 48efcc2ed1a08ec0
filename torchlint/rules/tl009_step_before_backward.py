"""TL009: optimizer.step() runs before loss.backward() in the same iteration.

The step uses gradients that are stale (last iteration's) or already cleared (zero): training lags one batch
behind or does not move at all, and nothing raises.
"""

from __future__ import annotations

from typing import Iterator

from torchlint.analysis import Event, EventKind, FileModel
from torchlint.analysis.exprs import code_of
from torchlint.diagnostic import Fix
from torchlint.fixes import movable, move_after
from torchlint.rules.base import BACKWARD_CALL, LOOP, STEP_CALL, Finding, Rule
from torchlint.verify.signs import Sign


class StepBeforeBackward(Rule):
    code = "TL009"
    name = "step-before-backward"
    summary = "optimizer.step() before loss.backward() in the same iteration"
    fix_safety = "unsafe"
    requires = (BACKWARD_CALL, LOOP, STEP_CALL)
    runtime_signs = (Sign.STEP_WITHOUT_BACKWARD,)
    runtime_same_line = True
    fix_promise = "every step now follows the backward of its own batch"
    doc = """
## What it flags
An unconditional `optimizer.step()` (or `scaler.step(optimizer)`) that runs in an iteration before any backward
of that iteration, while a backward follows later in the same iteration.

## Why it is wrong
`step()` applies what is in `.grad` now: the previous batch's gradients (one-step lag; the first step uses
nothing) or, after a `zero_grad()`, zeros. The loss curve looks "almost right", which makes it hard to spot.

## Example
```python
for x, y in loader:
    optimizer.zero_grad()
    optimizer.step()                  # TL009
    loss = criterion(model(x), y)
    loss.backward()
```

## Fix
When the order is unambiguous (the step and the backward are single statements of the same block, under the
same conditions), the step is moved to right after the backward. Otherwise there is no automatic fix.
**Unsafe**: the updates change.

## Correct look-alikes (not flagged)
`optimizer.step(closure)` whose closure runs the backward (LBFGS); a guarded step at the start of the next
accumulation window (`if i > 0 and i % k == 0: optimizer.step()`); `scheduler.step()`; `env.step()`; the
differentiable optimizer of `with higher.innerloop_ctx(model, opt) as (fmodel, diffopt):`, whose `diffopt.step(loss)`
takes the loss's gradients itself.

```python
for x, y in loader:
    def closure():
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        return loss
    optimizer.step(closure)         # LBFGS: the closure runs the backward
```
"""

    def check(self, model: FileModel) -> Iterator[Finding]:
        for loop in model.loops:
            backwards = loop.of(EventKind.BACKWARD)
            if not backwards:
                continue
            for step in loop.of(EventKind.STEP):
                if step.guards_within(loop.node) or step.loops[-1] is not loop.node:
                    continue
                if any(loop.may_follow(b, step) for b in backwards):
                    break  # a backward may already have run in this iteration
                later = [b for b in backwards if loop.may_follow(step, b) and b.loops[-1] is loop.node]
                if not later:
                    continue
                yield Finding(
                    step.node,
                    f"`{code_of(step.node)}` runs before `{code_of(later[0].node)}` in the same iteration: it applies "
                    f"stale (or zeroed) gradients; step after the backward",
                    _fix(step, later[0]),
                )
                break


def _fix(step: Event, backward: Event) -> Fix | None:
    same_place = (
        step.scope is backward.scope
        and step.guards == backward.guards
        and step.contexts == backward.contexts
        and step.loops == backward.loops
        and step.inlined_from is None
        and backward.inlined_from is None
    )
    if not same_place or not movable(step.stmt) or not movable(backward.stmt) or step.via:
        return None
    return Fix("unsafe", "move the step after the backward", move_after(step.stmt, backward.stmt))
