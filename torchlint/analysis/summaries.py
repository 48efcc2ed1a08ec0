"""Function summaries: what a function or method of the file does, as its callers see it.

A call is answered by its callee's summary. A callee that *trains* (it holds its own loop that back-propagates
and steps) is a whole training run: its loop is checked in its own scope, and none of its loop's events join the
caller's iteration (`train_amp(); train_plain()` called one after the other are two runs, not one iteration).
A callee that does per-batch work (no loop of its own around its backward or step) is placed at its call, in
the caller's flow. The return kind of a summary is computed on demand by the kinds engine (`KindInference.returns`).
"""

from __future__ import annotations

from dataclasses import dataclass

from torchlint.analysis.events import AssignForm, EventKind
from torchlint.analysis.exprs import positional_params, summand_names
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
                   looped_backward and looped_step, _kept_parameters(scope))


def _kept_parameters(scope: Scope) -> frozenset[str]:
    """The parameters that are a term of a value added into, or appended to, an attribute of `self`
    (`self.sum += val * n`, `self.values.append(val)`); not one turned into a number first (`val.item() * n`)."""
    params = set(positional_params(scope.node)[1:]) if scope.class_name else set()
    kept: set[str] = set()
    for e in scope.raw:
        if e.scope is not scope.node or e.value is None or not (e.target or "").startswith("self."):
            continue
        if e.kind is EventKind.APPEND or e.kind is EventKind.ASSIGN and e.accumulates:
            kept |= summand_names(e.value) & params
    return frozenset(kept)
