"""TL007: a loss (or model output) still attached to its graph is kept across iterations only for logging.

Every iteration's graph stays alive through the running total or list: memory grows each step until
"CUDA out of memory" (the PyTorch FAQ's "don't accumulate history across your training loop").
"""

from __future__ import annotations

import re
from typing import Iterator

import libcst as cst

from torchlint.analysis import AssignForm, BackwardVia, Event, EventKind, FileModel, Loop, Scope
from torchlint.analysis.bindings import bounded, runs_while_kept
from torchlint.analysis.cuts import DEF_FORWARD
from torchlint.analysis.engines import kept_by_forward, outputs_kept
from torchlint.analysis.evaluations import kept_by_passes, summed_by_evaluations
from torchlint.analysis.handing import escapes, handed_on
from torchlint.analysis.kept_callers import kept_for_callers, stored_for_callers
from torchlint.analysis.keeping import (
    SET_ITEM, kept_by_objects, kept_by_steps, one_step_per_call, summed_by_helper, term_of_backpropagated,
)
from torchlint.analysis.terms import log_probability
from torchlint.analysis.semantics import DISPLAY
from torchlint.analysis.containers import over_entries
from torchlint.analysis.exprs import code_of, dotted, summand_names
from torchlint.source.walk import walk
from torchlint.analysis.vkind import VKind
from torchlint.diagnostic import Fix
from torchlint.fixes import parenthesized
from torchlint.source.lines import split_lines
from torchlint.rules.base import BACKWARD_CALL, DEF_TRAINING_STEP, LOOP, STEP_CALL, TRAINING_STEP_TEXT, Finding, Rule
from torchlint.verify.signs import Sign
from torchlint.source.words import word_start


# The most graphs a container may keep, counted from constant trip counts, before it is a leak rather than a
# test's mini training run that returns or checks its losses.
FEW_ITERATIONS = 30
_BACKWARD_TEXT = re.compile(r"backward\s*\(")  # what `project_callers` reads a helper file's backward by


ITERATION_COMPLETED = re.compile(word_start("ITERATION_COMPLETED") + r"\b")  # ignite's event
# `self.acts.append(h)`, `self.reg += r`, `self.reg = self.reg + r` in a module's `forward` (`engines.kept_by_forward`)
FORWARD_KEEPS = re.compile(r"self\.\w+\s*(?:\.\s*append\s*\(|\+=)|self\.(\w+)\s*=\s*self\.\1\s*\+")
STATE_OUTPUT = re.compile(r"\.state\.output\b")  # what ignite's process function returned, read by a handler


class AttachedLoggingTotal(Rule):
    code = "TL007"
    name = "attached-logging-total"
    summary = "a graph-attached loss kept across iterations only for logging (memory grows every step)"
    fix_safety = "safe"
    # A loop that back-propagates, or Lightning's batch loop around `training_step` (its backward is Lightning's).
    # Or ignite's handler of ITERATION_COMPLETED keeping `engine.state.output` (the process function's return). Or a
    # function that back-propagates and steps, run once per step by a loop of another file (`agent.update(batch)`).
    requires = ((BACKWARD_CALL, TRAINING_STEP_TEXT), (LOOP, TRAINING_STEP_TEXT, ITERATION_COMPLETED, STEP_CALL))
    scope_requires = (BACKWARD_CALL, LOOP)
    scope_alternatives = ((DEF_TRAINING_STEP,), (STATE_OUTPUT,), (BACKWARD_CALL, STEP_CALL), (DEF_FORWARD, FORWARD_KEEPS))
    runtime_signs = (Sign.GRAPH_GROWS,)
    fix_promise = "the graph held by the script's variables no longer grows from step to step"
    fixture_keeps_training = True
    doc = """
## What it flags
In a training loop (one that calls backward), adding a loss that is still attached to the autograd graph into
a running total, dict entry or list that outlives the iteration and is never back-propagated:
`running_loss += loss`, `stats["loss"] = stats["loss"] + loss`, `epoch_loss += loss / n`, `history.append(loss)`,
`total.add_(loss)` (in place), `total, n = total + loss * len(x), n + len(x)` (each name bound to its own item),
`outputs.append({"loss": loss, "n": len(y)})` (a record that holds the loss), `total += train_step(batch)` (a
helper of the file that returns its attached loss), `score += dice(out, y)` (a helper, of the file or of another
project file, that returns a value computed from its argument with the argument's graph: `passing` in
docs/architecture.md), `running += model.compute_loss(x, y)` (a method of a module
class of the file whose loss comes from `self(x)` or a submodule assigned in `__init__`), `logs[name] += part`
over `parts.items()` or `.values()` of a dict the loop builds (a literal, or entries stored one by one), or of one
whose values it sums and back-propagates (`losses = model(x, y)`; `sum(losses.values()).backward()`) or one entry of
which it back-propagates (`out["loss"].backward()`, then every entry unfiltered: no string comparison in the loop;
no fix, since such entries may be plain numbers). A tensor grown by
concatenation keeps every part too (`seen = torch.cat([seen, out])`, `torch.vstack`), and so does a total whose
conditional keeps adding (`shown = loss if shown is None else 0.98 * shown + 0.02 * loss`; no fix there: the
other arm keeps a graph too). A total reset only every k-th iteration (`if i % log_every == 0: print(total);
total = 0`) keeps k iterations' graphs between resets: it is reported, unless k is a constant of at most 30 or the
window an optimizer steps in (the step's own divisor, or one named as accumulation steps: one step's micro-batches).
A loss computed on one branch with grad and on another under `no_grad` (`if cross_valid: with torch.no_grad(): out
= model(x)` / `else: out = model(x)`) carries its graph on the training branch, so its total keeps graphs there; a
function whose `no_grad` block is chosen by a parameter returns a graph only where the caller leaves that parameter
at its default (`self.run_epoch()`, not `self.run_epoch(cross_valid=True)`). A plain function of the file that
appends one parameter to another (`def log_loss(history, loss): history.append(loss)`), or adds each entry of one
into an item of another (`def accumulate(stats, parts): for k, v in parts.items(): stats[k] += v`, or
`history[k].append(v)`), keeps the attached value in the container a loop hands it (for a dict: one whose every
entry carries a graph), when that container is bound before the loop, never emptied in it, and read into no other
value (`torch.stack(log_probs)` for a loss is REINFORCE's buffer, not a record). A container the function is given
(the caller's, or a mutable default that every call shares: `def train(..., loss_list=[])`) outlives its loop too. A
function of the file every
return of which adds up its parameters as given (`def accumulate(total, value): return total + value`, an average
`beta * avg + (1 - beta) * new`, through its own bindings) and is handed the total itself (`running =
accumulate(running, loss)`) adds the loss into the total as `running += loss` would (no fix: what else the function
does with the value is its own). A module class's `forward` that appends a value carrying a graph to an attribute
of `self` (`self.maps.append(h)`: activations kept for a plot) or adds one into it (`self.l1_seen += h.abs().mean()`),
in a file that builds the class and back-propagates in a loop: each call, once per training step, leaves that step's
graph in the module. Not under a guard (`if self.store:`) or `no_grad`, nor an attribute bound again by any method
but `__init__`, emptied anywhere in the file (`net.maps.clear()`, `net.maps = []`), or back-propagated (auxiliary
losses the loop adds into its loss). No fix. An ignite handler of
`Events.ITERATION_COMPLETED` (decorated with `@trainer.on(...)` or given to `add_event_handler`) that appends
`engine.state.output` to a name it does not bind keeps what the process function returns each iteration: reported
when that return carries a graph (`return loss` after `loss.backward()`), not when it is `loss.item()`.

A value is also known by its use: one back-propagated in the same iteration (`loss.backward()`,
`scaler.scale(loss).backward()`, `accelerator.backward(loss)`, `manual_backward`, an object's `method.backward(loss)`)
carries a graph there, whoever built it (a method the analysis cannot resolve, an element of a tuple a function
returned). So is a term of it, followed through arithmetic and sums: `total += loss / len(loader)`,
`history.append(parts)` after `sum(parts).backward()`, `log[step] = out.loss` after `accelerator.backward(out.loss)`.
A list whose last item is back-propagated (`history.append(f(terms))`, then `history[-1].backward()`) keeps
every earlier item's graph, which no backward reads again; not when the loop takes items out (`pop`, `clear`,
`del`), the list is a `deque`, or a backward reads more than the last item.

An object of one of the file's classes, or of a class of another file of the project, that outlives the iteration
(`self` too: `self.record(loss)`; a function of the file that adds its parameter into a `global` or `nonlocal`
name, too) keeps what its method adds into an attribute of `self`: `meter.update(loss, n)` with `def update(self,
val, n): self.sum += val * n` (or `self.values.append(val)`, or `for i, v in enumerate(values): self.sums[i] += v`
given `[loss_a, loss_b]`, or `self.logs.setdefault(k, []).append(v)` over `**values` given by keyword, or by handing
it to another method of the class that does: `collect(loss)` calling `self.update("loss", loss)`), and `stats["loss"] =
loss` where the class's `__setitem__` appends its value to a list of `self`. So does a meter held by `self` in a
method that back-propagates and steps once per call (a runner's `train_step`, called by a loop elsewhere), and an
element of a dict or list the function fills with instances of one class of the file (`meters =
OrderedDict([(k, AverageMeter(k)) for k in names])`, then `meters[k].update(v, n)`). A part of a loss is known by the
loss's backward when a function of the file returns both and the part is a term of the loss in every `return`
(`total, part = self.losses(x)`, `total.backward()`, then `self.meter.update([part])`).
Reported in the class's own file too, which holds no backward (a metrics module), when a method adds a parameter
named like a loss into `self` (or into an attribute named like one: `self.train_losses[key] += loss[key]`) and a
file of the project near it calls the method in a loop that back-propagates what it passes or an item of it
(`loss["total"].backward()`, then `metrics.tracker.update_train_losses(loss)`), on an object bound outside that
loop, not under `no_grad`; the method is found by its name in the files that import its module (the receiver's
class is not resolved; an object the caller builds from another class is not it). A value back-propagated whole
and given to an object the caller builds from the class by name is the caller's finding, not the method's.
Likewise a function or method of a file with no backward that stores a loss into an item of a parameter
(`stat_col["loss"] = loss`), the loss returned by it (alone or in a tuple) or given to it, when the project's files
near it call it in a loop that back-propagates that loss and hand, for that parameter, an object outliving the loop
(`self.stats`, a name bound before it) that every such call site binds to an instance of the same class of a
project file whose `__setitem__` keeps its value (appends it to a list of `self`). The caller's binding is read in
its own file, or, for `self.stats` bound nowhere there, in the class its class derives from in another project
file; a method its class inherits from the helper's class (through up to two project files) is called on `self`.
Not reported: call sites that hand different classes or unknown objects, a collector whose `__setitem__` overwrites
(`self.values[key] = value`), an object the loop binds afresh, a loss read with `.item()` first, and an object of a
class of the file that keeps the value for a backward of its own: a method of the class that back-propagates reads
the attribute (`update()` back-propagating `torch.stack(self.log_probs)`: REINFORCE's episode buffer) or empties it,
itself or through a method of the class it calls (`self.values.clear()` after each update: an n-step rollout). Which
loop back-propagates is read per function, not per loop (a function with two loops counts both).

The loop that keeps may be an epoch loop around a function that trains (a run of its own): `a, b =
run_epoch(...)` then `curve.append(b)`, where the run returns a total of attached losses (or the epoch's loss computed
with grad after its batches), also where the function holding that loop returns the curve. A function of another
file of the project, or of the file itself, is known by what it returns, per element of a returned tuple: its
kinds, and a value it back-propagates before returning it (`loss.backward(); opt.step(); return loss`, or
`return policy, loss, steps`) carries a graph. So does the
field of a named tuple (`collections.namedtuple`, `typing.NamedTuple`, defined in that file) that the function
back-propagates before returning the tuple by name (`out = self.forward(x)`, `out.total.backward()`,
`return out`): the caller's item at that field's position, unpacked at once or from the name it bound first
(`res = runner.step(x)`, then `a, total = res`). Its other fields are not known that way, nor `res.total` read by
attribute in the caller.

A function run once per training step (one that back-propagates and steps, called by a loop; a LightningModule's
`training_step`, whose loss Lightning back-propagates; a transformers or trl `Trainer` subclass's `compute_loss` and
`training_step`, which the Trainer's loop runs every step) keeps what it adds into an attribute of `self`, or a name
it declares `global` or `nonlocal`: `self.total += loss`, `self.outputs.append(loss)`, and a record appended there
that holds an attached value (`self.outs.append({"pred": out, "y": y})`, emptied only by an epoch-end hook: an
epoch's graphs; the safe fix detaches the attached values of the record). So does a list that is an
entry of a container outliving the loop (`hist["loss"].append(loss)` over `defaultdict(list)`,
`hist.setdefault("loss", []).append(loss)`). A `deque(maxlen=k)` keeps at most `k`, as does a list the loop takes items
out of (`del window[0]`, `window.pop(0)`): not reported.

The values of a dict a function returns are known by key, as a tuple's items are by position: `out["loss"]`
after `out = fit_step(...)` where `fit_step` returns `{"loss": loss, "count": n}` (the loss, not the count), and
the values of `parts.items()` where every value of the returned dict carries a graph (`return total, {"ce": ce,
"kl": kl}`), through the helpers that hand the dict on. Calling an object runs its class's `__call__`; the class is
known from its constructor, or from the return annotation of the function that makes it (`self.loss_fn =
create_loss(cfg)` with `def create_loss(cfg) -> DualLoss:`), in the file or in another file of the project (a
plain name or a string; `Optional[...]` and a factory without annotation are not followed). A dict whose values
differ in kind (a loss and a count) tells nothing about a value of its `.items()`.

An evaluation function that a training loop runs with grad enabled (not under `no_grad`, no `set_grad_enabled` in
it or its caller) and that sums attached losses over the whole pass of its own loop into a total it returns attached
(`total += crit(model(x), y)`; `return total / n`): the total holds the graph of every batch of the pass, and the
caller only keeps its value (`score = evaluate(...)`, or `print(evaluate(...))`; it never back-propagates it). Not
a total bound afresh per batch, returned as a number (`total.item() / n`), nor in a function that back-propagates or steps.
Likewise a loop with no backward or step of its own in code that trains (a function, or the module, that
back-propagates elsewhere, so grad is on unless `no_grad` says otherwise): the validation loop beside an epoch's
batch loop that appends or adds each batch's attached value, computed from a module's forward, into a list or
total bound before it (`val_losses.append(crit(model(x), y))`), which no backward reads: it holds the graph of the
whole pass. Not a loop inside an iteration that back-propagates (one step's heads or micro-batches), nor a pass over
the parameters, nor one under `no_grad` or in a function that switches grad off. No fix.

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
A container that keeps at most 30 graphs, counted from constant trip counts (`for _ in range(5)`; a test's
mini-run over `range(steps)` with `steps=20` as the parameter's default and in every call of the file, or over
`range(STEPS)` with a module constant; the loops it outlives multiply, one over the optimizers it steps counts once
for a list the function binds: one per critic of an ensemble) is not reported. A default is trusted as the file sees it:
a caller in another file may pass more. Nor is a total bound afresh for each batch and added to by an inner loop
that repeats work on that batch (`for _ in range(n_critic)`, whose target the body never reads and which draws no
`next(...)`): it keeps one batch's repetitions, whatever their number. It reports only values the analysis knows to
carry a graph: the output of a model or criterion, arithmetic on one, a loss handed in as a parameter, a value
back-propagated in the iteration or a term of one. A value from a call it cannot resolve is otherwise left alone
(of another file's class, only methods the project's files define are read, not a library's; a class whose file
holds no `self.x +=` or `.append(` keeps nothing; the flake8 plugin and the language server, which read only
cached exports, do not read other files' classes and loss functions for this); a sibling of the loss in an unpacked result (`loss, sample =
trainer.compute(batch)`) is not known by the loss's backward unless a function of the file returns it as a term of
the loss, and a backward of an inner loop does not make what the outer loop keeps known (the total is judged where
it grows). A total returned by a function that back-propagates nothing itself, and whose loop does not train through a
helper (back-propagate and step), is left alone (its caller may back-propagate it); gradients taken with
`torch.autograd.grad(..., create_graph=True)` are no backward there (an unrolled inner optimizer returning its
differentiable iterates). A total rebound to a value without a graph (`total =
total.detach().cpu().numpy()`) before it is handed to a call is not handed on attached. A total added into on
exclusive branches (`if use_crf: running += nll` / `else: running += loss`) is reported once per branch: the fix must
reach each.

## Correct look-alikes (not flagged)
Values read as numbers: `x.item() if learned else x` (the plain arm runs where `x` is one), `w * loss.item()` with
`loss *= w` back-propagated (a shared weight is no graph), a reward summed that weighs a log-probability in the loss
(`-torch.log(p) * reward`); an item stored into an ndarray (`np.zeros(n)`); `stats += loss` on a dict (a TypeError). A
total that is later back-propagated (correct chunked accumulation, or TL001); values kept to be back-propagated later
(a pipeline schedule's queue of micro-batch outputs, each popped into a helper that runs the backward): the container,
its items or a value computed from them handed to a helper of the file that back-propagates, or to a call the analysis
cannot follow (what it does with them is not known); a backward that reads them is judged by the definitions reaching
it (an epoch's mean stored into `out`, which each batch rebinds to the model's output before `out["loss"].backward()`,
does not reach it). Calls known not to back-propagate what they are given are followed past: a reader (builtins,
display, numerics, torch's functions, named in full through the file's imports: `dist.all_reduce(total)` with `import
torch.distributed as dist`, a collective working in place; a figure's plotting methods, `ax.plot(history)`;
`torch.save`, `pickle.dump`), a scheduler's `step(metric)` (a name whose role is a scheduler, of no class of the
project that acts), and a method of a class of the file or of another project file that neither back-propagates the
value, nor hands it to a call not followed, nor stores it for another method of its class that may
(`board.record("total", total)`); the object's class is known from its constructor, or from the default or annotation
of the parameter an attribute of `self` is bound to (`def __init__(self, hooks=Hooks()): self.hooks = hooks`), or, for
an object of no known class, by the method's name when every class of the file defining a method of that name is such
a one (`monitor.check(net, history)` with the file's `Monitor.check` plotting it). A method meant to be overridden is
judged by the class the code names. Anything under `torch.no_grad()` / `inference_mode()`; `loss.item()` / `.detach()`
already; a model's forward that collects features of one call in a list; loops without a backward (evaluation code); a
list of the totals an inner loop summed (reported once, where the sum grows); an object built afresh in each call of a
method that steps; the micro-batch outputs of one step, kept in a list the batch loop binds afresh (it never holds
more than one step's graphs), or in a local of a function summed over its one loop of micro-batches with the optimizer
stepped once after it (dropped when the call returns), also when the function steps nothing and a loop that calls
it steps after the call (`loss = self.get_loss(batch)`, then `optimizer.step()`; every call of it in a loop); a
dict entry with a literal key replaced at every iteration
(`loss_dict["d"] = d_loss`: the latest value only; not one that reads the entry back, `log["loss"] = log.get("loss",
0) + loss`, which adds to it); a meter given `loss.item()`, a method that converts what it is given
(`self.values.append(float(val))`) or only replaces an attribute (`self.last = val`), a meter bound afresh in each
iteration; the slots of a tensor the function allocates before its loops (`q = torch.zeros_like(r)`), filled over a
counted loop (`for t in range(T): q[:, t] = q_t`): bounded by its shape and dropped when the call returns (filled over
the batches of a loader, it is reported).

```python
running_loss = 0.0
history = []
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    running_loss += loss.item()
    history.append(loss.detach())
```
"""

    def check(self, model: FileModel) -> Iterator[Finding]:
        yield from self._events(model)
        seen: set[int] = set()
        for loop in [*model.loops, *model.step_bodies()]:
            for k in kept_by_objects(model, loop) if loop.of(EventKind.BACKWARD) else ():
                if id(k.node) not in seen:
                    seen.add(id(k.node))
                    what = "appends it to a list of" if k.method.endswith(SET_ITEM) else "adds it into an attribute of an element of" \
                        if "[...]" in k.method else "adds it into an attribute of" if "." in k.method else "adds it into"
                    held = (f"the entries of `{code_of(k.value)}` are still attached to their graphs", "them ") \
                        if k.entries else (f"`{code_of(k.value)}` is still attached to its graph", "it ")
                    yield Finding(k.node, f"{held[0]} and `{k.method}` {what.replace('it ', held[1], 1)} `{k.obj}`, which "
                                  f"outlives the iteration: every step's graph stays alive and memory grows; " + (
                                      "pass them as numbers (`.item()`)" if k.entries else
                                      f"pass `{code_of(parenthesized(k.value))}.item()` or `.detach()`"), None)
        for summed in summed_by_evaluations(model):
            yield Finding(summed.event.node, f"`{code_of(summed.value)}` is still attached to its graph and is summed "
                          f"into `{summed.event.target}` over every batch of `{summed.scope.name}()`, which "
                          f"`{summed.caller.name}()` runs with grad enabled during training: the total holds the graph of "
                          f"the whole pass and memory grows with it; run it under `torch.no_grad()` or add `.item()`")
        for run in kept_by_passes(model):
            target = run.event.target
            yield Finding(run.event.node, f"`{code_of(run.value)}` is still attached to its graph and is kept in `{target}` "
                          f"over every batch of this loop, which runs with grad enabled (no `torch.no_grad()` around it, in "
                          f"code that back-propagates `{code_of(run.backprop)}`): `{target}` holds the graph of the whole "
                          f"pass and memory grows with it; run the loop under `torch.no_grad()` or keep `.item()`")
        for forward, e in kept_by_forward(model) if FORWARD_KEEPS.search(model.text) else ():
            what = "appends" if e.kind is EventKind.APPEND else "adds"
            assert e.value is not None  # kept_by_forward: each with a value
            yield Finding(_small_statement(e) if e.kind is EventKind.ASSIGN else e.node,
                          f"`{forward.class_name}.forward` {what} `{code_of(e.value)}`, still attached to its graph, to `{e.target}` "
                          f"on every call, and nothing empties it: the model keeps every training step's graph and "
                          f"memory grows; keep `.detach()`ed values (or empty `{e.target}` each step)")
        for handler, process, stmt in outputs_kept(model):
            if id(stmt) not in seen and model.kinds.returns(process) is VKind.GRAPH:
                seen.add(id(stmt))
                fn, pf = handler.name.rsplit(".", 1)[-1], process.name.rsplit(".", 1)[-1]
                yield Finding(stmt, f"`{fn}()` runs after every iteration of the engine and keeps its `state.output`, "
                              f"what `{pf}()` returns, still attached to its graph: every iteration's graph stays "
                              f"alive and memory grows; return `.item()` from `{pf}()`, or keep `.item()` of the output")
        displayed: dict[str, bool] = {}
        for body, e in kept_by_steps(model):
            scope, value = body.scope, e.value
            assert value is not None and e.target is not None  # kept_by_steps: each with both
            kind = model.kinds.of(value, scope, e)
            record = _attached_items(model, scope, e) if kind is not VKind.GRAPH and e.kind is EventKind.APPEND else []
            if id(e.node) in seen or (kind is not VKind.GRAPH and not record) or bounded(
                    model, scope, e.target) or escapes(model, body, e.target) or handed_on(model, scope, e.target):
                continue
            seen.add(id(e.node))
            if record:  # `self.outs.append({"pred": out, "y": y})`: the record holds the graph
                yield Finding(e.node, f"{', '.join(f'`{code_of(a)}`' for a in record)} in `{code_of(value)}` is still "
                              f"attached to its graph and is kept in `{e.target}`, which outlives each call of "
                              f"`{scope.name}()`, run once per training step: every step's graph stays alive and "
                              f"memory grows; keep `.detach()`ed values", _detach_all(record))
                continue
            yield Finding(e.node if e.kind is EventKind.APPEND else _small_statement(e),
                          f"`{code_of(value)}` is still attached to its graph and is kept in `{e.target}`, which "
                          f"outlives each call of `{scope.name}()`, run once per training step: every step's graph "
                          f"stays alive and memory grows; store `{code_of(parenthesized(value))}.item()` or `.detach()`",
                          _fix(model, scope, e, displayed))
        # A helper file the callers index answers for holds no backward call (`project_callers`): one text test
        # instead of asking for each function of a training file.
        if model.project is not None and _BACKWARD_TEXT.search(model.text) is None:
            for scope in model.scopes:
                for kept in kept_for_callers(model, scope) if scope.class_name is not None else ():
                    u = kept.use
                    yield Finding(kept.node, f"`{scope.name}()` keeps `{kept.param}` in `self`, and {u.path}:{u.line} "
                                  f"calls it in a loop that back-propagates the value it passes, on an object that "
                                  f"outlives the loop: every step's graph stays alive and memory grows; keep "
                                  f"`.item()` or `.detach()` of it", None)
                for stored in stored_for_callers(model, scope):
                    u = stored.use
                    stmt = stored.node.body[0] if type(stored.node) is cst.SimpleStatementLine else stored.node
                    yield Finding(stored.node, f"`{code_of(stmt)}` stores into `{stored.param}`, which "
                                  f"{u.path}:{u.line} hands in as a `{stored.cls}` bound outside its loop, whose "
                                  f"`__setitem__` keeps every value it is given, while that loop back-propagates "
                                  f"the value: every step's graph stays alive and memory grows; store `.item()` or "
                                  f"`.detach()` of it", None)

    def _events(self, model: FileModel) -> Iterator[Finding]:
        kinds = model.kinds
        displayed: dict[str, bool] = {}
        handed: dict[tuple[int, str], bool] = {}  # one look at the uses of each container of a scope
        for loop in model.loops:
            if not loop.of(EventKind.BACKWARD, EventKind.RUN):
                continue
            scope = loop.scope
            backprop = scope.backpropagated()
            reported: dict[str, list[Event]] = {}  # one addition per total, and one per branch exclusive of it
            for e in loop.events:
                helper = None
                if e.variant is AssignForm.PLAIN and type(e.value) is cst.Call and e.scope is scope.node and (
                        added := summed_by_helper(model, scope, e)) is not None:
                    helper = e.value.func
                    e = e.but(variant=AssignForm.SELF_ADD, value=added)  # `total = add(total, loss)`: `total += loss`
                if e.scope is not scope.node or e.target is None or e.value is None or any(
                        not scope.exclusive(r, e) for r in reported.get(e.target, ())):
                    continue
                if not (e.accumulates or e.kind is EventKind.APPEND or e.variant is AssignForm.ITEM):
                    continue
                if e.variant is AssignForm.ITEM and not e.accumulates and (_same_key(e) or model.kinds.of_name(
                        e.target, scope, e) is VKind.DATA):
                    continue  # `loss_dict["d"] = d_loss`: each iteration replaces the last one's value; an ndarray
                if "no_grad" in e.contexts or e.variant is AssignForm.ADD and _dict_bound(scope, e):
                    continue  # (`stats += loss` where `stats` is a dict raises TypeError: no total grows)
                fed = e.target in backprop and scope.feeds_backward({e.target}, {e.target})
                latest = loop.backpropagates_latest(e) if fed else None
                if fed and latest is None:
                    continue
                attached = _attached_items(model, scope, e) if latest is None else []
                part = latest.value if latest is not None else None
                kind = kinds.of(e.value, scope, e)
                if part is None and kind is not VKind.GRAPH and not attached:
                    part = _backpropagated_part(model, loop, scope, e) if not kind.graph_free else None
                    if part is None and (kind.graph_free or not term_of_backpropagated(model, scope, e.value)):
                        continue  # a number, a string, a detached tensor, or a value the analysis cannot see
                if (not loop.carries(e) or escapes(model, loop, e.target) or loop.within_one_step(e)
                        or loop.repeats_one_batch(e) or one_step_per_call(model, loop, e)):
                    continue
                if loop.fills_local_buffer(e) or kind is VKind.GRAPH and loop.keeps_inner_total(
                        e, lambda name: kinds.of_name(name, scope, e).graph_free):
                    continue  # one call's buffer of fixed shape; an inner loop's total (judged where it grows)
                if e.kind is EventKind.APPEND and (bounded(model, scope, e.target) or loop.takes_items(e.target)):
                    continue  # `deque(maxlen=k)`, `del window[0]`: the oldest graphs are dropped, at most k are kept
                runs = runs_while_kept(model, scope, e)
                if runs is not None and runs <= FEW_ITERATIONS:
                    continue  # a test's mini-run: a bounded handful of graphs, freed with the container
                key = (id(scope.node), e.target)
                if part is None and key not in handed:
                    handed[key] = handed_on(model, scope, e.target)
                if part is None and handed[key]:
                    continue  # kept for a backward later, or handed to code whose use of it is not known
                reported.setdefault(e.target, []).append(e)
                where = _small_statement(e)
                if latest is not None and part is not None:
                    yield Finding(
                        e.node,
                        f"`{code_of(e.value)}` is appended to `{e.target}` and back-propagated as "
                        f"`{code_of(part)}`, so it carries its graph, and `{e.target}` keeps every earlier one across "
                        f"iterations though no backward reads them again: memory grows every step; append "
                        f"`.detach()`ed values and back-propagate the loss itself",
                        None,
                    )
                    continue
                if part is not None:
                    # Back-propagated already, so no later backward needs it (one would fail): only kept.
                    kept, used = code_of(e.value), code_of(part)
                    held = f"`{kept}` is" if kept == used else f"`{kept}` holds `{used}`, which is"
                    yield Finding(
                        e.node if e.kind is EventKind.APPEND else where,
                        f"{held} back-propagated in the same iteration, so it carries its graph, and is kept in "
                        f"`{e.target}` across iterations: every step's graph stays referenced and memory grows; "
                        f"keep `.item()` or `.detach()`ed values instead",
                        None,
                    )
                    continue
                if attached:  # `outputs.append({"loss": loss, "n": len(y)})`: the record holds the graph
                    names = ", ".join(f"`{code_of(a)}`" for a in attached)
                    yield Finding(
                        e.node if e.kind is EventKind.APPEND else where,
                        f"{names} in `{code_of(e.value)}` is still attached to its graph and is kept in `{e.target}` "
                        f"across iterations, and `{e.target}` itself is never back-propagated: every step's graph "
                        f"stays alive and memory grows; keep `.detach()`ed values",
                        _detach_all(attached),
                    )
                    continue
                how = f"is kept in `{e.target}`" if helper is None else f"`{code_of(helper)}` adds it into `{e.target}`, kept"
                yield Finding(
                    e.node if e.kind is EventKind.APPEND else where,
                    f"`{code_of(e.value)}` is still attached to its graph and {how} across "
                    f"iterations, and `{e.target}` itself is never back-propagated: every step's graph stays alive "
                    f"and memory grows; store `{code_of(parenthesized(e.value))}.item()` or `.detach()`",
                    _fix(model, scope, e, displayed) if helper is None else None,  # (what else the helper does: unknown)
                )


def _backpropagated_part(model: FileModel, loop: Loop, scope: Scope, e: Event) -> cst.BaseExpression | None:
    """What a backward of the same iteration back-propagates that shares a term with the kept value
    (`output["loss"].backward()` then `outputs.append(output)`; `loss.backward()` then `total += loss / n`;
    `sum(parts).backward()` then `history.append(parts)`): whatever the analysis knows of it, the kept value
    holds a tensor that carried a graph. A factor beside a graph tensor is a weight, not a term."""
    def terms(x: cst.BaseExpression, at: Event) -> set[str]:
        if at.variant in (AssignForm.UNPACK_FIRST, AssignForm.UNPACK) and at is not e or at.variant in (
                AssignForm.MUL, AssignForm.DIV) and at.kind is EventKind.ASSIGN:
            return set()  # `loss, image = out`: the image is not a term of the loss; `loss *= w`: `w` weighs it
        # (a log-probability's factor is its weight: the return of `-torch.log(p) * reward`)
        names = summand_names(x, lambda y: model.kinds.of(y, scope, at) is VKind.GRAPH or log_probability(scope, y, at))
        # a number both share (`weight * loss.item()` kept, `loss *= weight` back-propagated) is no graph kept
        return {n for n in names if not model.kinds.of_name(n, scope, at).graph_free}

    b = loop.backpropagated_term(e, terms)
    return b.value if b is not None else None


def _dict_bound(scope: Scope, e: Event) -> bool:
    """`total += v` on the name itself (not an entry), and every definition of it reaching `e` binds a dict (`{...}`, a
    dict comprehension, `dict(...)`)."""
    def a_dict(value: cst.BaseExpression | None) -> bool:
        return type(value) in (cst.Dict, cst.DictComp) or type(value) is cst.Call and dotted(value.func) in (
            "dict", "collections.OrderedDict", "OrderedDict", "defaultdict", "collections.defaultdict")

    if not (type(e.node) is cst.AugAssign and type(e.node.target) is cst.Name) or not any(
            a_dict(a.value) for a in scope.assignments(e.target or "")):
        return False  # (the cheap question first: nothing binds the name to a dict)
    defs, entry = scope.reaching(e.target or "", e)
    bound = [d for d in defs if not d.accumulates]
    return bool(bound) and not entry and all(a_dict(d.value) for d in bound)


def _detach_all(attached: list[cst.BaseExpression]) -> Fix:
    return Fix("safe", "detach the attached values kept in the record",
               tuple((a, cst.Call(func=cst.Attribute(value=parenthesized(a), attr=cst.Name("detach")))) for a in attached))


def _attached_items(model: FileModel, scope: Scope, e: Event) -> list[cst.BaseExpression]:
    """The values of a dict, list or tuple literal that carry a graph (`{"loss": loss, "n": len(y)}`)."""
    value = e.value
    if type(value) is cst.Dict:
        items = [el.value for el in value.elements if type(el) is cst.DictElement]
    elif type(value) is cst.List or type(value) is cst.Tuple:
        items = [el.value for el in value.elements if type(el) is not cst.StarredElement]
    else:
        return []
    return [item for item in items if model.kinds.of(item, scope, e) is VKind.GRAPH]


def _small_statement(e: Event) -> cst.CSTNode:
    """The statement of the line that holds the accumulation (`s = "x"; total += loss` has two)."""
    if isinstance(e.node, cst.BaseSmallStatement):
        return e.node
    if type(e.stmt) is cst.SimpleStatementLine:
        for small in e.stmt.body:
            if any(n is e.value for n in walk(small)):
                return small
        return e.stmt.body[0]
    return e.node


def _same_key(e: Event) -> bool:
    """`d["name"] = value`: a key written as a literal, the same entry at every iteration, replaced by a value that
    does not read the container (`d["loss"] = d["loss"] + loss`, `d["loss"] = d.get("loss", 0) + loss` add to it)."""
    assert e.value is not None  # an assignment has its value
    if any(type(n) is cst.Subscript and dotted(n.value) == e.target
           or type(n) is cst.Call and dotted(n.func) in (f"{e.target}.get", f"{e.target}.setdefault")
           for n in walk(e.value)):
        return False
    line = e.node
    smalls = line.body if type(line) is cst.SimpleStatementLine else [line]
    targets = [t for small in smalls if type(small) is cst.Assign and small.value is e.value for t in small.targets]
    for t in targets:
        target = t.target
        if type(target) is cst.Subscript and dotted(target.value) == e.target:
            return all(type(el.slice) is cst.Index and isinstance(el.slice.value, (
                cst.SimpleString, cst.Integer, cst.Float)) for el in target.slice)
    return False


def _scalar(scope: Scope, value: cst.BaseExpression) -> bool:
    """`value` is back-propagated with a plain `.backward()` in this scope: a one-element tensor, so `.item()`
    works on it (backward without a gradient argument raises on anything else)."""
    name = dotted(value)
    return name is not None and any(
        b.variant is BackwardVia.TENSOR and dotted(b.value) == name and type(b.node) is cst.Call and not b.node.args
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
    if type(e.stmt) is cst.SimpleStatementLine and any(type(small) is cst.Assign and type(small.value) is cst.IfExp
                                                       for small in e.stmt.body) or over_entries(model.kinds, scope, value, e):
        return None  # `t = x if t is None else t + x`: the other arm keeps the graph too; a dict's entries: numbers too
    numeric_start = any(a.rebinds and type(a.value) in (cst.Integer, cst.Float) for a in scope.assignments(e.target or ""))
    as_number = e.accumulates and e.kind is EventKind.ASSIGN and numeric_start and _scalar(scope, value)
    if as_number and e.target not in displayed:
        displayed[e.target or ""] = _only_displayed(model, e)  # one scan of the file per total's name
    method = "item" if as_number and displayed[e.target or ""] else "detach"
    new = cst.Call(func=cst.Attribute(value=parenthesized(value), attr=cst.Name(method)))
    return Fix("safe", f"keep `{code_of(value)}.{method}()` instead", ((value, new),))
