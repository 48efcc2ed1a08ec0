"""TL002: the last backward of an iteration keeps the graph (`retain_graph=True` / `create_graph=True`).

Nothing later frees it, so the previous iteration's saved activations stay alive into the next forward: peak
memory doubles, and grows without bound when the loss is kept (a total, a list) across iterations.
"""

from __future__ import annotations

import re
from typing import Iterator

import libcst as cst

from torchlint.analysis import Event, EventKind, FileModel, Loop
from torchlint.analysis.kinds import VKind
from torchlint.analysis.semantics import NOT_A_FORWARD
from torchlint.analysis.exprs import code_of, dotted
from torchlint.source.walk import walk
from torchlint.diagnostic import Fix
from torchlint.rules.base import BACKWARD_CALL, LOOP, Finding, Rule

RETAIN = re.compile(r"retain_graph|create_graph|,(?:\s|#[^\n]*\n)*True\b")  # also `backward(g, True)`


class RetainGraphNeverReleased(Rule):
    code = "TL002"
    name = "retain-graph-never-released"
    summary = "retain_graph=True on the last backward of an iteration: the graph is never freed"
    fix_safety = "safe or unsafe"
    # The last backward of an iteration keeps the graph: retain_graph=/create_graph=, or True passed by position.
    requires = (BACKWARD_CALL, LOOP, RETAIN)
    doc = """
## What it flags
In a training loop, the last `backward(...)` / `torch.autograd.grad(...)` of an iteration passes
`retain_graph=True` (or `create_graph=True`) and no later backward in the iteration frees the graph.

## Why it is wrong
`retain_graph=True` tells autograd to keep every saved activation after the backward. It is needed only when
a later backward goes through the same graph (a GAN's generator loss after the discriminator's, several
task losses sharing a trunk). On the last backward nothing needs it: the saved tensors of the whole iteration
stay alive until the loss is rebound in the next iteration, so the next forward runs with twice the activation
memory; if the loss is also kept (a running total, a list of losses) they are never freed and training ends in
`CUDA out of memory`.
It is also often added to silence "Trying to backward through the graph a second time" — which hides TL001.
With `create_graph=True`, PyTorch warns that the parameter/gradient reference cycle can leak memory.

## Example
```python
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward(retain_graph=True)   # TL002
    optimizer.step()
    optimizer.zero_grad()
```

## Fix
Drop `retain_graph=True` (not offered when the call sits in an inner loop that runs it several times per
iteration: the earlier runs need the graph — restructure to one backward of the summed losses).
The fix is **safe** (same gradients, less memory) when the back-propagated value is
built fresh in the iteration; it is **unsafe** when the value depends on a running total carried across
iterations (then the next backward would fail: fix TL001 first). `create_graph=True` has no automatic fix.

## Correct look-alikes (not flagged)
`d_loss.backward(retain_graph=True)` followed by a plain `g_loss.backward()`; per-head backwards with
`retain_graph=True` followed by a final plain backward; a `retain_graph` given by a variable; a plain backward
in the other arm of an `if` is not "later" (the flow graph decides what follows what).

## Limits
A loop that steps no optimizer and differentiates with `create_graph=True` (`torch.autograd.grad(val, y,
create_graph=True)` in an unrolled solver inside a forward) keeps its graph for the backward after it, and is not
reported. A loop whose every iteration back-propagates into a graph built once before it (`s_feats = student(x)`, then
one loss per layer with `retain_graph=True`) is not reported: all iterations but the last need the graph, and
it is freed when the function returns. That value must be known to carry a graph and be a term or an argument of
the loss: a model or loss function built before the loop and called in it (`model = self.train()`, `loss_fn =
self.loss_fn`), or a target reshaped from a parameter, does not count. The right code there is
`retain_graph=<not the last layer>`, which the rule does not offer.
"""

    def check(self, model: FileModel) -> Iterator[Finding]:
        for loop in model.loops:
            if not loop.outermost:
                continue
            backwards = loop.of(EventKind.BACKWARD)
            for last in backwards:
                if not loop.ends_iteration_after(last, [b for b in backwards if b is not last]):
                    continue  # a later backward of the iteration releases the graph on every path
                if last.create_graph and not loop.of(EventKind.STEP, EventKind.RUN):
                    continue  # differentiating through gradients in a loop that trains nothing: an unrolled solver
                yield from _check_last(model, loop, last)


def _check_last(model: FileModel, loop: Loop, last: Event) -> Iterator[Finding]:
    if last.retain_arg is None and not last.create_graph:
        return
    if not _built_in_iteration(model, loop, last):
        return  # the same graph is back-propagated repeatedly: retain_graph is required there
    if _graph_from_before_loop(model, loop, last):
        return  # each iteration back-propagates into a graph built once before the loop (per layer)
    what = "retain_graph=True" if last.retain_arg is not None else "create_graph=True"
    yield Finding(
        last.node,
        f"`{code_of(last.node)}` is the last backward of the iteration and keeps the graph ({what}): the "
        f"saved activations stay alive into the next iteration's forward (twice the activation memory at its "
        f"peak, more while anything holds the loss): drop it from the last backward",
        _fix(model, loop, last),
    )


def _graph_from_before_loop(model: FileModel, loop: Loop, last: Event) -> bool:
    """Part of what is back-propagated is a graph computed before the loop (`s_hidden = student(x)` then one loss
    per layer): every iteration but the last needs that graph kept. Only a value known to carry a graph counts,
    reached as a term or an argument of the loss: a model or loss function that is called (`model =
    self.train()`), or a target reshaped from a parameter (of unknown kind), is no graph kept for later."""
    scope = model.scope_of(last)
    if scope is not loop.scope:
        return False
    for d in scope.operand_defs(last.value, last):
        node = scope.flow_node(d)
        if node is None or scope.flow.in_loop(node, loop.node):
            continue
        if model.kinds.of_def(d, scope) is VKind.GRAPH:
            return True
    return False


def _fix(model: FileModel, loop: Loop, last: Event) -> Fix | None:
    call = last.node
    if last.retain_arg is None or not isinstance(call, cst.Call):
        return None
    if last.create_graph:
        return None
    scope = model.scope_of(last)
    deps = scope.depends(last.value)
    if _graph_from_enclosing_iteration(scope, last, deps):
        # The call runs several times over one graph (per head, per task): the earlier runs need it kept.
        return None
    args = [a for a in call.args if a is not last.retain_arg]
    if args:
        # Keep the formatting of what remains; the last argument must not keep a dangling comma.
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    new_call = call.with_changes(args=args)
    carried = any(
        (e.accumulates or e.kind is EventKind.APPEND) and e.target in deps and e.scope is scope.node
        for e in loop.events
    )
    safety = "unsafe" if carried else "safe"
    return Fix(safety, "drop `retain_graph=True` from the last backward of the iteration", ((call, new_call),))


def _graph_from_enclosing_iteration(scope, last: Event, deps: frozenset[str]) -> bool:
    """True when the back-propagated value uses something computed in an enclosing loop's iteration,
    outside the innermost loop that runs the backward (the per-head loop of `output = model(x)`)."""
    if len(last.loops) < 2:
        return False
    inner, enclosing = last.loops[-1], last.loops[:-1]
    for name in deps:
        for a in scope.assignments(name):
            if a.flavor != "for" and inner not in a.loops and any(outer in a.loops for outer in enclosing):
                return True
    return False


def _built_in_iteration(model: FileModel, loop: Loop, last: Event) -> bool:
    """The back-propagated value is computed anew in each iteration (a forward inside the loop)."""
    scope = model.scope_of(last)
    deps = scope.depends(last.value)
    if scope is not loop.scope:  # a helper called from the loop: it computes what it back-propagates
        return any(scope.assignments(name) for name in deps)
    return any(
        a.flavor != "for" and loop.node in a.loops for name in deps for a in scope.assignments(name)
    ) or _calls_in(last.value)


def _calls_in(expr: cst.BaseExpression) -> bool:
    """`criterion(model(x), y).backward(...)`: a forward (a call of a function or module) is in the expression,
    not just tensor methods on a value from elsewhere (`out.sum()`)."""
    for node in walk(expr):
        if not isinstance(node, cst.Call):
            continue
        func = node.func
        if isinstance(func, cst.Name) and func.value not in NOT_A_FORWARD:
            return True
        if isinstance(func, cst.Attribute):
            base = dotted(func.value)
            if base is not None and (base.startswith("self.") or base in ("F", "nn.functional", "torch.nn.functional")):
                return True
    return False
