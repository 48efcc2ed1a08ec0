"""TL007: a loss (or model output) still attached to its graph is kept across iterations only for logging.

Every iteration's graph stays alive through the running total or list: memory grows each step until
"CUDA out of memory" (the PyTorch FAQ's "don't accumulate history across your training loop").
"""

from __future__ import annotations

import re
from typing import Iterator

import libcst as cst

from torchlint.analysis import Event, EventKind, FileModel, Loop, Scope
from torchlint.analysis.exprs import as_detachment, code_of, dotted
from torchlint.diagnostic import Fix
from torchlint.rules.base import Finding, Rule


class AttachedLoggingTotal(Rule):
    code = "TL007"
    name = "attached-logging-total"
    summary = "a graph-attached loss kept across iterations only for logging (memory grows every step)"
    fix_safety = "safe"
    doc = """
## What it flags
In a training loop (one that calls backward), adding a loss that is still attached to the autograd graph into
a running total, dict entry or list that outlives the iteration and is never back-propagated:
`running_loss += loss`, `stats["loss"] += loss`, `history.append(loss)`, `outputs.append(output)`.

## Why it is wrong
The total is a tensor whose graph reaches back through every iteration's forward pass, so none of those
activations can be freed: memory grows a little every step, then training stops with `CUDA out of memory` — the
PyTorch FAQ's first entry ("Don't accumulate history across your training loop").

## Example
```python
running_loss = 0.0
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    running_loss += loss          # TL007
```

## Fix
Add a plain number or a detached tensor: `running_loss += loss.item()` when the total starts as a Python number
and is never used as a tensor, otherwise `loss.detach()`; `history.append(loss.detach())`. **Safe**: the logged
values are the same, only the graph is dropped.

## Correct look-alikes (not flagged)
A total that is later back-propagated (correct chunked accumulation, or TL001); anything under
`torch.no_grad()` / `inference_mode()`; `loss.item()` / `.detach()` already; a model's forward that collects
features of one call in a list; loops without a backward (evaluation code).
"""

    def check(self, model: FileModel) -> Iterator[Finding]:
        for loop in model.loops:
            if not loop.of(EventKind.BACKWARD):
                continue
            scope = loop.scope
            backprop = scope.backpropagated()
            reported: set[str] = set()
            for e in loop.events:
                if e.scope is not scope.node or e.target is None or e.value is None or e.target in reported:
                    continue
                if not (e.accumulates or e.kind is EventKind.APPEND or e.flavor == "item="):
                    continue
                if "no_grad" in e.contexts or e.target in backprop or not _attached(scope, e.value):
                    continue
                if not _carried(scope, loop, e):
                    continue
                reported.add(e.target)
                yield Finding(
                    e.node if e.kind is EventKind.APPEND else e.stmt.body[0] if isinstance(e.stmt, cst.SimpleStatementLine) else e.node,
                    f"`{code_of(e.value)}` is still attached to its graph and is kept in `{e.target}` across "
                    f"iterations (never back-propagated): every step's graph stays alive and memory grows; store "
                    f"`{code_of(e.value)}.item()` or `.detach()`",
                    _fix(model, scope, e),
                )


def _attached(scope: Scope, value: cst.BaseExpression) -> bool:
    """A loss or a model output, not already a number or a detached tensor."""
    if as_detachment(value) is not None or scope.is_numeric(value):
        return False
    if scope.is_loss(value):
        return True
    if isinstance(value, cst.Call):
        return _is_forward(value)
    name = dotted(value)
    if name is None:
        return False
    defs = [a for a in scope.assignments(name) if a.value is not None and a.flavor in ("=", "tuple0", "tuple")]
    return bool(defs) and all(
        isinstance(a.value, cst.Call) and _is_forward(a.value) and "no_grad" not in a.contexts for a in defs
    )


def _is_forward(call: cst.Call) -> bool:
    """`model(x)`, `self.net(x)`, `criterion(out, y)`: a module or loss called, not a method of a tensor."""
    name = dotted(call.func)
    if name is None:
        return False
    last = name.rsplit(".", 1)[-1]
    return (name.count(".") == 0 or name.startswith("self.") and name.count(".") == 1) and last not in (
        "len", "int", "float", "str", "print", "range", "enumerate", "zip", "sum", "max", "min", "abs", "round",
        "list", "dict", "tuple", "sorted", "isinstance", "getattr", "next", "iter",
    )


def _carried(scope: Scope, loop: Loop, e: Event) -> bool:
    """The container outlives the iteration: bound before the loop and not rebound inside it."""
    inside = any(a.target == e.target and a.rebinds for a in loop.events if a.scope is scope.node)
    if inside:
        return False
    return any(a.rebinds and loop.node not in a.loops for a in scope.assignments(e.target or "")) or (
        e.target or ""
    ).startswith("self.")


def _fix(model: FileModel, scope: Scope, e: Event) -> Fix | None:
    value = e.value
    assert value is not None
    numeric_start = any(
        a.rebinds and isinstance(a.value, (cst.Integer, cst.Float)) for a in scope.assignments(e.target or "")
    )
    used_as_tensor = re.search(rf"\b{re.escape(e.target or '')}\s*\.\s*\w", model.text) is not None
    method = "item" if e.accumulates and e.kind is EventKind.ASSIGN and numeric_start and not used_as_tensor else "detach"
    if isinstance(value, (cst.BinaryOperation, cst.BooleanOperation, cst.UnaryOperation, cst.IfExp, cst.Await)) and not value.lpar:
        value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    new = cst.Call(func=cst.Attribute(value=value, attr=cst.Name(method)))
    return Fix("safe", f"keep `{code_of(e.value)}.{method}()` instead", ((e.value, new),))
