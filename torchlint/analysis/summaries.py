"""Function summaries: what a function or method of the file does, as its callers see it.

A call is answered by its callee's summary. A callee that *trains* (it holds its own loop that back-propagates
and steps) is a whole training run: its loop is checked in its own scope, and none of its loop's events join the
caller's iteration (`train_amp(); train_plain()` called one after the other are two runs, not one iteration).
A callee that does per-batch work (no loop of its own around its backward or step) is placed at its call, in
the caller's flow. The return kind of a summary is computed on demand by the kinds engine (`KindInference.returns`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import libcst as cst

from torchlint.analysis.events import AssignForm, Event, EventKind
from torchlint.analysis.exprs import argument_for, container_name, dotted, positional_params, summand_names
from torchlint.analysis.lookup import FileLookup
from torchlint.analysis.names import Role
from torchlint.analysis.scopes import Scope


@dataclass(frozen=True)
class Summary:
    steps: frozenset[str]  # optimizers it steps (as named in the function)
    zeroes: frozenset[str]  # what it clears: optimizers, models, "param" for `p.grad = None` and the like
    builds: frozenset[str]  # optimizers, schedulers, scalers it constructs
    backprops: bool  # it back-propagates (itself, not through helpers)
    trains: bool  # it holds a loop that back-propagates and steps: a training run of its own
    # its parameters whose value it adds into or appends to an attribute of `self` (a meter's `update(val)`:
    # `self.sum += val * n`), so that the object keeps whatever it is given
    keeps: frozenset[str] = frozenset()

    @property
    def per_batch(self) -> bool:
        return (self.backprops or bool(self.steps)) and not self.trains


def summarize(model: FileLookup, scope: Scope) -> Summary:
    """From the function's own events (before helpers are placed into it)."""
    steps, zeroes, builds = set(), set(), set()
    backprops = False
    looped_backward = looped_step = False
    for e in scope.raw:
        if e.kind is EventKind.METHOD:
            classified = model.classify(e)
            if classified is None:
                continue
            e = classified
        if e.kind is EventKind.BACKWARD:
            backprops = True
            looped_backward |= bool(e.loops)
        elif e.kind is EventKind.STEP and e.target:
            steps.add(e.target)
            looped_step |= bool(e.loops)
        elif e.kind is EventKind.ZERO_GRAD:
            zeroes.add(e.target or "param")
        elif e.kind is EventKind.ASSIGN and e.target and model.symbols.role(e.target) is not Role.OTHER:
            if e.variant is AssignForm.PLAIN and e.value is not None and model.symbols.built_here(e.value):
                builds.add(e.target)
    return Summary(frozenset(steps), frozenset(zeroes), frozenset(builds), backprops,
                   looped_backward and looped_step, _kept_parameters(scope) | _kept_by_own_methods(model, scope))


_SUMMARISING: set[int] = set()  # methods whose summary is being computed: a call back into one is not followed


def _kept_by_own_methods(model: FileLookup, scope: Scope) -> frozenset[str]:
    """The parameters a method hands to another method of its class that keeps them (`collect(pred, label, loss)`
    calling `self.update("loss", loss)`, where `update` appends its value to `self.losses[name]`)."""
    params = _unrebound_params(scope)
    kept: set[str] = set()
    for e in scope.raw if params else ():
        if e.kind is not EventKind.LOCAL_CALL or type(e.node) is not cst.Call or e.scope is not scope.node \
                or not (e.callee or "").startswith("self.") or (e.callee or "").count(".") != 1:
            continue
        callee = model.resolve(scope, e.callee or "")
        if callee is None or callee is scope or id(callee.node) in _SUMMARISING:
            continue
        _SUMMARISING.add(id(scope.node))
        try:
            keeps = model.summary(callee).keeps
        finally:
            _SUMMARISING.discard(id(scope.node))
        for p in keeps:
            a = argument_for(e.node, positional_params(callee.node)[1:], p)
            kept |= {n for n in summand_names(a) if n in params} if a is not None else set()
    return frozenset(kept)


def _unrebound_params(scope: Scope) -> set[str]:
    """A method's parameters past `self` that it never rebinds (a rebound one may be converted first: `if
    torch.is_tensor(val): val = val.item()`)."""
    params = set(positional_params(scope.node)[1:]) if scope.class_name else set()
    star = scope.node.params.star_kwarg if type(scope.node) is cst.FunctionDef and scope.class_name else None
    if type(star) is cst.Param:
        params.add(star.name.value)  # `def log(self, **values)`: what callers pass by keyword beyond the others
    return params - {e.target for e in scope.raw if e.kind is EventKind.ASSIGN and e.rebinds and e.scope is scope.node}


def _kept_parameters(scope: Scope) -> frozenset[str]:
    """The parameters that are a term of a value added into, or appended to, an attribute of `self`
    (`self.sum += val * n`, `self.values.append(val)`, `self.stats[key].append(value)`), themselves or through a
    loop over them (`for i, v in enumerate(values): self.sums[i] += v`); not one turned into a number first
    (`val.item() * n`)."""
    params = _unrebound_params(scope)
    return frozenset(p for e, target, kept in kept_writes(scope, params) if target.startswith("self.") for p in kept)


def kept_writes(scope: Scope, params: set[str]) -> Iterator[tuple[Event, str, set[str]]]:
    """The function's own writes that keep some of `params`: (the write, what it writes into, the parameters kept).
    A write appends (`x.append(v)`, `x.extend(v)`; `x.setdefault(k, []).append(v)` writes into `x`) or adds (`x += v`,
    `x[k] += v`); a parameter is kept when it is a term of what is written, itself or through a loop variable over
    its items (`for k, v in values.items()`)."""
    if not params:
        return
    stands_for = {p: p for p in params}  # a loop variable over a parameter stands for its items
    for e in scope.raw:
        if e.kind is EventKind.ASSIGN and e.variant is AssignForm.FOR and e.scope is scope.node and e.target:
            over = _iterated(e.value) & params
            if len(over) == 1:
                stands_for.setdefault(e.target, over.pop())
    for e in scope.raw:
        if e.scope is not scope.node:
            continue
        target, value = e.target or "", e.value
        call = e.node
        if e.kind is EventKind.METHOD and type(call) is cst.Call and type(call.func) is cst.Attribute \
                and call.func.attr.value in ("append", "extend") and call.args:
            held = call.func.value  # `self.logs.setdefault(k, []).append(v)`: the list is an entry of `self.logs`
            if type(held) is cst.Call and type(held.func) is cst.Attribute and held.func.attr.value == "setdefault":
                held = held.func.value
            target, value = container_name(held) or "", call.args[-1].value
        elif not (e.kind is EventKind.APPEND or e.kind is EventKind.ASSIGN and e.accumulates):
            continue
        kept = {stands_for[n] for n in summand_names(value) if n in stands_for} if value is not None else set()
        if kept:
            yield e, target, kept


def _iterated(value: cst.BaseExpression | None) -> set[str]:
    """The names a `for` loop walks the items of: `values`, `enumerate(values)`, `zip(a, b)`, `d.values()`."""
    if type(value) is cst.Call:
        func = dotted(value.func)
        if func in ("enumerate", "zip", "reversed"):
            return {n for a in value.args if (n := dotted(a.value)) is not None}
        if type(value.func) is cst.Attribute and value.func.attr.value in ("values", "items"):
            name = dotted(value.func.value)
            return {name} if name is not None else set()
        return set()
    name = dotted(value) if value is not None else None
    return {name} if name is not None else set()
