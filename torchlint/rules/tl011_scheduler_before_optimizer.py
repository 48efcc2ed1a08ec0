"""TL011: a per-iteration `lr_scheduler.step()` before `optimizer.step()` in the same iteration.

The first value of the schedule is skipped and every step uses the next one; PyTorch warns "Detected call of
`lr_scheduler.step()` before `optimizer.step()`", which is easy to miss in a log.
"""

from __future__ import annotations

import re
from typing import Iterator

import libcst as cst

from torchlint.analysis import Event, EventKind, FileModel, Loop
from torchlint.analysis.exprs import code_of
from torchlint.analysis.names import role_suffix
from torchlint.diagnostic import Fix
from torchlint.fixes import movable, move_after
from torchlint.rules.base import LOOP, STEP_CALL, Finding, Rule, where

# Every name or constructor torchlint.analysis.names takes for a scheduler contains one of these.
SCHEDULER = re.compile(r"(?i:sched)|LR\s*\(|ReduceLROnPlateau")


class SchedulerBeforeOptimizer(Rule):
    code = "TL011"
    name = "scheduler-before-optimizer"
    summary = "lr_scheduler.step() before optimizer.step() in the same iteration"
    fix_safety = "unsafe"
    # A scheduler is known by its name (`lr_sched`, `schedulerG`) or its constructor (`StepLR(`,
    # `get_linear_schedule_with_warmup(`), which may sit elsewhere in the file (`__init__`); the function with the
    # finding steps both in a loop.
    requires = (STEP_CALL, LOOP, SCHEDULER)
    scope_requires = (STEP_CALL, LOOP)
    doc = """
## What it flags
In one iteration of a loop, `scheduler.step()` (no argument) before the `optimizer.step()` it schedules —
directly, or inside a small wrapper method of the same file that steps both.

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
Move the scheduler step to right after the optimizer step (after `scaler.update()` with AMP). **Unsafe**: the
learning rates of every step change, to the intended ones.

## Correct look-alikes (not flagged)
`scheduler.step(start_epoch)` when resuming; per-epoch scheduling after the inner batch loop;
`ReduceLROnPlateau.step(val_loss)` after validation; any `scheduler.step(...)` with an argument.
"""

    def check(self, model: FileModel) -> Iterator[Finding]:
        for loop in model.loops:
            steps = loop.of(EventKind.STEP, EventKind.RUN)  # RUN: a call to a function that trains and steps
            if not steps:
                continue
            for sched in loop.of(EventKind.SCHED_STEP):
                call = sched.node
                if isinstance(call, cst.Call) and call.args:
                    continue
                mine = _scheduled(model, sched, steps)
                later = [s for s in mine if loop.may_follow(sched, s) and s.loops == sched.loops]
                earlier = [s for s in mine if loop.may_follow(s, sched) and s.loops == sched.loops]
                if not later or earlier or sched.loops[-1] is not loop.node:
                    continue
                opt = later[0]
                if set(sched.guards) != set(opt.guards):
                    continue
                before = f"`{code_of(opt.node)}`{where(opt)}"
                if opt.kind is EventKind.RUN:
                    before += f", which steps `{opt.target}`," if opt.target else ", which steps an optimizer,"
                    before += " in the same iteration"
                else:
                    before += " in the same iteration"
                yield Finding(
                    call,
                    f"`{code_of(call)}` runs before {before}: the schedule's first learning rate is skipped "
                    f"('Detected call of lr_scheduler.step() before optimizer.step()'); step the scheduler after "
                    f"the optimizer",
                    _fix(loop, sched, opt),
                )


def _scheduled(model: FileModel, sched: Event, steps: list[Event]) -> list[Event]:
    """The optimizer steps this scheduler schedules: by construction (`StepLR(opt)`), else by name (G/D)."""
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
    anchor = loop.after_step(opt)
    if sched.scope is not anchor.scope or sched.contexts != anchor.contexts:
        return None
    if not movable(sched.stmt) or not movable(anchor.stmt):
        return None
    return Fix("unsafe", "move the scheduler step after the optimizer step", move_after(sched.stmt, anchor.stmt))
