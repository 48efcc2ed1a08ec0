"""Evaluation passes that run with grad enabled and keep what they compute: a function that a training loop runs
outside `no_grad` and that sums attached losses over its own loop into the total it returns (`summed_by_evaluations`),
and a loop of a function that trains, with no backward of its own, that keeps each batch's attached value in a
list or total bound before it (`kept_by_passes`: the validation loop beside the batch loop of an epoch). Either
holds the graph of every batch of the pass until the total or list is dropped.
A layer above `engines`, whose callers of a function and test of grad switches it reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import libcst as cst

from torchlint.analysis.engines import switches_grad, training_callers
from torchlint.analysis.events import Event, EventKind
from torchlint.analysis.exprs import summand_names
from torchlint.analysis.model import FileModel
from torchlint.analysis.scopes import Scope
from torchlint.analysis.vkind import VKind
from torchlint.source.walk import walk

_TRAINS = (EventKind.BACKWARD, EventKind.STEP, EventKind.RUN)


@dataclass(frozen=True)
class Summed:
    """A sum of attached losses over an evaluation function's loop (`event` adds `value`), returned to `caller`'s
    training loop."""

    event: Event
    value: cst.BaseExpression
    scope: Scope
    caller: Scope


@dataclass(frozen=True)
class Pass:
    """What a loop of code that trains keeps over its batches (`event` keeps `value`), and what that code
    back-propagates elsewhere (`backprop`)."""

    event: Event
    value: cst.BaseExpression
    backprop: cst.BaseExpression


def summed_by_evaluations(model: FileModel) -> Iterator[Summed]:
    """An evaluation function, run by a training loop outside `no_grad`, that sums attached losses over its own
    loop and returns the total (`def validate(loader): total = 0; for x, y in loader: total += crit(model(x), y);
    return total`): the total holds the graph of every batch of the pass, and hands it to a caller that keeps
    only its value (a total returned as `total.item()` leaves the graph in the call)."""
    for loop in model.loops:
        scope = loop.scope
        if type(scope.node) is not cst.FunctionDef or not loop.outermost or any(x.kind in _TRAINS for x in scope.events):
            continue  # a function that trains, or back-propagates what it sums, is not an evaluation
        sums = [e for e in loop.events if e.scope is scope.node and e.accumulates and e.value is not None
                and "no_grad" not in e.contexts]
        if not sums:
            continue  # the cheap test first: most loops of a file sum nothing
        returned = {n for r in scope.own_returns() if r.value is not None  # as terms: not `total.item() / n`
                    for n in summand_names(r.value) | {d.target for d in scope.summand_defs(r.value, r)}}
        for e in sums:
            if e.target not in returned or not loop.carries(e):
                continue
            if any(a.loops for a in scope.assignments(e.target or "") if a.rebinds):
                continue  # bound afresh for each batch: one batch's graph, not the pass's
            if model.kinds.of(e.value, scope, e) is not VKind.GRAPH or switches_grad(scope):
                continue
            callers = training_callers(model, scope)
            if callers and e.value is not None:
                yield Summed(e, e.value, scope, callers[0])
                break


def kept_by_passes(model: FileModel) -> Iterator[Pass]:
    """A loop with no backward or step of its own in a function (or module) that trains: it back-propagates
    elsewhere, so grad is on wherever no `no_grad` says otherwise. What the loop appends or adds into a list or
    total bound before it, attached (computed from a forward: `val_losses.append(crit(model(x), y))`) and read by
    no backward, holds the graph of every batch of the pass. Not a loop inside an iteration that back-propagates
    (the heads of one step, the micro-batches of one window): only the pass beside the training loop (the
    validation loop of an epoch, after its batch loop)."""
    for loop in model.loops:
        scope = loop.scope
        backwards = scope.own_backwards()
        if not backwards or loop.of(*_TRAINS):
            continue
        kept = [e for e in loop.events if e.scope is scope.node and e.value is not None and e.target
                and (e.kind is EventKind.APPEND or e.accumulates) and "no_grad" not in e.contexts]
        if not kept or switches_grad(scope):
            continue
        around = tuple(kept[0].loops[:list(kept[0].loops).index(loop.node)])
        if any(tuple(b.loops) == around[:len(b.loops)] for b in backwards):
            continue  # a backward of the iteration the loop runs in (or of the function around it)
        passes = {id(lp.node) for lp in model.loops if lp.scope is scope and lp.node in around and not lp.of(*_TRAINS)}
        for e in kept:
            if not loop.carries(e) or scope.feeds_backward({e.target}, {e.target}):  # type: ignore[arg-type]
                continue
            if any(a.rebinds and any(id(n) in passes for n in a.loops) for a in scope.assignments(e.target or "")):
                continue  # bound afresh in each iteration of a pass around it: one batch's total, judged where it grows
            if model.kinds.of(e.value, scope, e) is VKind.GRAPH and _forward_made(model, scope, e) \
                    and e.value is not None and backwards[0].value is not None:
                yield Pass(e, e.value, backwards[0].value)
                break


def _forward_made(model: FileModel, scope: Scope, e: Event) -> bool:
    """Is the kept value computed from a module's output: a call of a module in it or in the definitions it
    computes with (`crit(model(x), y)`, or `out = model(x)` then `loss = crit(out, y)`), not a parameter's norm."""
    values = [e.value] + [d.value for d in scope.operand_defs(e.value, e)]  # type: ignore[arg-type]  # kept: a value
    return any(type(n) is cst.Call and model.kinds.of(n.func, scope, e) is VKind.MODULE
               for v in values if v is not None for n in walk(v))
