"""TL005: gradient accumulation whose loss is never divided by the number of accumulation steps.

backward() runs every iteration, step() only every k-th: the gradient is the sum of k micro-batch gradients,
k times too large, as if the learning rate were multiplied by k.
"""

from __future__ import annotations

import re
from typing import Iterator

import libcst as cst

from torchlint.analysis import Event, EventKind, FileModel, Loop
from torchlint.analysis.semantics import ACCUMULATION_NAME, SELF_SCALING_BACKWARDS
from torchlint.analysis.exprs import dotted, code_of, modulo_divisor, names_in
from torchlint.analysis.walk import walk
from torchlint.diagnostic import Fix
from torchlint.rules.base import BACKWARD_CALL, LOOP, STEP_CALL, Finding, Rule

# These divide the loss by the accumulation steps themselves (Accelerate, DeepSpeed, Fabric).

WINDOW_GUARD = re.compile(r"%|==|>=")  # the accumulation guard: `(i + 1) % k == 0`, or a counter `n == k`


class UnscaledAccumulation(Rule):
    code = "TL005"
    name = "unscaled-gradient-accumulation"
    summary = "gradient accumulation without dividing the loss by the accumulation steps"
    fix_safety = "unsafe"
    requires = (BACKWARD_CALL, LOOP, STEP_CALL, WINDOW_GUARD)
    doc = """
## What it flags
A loop whose backward runs every iteration while the optimizer steps only under a modulo guard
(`if (i + 1) % k == 0:`, `if step % args.grad_accum == 0:`) or a running counter (`n += 1` every iteration,
`if n == k:` ... `n = 0`), where the back-propagated loss is never divided by
`k` (`loss / k`, `loss /= k`, `loss * (1 / k)`, or a loss function of the same file that divides).

## Why it is wrong
Gradients add up over the k micro-batches. Without the division the update is the *sum* of k mean gradients,
k times the full-batch gradient: the effective learning rate is k times too large and changes whenever k does.
Nothing raises; the training curve is just worse or diverges.

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
`loss = loss / k` or `loss /= k` before backward; `with accelerator.accumulate(model):`; `accelerator.backward`
and DeepSpeed `engine.backward` (they divide by the configured steps); backward under the same guard as the step;
a GAN that steps its generator every `n_critic` iterations (the generator's backward runs under the same guard
as its step, so the backward that runs every iteration serves the discriminator).

## Limits
A division by anything named like the accumulation steps, or mentioning a name of the guard's divisor, counts
as scaling. A loss multiplied by hand on its way to the backward (`loss *= world_size`, `loss = loss * bs`) is
not reported: its scale is managed by the author, and a sum over samples is meant to add up across micro-batches.
A loss that is a mean over a window built elsewhere is not recognised.
"""

    def check(self, model: FileModel) -> Iterator[Finding]:
        for loop in model.loops:
            k = _accumulation_divisor(loop)
            if k is None:
                continue
            for b in loop.of(EventKind.BACKWARD):
                if b.flavor in SELF_SCALING_BACKWARDS or "accumulate" in b.contexts or "no_grad" in b.contexts:
                    continue
                if any(modulo_divisor(g.test) is not None or _counter_divisor(loop, g) is not None
                       for g in b.guards_within(loop.node) if not g.negated):
                    continue  # backward itself runs only every k-th iteration
                scope = model.scope_of(b)
                if _divided(model, scope, b.value, k):
                    continue
                yield Finding(
                    b.node,
                    f"`{code_of(b.node)}` runs every iteration but the optimizer steps every `{code_of(k)}` "
                    f"iterations: gradients of `{code_of(k)}` micro-batches add up, an update `{code_of(k)}`x too "
                    f"large; divide the loss by `{code_of(k)}`",
                    _fix(loop, b, k),
                )


def _accumulation_divisor(loop: Loop) -> cst.BaseExpression | None:
    for step in loop.of(EventKind.STEP):
        if step.loops[-1] is not loop.node or loop.gated_with(step):
            continue
        for g in step.guards_within(loop.node):
            if g.negated or not isinstance(g.test, cst.BaseExpression):
                continue
            k = modulo_divisor(g.test)
            if k is None:
                k = _counter_divisor(loop, g)
            if k is not None:
                return k
    return None


def _counter_divisor(loop: Loop, guard) -> cst.BaseExpression | None:
    """`if n == k:` (or `>=`) where the loop counts `n += 1` every iteration and the guarded block resets
    `n = 0`: a running counter instead of a modulo, the same accumulation window of `k` backwards."""
    test = guard.test
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, (cst.Equal, cst.GreaterThanEqual))):
        return None
    counter, k = dotted(test.left), test.comparisons[0].comparator
    if counter is None or isinstance(k, cst.Integer) and k.value in ("0", "1"):
        return None
    counts = any(e.target == counter and e.flavor == "+=" and isinstance(e.value, cst.Integer)
                 and e.value.value == "1" and guard not in e.guards for e in loop.of(EventKind.ASSIGN))
    resets = any(e.target == counter and e.flavor == "=" and isinstance(e.value, cst.Integer)
                 and e.value.value == "0" and guard in e.guards for e in loop.of(EventKind.ASSIGN))
    return k if counts and resets else None


def _divided(model: FileModel, scope, value: cst.BaseExpression, k: cst.BaseExpression) -> bool:
    k_names = names_in(k) - {"self", "args", "config", "cfg", "opt", "hparams"}
    k_code = code_of(k)

    def divisor_matches(divisor: cst.BaseExpression) -> bool:
        text = code_of(divisor)
        return text == k_code or bool(names_in(divisor) & k_names) or bool(ACCUMULATION_NAME.search(text))

    def divides(node: cst.CSTNode) -> bool:
        for n in walk(node):
            if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, (cst.Divide, cst.FloorDivide)):
                if divisor_matches(n.right):
                    return True
            elif isinstance(n, cst.AugAssign) and isinstance(n.operator, cst.DivideAssign) and divisor_matches(n.value):
                return True
        return False

    if divides(value):
        return True
    for name in scope.depends(value):
        for e in scope.assignments(name):
            if e.value is None:
                continue
            if e.flavor == "/=" and divisor_matches(e.value):
                return True
            if e.flavor == "*=" or e.flavor == "=" and _multiplies_itself(name, e.value):
                # `loss *= world_size` (undoing DDP's averaging), `loss = loss * scale`: the author manages the
                # loss's scale by hand (a sum over samples is meant to add up): not known to be a mean
                return True
            if divides(e.value):
                return True
        callee = model.resolve(scope, name)  # a loss function of this file that divides
        if callee is not None and divides(callee.node):
            return True
    return False


def _multiplies_itself(name: str, value: cst.BaseExpression) -> bool:
    return (isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply)
            and name in (dotted(value.left), dotted(value.right)))


def _fix(loop: Loop, b: Event, k: cst.BaseExpression) -> Fix | None:
    if b.scope is not loop.scope.node or b.inlined_from is not None:
        return None
    call = b.node
    divisor = k.deep_clone()
    if isinstance(divisor, (cst.BinaryOperation, cst.BooleanOperation, cst.IfExp)) and not divisor.lpar:
        divisor = divisor.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    if not isinstance(call, cst.Call):
        return None

    def divided(expr: cst.BaseExpression) -> cst.BinaryOperation:
        if isinstance(expr, (cst.BinaryOperation, cst.BooleanOperation, cst.IfExp, cst.UnaryOperation)) and not expr.lpar:
            expr = expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return cst.BinaryOperation(
            left=expr, operator=cst.Divide(cst.SimpleWhitespace(" "), cst.SimpleWhitespace(" ")), right=divisor
        )

    message = f"divide the loss by `{code_of(k)}`"
    if b.flavor == "tensor" and isinstance(call.func, cst.Attribute):
        new_recv = divided(call.func.value).with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return Fix("unsafe", message, ((call.func.value, new_recv),))
    if b.flavor == "scaler" and isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Call):
        arg = call.func.value.args[0]
        return Fix("unsafe", message, ((arg.value, divided(arg.value)),))
    if b.flavor in ("lightning", "autograd", "optimizer") and call.args:
        arg = call.args[0]
        return Fix("unsafe", message, ((arg.value, divided(arg.value)),))
    return None
