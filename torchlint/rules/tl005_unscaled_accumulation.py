"""TL005: gradient accumulation whose loss is never divided by the number of accumulation steps.

backward() runs every iteration, step() only every k-th: the gradient is the sum of k micro-batch gradients,
k times too large, as if the learning rate were multiplied by k.
"""

from __future__ import annotations

import re
from typing import Iterator

import libcst as cst

from torchlint.analysis import AssignForm, BackwardVia, Event, EventKind, FileModel, Loop
from torchlint.analysis.events import SELF_SCALING_BACKWARDS
from torchlint.analysis.bindings import coupled_decay, lr_divided, optimizer_calls, steps_clipping
from torchlint.analysis.hooks import lightning_steps
from torchlint.analysis.clearing import continued_window, grads_rescaled, stepped_at_once, wipes_window
from torchlint.analysis.semantics import (
    ACCUMULATION_NAME, BATCH_NAME,
    GRAD_RESCALING_TEXT, SETTINGS_HOLDERS, scale_invariant,
)
from torchlint.analysis.exprs import code_of, dotted, modulo_divisor, names_in
from torchlint.analysis.terms import call_divisor, disjuncts, inverted_window_factors, plus_terms
from torchlint.source.walk import walk
from torchlint.diagnostic import Fix
from torchlint.rules.base import BACKWARD_CALL, DEF_TRAINING_STEP, LOOP, STEP_CALL, Finding, Rule
from torchlint.verify.signs import Sign


class UnscaledAccumulation(Rule):
    code = "TL005"
    name = "unscaled-gradient-accumulation"
    summary = "gradient accumulation without dividing the loss by the accumulation steps"
    fix_safety = "unsafe"
    # A window: a guard (`%`, `==`, `>=`), a micro-batch loop, Lightning's batch loop: no text narrows further.
    requires = (BACKWARD_CALL, STEP_CALL)
    scope_requires = (BACKWARD_CALL, LOOP, STEP_CALL)
    # (and a function that sets a weight decay to zero, `args.weight_decay = 0.0`, is kept for what it tells
    # of the optimizer: `_coupled_decay`)
    scope_alternatives = ((DEF_TRAINING_STEP, re.compile(r"manual_backward\s*\("), STEP_CALL),
                          (re.compile(r"weight_decay\s*=\s*0(?:\.0*)?\s*(?:#|$)", re.MULTILINE),))
    runtime_signs = (Sign.UNSCALED_WINDOW,)
    runtime_same_line = True

    @classmethod
    def promise_kept(cls, line, original, fixed, monitored):
        """The gradient at a step is now the mean over its k micro-batches: 1/k of the sum the original applied."""
        import torch

        k = monitored["steps"][0]["backwards"] if monitored["steps"] else 0
        if k < 2 or not original["steps"] or not fixed["steps"]:
            return None
        pairs = zip(original["steps"][0]["grads"], fixed["steps"][0]["grads"])

        def scaled(a, b) -> bool:
            return a is None and b is None or a is not None and b is not None and torch.allclose(
                a, k * b, rtol=1e-4, atol=1e-7)

        if all(scaled(a, b) for a, b in pairs):
            return f"the first step's gradient is now the mean over its {k} micro-batches (1/{k} of the original's)"
        return None

    doc = """
## What it flags
A loop whose backward runs every iteration while the optimizer steps only under a modulo guard
(`if (i + 1) % k == 0:`, `if step % args.grad_accum == 0:`) or a running counter (`n += 1` every iteration,
`if n == k:` ... `n = 0`), where the back-propagated loss is never divided by
`k` (`loss / k`, `loss /= k`, `loss * (1 / k)`, `loss.div(k)`, `torch.div(loss, k)`, or a loss function of the
same file that divides). The guard may
test a flag computed ahead of it (`is_step = (i + 1) % k == 0` ... `if is_step:`), when that assignment is the
flag's one definition reaching the step; a flag from a call (`is_step = should_step(i)`) or one bound on several
branches is not read. The window may also be closed by an early `continue` (`accumulating = n % k != 0` ... `if
accumulating: continue`, then the step, in the loop's own body: Fabric's recipe). A loss counts as divided only
when every term of it that may carry a graph is (`ce + aux / k` divides `aux` alone; a number added is no term).

Two more shapes of the same window:
- an inner loop over micro-batches (`for xc in x.chunk(4)`, `for xs in torch.split(x, micro_bs)`,
  `for _ in range(accum_steps)` that draws `next(it)`) back-propagates in each pass, and the optimizer steps once
  after it, with the loss not divided by the number of micro-batches;
- the loss divided by a counter the loop increments (`loss / accum_step` with `accum_step += 1`) instead of the
  window's size: the first micro-batch of a window counts k times more than the last. Reported at the division;
- a term added into a back-propagated total multiplied by an accumulation setting that divides the total's other
  terms (`total += part * self.accum_iters` on one branch, `total += loss / self.accum_iters` on another): that
  term weighs k² times its siblings. Reported at the product, without a fix.

A counter window may close early (`if n >= k or is_last_batch:`), and its counter may be counted one loop out
(`n += 1` per batch, the backward and step in a loop over the batch's tasks). The step may be an optimizer wrapper's:
`scheduler = LRScheduler(optimizer)` of a class (of the file or the project) whose `step()` steps the optimizer it
holds is an optimizer step, whatever its name; an object whose class is not known is judged by its name.

### Which optimizers a summed window misleads
Only an optimizer whose update sees the gradient's size. SGD, with or without momentum, moves by the gradient
itself: the sum of k micro-batch gradients is an update k times too large. A scale-invariant one (Adam, AdamW,
RMSprop, Adagrad, LAMB, Lion, ... : it divides by a running gradient magnitude, or takes its sign) makes the same
update from the sum as from the mean, so it is reported only when something sees the gradient's size: clipping in
the loop (whatever the optimizer) or in the own `step()` of an optimizer class of the project (of the file, or of
another project file it imports: BERT's `BertAdam` clips), or a coupled L2 `weight_decay` (Adam's, not AdamW's; one known to be zero does
not: written as zero, an option whose default is zero, or a name every assignment of which in the file is zero,
`args.weight_decay = 0.0`). Gradients rescaled by hand before the step (`optimizer.multiply_grads(...)`, `p.grad.div_(k)`,
`p.grad /= k`: a factor that reads the window or an accumulation setting) count as divided; a factor of another
purpose (`p.grad *= 1 / loss_ratio` on one module's parameters) does not. `torch.autograd.grad(...)` adds nothing.

The optimizer is known when the analysis sees its constructor: bound by the definitions that reach the step
(each branch of a configuration that builds one: an SGD on one of them is an SGD the loop may step); built in the
file (in `__init__` as `self.optimizer = ...` too); handed to the training function by every call of it in the file
(`train_epoch(model, loader, s2s_optimizer)` with `s2s_optimizer = AdamW(...)`); returned by a function of the file
(`optimizer = make_optimizer(model)`, `self.optimizer = self.make(net)`, Lightning's `self.optimizers()` from
`configure_optimizers`); a class of another library whose name says its family (`HybridAdam`, `CPUAdam`,
`FusedSGD`) bound to an optimizer's name; or the optimizer a call takes and hands back under the same name
(`optimizer = Wrapper(optimizer, model)`, a mixed-precision or sharding optimizer with its own
`optimizer.backward(loss)`; `model, optimizer = amp.initialize(model, optimizer)`): it updates as the one it took.

An optimizer **not known** (a parameter no call of the file passes, one built in another file, a class of no known
family) is not taken as SGD. It is reported only where the code declares the window a gradient-accumulation setting:
`k` named as accumulation steps or micro-batches (`accum_steps`, `args.gradient_accumulation_steps`,
`update_freq`, `n_micro`), `k` a larger batch counted in the loader's (`global_batch // batch_size`, directly or
through its one binding in the function), or an inner loop that splits one batch into micro-batches. Such a
setting promises that its value does not change the training, and a function that takes its optimizer from its
callers must keep that promise for every optimizer they may hand it, SGD included. A window named otherwise
(the batch assembled one sample per iteration, `if not (i % batch_size):`) with an optimizer not known is not
reported: nothing in the code says the sum changes training.

A learning rate divided by the window or by the batch (`lr=cfg.learning_rate / cfg.batch`, directly or through a
name bound once) is the convention of a loss summed over the batch (Darknet's, Caffe's): the micro-batch gradients
are meant to add up, and the window is not reported. A rate multiplied by the batch (the linear scaling rule,
`base_lr * batch_size / 256`) is not that convention. DeepSpeed's engine (`model_engine.backward`, and
`self.deepspeed` of Hugging Face's Trainer) divides by the accumulation steps itself.

Frameworks count as plain backwards unless they divide: `fabric.backward` never does, Lightning's
`self.manual_backward` in a `training_step` whose `opt.step()` waits for `(batch_idx + 1) % k == 0` does not
either (Lightning's batch loop is the loop), and `accelerator.backward` divides only when the `Accelerator` was
built with `gradient_accumulation_steps` (one built in the file without it is reported; one built elsewhere is
not known and not reported).

## Why it is wrong
Gradients add up over the k micro-batches. Without the division the update is the *sum* of k mean gradients, k times
the full-batch gradient: the effective learning rate is k times too large and changes whenever k does. Nothing raises.

## Example
```python
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y)
    loss.backward()                      # TL005
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
```

## Fix
Divide the back-propagated loss by the guard's divisor: `(loss / accum_steps).backward()`,
`scaler.scale(loss / accum_steps).backward()`. **Unsafe**: the updates change, to the full-batch gradient.

## Correct look-alikes (not flagged)
`loss = loss / k` or `loss /= k` before backward; `with accelerator.accumulate(model):`; `accelerator.backward` and
DeepSpeed `engine.backward` (they divide by the configured steps); backward under the same guard as the step; a GAN
that steps its generator every `n_critic` iterations (the generator's backward runs under the same guard as its step,
so the backward that runs every iteration serves the discriminator; a guard both share around the whole window,
`if mode == "train":`, gates nothing). A backward followed, before any backward
that may follow it, by a step under no condition it does not hold (`alpha_loss.backward(); alpha_opt.step()` beside
the window of the main loss; the branch of an accumulation setting that steps every iteration, `else:` a mixed-
precision backward or a plain one, then `optimizer.step()`): its gradients serve that step.

```python
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum_steps
    loss.backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
```

## Limits
A division by anything named like the accumulation steps, or mentioning a name of the guard's divisor, counts as
scaling. A loss multiplied by hand on its way to the backward (`loss *= world_size`, `loss = loss * bs`) is not
reported: its scale is managed by the author, and a sum over samples is meant to add up across micro-batches. A loss
that is a mean over a window built elsewhere is not recognised. An optimizer returned by a function of another file,
or passed by callers in another file, is not followed: it is not known (see above). An optimizer bound in another
function than the loop's under one name on several branches is judged by the file's last binding of that name.
"""

    def check(self, model: FileModel) -> Iterator[Finding]:
        yield from _lightning_hooks(model)
        for scope in model.scopes if ACCUMULATION_NAME.search(model.text) else ():
            for product, by in inverted_window_factors(scope):
                yield Finding(product, f"`{code_of(product)}` multiplies a term of the loss by `{by}`, which divides its "
                              f"other terms: this term weighs `{by}`² times as much as they do; divide it by `{by}`")
        divisions: set[int] = set()
        for loop in model.loops:
            yield from _micro_batch_loop(model, loop)
            k = _accumulation_divisor(loop)
            if k is None or any(wipes_window(model, loop, s) for s in loop.of(EventKind.STEP)):
                continue  # (a window cleared before its step is TL006's: dividing would shrink the step further)
            if _scale_does_not_matter(model, loop.node, loop.of(EventKind.STEP), loop.of(EventKind.CLIP), k,
                                      _declared(loop.scope, k)):
                continue
            for b in loop.of(EventKind.BACKWARD):
                if _self_scaling(model, b) or "accumulate" in b.contexts or "no_grad" in b.contexts or not b.into_grad():
                    continue  # (`torch.autograd.grad(...)` returns its gradients: nothing adds up in `.grad`)
                if any(modulo_divisor(loop.scope.test_of(g, b)) is not None or _counter_divisor(loop, g) is not None
                       for g in b.guards_within(loop.node) if not g.negated) or stepped_at_once(loop, b):
                    continue  # backward itself runs only every k-th iteration, or its own step follows it
                scope = model.scope_of(b)
                assert b.value is not None  # a backward always has its value
                division = _counter_division(model, scope, loop, b.value, k, b)
                if division is not None:
                    if id(division) not in divisions:  # one finding per division, however many backwards use it
                        divisions.add(id(division))
                        yield Finding(
                            division,
                            f"`{code_of(division)}` divides the loss back-propagated by `{code_of(b.node)}` by "
                            f"`{code_of(division.right)}`, a counter that grows every iteration, not by the window "
                            f"`{code_of(k)}`: the first micro-batches of a window weigh more than the last; divide "
                            f"by `{code_of(k)}`",
                        )
                    continue
                if _divided(model, scope, b.value, k, loop, b):
                    continue
                yield Finding(b.node, _unscaled(b, k, "iteration", "iterations", "micro-batches"), _fix(loop, b, k))


def _unscaled(b: Event, k: cst.BaseExpression, unit: str, units: str, parts: str, why: str = "") -> str:
    """The message of an unscaled window: the backward runs every `unit`, the step every k `units`."""
    k_code = code_of(k)
    return (f"`{code_of(b.node)}` runs every {unit} but the optimizer steps every `{k_code}` {units}: gradients of "
            f"`{k_code}` {parts} add up{why}, an update `{k_code}`x too large; divide the loss by `{k_code}`")


def _lightning_hooks(model: FileModel) -> Iterator[Finding]:
    """A LightningModule's `training_step` with manual optimization, the body of Lightning's batch loop: `self.manual_backward(loss)`
    every call, `opt.step()` only when `(batch_idx + 1) % k == 0`; Lightning does not divide such a loss."""
    for step_loop in lightning_steps(model):
        scope = step_loop.scope
        steps = [e for e in scope.events if e.kind is EventKind.STEP and not e.loops]
        k = next((k for s in steps for g in s.guards
                  if not g.negated and (k := modulo_divisor(scope.test_of(g, s))) is not None), None)
        if k is None or any(wipes_window(model, step_loop, s) for s in steps):
            continue  # the window is cleared before its step (TL006): nothing accumulates to divide
        for b in scope.events:
            if (b.kind is not EventKind.BACKWARD or b.variant is not BackwardVia.LIGHTNING or b.loops or b.guards
                    or b.scope is not scope.node):
                continue
            assert b.value is not None  # a backward always has its value
            if _divided(model, scope, b.value, k, None, b):
                continue
            yield Finding(
                b.node, _unscaled(b, k, "batch", "batches", "batches",
                                  " (Lightning does not divide a manually back-propagated loss)"),
                _fix_call(b, k),
            )


def _scale_does_not_matter(model: FileModel, node: cst.CSTNode, steps: list[Event], clips: list[Event],
                           k: cst.BaseExpression, declared: bool) -> bool:
    """The window's summed gradient changes nothing the optimizer does, or is meant to be a sum, or is rescaled by
    hand: the loop (`node`) multiplies or divides the gradients themselves before the step
    (`optimizer.multiply_grads(...)`, `p.grad.div_(n)`, `p.grad /= n`); or nothing clips and every optimizer it
    steps is known (built in the file, handed in by the file's callers, returned by a function of the file) and
    either is scale-invariant (Adam-like, no coupled L2 `weight_decay`) or has its learning rate divided by the
    window or the batch (a loss summed by design). An optimizer not known counts only where the code `declared`
    the window a gradient-accumulation setting (k named as accumulation steps, a batch split into micro-batches):
    such a setting must not change the training for any optimizer the function may be handed, SGD included."""
    if GRAD_RESCALING_TEXT.search(model.text) and grads_rescaled(node, k):
        return True
    if not steps or clips:
        return False
    unknown = False
    for step in steps:
        scope = model.scope_at(step.scope)
        calls = optimizer_calls(model, scope, step.target, at=step)
        if calls is None:
            unknown = True
            continue
        for call in calls:
            if lr_divided(model, call, k):
                continue
            name = (dotted(call.func) or "").rsplit(".", 1)[-1]
            invariant = scale_invariant(name)
            if invariant is None:
                unknown = True
            elif not invariant or coupled_decay(model, call, name) or steps_clipping(model, call):
                return False  # (an Adam of the project whose own `step()` clips: BERT's `BertAdam`)
    return not (unknown and declared)


def _declared(scope, k: cst.BaseExpression) -> bool:
    """Does the code declare the window `k` a gradient-accumulation setting? Named as accumulation steps or
    micro-batches (`args.gradient_accumulation_steps`, `num_micro_batches`), or a larger batch counted in the
    loader's (`total_batch_size // batch_size`, directly or through the name's one binding in the function)."""
    text = code_of(k)
    if ACCUMULATION_NAME.search(text) or "micro" in text.lower():
        return True
    name = dotted(k)
    bound = [a.value for a in scope.assignments(name)] if name is not None else []
    value = bound[0] if len(bound) == 1 and bound[0] is not None else k
    return (type(value) is cst.BinaryOperation and type(value.operator) in (cst.Divide, cst.FloorDivide)
            and all(any(BATCH_NAME.search(n) for n in names_in(side)) for side in (value.left, value.right)))


def _self_scaling(model: FileModel, b: Event) -> bool:
    """Does this backward divide the loss by the accumulation steps itself? DeepSpeed's engine does (by its
    configured steps). Accelerate's does when its Accelerator was built with `gradient_accumulation_steps`; one
    built here without it divides by 1, so the user must divide; one built elsewhere is not known (silent).
    Fabric's `backward` never divides."""
    if b.variant not in SELF_SCALING_BACKWARDS:
        return False
    if b.variant is not BackwardVia.ACCELERATOR or type(b.node) is not cst.Call or type(b.node.func) is not cst.Attribute:
        return True
    receiver = dotted(b.node.func.value) or ""
    known = model.symbols.backward_divides
    divides = known.get(receiver, known.get(receiver.rsplit(".", 1)[-1]))
    if divides is None:
        return receiver.rsplit(".", 1)[-1] != "fabric"  # not built in this file: only Fabric is known not to
    return divides


def _micro_batch_loop(model: FileModel, inner: Loop) -> Iterator[Finding]:
    """An inner loop over micro-batches (`for xc in x.chunk(4)`, `for _ in range(accum_steps)` drawing
    `next(it)`) back-propagates in each pass, and the optimizer steps once after it: the step applies the sum of
    the micro-batch gradients unless the loss is divided by their number."""
    node = inner.node
    if type(node) is not cst.For or not inner.of(EventKind.BACKWARD):
        return
    count = _micro_batches(node, model.text)
    if count is None:
        return
    scope = inner.scope
    depth = None
    backwards = []
    for b in inner.of(EventKind.BACKWARD):
        if (b.scope is scope.node and b.loops[-1] is node and not _self_scaling(model, b)
                and "accumulate" not in b.contexts and "no_grad" not in b.contexts
                and not b.guards_within(node) and b.into_grad()):
            backwards.append(b)
            depth = b.loops.index(node)
    if not backwards or inner.of(EventKind.STEP, EventKind.ZERO_GRAD):
        return  # a step or a clear per micro-batch is another loop shape (GAN critics, TL006)
    own_steps = [s for s in scope.events if s.kind is EventKind.STEP and s.scope is scope.node]
    outer = backwards[0].loops[:depth]
    steps = [s for s in own_steps if s.loops == outer
             and any(scope.may_follow(b, s, outer[-1] if outer else None) for b in backwards)]
    if not steps or _scale_does_not_matter(model, outer[-1] if outer else node, own_steps,
                                           [c for c in scope.events if c.kind is EventKind.CLIP], count, True):
        return
    for b in backwards:
        assert b.value is not None  # a backward always has its value
        if _divided(model, scope, b.value, count, inner, b):
            continue
        how = f"`{code_of(count)}`" if type(count) is not cst.Call else "their number"
        yield Finding(
            b.node,
            f"`{code_of(b.node)}` runs once per micro-batch of the inner loop and `{code_of(steps[0].node)}` once "
            f"after it: the step applies the sum of the micro-batch gradients, not their mean; divide the loss by "
            f"{how}",
            _fix(inner, b, count) if type(count) is not cst.Call else None,
        )


def _micro_batches(node: cst.CSTNode, text: str = "") -> cst.BaseExpression | None:
    """How many micro-batches an inner loop goes through, when it goes through micro-batches: the `k` of
    `x.chunk(k)` / `torch.chunk(x, k)`, `len(...)` of a split, or the `k` of `range(k)` when the body draws the
    next batch (`next(it)`) or `k` names the accumulation steps."""
    if type(node) is not cst.For:
        return None
    it = node.iter
    while type(it) is cst.Call and dotted(it.func) in ("enumerate", "zip") and it.args:
        it = it.args[0].value
    if type(it) is not cst.Call:
        return None
    name = dotted(it.func) or ""
    last = name.rsplit(".", 1)[-1]
    positional = [a.value for a in it.args if a.keyword is None and not a.star]
    if last == "chunk" and type(it.func) is cst.Attribute and name not in ("torch.chunk",) and positional:
        return positional[0]
    if name == "torch.chunk" and len(positional) >= 2:
        return positional[1]
    if last in ("split", "tensor_split") and positional:
        return it  # the number of pieces is not written down: the call stands for it (no fix offered)
    if name == "range" and len(positional) == 1:
        k = positional[0]
        if ACCUMULATION_NAME.search(code_of(k)) or "micro" in code_of(k).lower():
            return k
        if "next(" in text and any(type(n) is cst.Call and dotted(n.func) == "next" for n in walk(node.body)):
            return k
    return None


def _accumulation_divisor(loop: Loop) -> cst.BaseExpression | None:
    for step in loop.of(EventKind.STEP):
        if step.loops[-1] is not loop.node:
            continue
        for g in step.guards_within(loop.node):
            if g.negated or not isinstance(g.test, cst.BaseExpression):
                continue
            k = modulo_divisor(loop.scope.test_of(g, step))  # `if is_step:` after `is_step = (i + 1) % k == 0`
            if k is None:
                k = _counter_divisor(loop, g)
            # (not when a backward shares the window's guard itself: the step's own backward runs under it)
            if k is not None and not loop.gated_with(step, g):
                return k
        if (k := continued_window(loop, step)) is not None:  # `if is_accumulating: continue`, then the step
            return k
    return None


def _counter_divisor(loop: Loop, guard) -> cst.BaseExpression | None:
    """`if n == k:` (or `>=`) where the loop counts `n += 1` every iteration and the guarded block resets
    `n = 0`: a running counter instead of a modulo, the same accumulation window of `k` backwards. The counter may
    be counted one loop out (`n += 1` per batch, the step in a loop over the batch's tasks), and the window may
    also close early (`if n >= k or last_batch:`)."""
    for test in disjuncts(guard.test):
        if not (type(test) is cst.Comparison and len(test.comparisons) == 1
                and isinstance(test.comparisons[0].operator, (cst.Equal, cst.GreaterThanEqual))):
            continue
        counter, k = dotted(test.left), test.comparisons[0].comparator
        if counter is None or type(k) is cst.Integer and k.value in ("0", "1"):
            continue
        counts = counter in _counters(loop, unguarded_only=False, guard=guard)
        resets = any(e.target == counter and e.variant is AssignForm.PLAIN and type(e.value) is cst.Integer
                     and e.value.value == "0" and guard in e.guards for e in loop.of(EventKind.ASSIGN))
        if counts and resets:
            return k
    return None


def _counters(loop: Loop, unguarded_only: bool = True, guard=None) -> set[str]:
    """Names incremented on every pass of the loop (`n += 1`), by the loop itself or by an enclosing loop of the
    same function, once per pass around it: counters, not window sizes. For a window's counter (`guard` given) the
    increment must be by one, outside the window's guard, and may also sit in a loop nested in this one."""
    enclosing = loop.events[0].loops[:loop.events[0].loops.index(loop.node) + 1] if loop.events else (loop.node,)
    out = set()
    for e in loop.scope.events:
        if e.kind is not EventKind.ASSIGN or e.variant is not AssignForm.ADD or not e.target or e.scope is not loop.scope.node:
            continue
        if not e.loops or not (e.loops[-1] in enclosing or guard is not None and loop.node in e.loops):
            continue
        if guard is not None:
            if type(e.value) is cst.Integer and e.value.value == "1" and guard not in e.guards:
                out.add(e.target)
        elif not (unguarded_only and e.guards_within(e.loops[-1])):
            out.add(e.target)
    return out


def _counter_division(model: FileModel, scope, loop: Loop, value: cst.BaseExpression,
                      k: cst.BaseExpression, at: Event) -> cst.BinaryOperation | None:
    """The division of the loss by a counter the loop increments (`loss / accum_step` with `accum_step += 1`),
    not by the window `k` itself; not a division on a path no step takes (`if optimizer_in_backward:`)."""
    counters = _counters(loop) - names_in(k)
    if not counters:
        return None
    exprs = [value] + [e.value for e in scope.summand_defs(value, at) if e.value is not None
                       and not all(scope.exclusive(e, s) for s in loop.of(EventKind.STEP))]
    for expr in exprs:
        for n in walk(expr):
            if (type(n) is cst.BinaryOperation and type(n.operator) is cst.Divide
                    and dotted(n.right) in counters):
                return n
    return None


def _divided(model: FileModel, scope, value: cst.BaseExpression, k: cst.BaseExpression, loop: Loop | None = None,
             at: Event | None = None) -> bool:
    """Is the loss back-propagated at `at` divided by `k` (or scaled by hand) on its way, along the definitions
    that reach it?"""
    k_names = names_in(k) - SETTINGS_HOLDERS
    k_names |= _window_totals(scope, k)
    k_code = code_of(k)
    counters = _counters(loop) if loop is not None else set()

    def divisor_matches(divisor: cst.BaseExpression) -> bool:
        text = code_of(divisor)
        if dotted(divisor) in counters:
            return False  # a counter that grows, not the number of micro-batches
        if type(k) is cst.Call and type(divisor) is cst.Call and dotted(divisor.func) == "len":
            return True  # `loss / len(chunks)` for a split
        return text == k_code or bool(names_in(divisor) & k_names) or bool(ACCUMULATION_NAME.search(text))

    def divides(node: cst.CSTNode) -> bool:
        for n in walk(node):
            if type(n) is cst.BinaryOperation and type(n.operator) in (cst.Divide, cst.FloorDivide):
                if divisor_matches(n.right):
                    return True
            elif type(n) is cst.AugAssign and type(n.operator) is cst.DivideAssign and divisor_matches(n.value):
                return True
            elif type(n) is cst.Call and (divisor := call_divisor(n)) is not None and divisor_matches(divisor):
                return True
        return False

    def divides_whole(node: cst.CSTNode, where: Event | None) -> bool:  # `a + b / k` divides `b` only (not a number)
        terms = plus_terms(node) if isinstance(node, cst.BaseExpression) else [node]
        return divides(node) and (len(terms) < 2 or all(
            divides(t) or model.kinds.of(t, scope, where).graph_free for t in terms))

    if divides_whole(value, at):
        return True
    defs = scope.summand_defs(value, at) if at is not None else []
    for e in defs:
        if e.value is None:
            continue
        if e.variant is AssignForm.DIV and divisor_matches(e.value):
            return True
        if e.variant is AssignForm.MUL or e.variant is AssignForm.PLAIN and _multiplies_itself(e.target or "", e.value):
            # `loss *= world_size` (undoing DDP's averaging), `loss = loss * scale`: the author manages the
            # loss's scale by hand (a sum over samples is meant to add up): not known to be a mean
            return True
        if divides_whole(e.value, e):
            return True
    for expr in [value] + [e.value for e in defs if e.value is not None]:
        for call in walk(expr):
            if type(call) is cst.Call and type(call.func) is cst.Name:
                callee = model.resolve(scope, call.func.value)  # a loss function of this file that divides
                if callee is not None and divides(callee.node):
                    return True
    return False


def _window_totals(scope, k: cst.BaseExpression) -> set[str]:
    """The names of what `k` counts in: `k = batch_gpu_total // batch_gpu` makes a loss summed over a micro-batch
    and divided by `batch_gpu_total` a mean over the window. Only the dividend: a loss divided by the
    micro-batch's own size is still a per-micro-batch mean."""
    name = dotted(k)
    out: set[str] = set()
    for a in scope.assignments(name) if name else ():
        value = a.value
        if type(value) is cst.BinaryOperation and type(value.operator) in (cst.Divide, cst.FloorDivide):
            out |= names_in(value.left) - SETTINGS_HOLDERS
    return out


def _multiplies_itself(name: str, value: cst.BaseExpression) -> bool:
    return (type(value) is cst.BinaryOperation and type(value.operator) is cst.Multiply
            and name in (dotted(value.left), dotted(value.right)))


def _fix(loop: Loop, b: Event, k: cst.BaseExpression) -> Fix | None:
    if b.scope is not loop.scope.node or b.inlined_from is not None:
        return None
    return _fix_call(b, k)


def _fix_call(b: Event, k: cst.BaseExpression) -> Fix | None:
    """Divide the back-propagated loss by `k` inside the backward call."""
    call = b.node
    divisor = k.deep_clone()
    if type(divisor) in (cst.BinaryOperation, cst.BooleanOperation, cst.IfExp) and not divisor.lpar:
        divisor = divisor.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    if type(call) is not cst.Call:
        return None

    def divided(expr: cst.BaseExpression) -> cst.BinaryOperation:
        if type(expr) in (cst.BinaryOperation, cst.BooleanOperation, cst.IfExp, cst.UnaryOperation) and not expr.lpar:
            expr = expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return cst.BinaryOperation(
            left=expr, operator=cst.Divide(cst.SimpleWhitespace(" "), cst.SimpleWhitespace(" ")), right=divisor
        )

    message = f"divide the loss by `{code_of(k)}`"
    if b.variant is BackwardVia.TENSOR and type(call.func) is cst.Attribute:
        new_recv = divided(call.func.value).with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return Fix("unsafe", message, ((call.func.value, new_recv),))
    if b.variant is BackwardVia.SCALER and type(call.func) is cst.Attribute and type(call.func.value) is cst.Call:
        arg = call.func.value.args[0]
        return Fix("unsafe", message, ((arg.value, divided(arg.value)),))
    if b.variant in (BackwardVia.LIGHTNING, BackwardVia.AUTOGRAD, BackwardVia.OPTIMIZER, BackwardVia.ACCELERATOR) and call.args:
        arg = call.args[0]
        return Fix("unsafe", message, ((arg.value, divided(arg.value)),))
    return None
