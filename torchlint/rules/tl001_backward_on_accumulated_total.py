"""TL001: backward() on a running total that is carried across iterations.

Each backward walks the graph of every earlier batch added into the total again: PyTorch stops with
"Trying to backward through the graph a second time", or, with retain_graph=True, early batches are counted again and again.
"""

from __future__ import annotations

import re
from typing import Iterator

import libcst as cst

from torchlint.analysis import AssignForm, Event, EventKind, FileModel, Loop
from torchlint.analysis.buffers import ATTRIBUTE_APPEND, unemptied_buffers
from torchlint.analysis.cuts import DISTRIBUTION_VALUE
from torchlint.analysis.exprs import argument_for, code_of, dotted, graph_operand_names, names_in, positional_params
from torchlint.analysis.vkind import VKind
from torchlint.diagnostic import Fix
from torchlint.fixes import insert_after, statements
from torchlint.rules.base import BACKWARD_CALL, LOOP, STEP_CALL, Finding, Rule
from torchlint.verify.signs import Sign
from torchlint.source.words import any_word
from torchlint.source.walk import walk

# `self.total += loss` / `self.total = self.total + loss` / `self.losses.append(loss)`: a total a per-step method
# keeps in `self`; or one in a name it declares `global` / `nonlocal`.
SELF_ADD = re.compile(r"self\.[\w.]+\s*(?:\+=|=\s*self\.)|self\.[\w.]+\.append\s*\(|"
                      + any_word({"global", "nonlocal"}, r"\s"))


class BackwardOnAccumulatedTotal(Rule):
    code = "TL001"
    name = "backward-on-accumulated-total"
    summary = "backward() on a loss total that keeps the graphs of earlier iterations"
    fix_safety = "unsafe"
    requires = (BACKWARD_CALL, (LOOP, SELF_ADD))  # no loop: a per-step method's attribute total
    scope_requires = (BACKWARD_CALL, LOOP)
    # (SELF_ADD is asked of the file only: its scan is dear); a function appending a distribution's value to an
    # object's list attribute may fill a buffer a training step of the file back-propagates (`buffers`)
    scope_alternatives = ((BACKWARD_CALL, STEP_CALL), (ATTRIBUTE_APPEND, DISTRIBUTION_VALUE))
    runtime_signs = (Sign.TOTAL_BACKPROPAGATED_AGAIN, Sign.BACKWARD_THROUGH_FREED_GRAPH)
    runtime_also = (Sign.SAVED_TENSOR_MODIFIED,)
    runtime_same_line = True
    fix_promise = "no backward of the fixed run goes through an earlier iteration's graph"
    fixture_errors = {"*": "Trying to backward through the graph a second time"}
    doc = """
## What it flags
A `.backward()` (or `accelerator.backward`, `scaler.scale(...).backward()`, `torch.autograd.backward`) whose loss
is — or is computed from — a running total that the loop keeps adding to (`total = total + loss`, `total += loss`,
`losses.append(loss)` then `sum(losses)` / `torch.stack(losses)`, a moving average `avg = 0.9 * avg + 0.1 * loss`),
when nothing rebinds the total between that backward and the next addition. A rebinding under the total's own
`is None` test (`if avg is None: avg = loss`), or under the test of the loop's first pass (`if i == 0:` with `i`
the index of `enumerate(loader)` or the target of `range(n)`), only seeds it: it runs once and drops no graph.
`total.data.zero_()` is not a reset: it zeroes the value and keeps the graph.

Also in a method run once per training step (it back-propagates outside any loop of its own and steps an
optimizer): a total kept in an attribute of `self` that `__init__` binds and the method adds to and
back-propagates (`self.total = self.total + loss`; `self.total.backward()`), or a name it declares `global` or
`nonlocal` that the module (the enclosing function) binds before the steps, or a list attribute it appends to
and back-propagates the stack of (`self.losses.append(loss)`; `torch.stack(self.losses).mean().backward()`), when
no method but `__init__` binds it again, or one that binds it and then calls the method in a loop that binds it no
more (`self.total = 0` once per epoch, then `for batch in loader: self.train_step(batch)`): each call's backward
re-walks every earlier call's graph. Reported without a fix. Likewise a method of the class that adds each call's
loss into such an attribute and returns it (`self.loss_sum += loss; return self.loss_sum`), whose result a loop
back-propagates (`out = self.compute(x, y)`; `out.backward()`; or `loss = crit(out, y)`, the forward of a loss
module of the file doing so; or a method of a helper object the loop hands each loss to, `total =
meter.add(loss)`), unless the loop binds the attribute again or builds the object anew in each pass.

Likewise a buffer kept across updates: a list attribute that `__init__` binds empty (`self.log_probs = []`, or
`self.saved_log_probs` of a module-level object, `policy = Policy()`), that a method or function of the file appends
values with a graph to (a policy's `dist.log_prob(action)`, `dist` a `torch.distributions` distribution built from a
model's output), and that a training step (back-propagating outside a loop of its own and stepping an optimizer)
reads into its loss, while no code of the file empties it (binds it again outside `__init__`, `del buf[:]`,
`.clear()`, `.pop(`, a slice assignment): REINFORCE's update that empties the rewards and forgets the
log-probabilities. From the second update on, the backward reaches the freed graphs of the first. No fix. (In a
file long enough to be pruned, a filler is read only where it appends a distribution's value.)

The total need not be a term of the loss: a loss computed from it (`(feat - ema).pow(2).sum()` with
`ema = 0.9 * ema + 0.1 * feat`, a bank of earlier outputs `torch.cat(bank[-8:])` with `bank.append(out)`) reaches
its graph all the same. Only what can carry a graph is followed: not a cut (`bank[i].detach()`), a shape or count
(`len(bank)`, `x.size(0)`) or a comparison; not the last item of a list (`losses[-1].backward()`: the loss
appended this iteration). Such a total is kept on purpose, so the message asks for `.detach()`ed values in it, and
no rebinding is offered.

## Why it is wrong
The total's autograd graph reaches back through every batch ever added to it. The first backward frees those
batches' saved tensors, so the next backward fails with

    RuntimeError: Trying to backward through the graph a second time (or directly access saved tensors after
    they have already been freed). Specify retain_graph=True if you need to backward through the graph a second time

Adding `retain_graph=True` silences the error but makes it worse: every backward adds the gradients of all
earlier batches again (the loss goes to nan), and memory grows without bound.

## Example
```python
total_loss = 0
for i, (x, y) in enumerate(loader):
    total_loss = total_loss + criterion(model(x), y)
    if (i + 1) % 8 == 0:
        total_loss.backward()          # TL001
        optimizer.step()
        optimizer.zero_grad()
        total_loss.data.zero_()        # does not drop the graph
```

## Fix
Rebind the total to its initial value right after the window's optimizer step (or backward), so each window
builds a fresh graph; a `total.data.zero_()` "reset" is replaced by that rebinding:

```python
        total_loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        total_loss = 0
```
The fix is **unsafe**: it changes what is computed (to the intended per-window gradient).

## Correct look-alikes (not flagged)
A total built fresh inside one iteration (`loss = 0` then the heads added, then one backward), a total reset right
after its backward, and a running total of `loss.item()` used for logging; a counter or index advanced each
iteration (`i += seq_len`) that the loss depends on: only totals whose added value carries a graph (its kind, see
docs/architecture.md) and that reach the backward as a term of the loss (reaching definitions) count. An added value
of unknown kind counts when it is the only way the back-propagated loss can carry a graph: everything else reaching
the backward as a term is known to hold none (`loss = 0` before the loop, then `loss += crit(head(x), y)` for each
`head` of a module list: a backward of a graph-free total would raise).

```python
running = 0.0
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    running += loss.item()          # a float for logging: no graph is carried
```

## Limits
The total must be a plain name, an attribute or a dict entry (`stats["loss"] += loss`). A total that a module's
`forward` keeps adding into (an auxiliary loss attribute) and the loop reads is not followed.
"""

    def check(self, model: FileModel) -> Iterator[Finding]:
        kinds = model.kinds
        for k in unemptied_buffers(model):
            yield Finding(k.backward.node, f"`{code_of(k.backward.node)}` back-propagates what `{k.buffer}` holds, a list "
                          f"`{k.filler}()` appends values with a graph to and that nothing empties: from the second "
                          f"update on, each backward reaches the items of earlier updates, whose graphs the first freed "
                          f"('Trying to backward through the graph a second time'); empty it after the step "
                          f"(`del {k.buffer}[:]`)")
        has_self_call = SELF_ADD.search(model.text) is not None  # else no method keeps a total it returns
        for loop in [*model.loops, *_self_total_bodies(model)]:
            accumulating = any(e.accumulates or e.kind is EventKind.APPEND for e in loop.events)
            returned = loop.node is not None and has_self_call and any(  # `l = self.compute(x)`, `crit(out, y)`:
                e.kind is EventKind.ASSIGN and type(e.value) is cst.Call for e in loop.events)  # a method may return
            # a total it keeps
            if not accumulating and not returned:
                continue  # no running total in this loop
            for backward in loop.of(EventKind.BACKWARD):
                scope = model.scope_of(backward)
                if scope is not loop.scope:
                    continue
                assert backward.value is not None  # a backward always has its value
                defs = scope.summand_defs(backward.value, backward)
                if returned:
                    yield from _returned_totals(model, scope, backward, defs)
                # A total the loss is computed from, not only one of its terms (`(feat - ema).pow(2).sum()`, a bank
                # of earlier outputs `torch.cat(bank)`): the backward reaches its graph all the same.
                terms, summed = {id(d) for d in defs}, {d.target for d in defs}
                operands = [d for d in scope.summand_defs(backward.value, backward, _graph_operands)
                            if id(d) not in terms] if accumulating and _other_totals(model, loop, summed) else []
                for acc in _accumulations(loop, defs + operands) if accumulating else ():
                    if acc.seq == backward.seq or _rebound_between(loop, backward, acc):
                        continue
                    if acc.kind is EventKind.APPEND and _last_item_only(acc.target or "", [backward, *defs, *operands]):
                        continue  # `losses[-1].backward()`: the item appended last, not the list's total
                    added = kinds.of(acc.value, scope, acc)
                    if added is not VKind.GRAPH and not (added is VKind.UNKNOWN and id(acc) in terms
                                                         and _graph_by_use(model, scope, defs, acc)):
                        continue  # nothing with a graph is added (a counter, a detached term: TL003's concern)
                    if not (_carried(scope, loop, acc) if loop.node is not None else _kept_by_self(model, scope, acc)):
                        continue
                    if id(acc) not in terms:  # kept on purpose (a memory bank, a moving average): keep it cut
                        yield Finding(
                            backward.node,
                            f"`{code_of(backward.node)}` back-propagates a loss computed from `{acc.target}`, which "
                            f"keeps `{code_of(acc.value or acc.node)}` with its graph across iterations: each backward reaches "
                            f"back into the graphs of earlier batches, already freed ('Trying to backward through "
                            f"the graph a second time'); keep `.detach()`ed values in `{acc.target}`",
                        )
                        break
                    yield Finding(
                        backward.node,
                        f"`{code_of(backward.node)}` back-propagates `{acc.target}`, a running total carried across "
                        f"iterations: each backward re-walks the graphs of earlier batches ('Trying to backward "
                        f"through the graph a second time'); rebind `{acc.target}` after the step",
                        _fix(loop, backward, acc) if loop.node is not None else None,
                    )
                    break


def _other_totals(model: FileModel, loop: Loop, summed: set[str | None]) -> bool:
    """The loop adds a value with a graph into a total that is not a term of the loss (the premise of following
    what the loss computes with)."""
    return any((e.accumulates or e.kind is EventKind.APPEND) and e.target not in summed and e.value is not None
               and e.scope is loop.scope.node and model.kinds.of(e.value, loop.scope, e) is VKind.GRAPH
               for e in loop.events)


def _last_item_only(name: str, events: list[Event]) -> bool:
    """Every read of the list `name` in the values of `events` is of its last item (`losses[-1]`)."""
    reads: list[bool] = []  # for each read: is it `name[-1]`

    def visit(n: cst.CSTNode) -> bool:  # True: do not walk into `n`
        if type(n) is cst.Subscript and dotted(n.value) == name:
            reads.append(len(n.slice) == 1 and type(n.slice[0].slice) is cst.Index
                         and code_of(n.slice[0].slice.value) == "-1")
            return True
        if type(n) is cst.Name and n.value == name:
            reads.append(False)
        return False

    for e in events:
        for _ in walk(e.value, prune=visit) if e.value is not None else ():
            pass
    return bool(reads) and all(reads)


def _graph_operands(expr: cst.BaseExpression, _at: Event) -> set[str]:
    return graph_operand_names(expr)


def _returned_totals(model: FileModel, scope, backward: Event, defs: list[Event]) -> Iterator[Finding]:
    """`l = self.compute(x, y)` (or `crit(out, y)`, the forward of a module of the file), then `l.backward()`, where
    the method adds each call's loss into an attribute of `self` and returns it (`self.loss_sum += loss; return
    self.loss_sum`), the attribute kept across calls
    (`_kept_by_self`): each backward re-walks every earlier call's graph. Reported without a fix."""
    for d in defs:
        if d.kind is not EventKind.ASSIGN or d.variant is not AssignForm.PLAIN or type(d.value) is not cst.Call:
            continue
        func = dotted(d.value.func) or ""
        callee = (model.kinds.callee(scope, func) or model.resolve(scope, f"{func}.forward")) if func else None
        rets = callee.own_returns() if callee is not None else []
        totals = {dotted(r.value) for r in rets}
        total = totals.pop() if len(totals) == 1 else None
        if callee is None or not rets or not total or not total.startswith("self.") or total.count(".") != 1:
            continue
        receiver = func.rpartition(".")[0]
        if receiver and receiver != "self" and any(
                a.rebinds and (backward.loops[-1] in a.loops if backward.loops else True)
                for a in scope.assignments(receiver)):
            continue  # `meter = Meter()` in each pass (or in the per-step function): a total of this pass only
        adds = [e for e in callee.events if e.scope is callee.node and e.target == total and e.accumulates
                and not e.loops and e.value is not None]
        if adds and (VKind.GRAPH in (model.kinds.of(adds[0].value, callee, adds[0]), model.kinds.of(d.value, scope, d))
                     or _graph_given(model, scope, d, callee, adds[0])) \
                and _kept_by_self(model, callee, adds[0]):  # (a graph added, or returned at this call, given its arguments)
            yield Finding(
                backward.node,
                f"`{code_of(backward.node)}` back-propagates what `{func}()` returns, `{total}`, a running total it "
                f"adds every call's loss into: each backward re-walks the graphs of earlier batches ('Trying to "
                f"backward through the graph a second time'); return the loss itself, or rebind `{total}` each step",
            )
            return


def _graph_given(model: FileModel, scope, d: Event, callee, add: Event) -> bool:
    """The call `d` binds hands the method, for a parameter its addition reads, a value with a graph
    (`total = meter.add(criterion(out, y))` for `def add(self, v): self.sum = self.sum + v`)."""
    assert type(d.value) is cst.Call
    params = positional_params(callee.node)
    if callee.class_name is not None:
        params = params[1:]  # `self`, bound by the object the method is called on
    read = names_in(add.value) if add.value is not None else set()
    return any((arg := argument_for(d.value, params, p)) is not None and model.kinds.of(arg, scope, d) is VKind.GRAPH
               for p in params if p in read)


def _graph_by_use(model: FileModel, scope, defs: list[Event], acc: Event) -> bool:
    """The backward's loss can carry a graph only through what is added into the total: every other definition that
    reaches it as a term is known to hold none (`loss = 0` before the loop, a count it is divided by), so the added
    value of unknown origin (`loss += crit(head(x), y)` for `head` in a module list) carries one, whoever built it.
    Not for a list appended to: a backward of one of its items (`losses[-1].backward()`) needs no total."""
    if acc.kind is EventKind.APPEND:
        return False
    return all(d.target == acc.target and (d.accumulates or d.kind is EventKind.APPEND)
               or d.value is not None and model.kinds.of_def(d, scope).graph_free for d in defs)


def _accumulations(loop: Loop, defs: list[Event]) -> list[Event]:
    """The accumulations (`t += x`, `t = t + x`, `t.append(x)`) inside the loop among the definitions that flow
    into the backward, first one per total."""
    seen: set[str] = set()
    out = []
    for e in sorted(defs, key=lambda d: d.seq):
        if e.target in seen or e.value is None or (e.loops if loop.node is None else loop.node not in e.loops):
            continue
        if not (e.accumulates or e.kind is EventKind.APPEND):
            continue
        seen.add(e.target or "")
        out.append(e)
    return out


def _carried(scope, loop: Loop, acc: Event) -> bool:
    """What the total held in the previous iteration is still in it at this accumulation."""
    if acc.kind is EventKind.APPEND:
        defs, entry = scope.reaching(acc.target or "", acc)
        return entry or any(not scope.flow.in_loop(scope.flow_node(d), loop.node) for d in defs if scope.flow_node(d) is not None)
    defs, _ = scope.reaching(acc.target or "", acc)
    return any(d.accumulates for d in defs) or any(
        loop.node not in d.loops for d in defs
    ) and not any(d.rebinds and loop.node in d.loops and not d.seeds for d in defs)


def _self_total_bodies(model: FileModel) -> list[Loop]:
    """The per-step functions (`FileModel.step_bodies`) that add into an attribute of `self`, or into a name they
    declare `global` or `nonlocal`, outside any loop of their own."""
    shares = "global" in model.text or "nonlocal" in model.text
    if "self." not in model.text and not shares:
        return []
    return [b for b in model.step_bodies()
            if any((e.accumulates or e.kind is EventKind.APPEND) and not e.loops and e.target is not None
                   and (e.target.startswith("self.") or shares and e.target in b.scope.declared_shared())
                   for e in b.events)]


def _kept_by_self(model: FileModel, scope, acc: Event) -> bool:
    """In a per-step method, the attribute total `acc` adds to holds what the previous call left in it: nothing in
    the method binds it before this addition, `__init__` of the same class binds it, and no other method does."""
    target = acc.target or ""
    shared = not target.startswith("self.")
    if shared and target not in scope.declared_shared():
        return False
    defs, entry = scope.reaching(target, acc)
    if not entry or any(d.rebinds and not d.accumulates for d in defs):
        return False
    if shared:
        return _kept_across_calls(model, scope, target)
    initialised = False
    for other in model.scopes:
        if other.class_name != scope.class_name or other is scope:
            continue
        binds = [e for e in other.events
                 if e.kind is EventKind.ASSIGN and e.target == target and e.rebinds and not e.accumulates]
        if binds and other.name != "__init__" and not _set_before_running(other, binds, scope):
            return False  # reset by another method (a per-epoch hook, a `reset()` the caller may run each step)
        initialised = initialised or bool(binds)
    return initialised


def _kept_across_calls(model: FileModel, scope, target: str) -> bool:
    """A name the step function declares `global` (`nonlocal`) is bound by the module (the enclosing function) before
    any loop, or before the loop that calls the function, and by nothing that may run between two steps."""
    initialised = False
    for other in model.scopes:
        if other is scope:
            continue
        binds = [e for e in other.events if e.kind is EventKind.ASSIGN and e.target == target and e.rebinds
                 and not e.accumulates and e.scope is other.node]
        if not binds:
            continue
        if not (other is model.scopes[0] and not any(b.loops for b in binds)) and not _set_before_running(
                other, binds, scope):
            return False
        initialised = True
    return initialised


def _set_before_running(other, binds: list[Event], method) -> bool:
    """`other` binds the total, then calls `method` on `self` in a loop that holds no binding of it (`self.total =
    0`, then `for batch in loader: self.train_step(batch)`, both perhaps inside an epoch loop): the total starts once
    per run of that loop, and every step of it adds to what the previous step left."""
    if any(b.scope is not other.node for b in binds):
        return False
    target, bound = binds[0].target, False
    for e in other.raw:  # in program order
        bound = bound or (e.kind is EventKind.ASSIGN and e.target == target)
        if (bound and e.kind is EventKind.LOCAL_CALL and e.loops and e.callee in (f"self.{method.name}", method.name.rsplit(".", 1)[-1])
                and all(e.loops[-1] not in b.loops for b in binds)):
            return True
    return False


def _rebound_between(loop: Loop, backward: Event, acc: Event) -> bool:
    return any(e.target == acc.target and e.rebinds and not e.seeds for e in loop.between(backward, acc))


def _initial_value(loop: Loop, acc: Event) -> cst.BaseExpression | None:
    """What the total is set to before the loop (`total = 0`, `losses = []`), if that is a plain literal/call."""
    scope = loop.scope
    inits = [e for e in scope.assignments(acc.target or "") if e.rebinds and e.seq < acc.seq and e.value is not None]
    if not inits:
        return cst.List([]) if acc.kind is EventKind.APPEND else cst.Integer("0")
    value = inits[-1].value
    if type(value) is cst.Integer or type(value) is cst.Float or type(value) is cst.List or type(value) is cst.Call:
        return value.deep_clone()
    return None


def _fix(loop: Loop, backward: Event, acc: Event) -> Fix | None:
    value = _initial_value(loop, acc)
    target = acc.target
    if value is None or target is None:
        return None
    rebind = statements(f"{target} = {code_of(value)}\n")[0]
    # Replace a `total.data.zero_()` pseudo-reset in the window with the rebinding.
    for e in loop.between(backward, acc):
        if e.kind is EventKind.FAKE_RESET and e.target == target and type(e.stmt) is cst.SimpleStatementLine:
            if len(e.stmt.body) == 1:
                new = e.stmt.with_changes(body=[rebind.body[0]])  # type: ignore[attr-defined]  # `x = v` is a simple line
                return Fix("unsafe", f"rebind `{target}` instead of zeroing its data", ((e.stmt, new),))
    # Otherwise rebind after the last step / zero_grad that follows the backward in the same block.
    anchor = backward
    for e in loop.between(backward, acc):
        if e.kind in (EventKind.STEP, EventKind.ZERO_GRAD, EventKind.SCALER_UPDATE) and e.guards == backward.guards:
            if e.stmt is not backward.stmt and e.scope is backward.scope:
                anchor = e
    if type(anchor.stmt) is not cst.SimpleStatementLine:
        return None
    return Fix(
        "unsafe",
        f"rebind `{target}` after the step so each window starts a fresh graph",
        (insert_after(anchor.stmt, f"{target} = {code_of(value)}\n"),),
    )
