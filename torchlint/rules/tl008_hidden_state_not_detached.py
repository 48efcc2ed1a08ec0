"""TL008: a recurrent hidden state fed back into the model batch after batch without `.detach()`.

Each backward reaches back into the previous batch's graph, already freed: "Trying to backward through the
graph a second time" (or, with retain_graph, backprop through the whole history and growing memory).
"""

from __future__ import annotations

import ast as pyast
import re
from typing import Iterator

import libcst as cst

from torchlint.analysis import AssignForm, BackwardVia, Event, EventKind, FileModel, Loop, Scope
from torchlint.analysis.cuts import DEF_FORWARD
from torchlint.analysis.vkind import VKind
from torchlint.analysis.semantics import STATE_RESETS
from torchlint.analysis.exprs import code_of, dotted, graph_operand_names
from torchlint.analysis.overrides import DEF_DETACH, NOOP_DETACH, detaches_state, does_nothing, parse_method
from torchlint.diagnostic import Fix
from torchlint.fixes import insert_before
from torchlint.rules.base import BACKWARD_CALL, LOOP, Finding, Rule
from torchlint.source.walk import children
from torchlint.verify.signs import Sign

# The assignments that bind the state anew: `h = v`, `out, h = model(x, h)`.
_REBINDING = (AssignForm.PLAIN, AssignForm.UNPACK_FIRST, AssignForm.UNPACK)


class HiddenStateNotDetached(Rule):
    code = "TL008"
    name = "hidden-state-not-detached"
    summary = "recurrent hidden state carried across batches without .detach() (truncated BPTT)"
    fix_safety = "unsafe"
    # The finding sits in a loop that back-propagates, or in a module's forward (the state kept on the module);
    # or on a `detach()` that does nothing, overriding one that detaches (a file that need not train).
    requires = ((BACKWARD_CALL, NOOP_DETACH), (LOOP, NOOP_DETACH))
    scope_requires = (BACKWARD_CALL, LOOP)
    scope_alternatives = ((DEF_FORWARD,), (DEF_DETACH,))
    runtime_signs = (Sign.SAVED_TENSOR_MODIFIED,)
    runtime_also = (Sign.BACKWARD_THROUGH_FREED_GRAPH,)
    fix_promise = "no backward of the fixed run reaches the previous batch's graph"
    fixture_errors = {"*": "Trying to backward through the graph a second time"}
    doc = """
## What it flags
A training loop (backward every iteration) where the state a model returns is fed back into it in the next
iteration — `output, hidden = model(x, hidden)` — and nothing in the loop detaches or re-initialises it
(`hidden = hidden.detach()`, `repackage_hidden(hidden)`, `model.init_hidden(...)`, `h.detach_()`).
Reported on the call that feeds the state back.

The state may also live on the module: `out, self.hidden = self.rnn(x, self.hidden)` in `forward`, in a file
whose loop back-propagates, where nothing but `__init__` resets or detaches `self.hidden` (no other method of the
class, no `model.hidden = ...` anywhere in the file). Reported on the call in `forward`.

A decoder-state class may also override its base's `detach()` with a body that does nothing (`pass`, after a
docstring) while the base's detaches what the object keeps (`self.hidden = tuple(h.detach() for h in
self.hidden)`, `h.detach_()`): the training loop's `state.detach()` between truncated-BPTT chunks then cuts
nothing. Reported on the override when the class keeps a value (`self.src = src`, not a constant) and the base
is of the same file or, read from its text, of another project file (the file need not train).

A value with a graph bound after the backward and read by the next iteration's loss (`prev = out` at the end of
the iteration, `loss = loss + (out - prev).pow(2).mean()` in the next one), with nothing in the loop detaching or
re-initialising it, carries the previous batch's graph into the next backward the same way. Only what can carry a
graph is followed (a cut `prev.detach()`, a shape `prev.size(0)` or a comparison is not); reported on the binding,
without a fix (`prev = out.detach()` is the intent, but whether the penalty should train the previous batch's
output is the author's call).

## Why it is wrong
The state carries the graph of the previous batch. The next backward walks into it, but that graph's buffers
were freed by the previous backward:

    RuntimeError: Trying to backward through the graph a second time (or directly access saved tensors after
    they have already been freed)

With `retain_graph=True` it "works" by back-propagating through the whole history: slower every batch, memory
grows, and the gradients are not the truncated-BPTT ones you meant.

## Example
```python
hidden = model.init_hidden(batch_size)
for x, y in batches:
    output, hidden = model(x, hidden)      # TL008
    loss = criterion(output, y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
```

## Fix
Detach the state at the top of the iteration, before it is fed back: `hidden = hidden.detach()` for a tensor
that starts as a tensor, `tuple(h.detach() for h in hidden)` for a tuple (LSTM), a form that handles both when
the code does not show which. **Unsafe**: gradients stop at the batch boundary (truncated BPTT, the intent).

## Correct look-alikes (not flagged)
`repackage_hidden(hidden)` / `.detach()` / re-initialisation each batch; a state reset every batch
(`hidden = None`); a state that is only passed in, not returned; loops without a backward (generation);
`hidden[0].detach_()` or `for s in state: s.detach_()` (detached in place); `h = tuple(e.data for e in h)`; a
value that is not a forward's output (`batch = move_to_device(batch)`, `out_dir = os.path.join(out_dir, ...)`);
a state re-initialised for every sequence and carried only across the time steps of that sequence; a running
value a helper returns and is fed again (`running = add_to(running, loss)`) when nothing the call binds flows
into a backward of the function (no backward walks into it), or when the function is one of the file whose every
`return` gives a tuple whose back-propagated items read the state's parameter only through a cut
(`loss, ma = mine_loss(net, x, y, ma)`, where the loss divides by `torch.mean(ma).detach()`: MINE's moving average);
a state computed under `no_grad` (a rollout's `logits, value, hx = net.step(obs, hx)`: it holds no graph); a value
bound anew from the batch on each arm of an if/elif chain before the call (only a fall-through that no arm names
would carry the previous output).

```python
hidden = model.init_hidden(batch_size)
for x, y in batches:
    hidden = repackage_hidden(hidden)
    output, hidden = model(x, hidden)
    loss = criterion(output, y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
```

## Limits
An override that does nothing is followed only for a method named `detach` taking no argument but `self`, of a
base in the project whose own `detach` assigns a detached value to an attribute or detaches one in place; a base
outside the project, or one whose `detach` does something else, is left alone.
The state must be known to be a forward's output: a graph tensor by its kind, or an item of the tuple a
forward returns that is fed back into that forward. A value from a call the analysis cannot resolve is left
alone.
"""

    def check(self, model: FileModel) -> Iterator[Finding]:
        yield from _module_state(model)
        yield from _noop_detach(model)
        for loop in model.loops:
            if not any(b.scope is loop.scope.node for b in loop.of(EventKind.BACKWARD)):
                continue
            scope = loop.scope
            yield from _carried_into_loss(model, loop)
            for e in loop.of(EventKind.ASSIGN):
                if e.scope is not scope.node or e.variant not in _REBINDING or e.target is None or (
                        "no_grad" in e.contexts or "inference_mode" in e.contexts):
                    continue  # (a state computed under `no_grad` holds no graph to reach into)
                call = e.value
                if type(call) is not cst.Call or not _feeds_back(call, e.target) or _detaching(call):
                    continue
                if not _forward_output(model, scope, e):
                    continue  # not a forward's output (a string, a batch, a value of an unresolved call)
                if not _reaches_backward(scope, loop, e) or _cut_by_callee(model, scope, loop, e):
                    continue  # a running value a helper returns (`total = add(total, loss)`): no backward walks it
                if not scope.carried_round(e, loop.node):
                    continue  # the call is not fed the output of the previous iteration of the backward's loop
                fresh = [d for d in scope.reaching(e.target, e)[0] if d is not e and loop.node in d.loops]
                if len(fresh) > 1 and all(scope.exclusive(a, b) for a in fresh for b in fresh if a is not b):
                    continue  # bound anew on each arm of an if/elif chain: only a fall-through no arm names carries it
                if _released(model, scope, loop, e.target):
                    continue
                yield Finding(
                    call,
                    f"`{e.target}` returned by `{code_of(call.func)}` is fed back into it on the next batch without "
                    f".detach(): backward reaches into the previous batch's freed graph ('Trying to backward through "
                    f"the graph a second time'); detach it at the top of the iteration",
                    _fix(scope, loop, e),
                )


def _carried_into_loss(model: FileModel, loop: Loop) -> Iterator[Finding]:
    """`prev = out` after the backward, and the next iteration's loss computed from `prev` (`(out - prev).pow(2)`):
    a value with its graph carried into the next iteration's loss, with nothing in the loop detaching it. Only a
    binding after the backward (it reaches the loss through the loop's head, a batch later); an accumulation is
    TL001's. Reported on the binding, without a fix."""
    scope = loop.scope
    seen: set[int] = set()
    first = min((b.seq for b in loop.of(EventKind.BACKWARD) if b.scope is scope.node), default=None)
    # the premise first: a plain binding after a backward, of a name also bound before the loop (the first
    # iteration reads that: `prev = None`), to a value with a graph
    if first is None or not any(
            e.kind is EventKind.ASSIGN and e.variant is AssignForm.PLAIN and not e.accumulates and e.seq > first
            and e.scope is scope.node and e.value is not None and e.target is not None and not e.contexts
            and any(loop.node not in a.loops for a in scope.assignments(e.target))
            and model.kinds.of(e.value, scope, e) is VKind.GRAPH for e in loop.events):
        return
    for b in loop.of(EventKind.BACKWARD):
        # `autograd.grad(loss, weights)` stops at what it is given (MAML's fast weights); a kept graph is not freed
        if b.scope is not scope.node or b.value is None or not isinstance(b.variant, BackwardVia) \
                or not b.variant.into_grad or b.retain_arg is not None or b.create_graph:
            continue
        # what the loss, or one of its terms, computes with directly (`(out - prev).pow(2)`)
        reads = [(n, e) for e in [b, *scope.summand_defs(b.value, b)] if e.value is not None and e.seq <= b.seq
                 for n in graph_operand_names(e.value)]
        # only a name whose every binding reaching the read is the carried one or made before the loop: one bound
        # anew earlier in the iteration as well is read carried only on a path the code may never take
        bound = [scope.reaching(n, e)[0] for n, e in reads]
        for d in (d for defs in bound if all(loop.node not in r.loops or r.seq > b.seq for r in defs) for d in defs):
            if (id(d) in seen or d.kind is not EventKind.ASSIGN or d.variant is not AssignForm.PLAIN or d.accumulates
                    or d.scope is not scope.node or d.target is None or d.value is None or loop.node not in d.loops
                    or d.seq < b.seq or d.contexts):
                continue
            seen.add(id(d))
            if model.kinds.of(d.value, scope, d) is not VKind.GRAPH or not scope.carried_round(d, loop.node) \
                    or _released(model, scope, loop, d.target):
                continue
            yield Finding(
                d.node,
                f"`{d.target}` keeps `{code_of(d.value)}` with its graph into the next iteration, whose loss is "
                f"computed from it: that backward reaches into this batch's graph, already freed ('Trying to "
                f"backward through the graph a second time'); keep `{code_of(d.value)}.detach()`",
            )


def _module_state(model: FileModel) -> Iterator[Finding]:
    """The state kept on the module: `out, self.hidden = self.rnn(x, self.hidden)` in `forward`, with nothing
    of the class (but `__init__`) and nothing else in the file resetting or detaching `self.hidden`, in a file
    that trains (a loop back-propagates): every call of the model feeds the previous batch's graph back in."""
    if not any(loop.backwards_into_grad() for loop in model.loops):
        return
    for scope in model.scopes:
        if scope.name != "forward" or not scope.class_name or not model.is_module_class(scope.class_name):
            continue
        for e in scope.events:
            if (e.kind is not EventKind.ASSIGN or e.scope is not scope.node or e.loops
                    or e.variant not in _REBINDING or not (e.target or "").startswith("self.")):
                continue
            call, state = e.value, e.target or ""
            if type(call) is not cst.Call or not _feeds_back(call, state) or _detaching(call):
                continue
            if not _forward_output(model, scope, e) or _reset_elsewhere(model, scope, state, e):
                continue
            yield Finding(
                call,
                f"`{state}` returned by `{code_of(call.func)}` is kept on the module and fed back into it by the next "
                f"call of the model, without .detach(): the next backward reaches into the previous batch's freed "
                f"graph ('Trying to backward through the graph a second time'); detach it before it is fed back",
                _fix_module_state(e, state),
            )


def _reset_elsewhere(model: FileModel, forward: Scope, state: str, at: Event) -> bool:
    """Anything but `__init__` that may detach or re-initialise `self.<state>`: another method of the class
    (`reset_hidden()`, called per batch from wherever), forward itself before the feeding call, or any
    assignment to `.<attr>` elsewhere in the file (`model.hidden = None`)."""
    attr = state.split(".", 1)[1]
    for other in model.scopes:
        if other.class_name != forward.class_name or other.name == "__init__":
            continue
        for e in other.events:
            if e.scope is not other.node or e.target != state or e is at:
                continue
            if e.kind is EventKind.RESET or (e.kind is EventKind.ASSIGN and other is not forward):
                return True
            if e.kind is EventKind.ASSIGN and e.value is not None and (
                    _detaching(e.value) or model.kinds.of_def(e, other).graph_free):
                return True
    return re.search(rf"(?<!self)\.{re.escape(attr)}\s*=(?!=)|\.{re.escape(attr)}\.detach_\(", model.text) is not None


def _fix_module_state(e: Event, state: str) -> Fix | None:
    """The state on the module starts as anything (None in `__init__`, or set from outside): the form that handles
    a tensor, a tuple and None."""
    return _detach_before(e, state, cst.Name("None"))


def _feeds_back(call: cst.Call, state: str) -> bool:
    """`model(x, hidden)` returning `hidden`: a forward call, not a wrapper (`model = DDP(model)`, `torch.compile`)."""
    func = dotted(call.func) or ""
    last = func.rsplit(".", 1)[-1]
    if not last or last[0].isupper() or func.startswith(("torch.", "nn.", "F.", "np.")):
        return False
    for arg in call.args:
        if dotted(arg.value) == state:
            return True
    return False


def _forward_output(model: FileModel, scope: Scope, e: Event) -> bool:
    """The state is (part of) what a forward returns: a graph tensor, or an item of the tuple a forward returns
    that is fed back into that same forward (`out, hidden = rnn(x, hidden)`)."""
    kind = model.kinds.of_def(e, scope)
    if kind is VKind.GRAPH:
        return True
    return (kind is VKind.UNKNOWN and e.variant in (AssignForm.UNPACK_FIRST, AssignForm.UNPACK) and e.value is not None
            and model.kinds.of(e.value, scope, e) is VKind.GRAPH)


def _reaches_backward(scope: Scope, loop: Loop, e: Event) -> bool:
    """Does a value the statement feeding the state back binds (`output` or `hidden` of `output, hidden =
    model(x, hidden)`) flow into a backward of the function? Only then does a backward walk into the graph the
    state carries from the previous batch."""
    bound = {a.target for a in loop.events if a.stmt is e.stmt and a.kind is EventKind.ASSIGN and a.target}
    return bool(bound & scope.backpropagated())


def _cut_by_callee(model: FileModel, scope: Scope, loop: Loop, e: Event) -> bool:
    """A function of the file (`loss, mi, ma = mine_loss(net, x, ma, rate)`) whose every `return` is a tuple in
    which each item the caller back-propagates reads the state's parameter only through a cut (`ma.detach()`,
    `.item()`, `.data`): the backward never walks into the graph the state carries from earlier iterations."""
    call = e.value
    if type(call) is not cst.Call or e.variant not in (AssignForm.UNPACK_FIRST, AssignForm.UNPACK):
        return False
    callee = model.resolve(scope, dotted(call.func) or "")
    if callee is None:
        return False
    params = list(callee.params)[1 if callee.class_name else 0:]
    state = next((params[i] for i, a in enumerate(call.args) if a.keyword is None and i < len(params)
                  and dotted(a.value) == e.target), None)
    targets = e.stmt.body[0].targets if type(e.stmt) is cst.SimpleStatementLine and type(e.stmt.body[0]) is cst.Assign else []
    if state is None or len(targets) != 1 or type(targets[0].target) is not cst.Tuple:
        return False
    names = [dotted(el.value) for el in targets[0].target.elements]
    trained = [i for i, n in enumerate(names) if n in scope.backpropagated() and n != e.target]
    returns = callee.own_returns()
    return bool(returns) and all(
        type(r.value) is cst.Tuple and len(r.value.elements) == len(names)
        and not any(_reads_uncut(callee, r.value.elements[i].value, r, state, 0) for i in trained) for r in returns)


def _reads_uncut(scope: Scope, expr: cst.CSTNode, at: Event, state: str, depth: int) -> bool:
    """Does `expr` read the parameter `state` other than through a cut, following the definitions it reads?"""
    if depth > 8:
        return True  # (not known: read)
    if type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in ("detach", "item") \
            or type(expr) is cst.Attribute and expr.attr.value == "data":
        return False
    if type(expr) is cst.Name:
        defs, entry = scope.reaching(expr.value, at)
        return entry and expr.value == state or any(
            d.value is not None and _reads_uncut(scope, d.value, d, state, depth + 1) for d in defs)
    return any(_reads_uncut(scope, c, at, state, depth) for c in children(expr))


def _released(model: FileModel, scope: Scope, loop: Loop, state: str) -> bool:
    """Anything in the loop that detaches or re-initialises the state: `del`, `detach_()` (of the state or of
    each of its tensors), or a rebinding to a value without graph (`h.detach()`, `h.data`, `None`, zeros)."""
    for e in loop.events:
        if e.scope is not scope.node or e.target != state:
            continue
        if e.kind is EventKind.RESET:
            return True
        if e.kind is EventKind.ASSIGN and e.value is not None and e.variant in _REBINDING:
            if _detaching(e.value) or model.kinds.of_def(e, scope).graph_free:
                return True
    return False


def _detaching(value: cst.BaseExpression) -> bool:
    text = code_of(value)
    return any(word in text for word in STATE_RESETS)


def _fix(scope: Scope, loop: Loop, e: Event) -> Fix | None:
    state = e.target
    inits = [a for a in scope.assignments(state or "") if loop.node not in a.loops and a.value is not None]
    return _detach_before(e, state or "", inits[-1].value if inits else None)


def _detach_before(e: Event, state: str, init: cst.BaseExpression | None) -> Fix | None:
    """Insert, before the statement that feeds `state` back, the detach that suits how it starts (`init`)."""
    if type(e.stmt) is not cst.SimpleStatementLine:
        return None
    if type(init) in (cst.Tuple, cst.List):
        line = f"{state} = tuple(h.detach() for h in {state})\n"
    elif type(init) is cst.Call and (dotted(init.func) or "").startswith("torch."):
        line = f"{state} = {state}.detach()\n"
    else:
        line = (f"{state} = {state}.detach() if hasattr({state}, 'detach') else tuple(h.detach() for h in {state})\n")
    if type(init) is cst.Name and init.value == "None":
        line = f"if {state} is not None:\n    {line}"
    return Fix("unsafe", f"detach `{state}` before feeding it back", (insert_before(e.stmt, line),))


def _noop_detach(model: FileModel) -> Iterator[Finding]:
    """A class that keeps state (`self.src = src`) and overrides its base's `detach()`, which cuts that state from
    the graph, with a body that does nothing: the training loop's `state.detach()` between truncated-BPTT chunks
    keeps the whole history. The base is read in the file, or through the project's lookup in another."""
    if NOOP_DETACH.search(model.text) is None:
        return
    for cls in model.classes.values():
        override = next((s for s in cls.body.body if type(s) is cst.FunctionDef and s.name.value == "detach"), None)
        if override is None or not does_nothing(code_of(override)) or not _keeps_state(cls):
            continue
        base = next((b for b in (dotted(a.value) for a in cls.bases) if b and _base_detaches(model, b)), None)
        if base is None:
            continue
        yield Finding(
            override,
            f"`{cls.name.value}.detach()` does nothing, while `{base}.detach()` it overrides cuts the kept state "
            f"from the graph: a training loop that calls `state.detach()` between batches keeps every previous "
            f"batch's graph (backward through freed buffers, or memory that grows); detach the state this class "
            f"keeps",
        )


def _keeps_state(cls: cst.ClassDef) -> bool:
    """A method of the class stores in an attribute of `self` a value that is not a constant (`self.src = src`)."""
    for stmt in cls.body.body:
        fn = parse_method(code_of(stmt)) if type(stmt) is cst.FunctionDef else None
        if fn is None or not fn.args.args:
            continue
        me = fn.args.args[0].arg
        for node in pyast.walk(fn):
            if type(node) is pyast.Assign and type(node.value) is not pyast.Constant and any(
                    type(t) is pyast.Attribute and type(t.value) is pyast.Name and t.value.id == me
                    for t in node.targets):
                return True
    return False


def _base_detaches(model: FileModel, base: str) -> bool:
    """The `detach()` the class overrides cuts its state from the graph: the base's in this file (or its own
    base's), or, for a base of another project file, as the project's lookup reads it."""
    seen: set[str] = set()
    while base in model.classes and base not in seen:
        seen.add(base)
        cls = model.classes[base]
        own = next((s for s in cls.body.body if type(s) is cst.FunctionDef and s.name.value == "detach"), None)
        if own is not None:
            fn = parse_method(code_of(own))
            return fn is not None and detaches_state(fn)
        base = next((b for b in (dotted(a.value) for a in cls.bases) if b), "")
    return base not in model.classes and model.project is not None and model.project.detaches(base, "detach")
