"""TL003: a loss cut out of the graph (`.data`, `.item()`, `.detach()`, `float()`) and then added into the
value that is back-propagated. That term gets no gradient: the loss never improves, or backward fails with
"element 0 of tensors does not require grad and does not have a grad_fn".
"""

from __future__ import annotations

import re
from typing import Iterator

import libcst as cst

from torchlint.analysis import Event, FileModel
from torchlint.analysis.kinds import VKind
from torchlint.analysis.exprs import Detachment, as_detachment, code_of
from torchlint.diagnostic import Fix
from torchlint.rules.base import BACKWARD_CALL, Finding, Rule

DETACHING = re.compile(r"\.\s*(?:data\b|(?:item|detach|tolist)\s*\()|\bfloat\s*\(")


class DetachedLossTerm(Rule):
    code = "TL003"
    name = "detached-loss-term"
    summary = "a detached loss (.data, .item(), .detach(), float()) is added into the back-propagated loss"
    fix_safety = "unsafe"
    # A backward whose loss has a detached term (no loop needed: one backward is enough).
    requires = (BACKWARD_CALL, DETACHING)
    doc = """
## What it flags
A loss value wrapped in `.data`, `.data[0]`, `.item()`, `.detach()`, `.tolist()` or `float(...)` that is then
added (as a summand) into a value that is back-propagated: `total = total + loss.data[0]` followed by
`total.backward()`, `losses.append(loss.item())` then `sum(losses).backward()`, `loss = a + b.detach()`.

## Why it is wrong
Those wrappers return a value outside the autograd graph. Added into the total, the term contributes nothing to
the gradients: the model does not learn from it ("the loss stays the same"), or, when every term is detached,
backward fails with

    RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn

Old (pre-0.4) code used `loss.data[0]` to read a loss; copied into a total that is back-propagated, it silently
cuts the graph.

## Example
```python
total_loss = total_loss + loss.data[0]   # TL003
...
total_loss.backward()
```

## Fix
Remove the wrapper where the value flows into a backward (`loss.data[0]` → `loss`, `loss.item()` → `loss`).
**Unsafe**: gradients now flow through that term (which is the intent). Keep `.item()` for logging totals.

## Correct look-alikes (not flagged)
`running_loss += loss.item()` used only for printing; `fake.detach()` in a GAN discriminator loss (not a loss);
a detached loss used as a multiplicative weight (`w = loss_b.detach() / loss_a.detach()`).

`loss.backward(); loss = loss.item()`: the rebinding comes after the backward (only the definitions that reach
the backward are read); a detached recurrent state fed into the model (an input, not a term of the loss).

## Limits
Only summands are checked, through arithmetic, sums and stacks; the detached value must be known to carry a graph
(its kind), or be named like a loss when its kind is unknown.
"""

    def check(self, model: FileModel) -> Iterator[Finding]:
        for scope in model.scopes:
            backwards = scope.own_backwards()
            if not backwards:
                continue
            candidates: list[tuple[cst.BaseExpression, Event]] = []
            seen: set[int] = set()
            for b in backwards:
                # Only the definitions that reach the backward: `loss.backward(); loss = loss.item()` is fine.
                pairs = [(b.value, b)] + [(d.value, d) for d in scope.summand_defs(b.value, b) if d.value is not None]
                for expr, at in pairs:
                    if id(expr) not in seen:
                        seen.add(id(expr))
                        candidates.append((expr, at))
            for expr, at in candidates:
                for d in _summand_detachments(expr):
                    kind = model.kinds.of(d.operand, scope, at)
                    if kind is not VKind.GRAPH and not (kind is VKind.UNKNOWN and scope.is_loss(d.operand)):
                        continue  # what is detached is not known to carry a graph (a count, a statistic)
                    operand = code_of(d.operand)
                    yield Finding(
                        d.node,
                        f"`{code_of(d.node)}` cuts `{operand}` out of the graph ({d.how}), yet it is added into a "
                        f"loss that is back-propagated: this term gets no gradient (loss never improves, or 'element "
                        f"0 of tensors does not require grad')",
                        Fix("unsafe", f"use `{operand}` itself", ((d.node, d.operand),)),
                    )


def _summand_detachments(expr: cst.BaseExpression) -> list[Detachment]:
    """Detachments that are added terms of `expr` (not factors, not arguments of other calls)."""
    found = as_detachment(expr)
    if found is not None:
        return [found]
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, (cst.Add, cst.Subtract)):
            return _summand_detachments(expr.left) + _summand_detachments(expr.right)
        if isinstance(expr.operator, (cst.Multiply, cst.Divide)):
            if isinstance(expr.right, (cst.Integer, cst.Float)):
                return _summand_detachments(expr.left)
            if isinstance(expr.left, (cst.Integer, cst.Float)) and isinstance(expr.operator, cst.Multiply):
                return _summand_detachments(expr.right)
    if isinstance(expr, cst.UnaryOperation):
        return _summand_detachments(expr.expression)
    return []
