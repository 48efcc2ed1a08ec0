"""TL002: the last backward of an iteration keeps the graph (`retain_graph=True` / `create_graph=True`).

Nothing later frees it, so the previous iteration's saved activations stay alive into the next forward: peak
memory doubles, and grows without bound when the loss is kept (a total, a list) across iterations.
"""

from __future__ import annotations

import builtins

import re
from typing import Iterator

import libcst as cst

from torchlint.analysis import AssignForm, Event, EventKind, FileModel, Loop, Scope
from torchlint.analysis.bindings import trip_count
from torchlint.analysis.engines import run_by_callers
from torchlint.analysis.vkind import VKind
from torchlint.analysis.semantics import CONSTANT_NAMES, FUNCTIONAL_MODULES, NOT_A_FORWARD, computes_loss
from torchlint.analysis.exprs import argument_for, code_of, dotted, names_in, positional_params
from torchlint.analysis.gradmode import leaf_grads_read
from torchlint.analysis.sources import differentiated_after, graph_sources, leaves_call, operands, shared_sources
from torchlint.source.walk import walk
from torchlint.diagnostic import Fix
from torchlint.rules.base import BACKWARD_CALL, LOOP, STEP_CALL, Finding, Rule
from torchlint.verify.signs import Sign

RETAIN = re.compile(r"retain_graph|create_graph|,(?:\s|#[^\n]*\n)*True\b")  # also `backward(g, True)`
CREATE_GRAPH = re.compile(r"create_graph")
GRAD_READ = re.compile(r"\.\s*grad\b")


class RetainGraphNeverReleased(Rule):
    code = "TL002"
    name = "retain-graph-never-released"
    summary = "retain_graph=True on the last backward of an iteration: the graph is never freed"
    fix_safety = "safe or unsafe"
    # The last backward of an iteration keeps the graph: retain_graph=/create_graph=, or True passed by position.
    requires = (BACKWARD_CALL, RETAIN)
    scope_requires = (BACKWARD_CALL, LOOP, RETAIN)
    # Or a function that takes an input gradient with `backward(create_graph=True)` and reads `x.grad` (no loop).
    # Or a training-step method that keeps the graph, run per iteration by another file's loop (no loop of its own).
    scope_alternatives = ((BACKWARD_CALL, CREATE_GRAPH, GRAD_READ), (BACKWARD_CALL, RETAIN, STEP_CALL))
    runtime_signs = (Sign.RETAINED_GRAPH_OUTLIVES_STEP,)
    fix_promise = "no graph kept by retain_graph=True outlives its step in the fixed run"
    fixture_keeps_training = True
    doc = """
## What it flags
In a training loop, the last `backward(...)` / `torch.autograd.grad(...)` of an iteration passes
`retain_graph=True` (or `create_graph=True`) and no later backward in the iteration frees the graph. A closure
handed to `optimizer.step(closure)` runs in the iteration of that step: a local function, or the one closure a
function or method of the file builds and returns (`closure = self.make_closure(x, y)`, then
`optimizer.step(closure)`, when every binding of the name calls that factory).

And a `backward(retain_graph=True)` followed in the iteration by backwards of graphs of their own: the later
losses share no value that may carry a graph with the first (`critic_loss.backward(retain_graph=True)`, then
`actor_loss.backward()`, each loss computed from its own forward of the batch). The sources of a graph are followed
back through the loop's bindings to the items it iterates over; a value from before the loop, a parameter or global
that may hold a tensor, or both losses bound by one statement (`a, b = self.losses(x)`) count as shared.

Also, anywhere (in a loop or not): an input gradient taken with `backward(create_graph=True)` and read from the
`.grad` of a leaf the function makes (`x.requires_grad = True`, `x.requires_grad_()`, `Variable(v,
requires_grad=True)`), as a gradient penalty does: that `.grad` holds a gradient whose graph refers back to `x`, a
reference cycle that is never freed (pytorch#4661), so each call leaks its graph. Use `torch.autograd.grad(out, x,
create_graph=True)`, which returns the gradient without storing it. Not reported when the function resets the
`.grad` (`x.grad = None`), nor for gradients read from parameters (an optimizer's `zero_grad` resets those).

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
iteration over one graph: the next run needs it — restructure to one backward of the summed losses). The same
holds for a helper's backward run in an inner loop (the helper's or its caller's): the fix is offered only when
what it back-propagates is built afresh in each run (`micro_step(model, mb_x, mb_y)` over the micro-batches),
not when it reaches a graph built before that inner loop or handed in by the caller (`head_step(head, feats,
y)` per head).
The fix is **safe** (same gradients, less memory) when the back-propagated value is
built fresh in the iteration; it is **unsafe** when the value depends on a running total carried across
iterations (then the next backward would fail: fix TL001 first). `create_graph=True` has no automatic fix.

## Correct look-alikes (not flagged)
`d_loss.backward(retain_graph=True)` followed by a plain `g_loss.backward()`; per-head backwards with
`retain_graph=True` followed by a final plain backward; a `retain_graph` given by a variable; a plain backward
in the other arm of an `if` is not "later" (the flow graph decides what follows what), except in an inner
loop that keeps the graph only in its first pass (`for i in range(2):` `if i == 0: losses[i].backward(
retain_graph=True)` `else: losses[i].backward()`, a counter compared with its start, the loop not known to run
once) when every other pass runs another backward: the second pass frees it. A call later in the
iteration that differentiates the graph again, a backward of another form: given `retain_graph=` or
`create_graph=` (a learned optimizer's `update(err, params, create_graph=True)`), or named for a derivative
(`hessian_vector_product(kl, params)`, `jvp`, `compute_grads`; not torch's `clip_grad_norm_`), handed the value or
another bound by the same statement (`loss, kl = surrogate(...)`, TRPO's Fisher-vector product). A helper whose
backward goes through what the loop's call hands it from before the loop (`self._jvp(y, x, v)` per projection
of one output `y`): every pass needs that graph. Gradients taken with `create_graph=True` and stored, in a value
computed from them, on an attribute (MAML's fast weights, `weight.fast = weight - lr * grad[k]`, read by the layers'
`forward`): the query loss's backward goes through them.

```python
for real, _ in loader:
    fake = netG(noise())
    d_loss = criterion(netD(real), ones) + criterion(netD(fake), zeros)
    d_loss.backward(retain_graph=True)   # the generator's backward below needs the graph
    g_loss = criterion(netD(fake), ones)
    g_loss.backward()                    # the last backward of the iteration releases it
    optD.step()
    optG.step()
    optD.zero_grad()
    optG.zero_grad()
```

## Limits
A loop that steps no optimizer and differentiates with `create_graph=True` (`torch.autograd.grad(val, y,
create_graph=True)` in an unrolled solver inside a forward) keeps its graph for the backward after it, and is not
reported. A loop whose every iteration back-propagates into a graph built once before it (`s_feats = student(x)`, then
one loss per layer with `retain_graph=True`) is not reported: all iterations but the last need the graph, and it is
freed when the function returns. The same goes for a helper called once per batch whose own loop does that (`outs =
model(x)`, then one backward per layer). That value must be known to carry a graph, or be computed by the same module
or function as a forward of the iteration (`anchor = net(x)` before the loop, `noisy = net(x)` in it; not under
`no_grad`), or be what a loss function of the loop is handed first, the prediction (`hyp` reshaped from a parameter,
then `criterion(hyp[i:j], gold[i:j])` per chunk), and be a term or an argument of the loss: a model or loss function
built before the loop and called in it (`model = self.train()`, `loss_fn = self.loss_fn`), or a target reshaped from a
parameter, does not count; a loss computed, by no call of a function or module, from a parameter of a function whose
loop steps nothing does (`loss_d = losses[mask].mean()` per domain, the caller's graph). The right code there is
`retain_graph=<not the last layer>`, which the rule does not offer.

A loop known to run once, in a function (`for _ in range(args.gradient_steps)` in an agent's `update()`, with
`parser.add_argument('--gradient_steps', default=1)` and `args = parser.parse_args()` in the script), is not
reported either: no next iteration's forward meets the kept graph, and it is freed when the function returns.
That holds only while nothing it is computed from leaves the call: a loss returned, stored on `self`, or added
into a container or total from outside the function keeps the graph into the next call, and is reported. An
option the script changes (`args.gradient_steps = 4`), a default other than 1, or a bound the analysis cannot read
counts as more than one iteration.
The same holds for a helper the loop calls (`q_loss, pi_loss = agent.update(batch_size)`, `process_batch(batch)`)
whose backward runs once per call, outside any loop of the helper: when the loss is built in the helper from
nothing that may hold a graph from outside (an attribute of `self` read as a value, a global, a parameter the loop
passes a value not known to be graph-free) and nothing computed from it leaves the call (`return loss.item()` is a
number), the graph is freed when the helper returns, before the loop's next forward. A helper handed the loss the
iteration computed (`def backprop(loss): loss.backward(retain_graph=True)`, called as `backprop(loss)`) is the
loop's own backward: the caller's `loss` keeps the graph into the next forward. Reported without a fix (the
helper's other callers may back-propagate through what they hand it again).

With project analysis (the command, pre-commit), a training-step method of a class (it back-propagates and steps
outside any loop of its own) that no function of its file calls is checked as one iteration of the loops of other
project files that run it: a caller that imports the class from the method's file (or through a package's
`__init__`), binds a name to an instance of it and to nothing else, and calls the method on it in a loop
(`scheduler = LossScheduler(model)`, then `losses = scheduler(preds, labels)` per batch, reaching the method through
the class's `__call__`, which nothing in the file calls either). Its last backward with `retain_graph=True` is
reported when something computed from the graph leaves the call (a loss returned, alone or in a dict; stored on
`self`) and the caller's loop back-propagates nothing itself (a later backward there may need the graph). Not
followed: a method whose graph dies with the call, a caller that binds the name to anything else too, a call
under `no_grad`.
"""

    def check(self, model: FileModel) -> Iterator[Finding]:
        reported: set[int] = set()
        for loop in model.loops:
            if not loop.outermost:
                continue
            backwards = loop.of(EventKind.BACKWARD)
            for last in backwards:
                if _freed_by_a_later_pass(model, last, backwards):
                    continue  # `if i == 0: a.backward(retain_graph=True)` `else: b.backward()` over two passes
                if not loop.ends_iteration_after(last, [b for b in backwards if b is not last]):
                    yield from _kept_for_another_graph(model, loop, last, backwards)
                    continue  # a later backward of the iteration releases the graph on every path
                if last.create_graph and not loop.of(EventKind.STEP, EventKind.RUN):
                    continue  # differentiating through gradients in a loop that trains nothing: an unrolled solver
                for finding in _check_last(model, loop, last):
                    reported.add(id(last.node))
                    yield finding
        yield from _input_gradient_cycles(model, reported)
        yield from _run_by_callers(model, reported)


def _freed_by_a_later_pass(model: FileModel, first: Event, backwards: list[Event]) -> bool:
    """The backward keeps its graph only in the first pass of an inner loop (`if i == 0:` over `for i in
    range(2)`, a counter compared with its start) that runs more than once, and every pass of that loop that does
    not keep it runs another backward (`else: losses[i].backward()`): the second pass frees the graph (the
    per-task gradients of a multi-task method, taken one loss at a time)."""
    if first.retain_arg is None or first.create_graph:
        return False
    for node in first.loops[1:]:
        inner = next((lp for lp in model.loops if lp.node is node and lp.scope.node is first.scope), None)
        if inner is None or not any(not g.negated and isinstance(g.test, cst.BaseExpression)
                                    and inner.first_pass_only(g.test, first) for g in first.guards_within(node)):
            continue
        trips = trip_count(model, inner)
        start = inner.scope.flow_node(first)
        others = {n for b in backwards if b is not first and (n := inner.scope.flow_node(b)) is not None}
        if start is None or not others or (trips is not None and trips < 2):
            return False
        return inner.scope.flow.every_pass_meets(node, frozenset(others | {start}))
    return False


def _kept_for_another_graph(model: FileModel, loop: Loop, first: Event, backwards: list[Event]) -> Iterator[Finding]:
    """`critic_loss.backward(retain_graph=True)`, then `actor_loss.backward()`, where the later losses share no
    value that may carry a graph with the first (`self.critic(s)` and `self.actor(s)` of the batch, each its own
    forward): no later backward goes through the kept graph, which stays alive until the loss is bound again."""
    scope = loop.scope
    later = [b for b in backwards if b.seq > first.seq and b.scope is scope.node and b.value is not None]
    if first.retain_arg is None or first.create_graph or first.scope is not scope.node or first.value is None \
            or not later or not loop.of(EventKind.STEP):
        return
    kept = graph_sources(model, loop, first)
    if kept is None or any((other := graph_sources(model, loop, b)) is None or other & kept for b in later):
        return
    if _no_next_iteration(model, loop, first):
        return  # the loop runs once per call: the kept graph dies with the call (a little more memory till then)
    yield Finding(
        first.node,
        f"`{code_of(first.node)}` keeps its graph (retain_graph=True) for a later backward, but none goes through it: "
        f"`{code_of(later[0].node)}` back-propagates a graph of its own, so the saved activations stay alive until "
        f"the loss is bound again (in the next iteration's forward); drop retain_graph=True",
    )


def _run_by_callers(model: FileModel, reported: set[int]) -> Iterator[Finding]:
    """A training-step method whose last backward keeps the graph (`retain_graph=True`, outside any loop of the
    method) while something computed from it leaves the call (a loss returned, stored on `self`), run once per
    iteration by a loop of another project file that back-propagates nothing itself (`engines.run_by_callers`):
    what leaves the call holds the kept graph into the caller's next forward."""
    if model.project is None:
        return
    for body in model.step_bodies():
        scope = body.scope
        own = scope.own_backwards()
        for last in own:
            if last.retain_arg is None or last.loops or id(last.node) in reported or scope.class_name is None:
                continue
            if any(b is not last and body.may_follow(last, b) for b in own):
                continue  # a later backward of the method goes through the graph
            assert last.value is not None  # own_backwards: each with a value
            if not leaves_call(model, scope, last.value):
                continue  # the graph dies when the method returns
            use = next((u for u in run_by_callers(model, scope) if not u.backward_line), None)
            if use is None:
                continue
            reported.add(id(last.node))
            yield Finding(
                last.node,
                f"`{code_of(last.node)}` is the last backward of `{scope.class_name}.{scope.name}()`, which "
                f"{use.path}:{use.line} runs once per iteration of a loop, and keeps the graph (retain_graph=True) "
                f"while a value computed from it leaves the call: the saved activations stay alive into the "
                f"caller's next forward (twice the activation memory at its peak, more while anything holds the "
                f"loss): drop it from the last backward",
            )


def _input_gradient_cycles(model: FileModel, reported: set[int]) -> Iterator[Finding]:
    """`x.requires_grad = True; out = D(x); out.backward(g, create_graph=True); grad = x.grad`: the gradient kept
    in `x.grad` has a graph that refers back to `x`, a reference cycle that is never freed (PyTorch warns about it,
    pytorch#4661); `torch.autograd.grad(out, x, g, create_graph=True)` returns the gradient without storing it."""
    for scope in model.scopes:
        made = None
        for b in scope.own_backwards():
            if not b.create_graph or not b.into_grad() or id(b.node) in reported:
                continue
            made = leaf_grads_read(scope) if made is None else made
            reached = sorted(made & scope.depends(b.value)) if made else []  # type: ignore[arg-type]  # own_backwards: each with a value
            if reached:
                leaf = reached[0]
                yield Finding(
                    b.node,
                    f"`{code_of(b.node)}` stores in `{leaf}.grad` a gradient whose graph refers back to `{leaf}`: a "
                    f"reference cycle that is never freed, so every call leaks its graph (PyTorch warns about "
                    f"backward() with create_graph=True); take the gradient with `torch.autograd.grad(..., "
                    f"inputs={leaf}, create_graph=True)` instead",
                )


def _gradients_stored_on_objects(model: FileModel, last: Event) -> bool:
    """What `torch.autograd.grad(..., create_graph=True)` returns is stored, in a computed value, on an attribute
    (MAML's `weight.fast = weight - lr * grad[k]`, which the modules' `forward` reads): the analysis does not follow
    where it goes, and a second-order update is what `create_graph` is for."""
    scope = model.scope_of(last)
    got = {e.target for e in scope.events if e.kind is EventKind.ASSIGN and e.value is last.node and e.target}
    return bool(got) and any(e.kind is EventKind.ASSIGN and e.target and "." in e.target and e.value is not None
                             and names_in(e.value) & got for e in scope.events)


def _check_last(model: FileModel, loop: Loop, last: Event) -> Iterator[Finding]:
    if last.retain_arg is None and not last.create_graph:
        return
    if not _built_in_iteration(model, loop, last):
        return  # the same graph is back-propagated repeatedly: retain_graph is required there
    if _graph_from_before_loop(model, loop, last) or _handed_from_before_loop(model, loop, last):
        return  # each iteration back-propagates into a graph built once before the loop (per layer)
    if _no_next_iteration(model, loop, last):
        return  # the loop runs once per call and the graph dies with the call
    if _differentiated_again(model, loop, last):
        return  # a call differentiates the graph again later in the iteration (a Hessian-vector product)
    if last.create_graph and _gradients_stored_on_objects(model, last):
        return  # fast weights kept on the parameters (`weight.fast = weight - lr * grad[k]`): a later forward reads them
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
    self.train()`), or a target reshaped from a parameter (of unknown kind), is no graph kept for later. For a
    helper called from the loop, the helper's own outermost loop counts: what it computes before that loop is
    built once per call and freed when it returns."""
    scope = model.scope_of(last)
    at, own = last, loop.node
    if scope is not loop.scope:
        home = _at_home(scope, last)
        if home is None or not home.loops:
            return False
        at, own = home, home.loops[0]
    assert at.value is not None  # a backward always has its value
    defs = scope.operand_defs(at.value, at)
    outside = [d for d in defs if (node := scope.flow_node(d)) is not None and not scope.flow.in_loop(node, own)]
    # the forwards the iteration runs (`out = net(x)`): the same call before the loop builds a graph as well
    forwards = {_forward_of(d) for d in defs if d not in outside} - {None}
    predictions = _criterion_inputs(d for d in scope.events if d.kind is EventKind.ASSIGN
                                    and (node := scope.flow_node(d)) is not None and scope.flow.in_loop(node, own))
    for d in outside:
        kind = model.kinds.of_def(d, scope)
        if kind is VKind.GRAPH or not kind.graph_free and (_forward_of(d) in forwards or d.target in predictions):
            return True
    # computed from a parameter by no call, in a loop stepping nothing (`losses[mask].mean()`): the caller's graph
    values = [d.value for d in (at, *defs) if d.value is not None]
    return not loop.of(EventKind.STEP) and scope is loop.scope and not any(_runs_forward(v) for v in values) and bool(
        (set(scope.params) - {"self"}) & {n for v in values for n in names_in(v)})


def _handed_from_before_loop(model: FileModel, loop: Loop, last: Event) -> bool:
    """A helper the loop calls back-propagates what the call hands it from before the loop, a value that may carry a
    graph, running no forward of its own on it (`jv = self._jvp(y, x, v)` per projection, `y` the caller's
    parameter, the helper differentiating `y.reshape(-1)`): every pass goes through that graph again."""
    scope = model.scope_of(last)
    call = last.inlined_from
    home = _at_home(scope, last)
    if scope is loop.scope or type(call) is not cst.Call or home is None or home.value is None \
            or model.resolve(loop.scope, dotted(call.func) or "") is not scope:
        return False
    if _runs_forward(home.value) or any(a.value is not None and _runs_forward(a.value)
                                        for name in scope.depends(home.value) for a in scope.assignments(name)):
        return False  # a forward of its own each pass (`self._loss(videos, patch_points)`): a graph of its own
    params = positional_params(scope.node)[1 if scope.class_name else 0:]
    _, entries = shared_sources(model, scope, home, operands(home.value), None)
    handed = (argument_for(call, params, p) for p in params if p in entries)
    return any(type(a) is cst.Name and not _computed_in(loop, a) and not _loop_target(loop, a.value)
               and not model.kinds.of(a, loop.scope, last).graph_free for a in handed)


def _loop_target(loop: Loop, name: str) -> bool:
    """`name` is bound by the loop's own `for` or one inside it (`for x, y in loader:`), a new value each pass."""
    return any(type(f) is cst.For and name in names_in(f.target) for f in walk(loop.node))


def _differentiated_again(model: FileModel, loop: Loop, last: Event) -> bool:
    """`sources.differentiated_after`, asked in the loop's scope or, for a helper's backward, in the helper."""
    scope = model.scope_of(last)
    if scope is loop.scope:
        return differentiated_after(scope, last, loop.node) is not None
    home = _at_home(scope, last)
    return home is not None and differentiated_after(scope, home, None) is not None


def _criterion_inputs(defs) -> set[str]:
    """The names whose slices a loss function of the loop's assignments is handed first (`loss =
    criterion(hyp[i:j], gold[i:j])`: `hyp`): chunks of one prediction, where a graph comes from, not the target
    (nor leaves handed whole on every iteration, `loss_fn(*params)`, which build a new graph each time)."""
    out: set[str] = set()
    for d in defs:
        for call in walk(d.value) if d.value is not None else ():
            if type(call) is cst.Call and call.args and call.args[0].keyword is None \
                    and type(first := call.args[0].value) is cst.Subscript \
                    and (func := dotted(call.func)) is not None and computes_loss(func):
                out |= names_in(first.value)
    return out


def _no_next_iteration(model: FileModel, loop: Loop, last: Event) -> bool:
    """The loop runs once (`for _ in range(args.gradient_steps)` with the option's default 1) in a function: no
    next iteration's forward meets the kept graph, and it is freed when the function returns, unless something it
    is computed from leaves the call (returned, stored on an object, a parameter or a global)."""
    scope = loop.scope
    if model.scope_of(last) is not scope:
        return _dies_with_helper(model, loop, last)
    if trip_count(model, loop) != 1 or type(scope.node) is not cst.FunctionDef:
        return False
    assert last.value is not None  # a backward always has its value
    return not leaves_call(model, scope, last.value)


def _dies_with_helper(model: FileModel, loop: Loop, last: Event) -> bool:
    """A helper the loop calls once per step (`agent.update(batch_size)`, `process_batch(batch)`) whose backward
    runs once per call, outside any loop of the helper, over a graph the helper builds from nothing that may hold a
    graph from outside (a global, an attribute of `self`, a parameter unless the loop passes it a value known to hold
    none): the graph is freed when the helper returns, before the caller's next iteration, unless something computed
    from it leaves the call."""
    scope = model.scope_of(last)
    call = last.inlined_from
    if type(scope.node) is not cst.FunctionDef or len(last.path) != 2 or type(call) is not cst.Call:
        return False
    home = _at_home(scope, last)
    if home is None or home.value is None or home.loops:
        return False
    _, entries = shared_sources(model, scope, home, operands(home.value), None)
    entries -= model.imported  # `torch` of `torch.mean(q)`: a module, not a value
    entries -= CONSTANT_NAMES  # `requires_grad_(True)`
    if entries:
        args = _arguments_for(scope, call, entries)
        # in a loop that trains nothing (a Grad-CAM pass per image), an argument not known to carry a graph
        trains = bool(loop.of(EventKind.STEP))
        if args is None or not all(k.graph_free or not trains and k is not VKind.GRAPH
                                   for k in (model.kinds.of(a, loop.scope, last) for a in args)):
            return False
    return not leaves_call(model, scope, home.value)


def _forward_of(d: Event) -> str | None:
    """The module or function a definition calls for its value (`ref = net(x)`: `net`), not a tensor function."""
    value = d.value
    if type(value) is not cst.Call or d.variant is AssignForm.FOR:
        return None
    if next((c for c in reversed(d.contexts) if c in ("no_grad", "enable_grad")), None) == "no_grad":
        return None  # `with torch.no_grad(): ref = net(x)` builds no graph
    name = dotted(value.func)
    if name is None or name in NOT_A_FORWARD or hasattr(builtins, name):
        return None  # `iter(loader)`, `len(x)`: Python's, no forward
    if name.count(".") > (1 if name.startswith("self.") else 0):
        return None  # `x.to(device)`, `torch.randn(...)`: a method of a value or a library's function
    return name


def _at_home(scope: Scope, last: Event) -> Event | None:
    """The helper's own event for a backward placed in its caller's loop: its names, loops and flow node are the
    helper's (the placed copy stands at the caller's call statement)."""
    for e in scope.events:
        if e.node is last.node and e.kind is EventKind.BACKWARD and e.inlined_from is None:
            return e
    return None


def _fix(model: FileModel, loop: Loop, last: Event) -> Fix | None:
    call = last.node
    if last.retain_arg is None or type(call) is not cst.Call:
        return None
    if last.create_graph:
        return None
    scope = model.scope_of(last)
    assert last.value is not None  # a backward always has its value
    deps = scope.depends(last.value)
    if _graph_from_enclosing_iteration(scope, last, deps) or _shared_by_helper_runs(model, loop, last):
        # The call runs several times over one graph (per head, per task): the earlier runs need it kept.
        return None
    if scope is not loop.scope and not any(scope.assignments(name) for name in deps):
        return None  # a helper handed the loss: its other callers (other files too) may back-propagate it again
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
            if a.variant is not AssignForm.FOR and inner not in a.loops and any(outer in a.loops for outer in enclosing):
                return True
    return False


def _shared_by_helper_runs(model: FileModel, loop: Loop, last: Event) -> bool:
    """A helper's backward that runs several times per iteration (in an inner loop of the helper or of its caller)
    may go through a graph that every run shares: one built in the helper before its inner loop, or one handed in
    by the caller (`feats = trunk(x)`, then `head_step(head, feats, y)` per head). An argument is followed into the
    caller when the helper is called from the loop's own scope; anything else that may hold a graph (a parameter
    of a helper with its own inner loop, a global) counts as shared."""
    scope = model.scope_of(last)
    if scope is loop.scope or len(last.loops) < 2:
        return False
    home = _at_home(scope, last)
    if home is None or home.value is None:
        return True
    inner = home.loops[-1] if home.loops else None
    shared, entries = shared_sources(model, scope, home, operands(home.value), inner)
    if shared or not entries:
        return shared
    call = last.inlined_from
    if inner is not None or len(last.path) != 2 or type(call) is not cst.Call:
        return True  # a parameter is the same object for every run of the helper's inner loop
    args = _arguments_for(scope, call, entries)
    if args is None:
        return True
    names = set().union(*(operands(arg) for arg in args))
    shared, entries = shared_sources(model, loop.scope, last, names, last.loops[-1])
    return shared or bool(entries)


def _arguments_for(scope: Scope, call: cst.Call, params: set[str]) -> list[cst.BaseExpression] | None:
    """What the call passes for the helper's parameters `params` (a default it leaves them at: `label=None`);
    None when one is not a parameter or is passed in a way not followed (`*args`, `**kwargs`)."""
    names = positional_params(scope.node)
    if type(call.func) is cst.Attribute and names and ((dotted(call.func) or "").startswith("self.")
                                                       or names[0] in ("self", "cls")):
        names = names[1:]  # a method called on its object (`self.step(x)`, `agent.update(n)`)
    if any(a.star for a in call.args):
        return None
    node = scope.node
    defaults = {p.name.value: p.default for p in (*node.params.params, *node.params.kwonly_params)
                if p.default is not None} if type(node) is cst.FunctionDef else {}
    found = [argument_for(call, names, p) or defaults.get(p) for p in params]
    args = [a for a in found if a is not None]
    return args if len(args) == len(found) else None


def _built_in_iteration(model: FileModel, loop: Loop, last: Event) -> bool:
    """The back-propagated value is computed anew in each iteration (a forward inside the loop)."""
    scope = model.scope_of(last)
    assert last.value is not None  # a backward always has its value
    deps = scope.depends(last.value)
    if scope is not loop.scope:  # a helper called from the loop: it computes what it back-propagates, or is handed
        return any(scope.assignments(name) for name in deps) or _handed_from_iteration(model, loop, scope, last, deps)
    return _computed_in(loop, last.value)


def _computed_in(loop: Loop, expr: cst.BaseExpression) -> bool:
    """`expr` runs a forward, or reads a name the loop's scope assigns inside the loop (a loop variable aside)."""
    scope = loop.scope
    return any(a.variant is not AssignForm.FOR and loop.node in a.loops
               for name in scope.depends(expr) for a in scope.assignments(name)) or _calls_in(expr)


def _handed_from_iteration(model: FileModel, loop: Loop, helper: Scope, last: Event, deps) -> bool:
    """The helper back-propagates a parameter (`def backprop(loss): loss.backward(retain_graph=True)`) that the
    loop's call hands a value computed in the iteration (`backprop(loss)`): the caller's name keeps the graph into
    the next iteration's forward, as if the backward were written in the loop. Only in a loop that steps an
    optimizer: a guidance loop (`latents = update(latents, loss)` until the loss is small) may back-propagate a graph
    built before it, out of sight, again and again."""
    if not loop.of(EventKind.STEP):
        return False
    params = positional_params(helper.node)[1 if helper.class_name else 0:]
    handed = [p for p in params if p in deps]
    call = last.inlined_from  # the loop's call of the helper (a nested helper's events stand at the outer call)
    if type(call) is not cst.Call or not handed or model.resolve(loop.scope, dotted(call.func) or "") is not helper:
        return False
    return any(a is not None and _computed_in(loop, a) for a in (argument_for(call, params, p) for p in handed))


def _runs_forward(expr: cst.BaseExpression) -> bool:
    """`_calls_in`, or a method of `self` (`self._loss(x, y)`): more than tensor methods on the values it reads."""
    return _calls_in(expr) or any(type(n) is cst.Call and type(n.func) is cst.Attribute
                                  and dotted(n.func.value) == "self" for n in walk(expr))


def _calls_in(expr: cst.BaseExpression) -> bool:
    """`criterion(model(x), y).backward(...)`: a forward (a call of a function or module) is in the expression,
    not just tensor methods on a value from elsewhere (`out.sum()`)."""
    for node in walk(expr):
        if type(node) is not cst.Call:
            continue
        func = node.func
        if type(func) is cst.Name and func.value not in NOT_A_FORWARD:
            return True
        if type(func) is cst.Attribute:
            base = dotted(func.value)
            if base is not None and (base.startswith("self.") or base in FUNCTIONAL_MODULES):
                return True
    return False
