"""Queries over a GradScaler's events in one loop: the conditions an event sits under, whether an update sets the
scale, whether a gradient is unscaled at another scale than the one it was made at, whether an update's condition
is decided after an unscale. What TL010's checks share."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.clearing import clears
from torchlint.analysis.events import BackwardVia, ClipVia, Event, EventKind
from torchlint.analysis.exprs import code_of, equals_integer, modulo_divisor, names_in
from torchlint.analysis.loops import Loop
from torchlint.analysis.model import FileModel
from torchlint.source.walk import walk


def level(e: Event) -> cst.CSTNode | None:
    """The innermost loop `e` runs in, in its function; None outside any (a per-step function's body)."""
    return e.loops[-1] if e.loops else None


def conditions(loop: Loop, e: Event) -> set[tuple[str, bool] | None]:
    """The conditions (text, polarity) `e` sits under inside the loop."""
    return {g.condition() for g in e.guards_within(loop.node)}


def crossed(model: FileModel, loop: Loop, u: Event, steps: list[Event]) -> bool:
    """A gradient is unscaled at another scale than the one it was made at: a step of `steps` whose optimizer is
    not cleared and refilled by a scaled backward since the update `u` (two backwards, then a step and an update for
    each network; a discriminator's backward leaving gradients in the generator), or one under a condition its
    backwards do not hold (an accumulation window: gradients made before earlier updates). Complete cycles (clear,
    scale, backward, step, update for each network in turn) only count the iteration twice."""
    scaled = [b for b in loop.of(EventKind.BACKWARD) if b.via == u.target]
    clearings = loop.of(EventKind.ZERO_GRAD)
    for s in steps:
        fresh = [b for b in scaled if loop.may_follow(u, b) and loop.may_follow(b, s) and any(
            loop.may_follow(u, z) and loop.may_follow(z, b) and clears(model, s.target or "", z) for z in clearings)]
        held = set(s.guards_within(loop.node))
        if not fresh or any(not held <= set(b.guards_within(loop.node)) for b in fresh):
            return True
    return False


def sets_scale(update: Event) -> bool:
    """`scaler.update(new_scale)` itself, given the scale: not another file's helper whose update is placed at its
    call (`update_network(net, opt, clip, scaler)`: the event stands at the call, whose arguments are the helper's)."""
    node = update.node
    return update.origin is None and type(node) is cst.Call and bool(node.args)


def steps_again(loop: Loop, u: Event, v: Event) -> bool:
    """An optimizer the scaler stepped before `u` steps again between `u` and `v`: two training steps in one pass
    (a helper that steps and updates, called for two batches), each updated once."""
    steps = [s for s in loop.of(EventKind.STEP) if s.via == u.target and s.target]
    before = {s.target for s in steps if loop.may_follow(s, u)}
    return any(s.target in before and loop.may_follow(u, s) and loop.may_follow(s, v) for s in steps)


def decided_after(loop: Loop, unscale: Event, update: Event) -> bool:
    """`update` sits under a guard the unscale does not share whose test reads a name bound between the two."""
    bound = {e.target for e in loop.of(EventKind.ASSIGN)
             if e.target and loop.may_follow(unscale, e) and loop.may_follow(e, update)}
    for g in update.guards:
        if g in unscale.guards or not isinstance(g.test, cst.BaseExpression):
            continue
        if any(h.condition() == g.condition() for h in unscale.guards) and loop.unchanged_between(
                g.test, unscale, update):
            continue
        if names_in(g.test) & bound:
            return True
    return False


def every_time_after(loop: Loop, u: Event, v: Event) -> bool:
    """Every condition `v` sits under in the loop that `u` does not is a window `% k == 0` whose `k` is asserted
    to be 1 ahead of `u` in the iteration (`assert accumulation_steps == 1` before an unscale, then `if (step + 1) %
    accumulation_steps == 0: scaler.update()`): when `u` runs, `v` runs too."""
    held = conditions(loop, u)
    return all(g.condition() in held or not g.negated and (k := modulo_divisor(g.test)) is not None
               and _asserted_one(loop, u, code_of(k)) for g in v.guards_within(loop.node))


def _asserted_one(loop: Loop, at: Event, name: str) -> bool:
    """An `assert name == 1` statement of the loop's body runs before `at` on every path of the iteration."""
    scope = loop.scope
    flow = scope.flow
    start, head = scope.flow_node(at), flow.loop_head.get(id(loop.node))
    if start is None or head is None:
        return False
    for line in walk(loop.node):
        if type(line) is not cst.SimpleStatementLine or not any(
                type(s) is cst.Assert and (eq := equals_integer(s.test)) is not None and eq[1] == 1
                and code_of(eq[0]) == name for s in line.body):
            continue
        n = flow.node(line)
        if n is not None and n != start and flow.in_loop(n, loop.node) and not flow.reaches_avoiding(
                head, start, frozenset((n,)), normal_only=True):
            return True
    return False


def optimizers_in_turn(loop: Loop, step: Event) -> bool:
    """The loop steps a different optimizer on each pass, one scaler for all (`for axis in axes: opt = opts[axis]`,
    `for opt in optimizers:`), and the function updates that scaler after the loop: the pattern PyTorch's AMP
    documents for several optimizers (each `scaler.step(opt)`, then one `scaler.update()`)."""
    if type(loop.node) is not cst.For or step.target is None or step.scope is not loop.scope.node:
        return False
    per_pass = names_in(loop.node.target)  # (the loop's own name, or one bound from it in the pass)
    name = step.target
    if name not in per_pass:
        defs, entry = loop.scope.reaching(name, step)
        if entry or not defs or not all(loop.node in d.loops and d.value is not None and names_in(d.value) & per_pass
                                        for d in defs):
            return False
    return any(e.kind is EventKind.SCALER_UPDATE and e.target == step.via and loop.node not in e.loops
               and e.seq > step.seq and e.loops == step.loops[:-1] for e in loop.scope.events)


def clipped_before_scaler_step(model: FileModel) -> list[tuple[Event, Event, Event | None]]:
    """A function that back-propagates nothing itself, clips gradients and then steps through a GradScaler
    (`clip_grad_norm_(...)`, then `scaler.step(opt)`, the scaler a parameter or an attribute of `self`), with no
    `unscale_` anywhere in the file: the gradients the clip sees are the scaled ones, made by a backward elsewhere
    (another method of the class, `self.scaler.scale(loss).backward()`, or the caller's), since `scaler.step`
    unscales only after the clip (PyTorch: unscale before modifying `.grad` between the backward and the step).
    Each (clip, step, the class's scaled backward through that scaler or None); a function that back-propagates is
    one iteration, judged with its own backward."""
    if ".unscale_(" in model.text:
        return []
    out: list[tuple[Event, Event, Event | None]] = []
    backwards = [(s, b) for s in model.scopes for b in s.events if b.kind is EventKind.BACKWARD and b.scope is s.node]
    for scope in model.scopes:
        if type(scope.node) is not cst.FunctionDef or any(e.kind is EventKind.BACKWARD for e in scope.events):
            continue
        events = [e for e in scope.events if e.scope is scope.node]
        for step in (e for e in events if e.kind is EventKind.STEP and e.via):
            clips = [c for c in events if c.kind is EventKind.CLIP and c.variant is not ClipVia.ACCELERATOR
                     and c.seq < step.seq and set(c.loops) >= set(step.loops)]
            if not clips:
                continue
            # The backwards of the class (of the file, for a function outside any): one that is not through this
            # scaler (a plain `loss.backward()`, another scaler's) says the gradients may not be this scaler's.
            near = [b for s, b in backwards if s.class_name == scope.class_name]
            if any(b.variant is not BackwardVia.SCALER or b.via != step.via for b in near) or not near and any(
                    b.variant is not BackwardVia.SCALER for _, b in backwards):
                continue  # (the file's other functions name the scaler as they like: `scaler` handed as `grad_scaler`)
            out.append((clips[0], step, near[0] if near else None))
    return out


def without_scaler(step: Event, scaled: list[Event], scaler: str) -> bool:
    """The plain step runs only when the scaler is absent (`if self.scaler is None: self.optimizer.step()`, in
    the method that steps, while the one that back-propagates scales only when there is a scaler): a scaled
    backward cannot have run in that pass, `None.scale(...)` would have raised."""
    names = {b.via for b in scaled if b.via} | {scaler}
    return any(g.condition() in {(n, False) for n in names} for g in step.guards)


def handed_scaler(call: cst.CSTNode, scaled: list[Event], scaler: str) -> bool:
    """A step call given the GradScaler as an argument (`optimizer.step('generator', scaler=scaler)`): not
    `torch.optim.Optimizer.step`, which takes only a closure, but a wrapper that decides what to do with the scaler
    (it may call `scaler.step(opt)` itself): not known to be a plain step."""
    if type(call) is not cst.Call:
        return False
    scalers = {b.via for b in scaled if b.via} | {scaler}
    return any(names_in(a.value) & scalers for a in call.args)
