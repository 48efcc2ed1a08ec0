"""TL007: a loss (or model output) still attached to its graph is kept across iterations only for logging.

Every iteration's graph stays alive through the running total or list: memory grows each step until
"CUDA out of memory" (the PyTorch FAQ's "don't accumulate history across your training loop").
"""

from __future__ import annotations

import re
from typing import Iterator

import libcst as cst

from torchlint.analysis import Event, EventKind, FileModel, Loop, Scope
from torchlint.analysis.semantics import DISPLAY
from torchlint.analysis.exprs import code_of, dotted
from torchlint.source.walk import walk
from torchlint.analysis.kinds import VKind
from torchlint.diagnostic import Fix
from torchlint.fixes import parenthesized
from torchlint.source.lines import split_lines
from torchlint.rules.base import Finding, Rule


FEW_ITERATIONS = 10


class AttachedLoggingTotal(Rule):
    code = "TL007"
    name = "attached-logging-total"
    summary = "a graph-attached loss kept across iterations only for logging (memory grows every step)"
    fix_safety = "safe"
    doc = """
## What it flags
In a training loop (one that calls backward), adding a loss that is still attached to the autograd graph into
a running total, dict entry or list that outlives the iteration and is never back-propagated:
`running_loss += loss`, `stats["loss"] = stats["loss"] + loss`, `epoch_loss += loss / n`, `history.append(loss)`,
`outputs.append({"loss": loss, "n": len(y)})` (a record that holds the loss), `total += train_step(batch)` (a
helper of the file that returns its attached loss).

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
Add a detached tensor: `history.append(loss.detach())`, `stats["loss"] += loss.detach()`; or a plain number,
`running_loss += loss.item()`, when the total starts as a Python number, the value is a scalar (it is
back-propagated with a plain `.backward()`), and the total is only printed or logged. **Safe**: the logged values
are the same, only the graph is dropped.

## Limits
A loop with a constant trip count of at most 10 (`for _ in range(5)`, a test's mini training run) is not
reported: it keeps a handful of graphs, not a growing number. It reports only values the analysis knows to
carry a graph: the output of a model or criterion, arithmetic on one, a loss handed in as a parameter. A value
from a call it cannot resolve is left alone, and so is a total returned by a function that back-propagates
nothing itself (its caller may back-propagate it).

## Correct look-alikes (not flagged)
A total that is later back-propagated (correct chunked accumulation, or TL001); anything under
`torch.no_grad()` / `inference_mode()`; `loss.item()` / `.detach()` already; a model's forward that collects
features of one call in a list; loops without a backward (evaluation code); the micro-batch outputs of one step,
kept in a list the batch loop binds afresh (it never holds more than one step's graphs); a dict entry with a
literal key replaced at every iteration (`loss_dict["d"] = d_loss`: the latest value only).
"""

    def check(self, model: FileModel) -> Iterator[Finding]:
        kinds = model.kinds
        displayed: dict[str, bool] = {}
        for loop in model.loops:
            if not loop.of(EventKind.BACKWARD):
                continue
            trips = loop.trip_count()
            if trips is not None and trips <= FEW_ITERATIONS:
                continue  # a handful of graphs, freed with the container: nothing grows
            scope = loop.scope
            backprop = scope.backpropagated()
            reported: set[str] = set()
            for e in loop.events:
                if e.scope is not scope.node or e.target is None or e.value is None or e.target in reported:
                    continue
                if not (e.accumulates or e.kind is EventKind.APPEND or e.flavor == "item="):
                    continue
                if e.flavor == "item=" and not e.accumulates and _same_key(e):
                    continue  # `loss_dict["d"] = d_loss`: each iteration replaces the last one's value
                if "no_grad" in e.contexts or e.target in backprop:
                    continue
                attached = _attached_items(model, scope, e)
                if kinds.of(e.value, scope, e) is not VKind.GRAPH and not attached:
                    continue  # a number, a string, a detached tensor, or a value the analysis cannot see
                if not _carried(scope, loop, e) or _escapes(model, scope, e.target) or _within_one_step(scope, loop, e):
                    continue
                reported.add(e.target)
                where = _small_statement(e)
                if attached:  # `outputs.append({"loss": loss, "n": len(y)})`: the record holds the graph
                    names = ", ".join(f"`{code_of(a)}`" for a in attached)
                    yield Finding(
                        e.node if e.kind is EventKind.APPEND else where,
                        f"{names} in `{code_of(e.value)}` is still attached to its graph and is kept in `{e.target}` "
                        f"across iterations (never back-propagated): every step's graph stays alive and memory "
                        f"grows; keep `.detach()`ed values",
                        Fix("safe", "detach the attached values kept in the record",
                            tuple((a, cst.Call(func=cst.Attribute(value=parenthesized(a), attr=cst.Name("detach"))))
                                  for a in attached)),
                    )
                    continue
                yield Finding(
                    e.node if e.kind is EventKind.APPEND else where,
                    f"`{code_of(e.value)}` is still attached to its graph and is kept in `{e.target}` across "
                    f"iterations (never back-propagated): every step's graph stays alive and memory grows; store "
                    f"`{code_of(e.value)}.item()` or `.detach()`",
                    _fix(model, scope, e, displayed),
                )


def _attached_items(model: FileModel, scope: Scope, e: Event) -> list[cst.BaseExpression]:
    """The values of a dict, list or tuple literal that carry a graph (`{"loss": loss, "n": len(y)}`)."""
    value = e.value
    if isinstance(value, cst.Dict):
        items = [el.value for el in value.elements if isinstance(el, cst.DictElement)]
    elif isinstance(value, (cst.List, cst.Tuple)):
        items = [el.value for el in value.elements if not isinstance(el, cst.StarredElement)]
    else:
        return []
    return [item for item in items if model.kinds.of(item, scope, e) is VKind.GRAPH]


def _small_statement(e: Event) -> cst.CSTNode:
    """The statement of the line that holds the accumulation (`s = "x"; total += loss` has two)."""
    if isinstance(e.node, cst.BaseSmallStatement):
        return e.node
    if isinstance(e.stmt, cst.SimpleStatementLine):
        for small in e.stmt.body:
            if any(n is e.value for n in walk(small)):
                return small
        return e.stmt.body[0]
    return e.node


def _carried(scope: Scope, loop: Loop, e: Event) -> bool:
    """The container outlives the iteration: bound before the loop and not rebound inside it."""
    inside = any(a.target == e.target and a.rebinds for a in loop.events if a.scope is scope.node)
    if inside:
        return False
    return any(a.rebinds and loop.node not in a.loops for a in scope.assignments(e.target or "")) or (
        e.target or ""
    ).startswith("self.")


def _same_key(e: Event) -> bool:
    """`d["name"] = value`: a key written as a literal, the same entry at every iteration, replaced by a value that
    does not read the container (`d["loss"] = d["loss"] + loss` adds to it)."""
    if any(isinstance(n, cst.Subscript) and dotted(n.value) == e.target for n in walk(e.value)):
        return False
    line = e.node
    smalls = line.body if isinstance(line, cst.SimpleStatementLine) else [line]
    targets = [t for small in smalls if isinstance(small, cst.Assign) and small.value is e.value for t in small.targets]
    for t in targets:
        target = t.target
        if isinstance(target, cst.Subscript) and dotted(target.value) == e.target:
            return all(isinstance(el.slice, cst.Index) and isinstance(el.slice.value, (
                cst.SimpleString, cst.Integer, cst.Float)) for el in target.slice)
    return False


def _within_one_step(scope: Scope, loop: Loop, e: Event) -> bool:
    """The container is carried across a loop that never steps (the micro-batches of one step), and an enclosing
    loop binds it afresh: it holds one step's graphs at most, already back-propagated, and nothing grows."""
    if loop.of(EventKind.STEP, EventKind.RUN):
        return False
    return any(a.target == e.target and a.rebinds and a.loops and loop.node not in a.loops
               and any(outer in e.loops for outer in a.loops) for a in scope.assignments(e.target or ""))


def _escapes(model: FileModel, scope: Scope, total: str) -> bool:
    """The total leaves a function that back-propagates nothing itself (a loss builder: its caller may well
    back-propagate the total), or another method of the class back-propagates it."""
    if not scope.own_backwards() and any(total in scope.depends(r.value) for r in scope.own_returns()):
        return True
    if total.startswith("self."):
        return any(total in s.backpropagated() for s in model.scopes if s.class_name == scope.class_name)
    return False


def _scalar(scope: Scope, value: cst.BaseExpression) -> bool:
    """`value` is back-propagated with a plain `.backward()` in this scope: a one-element tensor, so `.item()`
    works on it (backward without a gradient argument raises on anything else)."""
    name = dotted(value)
    return name is not None and any(
        b.flavor == "tensor" and dotted(b.value) == name and isinstance(b.node, cst.Call) and not b.node.args
        for b in scope.own_backwards()
    )


def _only_displayed(model: FileModel, e: Event) -> bool:
    """Every other line that mentions the total only prints or logs it (a float prints the same number)."""
    total = re.escape(e.target or "")
    mention = re.compile(rf"(?<![\w.]){total}\b(?!\s*[.\[])")
    attribute = re.compile(rf"(?<![\w.]){total}\s*[.\[]")
    if attribute.search(model.text):
        return False
    for line in split_lines(model.text):
        stripped = line.strip()
        if not mention.search(stripped):
            continue
        if re.match(rf"{total}\s*(\+?=)", stripped):
            continue  # the initialisation and the accumulation itself
        if not DISPLAY.search(stripped):
            return False
    return True


def _fix(model: FileModel, scope: Scope, e: Event, displayed: dict[str, bool]) -> Fix | None:
    value = e.value
    assert value is not None
    numeric_start = any(
        a.rebinds and isinstance(a.value, (cst.Integer, cst.Float)) for a in scope.assignments(e.target or "")
    )
    as_number = e.accumulates and e.kind is EventKind.ASSIGN and numeric_start and _scalar(scope, value)
    if as_number and e.target not in displayed:
        displayed[e.target or ""] = _only_displayed(model, e)  # one scan of the file per total's name
    method = "item" if as_number and displayed[e.target or ""] else "detach"
    new = cst.Call(func=cst.Attribute(value=parenthesized(value), attr=cst.Name(method)))
    return Fix("safe", f"keep `{code_of(e.value)}.{method}()` instead", ((e.value, new),))
